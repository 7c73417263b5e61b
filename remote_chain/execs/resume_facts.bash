# The read exec of `resume` (see resume.py): per benchmark, the caps in its job.sh, its
# state files, and every accounting row (`sacct --duplicates`: each run of a requeued job) of
# the jobs its chain file names. Read only; the decision is the client's (resume.plan_resume).
__WIRE__
__GUARD__
# Nothing of the run is read before it is known to be the user's own.
rc_guard "${RC_RUN_DIR%/*}" "$RC_RUN_DIR" "$RC_RUN_DIR/__RECORD__" "$RC_RUN_DIR/__SINCE__"
rc_guard_bench "${RC_BENCHES[@]/#/$RC_RUN_DIR/}"
rc_sum() { cksum < "$1" 2>/dev/null | tr ' ' '-'; }
rc_emit_file RECORD "$(rc_sum "$RC_RUN_DIR/__RECORD__")" "$RC_RUN_DIR/__RECORD__"
since=$(head -c 40 "$RC_RUN_DIR/__SINCE__" 2>/dev/null); [[ $since =~ ^[0-9T:-]+$ ]] || since=now-30days
ids=()
for bench in "${RC_BENCHES[@]}"; do
  b="$RC_RUN_DIR/$bench"
  if [[ ! -f $b/__JOB__ ]]; then rc_emit NOBENCH "$bench"; continue; fi
  rc_emit CAPS "$bench" "$(grep -E '^RC_(RESUMABLE|MAX_RETRIES|MAX_WALLTIME|MAX_UNKNOWN)=' "$b/__JOB__" | tr '\n' ' ')"
  for kind in chain:__CHAIN__ events:__EVENTS__ walltime:__WALLTIME__ retries:__RETRIES__ unknown:__UNKNOWN__; do
    f="$b/${kind#*:}"
    if [[ -e $f ]]; then rc_emit_file FILE "$bench" "${kind%%:*}" "$f"; fi
  done
  while IFS= read -r id; do [[ $id =~ ^[0-9]+([_+][0-9]+)?$ ]] && ids+=("$id"); done < "$b/__CHAIN__" 2>/dev/null
done
if (( ${#ids[@]} )); then
  ids_csv=$(IFS=,; printf '%s' "${ids[*]}")
  if out=$(rc_query timeout 60 sacct -X --duplicates --parsable2 --noheader --format=__SACCT_FIELDS__ \
      --starttime "$since" --endtime now --jobs "$ids_csv" 2>&1); then
    rc_emit SACCT ok "$out"
  else
    rc_emit SACCT fail "$out"
  fi
fi
rc_emit DONE
