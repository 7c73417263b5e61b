# The single remote exec of `status` (see status.py). Not standalone: status.py prepends
# the RC_* arrays and substitutes the __NAMES__.
# The C locale for the whole exec: it reads and runs, and starts no job that would inherit it.
# Under a UTF-8 locale (C.UTF-8 here, en_US.UTF-8 at most sites) every process it starts
# loads the locale and every bash pattern test goes through wide characters, which costs
# login-node CPU on every poll. Every awk below relies on it; nothing depends on UTF-8: rc_emit
# judges bytes
# ("printable ASCII" is a byte range in C), read -N and ${#x} count bytes (the inline limit
# is one of bytes), Slurm does not translate, and sort orders the ISO start times the same.
export LC_ALL=C
# Its awk programs (the squeue filter, the ids' comparison) run in mawk where it is there: Debian's
# default awk, and lighter on CPU than gawk for them, where a site or scripts/setup made gawk
# the awk. Both are tested.
rc_awk=awk; command -v mawk >/dev/null 2>&1 && rc_awk=mawk
__WIRE__
__GUARD__
# One status exec costs O(1) processes, not O(chains): a file is read by bash itself and
# escaped by rc_emit with parameter expansions, so a run's chains do not fork a few processes
# per file each. Only a file above __INLINE__ bytes (or not ASCII) takes base64.
# A chain is one BENCH record, its files in it as KIND STATUS CONTENT triples; a file that does
# not exist is left out (the client reads "missing"): a held chain has one file of six, and its
# record carries that one alone.
rc_file() {  # kind path (that exists): appends the triple to rc_rec; its text in rc_text[kind]
  local content=""
  if [[ ! -r $2 ]]; then rc_rec+=("$1" unreadable ""); return 0; fi
  # -N stops after __INLINE__+1 characters: a bigger file is never held whole in bash.
  IFS= read -r -d '' -N $((__INLINE__ + 1)) content < "$2"
  if (( ${#content} <= __INLINE__ )); then rc_rec+=("$1" ok "$content"); rc_text[$1]=$content
  elif (( $(stat -c %s -- "$2") > __MAX__ )); then rc_rec+=("$1" toolarge "")
  else
    rc_big+=("$1" "$2")  # its own FILE record, base64 of the file (rc_emit_file)
    IFS= read -r -d '' content < "$2"; rc_text[$1]=$content
  fi
}
rc_lines() {  # TEXT: its complete lines in rc_line_list (a last line without its newline is
  # dropped, as `while read` did); no globbing of the words
  local text=$1 IFS=$'\n'
  [[ $text == *$'\n' ]] || text=${text%"${text##*$'\n'}"}
  set -f
  # shellcheck disable=SC2206  # split on newlines on purpose, globbing off
  rc_line_list=($text)
  set +f
}
declare -A rc_text
rc_bench() {  # BENCH...: each chain's records (BENCH, FILE, NOBENCH, UNREADABLE); its job name
  # and job ids appended to names and ids. The one reader of a chain's files: rc_guard_bench
  # has judged every path it trusts here first. One call reads a run's chains: bash pays for
  # a function call and its locals once, not once a chain.
  local bench b marker k kind text id line words pid
  for bench; do
    b=$dir/$bench
    if [[ ! -d $b ]]; then rc_emit NOBENCH "$RC_I" "$bench"; continue; fi
    if [[ ! -r $b || ! -x $b ]]; then rc_emit UNREADABLE "$RC_I" "$bench"; continue; fi
    marker=0; [[ -e $b/__CANCEL__ ]] && marker=1
    rc_rec=(BENCH "$RC_I" "$bench" "$marker") rc_big=() rc_text=()
    __FILES__
    rc_emit "${rc_rec[@]}"
    for (( k = 0; k < ${#rc_big[@]}; k += 2 )); do
      rc_emit_file FILE "$RC_I" "${rc_big[k]}" "$bench" ok "${rc_big[k + 1]}"
    done
    names+=("${RC_RUN_IDS[$RC_I]}:$bench")
    # Job ids for sacct: the chain's and first job's lines, and each successor event's.
    for kind in chain first; do
      text=${rc_text[$kind]:-} id=${text%$'\n'}
      [[ -n $text ]] || continue
      # The common case, one id on one line, without a regex (bash compiles one per test).
      if [[ $text == *$'\n' && -n $id && $id != *[!0-9_+]* ]]; then ids+=("$id"); continue; fi
      rc_lines "$text"
      for id in "${rc_line_list[@]}"; do [[ -n $id && $id != *[!0-9_+]* ]] && ids+=("$id"); done
    done
    if [[ ${rc_text[events]:-} == *successor* ]]; then
      rc_lines "${rc_text[events]}"
      for line in "${rc_line_list[@]}"; do
        [[ $line == *successor* ]] || continue
        set -f
        # shellcheck disable=SC2206  # words as `read -r _ _ kind id _` split them
        words=($line)
        set +f
        id=${words[3]:-}
        [[ ${words[2]:-} == successor && -n $id && $id != *[!0-9_+]* ]] && ids+=("$id")
      done
    fi
    if [[ $RC_EXECUTOR == shell && -n ${rc_text[first]:-} ]]; then
      pid=${rc_text[first]%%$'\n'*}; [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && rc_emit LIVE "$pid"
    fi
  done
}
rc_folders() {  # wanted: the benchmark folders of dir, those with a job.sh and those we may
  # not look into (named, for rc_bench to say so). `*/` lists folders and symlinks to them,
  # so a linked chain is named to the guard, which refuses it.
  local d
  wanted=()
  for d in "$dir"/*/; do
    d=${d%/}; [[ ${d##*/} == __UPLOADS__ ]] && continue
    if [[ -e $d/__JOB__ || ! -r $d || ! -x $d ]]; then wanted+=("${d##*/}"); fi
  done
}
ids=() names=() starts=()
rc_wire_buffered=1  # a record per chain: written in batches (wire.bash)
for RC_I in "${!RC_RUN_DIRS[@]}"; do
  dir=${RC_RUN_DIRS[$RC_I]}
  if [[ ! -d $dir && ! -L $dir ]]; then rc_emit RUN "$RC_I" 0; continue; fi
  # Nothing of a run is read before the run is known to be ours (the guard, rc_guard).
  rc_guard "${dir%/*}" "$dir" "$dir/__RECORD__" "$dir/__SINCE__"
  since=""; [[ -r $dir/__SINCE__ ]] && IFS= read -r -d '' -N 4096 since < "$dir/__SINCE__"
  # The run record only when the client has not what status reads from it (RC_RECORDS).
  if (( ${RC_RECORDS[$RC_I]:-1} )); then rc_emit_gz RUN "$RC_I" 1 "$since" "$dir/__RECORD__"
  else rc_emit RUN "$RC_I" 1 "$since" ""; fi
  if [[ -r $dir/__SINCE__ ]]; then  # its first 40 characters, trailing newlines dropped
    start=${since:0:40}; while [[ $start == *$'\n' ]]; do start=${start%$'\n'}; done
    starts+=("$start")
  fi
  read -r -a wanted <<< "${RC_BENCHES[$RC_I]}"
  (( ${#wanted[@]} )) || rc_folders  # none named: every benchmark of the run
  # No file of the run's chains is read before every path rc_bench trusts has passed.
  rc_guard_bench "${wanted[@]/#/$dir/}"
  rc_bench "${wanted[@]}"
done
rc_flush; rc_wire_buffered=""  # before the subshells below
rc_sacct() {  # one SACCT record: the first non-zero exit status, every chunk's output
  local chunk part r rc=0 out="" start
  start=$(printf '%s\n' "${starts[@]}" | sort | head -n 1)
  rc_chunks "${ids[@]}"
  for chunk in "${rc_chunk_list[@]}"; do
    part=$(rc_query sacct -X --parsable2 --noheader --format=__SACCT_FIELDS__ --starttime "${start:-now-30days}" \
      --endtime now --jobs "$chunk" 2>&1); r=$?
    (( rc )) || rc=$r; out+=${out:+$'\n'}$part
  done
  rc_emit_answer SACCT "$rc" "$out"
}
# rc_squeue_streamed: rc_squeue's listing of all of the user's jobs, kept by one awk and never
# held in bash: the lines it keeps go through gzip and base64 straight to the answer (fd 3)
# as one SQUEUE_STREAMED record (its text, then the first non-zero status of squeue, awk,
# gzip and base64: a text cut short is never read as squeue's whole answer), and the same awk
# leaves in ids those squeue does not show queued or running (rc_unqueued's comparison, made
# as it reads), so bash never holds a big listing several times over (the substitution, a copy,
# a printf for each of gzip and the unqueued awk). The ids come back on awk's stderr, each
# after "I<TAB>".
rc_squeue_streamed() {
  local left s line
  rc_flush
  printf 'SQUEUE_STREAMED\t\\z'
  { left=$( {
    rc_query squeue --noheader --me --format='__SQUEUE_FORMAT__' 2>&1 |
      command "$rc_awk" -F'|' 'NR == FNR {
          k = substr($0, 1, 1); v = substr($0, 3)
          if (k == "N") want[tolower(v)]
          else if (k == "I") { id[v]; asked[++na] = v }
          else if (k == "F") final[v]
          else dirs[++nd] = "|" v "/"
          next
        }
        NF < 7 { put(); next }
        !(tolower($NF) in want) { next }
        $1 in id { keep(); next }
        { for (i = 1; i <= nd; i++) if (index($0, dirs[i])) { keep(); next } }
        function keep() { put(); if ($2 ~ /^(__SQUEUE_LIVE_ERE__)$/) live[$1] }
        function put() { printf "%s%s", sep, $0; sep = "\n" }  # no last newline: as $(...)
        END {
          for (i = 1; i <= na; i++)
            if (asked[i] != "" && !(asked[i] in live) && !(asked[i] in final))
              print "I\t" asked[i] > "/dev/stderr"
        }' \
        <(printf 'N %s\n' "${names[@]}"; printf 'I %s\n' "${ids[@]}"
          printf 'F %s\n' "${RC_FINAL_IDS[@]}"; printf 'D %s\n' "${RC_RUN_DIRS[@]}") - 2>&4 |
      command gzip -c | command base64 -w 0 >&3
    s=("${PIPESTATUS[@]}")
    printf 'S\t%s\n' $(( s[0] ? s[0] : s[1] ? s[1] : s[2] ? s[2] : s[3] ))
  } 4>&1 ); } 3>&1
  rc_sq_rc=${left##*S$'\t'}
  # No status line (the subshell could not run to its end): a failure, never text on the wire.
  [[ -n $rc_sq_rc && $rc_sq_rc != *[!0-9]* && $left == *S$'\t'* ]] || rc_sq_rc=1
  printf '\t%s\n' "$rc_sq_rc"
  # squeue answered and awk compared all of it: the ids left are those for sacct; else every
  # id goes to sacct, as rc_unqueued leaves them.
  if [[ $rc_sq_rc == 0 ]]; then
    rc_lines "${left%S$'\t'*}"
    ids=()
    for line in "${rc_line_list[@]}"; do [[ $line == I$'\t'?* ]] && ids+=("${line#I$'\t'}"); done
  fi
  rc_sq_streamed=1
}
rc_squeue() {  # one SQUEUE record, as rc_sacct; its text and status kept in rc_sq_out, rc_sq_rc
  # (or, past 256 names, rc_squeue_streamed's record)
  local chunk part r rc=0 out="" all IFS=/
  all=${names[*]}; IFS=$' \t\n'
  # squeue's --name is no server-side filter: slurmctld sends all of the user's jobs (--me) and
  # squeue compares each with every name asked, O(jobs x names), where listing them all and
  # filtering in one awk is O(jobs). Past 256 names (where the two costs meet, whatever the
  # number of jobs), all of the user's jobs are listed once and awk keeps those squeue itself
  # would have kept: the lines whose job name (the last field, after %Z) equals an asked name,
  # ignoring case as squeue's xstrcasecmp does (22.05 and 24.11), and every line that is not a
  # job line (an error, a warning). Only for names squeue would not split or awk misread
  # (NAME_RE plus the ":");
  # '/' joins them here because no folder name holds one.
  # Of those, a job in none of the runs' folders (%Z) whose id no chain file names is a twin's:
  # the same run on another profile of this Slurm cluster, which the client never counts for
  # these chains (chainstatus.derive: a chain's ids, and the jobs in its folder). Left out:
  # with many profiles on few controllers every job would come back once per profile, for the
  # client to parse and drop. (Without gzip, which no Debian or RHEL lacks: --name.)
  if (( ${#names[@]} > 256 )) && [[ $all != *[!A-Za-z0-9._:/-]* ]] &&
    command -v "$rc_awk" >/dev/null 2>&1 && command -v gzip >/dev/null 2>&1 &&
    command -v base64 >/dev/null 2>&1; then
    rc_squeue_streamed
    return
  fi
  rc_chunks "${names[@]}"
  for chunk in "${rc_chunk_list[@]}"; do
    part=$(rc_query squeue --noheader --me --format='__SQUEUE_FORMAT__' --name="$chunk" 2>&1); r=$?
    (( rc )) || rc=$r; out+=${out:+$'\n'}$part
  done
  rc_emit_answer SQUEUE "$rc" "$out"
  rc_sq_out=$out rc_sq_rc=$rc
}
rc_unqueued() {  # the ids (in ids) for sacct, left in ids: those squeue did not show queued
  # or running, less those whose final record the client keeps (RC_FINAL_IDS: sacct said
  # COMPLETED, FAILED, ... with an End on an earlier poll, and will not say otherwise).
  # Only when squeue answered (an empty answer too: nothing of ours queued), and awk is there
  # to compare the lists in one process (mawk or gawk: every Debian and RHEL login node); else
  # every id goes to sacct, as before. Each list is one file, never empty (printf prints its
  # newline with no words): the files are told apart by FNR == 1.
  (( rc_sq_rc == 0 )) && command -v "$rc_awk" >/dev/null 2>&1 || return 0
  local left  # a substitution: bash reads a pipe a byte a system call, a substitution in blocks
  left=$(command "$rc_awk" -F'|' '
    FNR == 1 { f++ }
    f == 1 { if (NF >= 7 && $2 ~ /^(__SQUEUE_LIVE_ERE__)$/) live[$1]; next }
    f == 2 { final[$0]; next }
    $0 != "" && !($0 in live) && !($0 in final)' <(printf '%s\n' "$rc_sq_out") \
    <(printf '%s\n' "${RC_FINAL_IDS[@]}") <(printf '%s\n' "${ids[@]}")) ||
    return 0  # awk failed: every id goes to sacct
  ids=(); [[ -z $left ]] || { rc_lines "$left"$'\n'; ids=("${rc_line_list[@]}"); }
}
rc_emit_answer() {  # TAG STATUS TEXT: a long answer (over 4 KiB) gzipped
  if (( ${#3} > 4096 )); then rc_emit_gz "$1" "$2" <(printf '%s' "$3"); else rc_emit "$@"; fi
}
if [[ $RC_EXECUTOR == slurm ]]; then
  # squeue (slurmctld's memory) first, then sacct (slurmdbd) only for the jobs squeue no longer
  # shows queued or running: squeue speaks for those (state, reason, start, time used), so a
  # poll asks slurmdbd, which a site shares between all its users, only of the links that have
  # ended, and not at all while every job is still queued or running (held or waiting chains,
  # a run's first links). And slurmdbd's answer is the slow one (22.05's sacct stalls on its
  # own Nagle/delayed-ACK exchange). A job's final record is asked once: later polls send its
  # id in RC_FINAL_IDS, so a run whose ended chains are all known asks no sacct either.
  rc_sq_out="" rc_sq_rc=1 rc_sq_streamed=""
  if (( ${#names[@]} )); then rc_squeue; fi
  if (( ${#ids[@]} )) && [[ -z $rc_sq_streamed ]]; then rc_unqueued; fi
  if (( ${#ids[@]} )); then rc_sacct; fi
fi
rc_emit DONE
