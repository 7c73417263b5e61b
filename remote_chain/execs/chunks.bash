# rc_chunks: comma-joined lists, each small enough to be one argument of a command line.
# Linux refuses an exec whose single argument exceeds MAX_ARG_STRLEN (128 KiB, "Argument list
# too long"), and a big run's names exceed it: a job-id or job-name list is cut into chunks of
# at most __CHUNK__ bytes, one call of the tool each. Prepended to the status and cancel
# scripts (status.py, cancel.py).
rc_chunks() {  # items... -> the array rc_chunk_list
  rc_chunk_list=()
  local item cur=""
  for item in "$@"; do
    if [[ -n $cur ]] && (( ${#cur} + 1 + ${#item} > __CHUNK__ )); then rc_chunk_list+=("$cur"); cur=""; fi
    cur+=${cur:+,}$item
  done
  if [[ -n $cur ]]; then rc_chunk_list+=("$cur"); fi
}
