# The single remote exec of `status` (see snapshot.py). Not standalone: snapshot.py prepends
# the RC_* arrays and substitutes the __NAMES__.
__GUARD__
rc_b64() { base64 < "$1" 2>/dev/null | tr -d '\n'; }
# One status exec costs O(1) processes, not O(chains): a file is read by bash itself and
# escaped with parameter expansions (\\ \t \n), so 200 chains do not fork 200 x 6 x 3 times
# (benchmarks issue, P3). Only a file above __INLINE__ bytes takes the base64 path.
rc_bs='\' rc_tab=$'\t' rc_nl=$'\n'
rc_file() {  # kind bench path
  local content=""
  if [[ ! -e $3 ]]; then printf 'FILE\t%s\t%s\t%s\tmissing\t\n' "$RC_I" "$1" "$2"
  elif [[ ! -r $3 ]]; then printf 'FILE\t%s\t%s\t%s\tunreadable\t\n' "$RC_I" "$1" "$2"
  else
    # -N stops after __INLINE__+1 characters: a bigger file is never held whole in bash.
    IFS= read -r -d '' -N $((__INLINE__ + 1)) content < "$3"
    if (( ${#content} <= __INLINE__ )); then
      # Quoted pattern and replacement are literal in every bash (5.2's patsub_replacement too).
      content=${content//"$rc_bs"/"$rc_bs$rc_bs"}; content=${content//"$rc_tab"/"${rc_bs}t"}
      content=${content//"$rc_nl"/"${rc_bs}n"}
      printf 'FILE\t%s\t%s\t%s\ttext\t%s\n' "$RC_I" "$1" "$2" "$content"
    elif (( $(stat -c %s -- "$3") > __MAX__ )); then printf 'FILE\t%s\t%s\t%s\ttoolarge\t\n' "$RC_I" "$1" "$2"
    else printf 'FILE\t%s\t%s\t%s\tok\t%s\n' "$RC_I" "$1" "$2" "$(rc_b64 "$3")"; fi
  fi
}
ids=() names=() starts=()
for RC_I in "${!RC_RUN_DIRS[@]}"; do
  dir=${RC_RUN_DIRS[$RC_I]}
  if [[ ! -d $dir && ! -L $dir ]]; then printf 'RUN\t%s\t0\n' "$RC_I"; continue; fi
  # Nothing of a run is read before the run is known to be ours (issue 14.1).
  rc_guard "${dir%/*}" "$dir" "$dir/__RECORD__" "$dir/__SINCE__"
  printf 'RUN\t%s\t1\t%s\t%s\n' "$RC_I" "$(rc_b64 "$dir/__RECORD__")" "$(rc_b64 "$dir/__SINCE__")"
  [[ -r $dir/__SINCE__ ]] && starts+=("$(head -c 40 "$dir/__SINCE__")")
  read -r -a wanted <<< "${RC_BENCHES[$RC_I]}"
  if (( ${#wanted[@]} == 0 )); then
    # Benchmark folders: those with a job.sh, and those we may not look into (named below).
    for d in "$dir"/*/; do
      d=${d%/}; [[ ${d##*/} == files ]] && continue
      if [[ -e $d/job.sh || ! -r $d || ! -x $d ]]; then wanted+=("${d##*/}"); fi
    done
  fi
  # One stat for every benchmark folder and file read below.
  rc_guard_bench "${wanted[@]/#/$dir/}"
  for bench in "${wanted[@]}"; do
    b="$dir/$bench"
    if [[ ! -d $b ]]; then printf 'NOBENCH\t%s\t%s\n' "$RC_I" "$bench"; continue; fi
    if [[ ! -r $b || ! -x $b ]]; then printf 'UNREADABLE\t%s\t%s\n' "$RC_I" "$bench"; continue; fi
    marker=0; [[ -e $b/__CANCEL__ ]] && marker=1
    printf 'BENCH\t%s\t%s\t%s\n' "$RC_I" "$bench" "$marker"
    __FILES__
    names+=("${RC_RUN_IDS[$RC_I]}:$bench")
    for f in "$b/__CHAIN__" "$b/__FIRST__"; do
      [[ -r $f ]] && while IFS= read -r id; do [[ $id =~ ^[0-9_+]+$ ]] && ids+=("$id"); done < "$f"
    done
    [[ -r $b/__EVENTS__ ]] && while read -r _ _ kind id _; do
      [[ $kind == successor && $id =~ ^[0-9_+]+$ ]] && ids+=("$id")
    done < "$b/__EVENTS__"
    if [[ $RC_EXECUTOR == shell && -r $b/__FIRST__ ]]; then
      pid=$(head -n 1 "$b/__FIRST__"); [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && printf 'LIVE\t%s\n' "$pid"
    fi
  done
done
rc_sacct() {  # one SACCT line: the first non-zero exit status, every chunk's output
  local chunk part r rc=0 out="" start
  start=$(printf '%s\n' "${starts[@]}" | sort | head -n 1)
  rc_chunks "${ids[@]}"
  for chunk in "${rc_chunk_list[@]}"; do
    part=$(command sacct -X --parsable2 --noheader --format=__SACCT_FIELDS__ --starttime "${start:-now-30days}" \
      --endtime now --jobs "$chunk" 2>&1); r=$?
    (( rc )) || rc=$r; out+=${out:+$'\n'}$part
  done
  printf 'SACCT\t%s\t%s\n' "$rc" "$(printf '%s' "$out" | base64 | tr -d '\n')"
}
rc_squeue() {  # one SQUEUE line, as rc_sacct
  local chunk part r rc=0 out=""
  rc_chunks "${names[@]}"
  for chunk in "${rc_chunk_list[@]}"; do
    part=$(command squeue --noheader --me --format='__SQUEUE_FORMAT__' --name="$chunk" 2>&1); r=$?
    (( rc )) || rc=$r; out+=${out:+$'\n'}$part
  done
  printf 'SQUEUE\t%s\t%s\n' "$rc" "$(printf '%s' "$out" | base64 | tr -d '\n')"
}
if [[ $RC_EXECUTOR == slurm ]]; then
  # sacct (slurmdbd) and squeue (slurmctld) run side by side: the exec takes the slower of
  # the two, not their sum (issue 13, P9). The process substitution runs sacct at once;
  # its line is read after squeue's.
  if (( ${#ids[@]} )); then exec {rc_fd}< <(rc_sacct); fi
  if (( ${#names[@]} )); then rc_squeue; fi
  if [[ -n ${rc_fd:-} ]]; then cat <&"$rc_fd"; exec {rc_fd}<&-; fi
fi
printf 'DONE\n'
