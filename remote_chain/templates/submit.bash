# The single remote exec of `submit` (see bundle.py). Not standalone: bundle.py prepends the
# RC_* variables and substitutes the __NAMES__.
rc_fail() { printf 'ERROR\t%s\n' "$(printf '%s' "$1" | base64 | tr -d '\n')"; exit 0; }
rc_existing() {
  local i=0
  while [[ ! -f $RC_RUN_DIR/__RECORD__ ]] && (( i < __WAIT__ * 2 )); do sleep 0.5; i=$((i + 1)); done
  if [[ -f $RC_RUN_DIR/__RECORD__ ]]; then
    printf 'EXISTS\t%s\n' "$(base64 < "$RC_RUN_DIR/__RECORD__" | tr -d '\n')"
  else
    printf 'EXISTS\t\n'
  fi
  exit 0
}
umask 077
err=$(mkdir -p -- "$RC_PARENT" 2>&1) || rc_fail "cannot create $RC_PARENT: $err"
[[ -w $RC_PARENT ]] || rc_fail "workdir not writable: $RC_PARENT"
if [[ $RC_MODE == lookup ]]; then
  [[ -d $RC_RUN_DIR ]] && rc_existing
  printf 'ABSENT\n'; exit 0
fi
# mkdir is atomic: exactly one submit of a run id on this cluster gets past this line.
mkdir -- "$RC_RUN_DIR" 2>/dev/null || rc_existing
# From here on, a dropped connection must not stop us half-way.
trap '' HUP PIPE
cd -- "$RC_RUN_DIR" || rc_fail "cannot enter $RC_RUN_DIR"
date -d '-1 hour' +%Y-%m-%dT%H:%M:%S > __SINCE__ 2>/dev/null || date +%Y-%m-%dT%H:%M:%S > __SINCE__
err=$(base64 -d <<'__RC_PAYLOAD_END__' 2>&1 | tar -xzpf - 2>&1
__PAYLOAD__
__RC_PAYLOAD_END__
) || rc_fail "unpacking the run files failed: $err"
rc_submit_one() {
  local bench=$1 out id
  if [[ $RC_EXECUTOR == shell ]]; then
    # No scheduler: run in the background, detached; the wrapper's pid is the "job id".
    out=$(cd -- "$bench" && setsid nohup bash -c \
      'export RC_SHELL_JOB_ID=$$; exec >"logs/$$.log" 2>&1; bash ./job.sh; echo $? > .remote_chain_exit' \
      </dev/null >/dev/null 2>&1 & echo $!)
  else
    out=$(sbatch --parsable "$RC_RUN_DIR/$bench/job.sh" 2>&1)
  fi
  id=$(printf '%s\n' "$out" | grep -E '^[0-9]+(;.*)?$' | tail -n 1); id=${id%%;*}
  if [[ -n $id ]]; then
    printf '%s\n' "$id" > "$bench/__FIRST__"
    printf 'SUBMITTED\t%s\t%s\n' "$bench" "$id" >> __LOG__
  else
    printf 'FAILED\t%s\t%s\n' "$bench" "$(printf '%s' "$out" | base64 | tr -d '\n')" >> __LOG__
  fi
}
: > __LOG__
for bench in "${RC_BENCHMARKS[@]}"; do
  mkdir -p -- "$bench/logs" "$bench/artifacts"
  rc_submit_one "$bench"
done
# The record: static parts rendered by the client, job ids and errors filled in here.
{
  printf '%s' "$RC_RECORD_HEAD"
  sep=""
  for i in "${!RC_BENCHMARKS[@]}"; do
    bench=${RC_BENCHMARKS[$i]}
    id=$(awk -F '\t' -v b="$bench" '$1 == "SUBMITTED" && $2 == b {print $3}' __LOG__)
    err=$(awk -F '\t' -v b="$bench" '$1 == "FAILED" && $2 == b {print $3}' __LOG__ | base64 -d 2>/dev/null \
      | tr -d '"\\' | tr -c '[:print:]' ' ' | cut -c1-500)
    if [[ -n $id ]]; then tail='"'$id'", "error": null}'; else tail='null, "error": "'$err'"}'; fi
    printf '%s%s%s' "$sep" "${RC_RECORD_PREFIX[$i]}" "$tail"
    sep=", "
  done
  printf ']}\n'
} > __RECORD__.tmp && mv -f __RECORD__.tmp __RECORD__
cat __LOG__
printf 'DONE\n'
