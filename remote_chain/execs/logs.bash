# The single remote exec of `logs` (see logs.py): which job's log, then its bytes from an
# offset (so --follow re-reads only what is new).
__WIRE__
__GUARD__
b="$RC_RUN_DIR/$RC_BENCH"
rc_guard "${RC_RUN_DIR%/*}" "$RC_RUN_DIR"
rc_guard_bench "$b"
[[ -d $b ]] || { rc_emit NOBENCH; exit 0; }
job=$RC_JOB
if [[ -z $job && -r $b/__CHAIN__ ]]; then job=$(tail -n 1 "$b/__CHAIN__"); fi
if [[ -z $job && -r $b/__FIRST__ ]]; then job=$(head -n 1 "$b/__FIRST__"); fi
[[ $job =~ ^[0-9_+]+$ ]] || { rc_emit NOJOB; exit 0; }
log="$b/__LOGS__/$job.log"
rc_guard "$log"
live=0
if [[ $RC_EXECUTOR == slurm ]]; then
  [[ -n $(rc_query squeue --noheader --format=%i --jobs "$job" 2>/dev/null) ]] && live=1
else
  kill -0 "$job" 2>/dev/null && live=1
fi
size=$(stat -c %s -- "$log" 2>/dev/null || echo 0)
# The log's bytes from the offset, as they are (base64 on the wire: a log is anything).
if [[ -r $log ]] && (( size > RC_OFFSET )); then
  rc_emit_file LOG "$job" "$live" "$size" <(tail -c "+$((RC_OFFSET + 1))" -- "$log" | head -c "$RC_MAX")
else
  rc_emit LOG "$job" "$live" "$size" ""
fi
