# The single acting exec of `resume` (see resume.py): for each chain the client
# judged resumable (failed, stopped or broken) and whose caps it checked, unless something of
# the chain is still queued or its state files changed since the client read them: count the
# walltime not yet counted, write the new caps into job.sh (atomically, mode kept), then queue
# job.sh again in the same folder with no predecessor.
__WIRE__
__GUARD__
# The resubmitted job inherits sbatch's umask (Slurm propagates it): its state files must not
# become group-writable under a login umask of 002, or the guard would refuse the run.
umask 077
# The job.sh resubmitted here runs as the user, and the record, job.sh and state files are
# rewritten: all of them, their folders and the run's folders must be the user's own and
# writable by nobody else.
rc_guard "${RC_RUN_DIR%/*}" "$RC_RUN_DIR" "$RC_RUN_DIR/__RECORD__"
rc_guard_bench "${RC_BENCHES[@]/#/$RC_RUN_DIR/}"
rc_fail() { rc_emit FAILED "$1" "$2"; }
# Write a file atomically (tmp + rename) keeping the mode of the file it replaces.
rc_write() { printf '%s\n' "$2" > "$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"; }
rc_read() { local v=""; [[ -e $1 ]] && v=$(<"$1"); v=${v//[[:space:]]/}; printf '%s' "$v"; }
rc_set_cap() {  # file name value: rewrite the one `NAME=...` line of __JOB__
  local n
  n=$(grep -c -E "^$2=" "$1") || true
  [[ $n == 1 ]] || { printf '__JOB__ has %s lines %s=...' "$n" "$2"; return 1; }
  cp -p -- "$1" "$1.tmp.$$" && sed -e "s/^$2=.*/$2=$3/" -- "$1" > "$1.tmp.$$" && mv -f -- "$1.tmp.$$" "$1"
}
if [[ -n $RC_RECORD ]]; then
  sum=$(cksum < "$RC_RUN_DIR/__RECORD__" 2>/dev/null | tr ' ' '-')
  if [[ $sum == "$RC_RECORD_SUM" ]]; then
    printf '%s' "$RC_RECORD" | base64 -d > "$RC_RUN_DIR/__RECORD__.tmp.$$" \
      && mv -f "$RC_RUN_DIR/__RECORD__.tmp.$$" "$RC_RUN_DIR/__RECORD__" || rc_emit NORECORD
  else
    rc_emit NORECORD
  fi
fi
for i in "${!RC_BENCHES[@]}"; do
  bench=${RC_BENCHES[$i]} b="$RC_RUN_DIR/${RC_BENCHES[$i]}"
  if [[ ! -f $b/__JOB__ ]]; then rc_emit NOBENCH "$bench"; continue; fi
  live=$(rc_query squeue --noheader --me --format='%i %Z' --name="$RC_RUN_ID:$bench" 2>&1) || { rc_fail "$bench" "$live"; continue; }
  live=$(printf '%s\n' "$live" | awk -v d="$b" '$2 == d {print $1}')  # not a twin chain's
  if [[ -n $live ]]; then rc_emit LIVE "$bench" "${live//$'\n'/ }"; continue; fi
  # A chain submitted with secrets whose file went when it ended (cancel and the prologue
  # remove it once no link is left): queued again it would run without them and spend its
  # links failing. Refused, nothing written.
  if grep -q -x 'RC_SECRETS=1' "$b/__JOB__" && [[ ! -f $b/__SECRETS__ ]]; then
    rc_emit NOSECRETS "$bench"; continue
  fi
  if [[ ${RC_STEP[$i]} == caps ]]; then
    if [[ $(rc_read "$b/__WALLTIME__") != "${RC_OLD_WALLTIME[$i]}" || $(rc_read "$b/__RETRIES__") != "${RC_OLD_RETRIES[$i]}" \
        || $(rc_read "$b/__UNKNOWN__") != "${RC_OLD_UNKNOWN[$i]}" ]]; then
      rc_emit CHANGED "$bench"; continue
    fi
    err=""
    [[ ${RC_CAP_WALLTIME[$i]} == keep ]] || err=$(rc_set_cap "$b/__JOB__" RC_MAX_WALLTIME "${RC_CAP_WALLTIME[$i]}" 2>&1) || { rc_fail "$bench" "cannot write the cap into __JOB__: $err"; continue; }
    [[ ${RC_CAP_RETRIES[$i]} == keep ]] || err=$(rc_set_cap "$b/__JOB__" RC_MAX_RETRIES "${RC_CAP_RETRIES[$i]}" 2>&1) || { rc_fail "$bench" "cannot write the cap into __JOB__: $err"; continue; }
    rc_write "$b/__WALLTIME__" "${RC_NEW_WALLTIME[$i]}" || { rc_fail "$bench" "cannot write __WALLTIME__"; continue; }
    rc_write "$b/__RETRIES__" "${RC_NEW_RETRIES[$i]}" || { rc_fail "$bench" "cannot write __RETRIES__"; continue; }
    # A chain stopped on the unknown-links cap starts again from 0.
    if [[ -e $b/__UNKNOWN__ ]]; then
      rc_write "$b/__UNKNOWN__" 0 || { rc_fail "$bench" "cannot write __UNKNOWN__"; continue; }
    fi
    for counted in ${RC_COUNTED[$i]}; do
      printf '%s %s __EV_COUNTED_BY_RESUME__ %s\n' "$(date +%s)" "${counted%%:*}" "${counted#*:}" >> "$b/__EVENTS__"
    done
  fi
  out=$(command sbatch --parsable "$b/__JOB__" 2>&1)
  id=$(printf '%s\n' "$out" | grep -E '^[0-9]+(;.*)?$' | tail -n 1); id=${id%%;*}
  if [[ -n $id ]]; then
    printf '%s %s __EV_RESUMED_BY_USER__ %s\n' "$(date +%s)" "$id" "$(id -un)" >> "$b/__EVENTS__"
    rc_emit SUBMITTED "$bench" "$id"
  else
    rc_fail "$bench" "$out"
  fi
done
rc_emit DONE
