# The single remote exec of `status` (see snapshot.py). Not standalone: snapshot.py prepends
# the RC_* arrays and substitutes the __NAMES__.
__WIRE__
__GUARD__
# One status exec costs O(1) processes, not O(chains): a file is read by bash itself and
# escaped by rc_emit with parameter expansions, so 200 chains do not fork 200 x 6 x 3 times
# (benchmarks issue, P3). Only a file above __INLINE__ bytes (or not ASCII) takes base64.
rc_file() {  # kind bench path
  local content=""
  if [[ ! -e $3 ]]; then rc_emit FILE "$RC_I" "$1" "$2" missing ""
  elif [[ ! -r $3 ]]; then rc_emit FILE "$RC_I" "$1" "$2" unreadable ""
  else
    # -N stops after __INLINE__+1 characters: a bigger file is never held whole in bash.
    IFS= read -r -d '' -N $((__INLINE__ + 1)) content < "$3"
    if (( ${#content} <= __INLINE__ )); then rc_emit FILE "$RC_I" "$1" "$2" ok "$content"
    elif (( $(stat -c %s -- "$3") > __MAX__ )); then rc_emit FILE "$RC_I" "$1" "$2" toolarge ""
    else rc_emit_file FILE "$RC_I" "$1" "$2" ok "$3"; fi
  fi
}
ids=() names=() starts=()
for RC_I in "${!RC_RUN_DIRS[@]}"; do
  dir=${RC_RUN_DIRS[$RC_I]}
  if [[ ! -d $dir && ! -L $dir ]]; then rc_emit RUN "$RC_I" 0; continue; fi
  # Nothing of a run is read before the run is known to be ours (issue 14.1).
  rc_guard "${dir%/*}" "$dir" "$dir/__RECORD__" "$dir/__SINCE__"
  since=""; [[ -r $dir/__SINCE__ ]] && IFS= read -r -d '' -N 4096 since < "$dir/__SINCE__"
  rc_emit_file RUN "$RC_I" 1 "$since" "$dir/__RECORD__"
  [[ -r $dir/__SINCE__ ]] && starts+=("$(head -c 40 "$dir/__SINCE__")")
  read -r -a wanted <<< "${RC_BENCHES[$RC_I]}"
  if (( ${#wanted[@]} == 0 )); then
    # Benchmark folders: those with a job.sh, and those we may not look into (named below).
    for d in "$dir"/*/; do
      d=${d%/}; [[ ${d##*/} == files ]] && continue
      if [[ -e $d/__JOB__ || ! -r $d || ! -x $d ]]; then wanted+=("${d##*/}"); fi
    done
  fi
  # One stat for every benchmark folder and file read below.
  rc_guard_bench "${wanted[@]/#/$dir/}"
  for bench in "${wanted[@]}"; do
    b="$dir/$bench"
    if [[ ! -d $b ]]; then rc_emit NOBENCH "$RC_I" "$bench"; continue; fi
    if [[ ! -r $b || ! -x $b ]]; then rc_emit UNREADABLE "$RC_I" "$bench"; continue; fi
    marker=0; [[ -e $b/__CANCEL__ ]] && marker=1
    rc_emit BENCH "$RC_I" "$bench" "$marker"
    __FILES__
    names+=("${RC_RUN_IDS[$RC_I]}:$bench")
    for f in "$b/__CHAIN__" "$b/__FIRST__"; do
      [[ -r $f ]] && while IFS= read -r id; do [[ $id =~ ^[0-9_+]+$ ]] && ids+=("$id"); done < "$f"
    done
    [[ -r $b/__EVENTS__ ]] && while read -r _ _ kind id _; do
      [[ $kind == successor && $id =~ ^[0-9_+]+$ ]] && ids+=("$id")
    done < "$b/__EVENTS__"
    if [[ $RC_EXECUTOR == shell && -r $b/__FIRST__ ]]; then
      pid=$(head -n 1 "$b/__FIRST__"); [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && rc_emit LIVE "$pid"
    fi
  done
done
rc_sacct() {  # one SACCT record: the first non-zero exit status, every chunk's output
  local chunk part r rc=0 out="" start
  start=$(printf '%s\n' "${starts[@]}" | sort | head -n 1)
  rc_chunks "${ids[@]}"
  for chunk in "${rc_chunk_list[@]}"; do
    part=$(command sacct -X --parsable2 --noheader --format=__SACCT_FIELDS__ --starttime "${start:-now-30days}" \
      --endtime now --jobs "$chunk" 2>&1); r=$?
    (( rc )) || rc=$r; out+=${out:+$'\n'}$part
  done
  rc_emit SACCT "$rc" "$out"
}
rc_squeue() {  # one SQUEUE record, as rc_sacct
  local chunk part r rc=0 out=""
  rc_chunks "${names[@]}"
  for chunk in "${rc_chunk_list[@]}"; do
    part=$(command squeue --noheader --me --format='__SQUEUE_FORMAT__' --name="$chunk" 2>&1); r=$?
    (( rc )) || rc=$r; out+=${out:+$'\n'}$part
  done
  rc_emit SQUEUE "$rc" "$out"
}
if [[ $RC_EXECUTOR == slurm ]]; then
  # sacct (slurmdbd) and squeue (slurmctld) run side by side: the exec takes the slower of
  # the two, not their sum (issue 13, P9). The process substitution runs sacct at once;
  # its line is read after squeue's.
  if (( ${#ids[@]} )); then exec {rc_fd}< <(rc_sacct); fi
  if (( ${#names[@]} )); then rc_squeue; fi
  if [[ -n ${rc_fd:-} ]]; then cat <&"$rc_fd"; exec {rc_fd}<&-; fi
fi
rc_emit DONE
