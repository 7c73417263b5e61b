# The single remote exec of `submit` (see submit.py). Not standalone: submit.py prepends the
# RC_* variables and substitutes the __NAMES__.
__WIRE__
rc_fail() { rc_emit ERROR "$1"; exit 0; }
# The profile's workdir is unusable here: a config problem, told apart from other failures.
rc_workdir() { rc_emit WORKDIR "$1"; exit 0; }
__GUARD__
rc_existing() {
  local i=0
  # Adopt only a run of our own: a folder someone else made is an error, never "existing".
  rc_guard "$RC_PARENT" "$RC_RUN_DIR"
  while [[ ! -f $RC_RUN_DIR/__RECORD__ ]] && (( i < __WAIT__ * 2 )); do sleep 0.5; i=$((i + 1)); done
  if [[ -f $RC_RUN_DIR/__RECORD__ ]]; then
    rc_guard "$RC_RUN_DIR/__RECORD__"
    rc_emit_file EXISTS "$RC_RUN_DIR/__RECORD__"
  else
    rc_emit EXISTS ""
  fi
  exit 0
}
umask 077
err=$(mkdir -p -- "$RC_PARENT" 2>&1) || rc_workdir "cannot create $RC_PARENT: $err"
[[ -w $RC_PARENT ]] || rc_workdir "workdir not writable: $RC_PARENT"
# <workdir>/<run_id> is shared by the run's clusters: it must be ours before we go in.
rc_guard "$RC_PARENT"
if [[ $RC_MODE == lookup ]]; then
  [[ -d $RC_RUN_DIR ]] && rc_existing
  rc_emit ABSENT; exit 0
fi
# mkdir is atomic: exactly one submit of a run id on this cluster gets past this line.
mkdir -- "$RC_RUN_DIR" 2>/dev/null || rc_existing
# From here on, a dropped connection must not stop us half-way.
trap '' HUP PIPE
cd -- "$RC_RUN_DIR" || rc_fail "cannot enter $RC_RUN_DIR"
# An hour back, in local time as sacct reads it: bash's own strftime, not a date process.
printf -v rc_now '%(%s)T' -1
printf '%(%Y-%m-%dT%H:%M:%S)T\n' $((rc_now - 3600)) > __SINCE__
err=$(base64 -d <<'__RC_PAYLOAD_END__' 2>&1 | tar -xzpf - 2>&1
__PAYLOAD__
__RC_PAYLOAD_END__
) || rc_fail "unpacking the run files failed: $err"
# Job ids and errors are kept in bash itself, not re-read with awk/tr/cut per benchmark: a
# submit forks a handful of processes plus one sbatch per benchmark, sparing the login node's
# CPU.
declare -A rc_ids=() rc_errs=()
rc_start_one() {  # bench: leaves what the scheduler said in $bench/__SBATCH_OUT__
  local bench=$1
  if [[ $RC_EXECUTOR == shell ]]; then
    # No scheduler: run in the background, detached; the wrapper's pid is the "job id". Only
    # setsid goes to the background, with every fd away from the ssh channel: anything that
    # kept the channel's pipes open would hold the submit's connection until the job ends.
    (cd -- "$bench" || exit
     setsid nohup bash -c \
      'export RC_SHELL_JOB_ID=$$; exec >"__LOGS__/$$.log" 2>&1; bash ./__JOB__; echo $? > __EXIT__' \
      </dev/null >/dev/null 2>&1 &
     echo $!) > "$bench/__SBATCH_OUT__" 2>&1
  else
    command sbatch --parsable "$RC_RUN_DIR/$bench/__JOB__" > "$bench/__SBATCH_OUT__" 2>&1
  fi
}
rc_collect_one() {
  local bench=$1 out id="" line
  out=$(<"$bench/__SBATCH_OUT__")
  # The last line that is a job id ("id" or "id;cluster") wins, as with grep | tail -n 1.
  while IFS= read -r line; do [[ $line =~ ^([0-9]+)(;.*)?$ ]] && id=${BASH_REMATCH[1]}; done <<< "$out"
  if [[ -n $id ]]; then
    rc_ids[$bench]=$id  # reported below, once Slurm confirms it
  else
    rc_emit FAILED "$bench" "$out" >> __LOG__
    # For the JSON record: no quote or backslash, control characters as spaces, 500 at most.
    out=${out//[\"\\]/}; out=${out//[^[:print:]]/ }
    rc_errs[$bench]=${out:0:500}
  fi
}
: > __LOG__
rc_dirs=()
for bench in "${RC_BENCHMARKS[@]}"; do rc_dirs+=("$bench/__LOGS__" "$bench/__ARTIFACTS__"); done
mkdir -p -- "${rc_dirs[@]}"
# The sbatch calls are independent: up to 8 at once (each is one RPC to slurmctld, slow on a
# busy cluster; a run of many benchmarks should not pay them in series).
rc_running=0
for bench in "${RC_BENCHMARKS[@]}"; do
  rc_start_one "$bench" &
  if (( ++rc_running >= 8 )); then wait -n; rc_running=$((rc_running - 1)); fi
done
wait
# The user's job limits from slurmctld's own cache (one RPC, where sacctmgr would ask slurmdbd)
# and the jobs queued now, this run's first jobs included, so the client can warn when the run
# cannot fit (limits.py). Both start here, once every sbatch is done, and are read at the end:
# they overlap the job ids' check and the record.
if [[ $RC_EXECUTOR == slurm ]]; then
  rc_user=$(id -un)
  exec {rc_assoc}< <(timeout 5 scontrol -o show assoc_mgr users="$rc_user" flags=assoc,qos 2>/dev/null)
  exec {rc_queued}< <(rc_query squeue --noheader --me --format=%i 2>/dev/null | grep -c .)
fi
for bench in "${RC_BENCHMARKS[@]}"; do rc_collect_one "$bench"; done
# A job id is reported only once Slurm itself shows it under the chain's name: an sbatch that
# is a shell function of the login files (`sbatch(){ echo 31337; }`) queued nothing.
# squeue first (it keeps finished jobs for MinJobAge), then sacct for what it no longer shows.
if [[ $RC_EXECUTOR != shell && ${#rc_ids[@]} -gt 0 ]]; then
  declare -A rc_seen=()
  rc_idlist=$(IFS=,; echo "${rc_ids[*]}")
  while IFS='|' read -r id name; do rc_seen[$id]=$name; done \
    < <(rc_query squeue --noheader --states=all --jobs="$rc_idlist" --format='%i|%j' 2>/dev/null)
  rc_missing=()
  for id in "${rc_ids[@]}"; do [[ -n ${rc_seen[$id]:-} ]] || rc_missing+=("$id"); done
  if (( ${#rc_missing[@]} )); then
    while IFS='|' read -r id name; do rc_seen[$id]=$name; done \
      < <(rc_query sacct -X --noheader --parsable2 --starttime=now-1hours --jobs="$(IFS=,; echo "${rc_missing[*]}")" \
            --format=JobIDRaw,JobName 2>/dev/null)
  fi
  for i in "${!RC_BENCHMARKS[@]}"; do
    bench=${RC_BENCHMARKS[$i]} id=${rc_ids[${RC_BENCHMARKS[$i]}]:-}
    [[ -n $id ]] || continue
    if [[ ${rc_seen[$id]:-} != "${RC_JOB_NAMES[$i]}" ]]; then
      err="sbatch answered job $id, but Slurm shows no job $id named ${RC_JOB_NAMES[$i]} (is sbatch a shell function or alias in your login files?)"
      unset "rc_ids[$bench]"; rc_errs[$bench]=$err
      rc_emit FAILED "$bench" "$err" >> __LOG__
    fi
  done
fi
for bench in "${RC_BENCHMARKS[@]}"; do
  id=${rc_ids[$bench]:-}
  [[ -n $id ]] || continue
  printf '%s\n' "$id" > "$bench/__FIRST__"
  rc_emit SUBMITTED "$bench" "$id" >> __LOG__
done
# The record: static parts rendered by the client, job ids and errors filled in here.
{
  printf '%s' "$RC_RECORD_HEAD"
  sep=""
  for i in "${!RC_BENCHMARKS[@]}"; do
    bench=${RC_BENCHMARKS[$i]}
    id=${rc_ids[$bench]:-} err=${rc_errs[$bench]:-}
    if [[ -n $id ]]; then tail='"'$id'", "error": null}'; else tail='null, "error": "'$err'"}'; fi
    printf '%s%s%s' "$sep" "${RC_RECORD_PREFIX[$i]}" "$tail"
    sep=", "
  done
  printf ']}\n'
} > __RECORD__.tmp && mv -f __RECORD__.tmp __RECORD__
cat __LOG__
if [[ $RC_EXECUTOR == slurm ]]; then
  rc_emit LIMITS "$(< "/dev/fd/$rc_assoc")" "$(< "/dev/fd/$rc_queued")" "$rc_user"
  exec {rc_assoc}<&- {rc_queued}<&-
fi
rc_emit DONE
