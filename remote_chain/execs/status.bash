# The single remote exec of `status` (see snapshot.py). Not standalone: snapshot.py prepends
# the RC_* arrays and substitutes the __NAMES__.
# The C locale for the whole exec: it reads and runs, and starts no job that would inherit it.
# Under a UTF-8 locale (C.UTF-8 here, en_US.UTF-8 at most sites) every process it starts
# loads the locale and every bash pattern test goes through wide characters: a 1,000-chain
# status cost 138 ms of login-node CPU, 128 ms in C (issue 13, P7). Every awk below relies
# on it (lengths in bytes, chains.awk); nothing depends on UTF-8: rc_emit judges bytes
# ("printable ASCII" is a byte range in C), read -N and ${#x} count bytes (the inline limit
# is one of bytes), Slurm does not translate, and sort orders the ISO start times the same.
export LC_ALL=C
# Its awk programs (chains.awk, the squeue filter) run in mawk where it is there: Debian's
# default awk, and ~1/3 less CPU than gawk for them (a 1,000-chain exec: 141 -> 129 ms of
# login-node CPU), where a site or scripts/setup made gawk the awk. Both are tested.
rc_awk=awk; command -v mawk >/dev/null 2>&1 && rc_awk=mawk
__WIRE__
__GUARD__
# One status exec costs O(1) processes, not O(chains): a file is read by bash itself and
# escaped by rc_emit with parameter expansions, so 200 chains do not fork 200 x 6 x 3 times
# (benchmarks issue, P3). Only a file above __INLINE__ bytes (or not ASCII) takes base64.
# A chain is one BENCH record, its files in it as KIND STATUS CONTENT triples; a file that does
# not exist is left out (the client reads "missing"): a held chain has one file of six, and the
# reply of 10,000 chains shrank from ~3.5 MB to ~0.5 MB (issue 13, P7).
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
rc_bench() {  # BENCH: one chain's records (BENCH, FILE, NOBENCH, UNREADABLE); its job name
  # and job ids appended to names and ids. The one definition of what they hold: chains.awk
  # prints the same records for the chains it reads, and leaves every other one to this.
  local bench=$1 b="$dir/$1" marker k kind text id line words pid
  if [[ ! -d $b ]]; then rc_emit NOBENCH "$RC_I" "$bench"; return; fi
  if [[ ! -r $b || ! -x $b ]]; then rc_emit UNREADABLE "$RC_I" "$bench"; return; fi
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
}
# rc_read_run: the records of every chain in wanted (of run RC_I, folder dir), each folder and
# file remote-chain trusts in them guarded first. Past 8 chains of a Slurm run, one process
# reads them all: perl (chains.pl) where it is there, else one find listing the run folder two
# levels deep and one awk (chains.awk) taking from it what the guard takes from its own find
# (every trusted path that is not ours, writable by group or others, or not a plain folder or
# file), then reading every plain chain. ~0.035 ms a chain with perl, ~0.08 with find and awk,
# where rc_guard_bench and rc_bench cost ~0.15 ms (issue 13, P7). A path either finds suspect
# goes to rc_guard, which refuses it as always (or, changed meanwhile, sends the run the careful
# way). Records go out in wanted's order, a deferred chain's from rc_bench in its place;
# anything unexpected (neither reader there, a fallback, output cut short) and the run is
# rc_guard_bench's and rc_bench's. Their input's records end in NUL: no file name can forge one.
rc_folders() {  # wanted: the benchmark folders of dir, those with a job.sh and those we may
  # not look into (named, for the reader to say so); the careful way, a stat or two each
  local d
  wanted=()
  for d in "$dir"/*/; do
    d=${d%/}; [[ ${d##*/} == __UPLOADS__ ]] && continue
    if [[ -e $d/__JOB__ || ! -r $d || ! -x $d ]]; then wanted+=("${d##*/}"); fi
  done
}
rc_read_run() {  # with rc_all, wanted holds the run folder's names: chains.awk or rc_folders
  # keeps the benchmark folders
  local fast=() head nrec nname nid nbytes plain feed i rc_out tag=W
  (( rc_all )) && tag=C
  rc_feed_arrays  # an earlier run's: names and ids stay in the runs' order
  if (( ${#wanted[@]} > 8 )) && [[ $RC_EXECUTOR == slurm ]] && command -v perl >/dev/null 2>&1; then
    # Bytes in, bytes out, whatever the login shell exports: PERL5OPT could load modules or
    # the debugger, PERLIO and PERL_UNICODE (-C0 wins over it) change the layers.
    # Its records may go straight out on descriptor 3: what is buffered leaves first.
    rc_flush
    { rc_out=$({ printf "$tag"'\t%s\0' "${wanted[@]}"; printf 'END\0'; } |
        RC_AWK_RUN=$RC_I RC_AWK_RUN_ID=${RC_RUN_IDS[$RC_I]} RC_AWK_DIR=$dir PERL5OPT='' PERLIO='' \
          command perl -C0 -e '__CHAINS_PL__' 2>/dev/null); } 3>&1
    if [[ $rc_out == "FEED "* ]]; then  # the records went out: here are the names and ids
      head=${rc_out%%$'\n'*} feed=""
      [[ $rc_out == *$'\n'* ]] && feed=${rc_out#*$'\n'}
      read -r head nrec nname nid nbytes plain <<< "$head"
      # Each chain asked by name has its one record (C: the names perl kept, bash knows not).
      if [[ -n $nrec$nname$nid$nbytes$plain && $nrec$nname$nid$nbytes$plain != *[!0-9]* ]] &&
        (( ${#feed} == nbytes && (rc_all || nrec == ${#wanted[@]}) )); then
        [[ -z $feed ]] || rc_feed+=$feed$'\n'
        (( rc_feed_names += nname, rc_feed_ids += nid ))
        (( plain )) || rc_feed_arrays  # rc_squeue judges the names
        return
      fi
      # Never (perl counted them): read the run again the careful way; a record sent twice
      # is one chain to the client (parse_status_output keeps the last).
    fi
    rc_lines "$rc_out"$'\n'; fast=("${rc_line_list[@]}")
  elif (( ${#wanted[@]} > 8 )) && [[ $RC_EXECUTOR == slurm ]] &&
    command -v "$rc_awk" >/dev/null 2>&1 && command -v find >/dev/null 2>&1; then
    # Read as one command substitution, not mapfile from a pipe: bash reads a pipe a byte a
    # system call (75,000 of them for 1,000 chains' records), a substitution 4 KB at a time.
    rc_out=$({
        printf "$tag"'\t%s\0' "${wanted[@]}"
        # One find of the run folder, from inside it (its name holds no pattern then): each
        # entry stat-ed (the benchmark folders), and in them the names we trust or read and
        # nothing else stat-ed, as a runner may keep 100,000 files in its working folder
        # (name tests first; find knows the rest's names). Two finds, one a level, cost
        # ~5 ms more for 1,000 chains: the first stat-ed every folder the second read.
        ( CDPATH='' cd -- "$dir" 2>/dev/null && exec find . -mindepth 1 -maxdepth 2 \
          \( -path './*/*' \( __AWK_LISTED__ \) \
            \( \( ! -uid "$EUID" -o -perm /022 -o ! \( -type f -o -type d \) \) -printf 'S\t2\t%P\0' -o \
              -type d -printf 'D\t2\t%P\0' -o \
              \( __AWK_NAMES__ \) \( -readable -printf 'F\t2\t%s\t%P\0' -o -printf 'R\t2\t%P\0' \) \) \) -o \
          \( ! -path './*/*' \
            \( \( ! -uid "$EUID" -o -perm /022 -o ! \( -type f -o -type d \) \) -printf 'S\t1\t%P\0' -o \
              -type d \( -readable -executable -printf 'D\t1\t%P\0' -o -printf 'U\t1\t%P\0' \) \) \) \
          2>/dev/null )
        printf 'END\t%s\0' "$?"
      } | RC_AWK_RUN=$RC_I RC_AWK_RUN_ID=${RC_RUN_IDS[$RC_I]} RC_AWK_DIR=$dir \
        command "$rc_awk" '__CHAINS_AWK__' 2>/dev/null)
    rc_lines "$rc_out"$'\n'; fast=("${rc_line_list[@]}")
  fi
  if [[ ${fast[0]:-} == SUSPECT ]]; then
    rc_guard "${fast[@]:1}"  # exits, naming the path and its owner
    fast=()  # it changed since find looked: the careful way
  fi
  head=${fast[0]:-}
  read -r head nrec nname nid <<< "$head"
  if [[ $head != OK ]] || (( ${#fast[@]} != 1 + nrec + nname + nid )); then
    if (( rc_all )); then  # the names did not tell (or were few): the folders, then as named
      rc_folders; rc_all=0; rc_read_run; return
    fi
    rc_guard_bench "${wanted[@]/#/$dir/}"  # one stat, or one find, for every path read below
    for bench in "${wanted[@]}"; do rc_bench "$bench"; done
    return
  fi
  if [[ " ${fast[*]:1:nrec}" != *" DEFER"$'\t'* ]]; then  # every chain read: one write
    rc_flush; printf '%s\n' "${fast[@]:1:nrec}"
  else
    for (( i = 1; i <= nrec; i++ )); do
      if [[ ${fast[i]} == DEFER$'\t'* ]]; then rc_bench "${fast[i]#DEFER$'\t'}"; else rc_put "${fast[i]}"; fi
    done
  fi
  names+=("${fast[@]:1 + nrec:nname}")
  ids+=("${fast[@]:1 + nrec + nname:nid}")
}
# The job names and ids of every chain read, for squeue and sacct: in names and ids, or, as
# perl sent them (chains.pl, "FEED"), still in rc_feed's "N name" and "I id" lines, which
# the awk of rc_squeue_streamed reads as they are (rc_feed_names and rc_feed_ids count them).
rc_feed_arrays() {  # rc_feed's names and ids appended to names and ids
  local line
  [[ -n $rc_feed ]] || return 0
  rc_lines "$rc_feed"
  for line in "${rc_line_list[@]}"; do
    case $line in "N "*) names+=("${line#N }") ;; "I "*) ids+=("${line#I }") ;; esac
  done
  rc_feed="" rc_feed_names=0 rc_feed_ids=0
}
ids=() names=() starts=() rc_feed="" rc_feed_names=0 rc_feed_ids=0
rc_wire_buffered=1  # a record per chain: written in batches (wire.bash)
for RC_I in "${!RC_RUN_DIRS[@]}"; do
  dir=${RC_RUN_DIRS[$RC_I]}
  if [[ ! -d $dir && ! -L $dir ]]; then rc_emit RUN "$RC_I" 0; continue; fi
  # Nothing of a run is read before the run is known to be ours (issue 14.1).
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
  rc_all=0
  if (( ${#wanted[@]} == 0 )); then
    # Every benchmark of the run: first the folder's names, sorted, which a glob lists without
    # a stat (`*/` stats each entry, and `-e` each job.sh: ~10 ms for 1,000 chains). The reader
    # keeps the folders from find's listing, or rc_folders does (issue 13, P7).
    wanted=("$dir"/*); wanted=("${wanted[@]##*/}") rc_all=1
  fi
  rc_read_run  # the guard of every benchmark folder and file it reads, first
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
# as it reads). bash held a 1,000-chain listing's ~150 KB three times over (the substitution,
# a copy, a printf for each of gzip and the unqueued awk): ~14 ms of a 1,000-chain exec's
# login-node CPU (issue 13, P7). The ids come back on awk's stderr, each after "I<TAB>".
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
        <(printf '%s' "$rc_feed"; printf 'N %s\n' "${names[@]}"; printf 'I %s\n' "${ids[@]}"
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
    ids=() rc_feed="" rc_feed_names=0 rc_feed_ids=0
    for line in "${rc_line_list[@]}"; do [[ $line == I$'\t'?* ]] && ids+=("${line#I$'\t'}"); done
  else
    rc_feed_arrays
  fi
  rc_sq_streamed=1
}
rc_squeue() {  # one SQUEUE record, as rc_sacct; its text and status kept in rc_sq_out, rc_sq_rc
  # (or, past 256 names, rc_squeue_streamed's record)
  local chunk part r rc=0 out="" all IFS=/
  all=${names[*]}; IFS=$' \t\n'
  # squeue's --name is no server-side filter: slurmctld sends all of the user's jobs (--me) and
  # squeue compares each with every name asked, O(jobs x names): 0.10 s of CPU for 1,000 names
  # over 5,000 held jobs (~20 ns a pair), where listing them all costs 0.02 s (~4 us a job, one
  # awk included). Past 256 names (where the two meet, whatever the number of jobs), all of the
  # user's jobs are listed once and awk keeps those squeue itself would have kept: the lines
  # whose job name (the last field, after %Z) equals an asked name, ignoring case as squeue's
  # xstrcasecmp does (22.05 and 24.11), and every line that is not a job line (an error, a
  # warning). Only for names squeue would not split or awk misread (NAME_RE plus the ":");
  # '/' joins them here because no folder name holds one (issue 13, P7).
  # Of those, a job in none of the runs' folders (%Z) whose id no chain file names is a twin's:
  # the same run on another profile of this Slurm cluster, which the client never counts for
  # these chains (chainstatus.derive: a chain's ids, and the jobs in its folder). Left out:
  # ten profiles on two controllers sent every job five times, and the client parsed 50,000
  # lines for 10,000 chains. (Without gzip, which no Debian or RHEL lacks: --name.)
  if (( ${#names[@]} + rc_feed_names > 256 )) && [[ $all != *[!A-Za-z0-9._:/-]* ]] &&
    command -v "$rc_awk" >/dev/null 2>&1 && command -v gzip >/dev/null 2>&1 &&
    command -v base64 >/dev/null 2>&1; then
    rc_squeue_streamed
    return
  fi
  rc_feed_arrays
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
  local left  # a substitution, as rc_read_run reads chains.awk's
  left=$(command "$rc_awk" -F'|' '
    FNR == 1 { f++ }
    f == 1 { if (NF >= 7 && $2 ~ /^(__SQUEUE_LIVE_ERE__)$/) live[$1]; next }
    f == 2 { final[$0]; next }
    $0 != "" && !($0 in live) && !($0 in final)' <(printf '%s\n' "$rc_sq_out") \
    <(printf '%s\n' "${RC_FINAL_IDS[@]}") <(printf '%s\n' "${ids[@]}")) ||
    return 0  # awk failed: every id goes to sacct
  ids=(); [[ -z $left ]] || { rc_lines "$left"$'\n'; ids=("${rc_line_list[@]}"); }
}
rc_emit_answer() {  # TAG STATUS TEXT: a long answer (1,000 jobs' lines are ~130 KB) gzipped
  if (( ${#3} > 4096 )); then rc_emit_gz "$1" "$2" <(printf '%s' "$3"); else rc_emit "$@"; fi
}
if [[ $RC_EXECUTOR == slurm ]]; then
  # squeue (slurmctld, ~10 ms) first, then sacct (slurmdbd) only for the jobs squeue no longer
  # shows queued or running: squeue speaks for those (state, reason, start, time used), so a
  # poll asks slurmdbd, which a site shares between all its users, only of the links that have
  # ended, and not at all while every job is still queued or running (held or waiting chains,
  # a run's first links). And slurmdbd's answer is the slow one: 22.05's
  # sacct waits ~90 ms on its own Nagle/delayed-ACK stalls, 24.11's ~5 ms (issue 13, P9). A
  # job's final record is asked once: later polls send its id in RC_FINAL_IDS, so a run whose
  # ended chains are all known asks no sacct either (P3: a 200-chain run with 30 ended ones
  # paid squeue, then sacct, on every poll).
  rc_sq_out="" rc_sq_rc=1 rc_sq_streamed=""
  if (( ${#names[@]} + rc_feed_names )); then rc_squeue; fi
  rc_feed_arrays  # (emptied by rc_squeue)
  if (( ${#ids[@]} )) && [[ -z $rc_sq_streamed ]]; then rc_unqueued; fi
  if (( ${#ids[@]} )); then rc_sacct; fi
fi
rc_emit DONE
