# rc_guard: the one ownership check of every folder and file remote-chain trusts.
# Shared by the client's remote scripts through __GUARD__ (execs/templates.py); written to stand
# alone, so a job's prologue can include it too. Needs bash and GNU stat (grep only speeds it up).
#
# rc_guard PATH...: each PATH that exists must be a folder or a regular file -- never a
# symlink, whatever it points to -- owned by the user running us and not writable by group or
# others. Otherwise the reason, naming the path and its owner, goes to stderr and the script
# exits with __UNSAFE_EXIT__, which the client reports as an error (never as "existing" or as
# a state). Missing paths are skipped: the caller decides what a missing file means. One stat
# for all paths (status guards a run's chains without a fork per chain); `command` so that a shell
# function or alias of the user's login files cannot answer for stat.
# The paths go to stat through xargs, NUL-separated, so no command line exceeds ARG_MAX: a big
# run's paths would not fit in one exec ("Argument list too long"). The lines of plainly safe
# paths (our uid; %f, the raw mode in hex, a folder 4xxx or a file 8xxx with neither 0x10,
# group write, nor 0x2, other write) are dropped by one grep, so bash reads only the others:
# bash reads a pipe a byte per read(2). If stat
# could not run (xargs: 126, 127; 123 is a missing path), every path is refused; if grep
# cannot (status 2 or more), every line is judged: the filter only skips lines the loop passes.
rc_guard() {
  (( $# )) || return 0
  local uid raw path kind lines why user ran
  local filtered=2
  if (( $# > 64 )); then  # a few paths: bash reads their lines sooner than grep starts
    lines=$({ rc_stat '%u %f %n' "$@"; echo "rc_stat=$?"; } \
      | LC_ALL=C command grep -v -E "^$EUID [48][0-9a-f][02468ace][014589cd] ")
    filtered=$?
  fi
  if (( $# <= 16 )); then
    # A few paths (a run's four, a chain's): one stat, without xargs and the pipe to it, two
    # processes fewer on every status exec. No command line nears ARG_MAX: 16
    # paths of PATH_MAX are 64 KiB. stat's 1 (a path missing or not reachable) is xargs's 123.
    lines=$(command stat -c '%u %f %n' -- "$@" 2>/dev/null; ran=$?
      echo "rc_stat=$(( ran == 1 ? 123 : ran ))")
  elif (( filtered >= 2 )); then
    lines=$(rc_stat '%u %f %n' "$@"; echo "rc_stat=$?")
  fi
  ran=${lines##*rc_stat=} lines=${lines%rc_stat=*} lines=${lines%$'\n'}
  [[ $ran == 0 || $ran == 123 ]] || rc_unsafe "cannot check who owns ${1%/}: stat did not run (status $ran)"
  [[ -n $lines ]] || return 0
  while IFS=' ' read -r uid raw path; do
    kind=$(( 16#$raw & 8#170000 )) why=""
    if (( kind == 8#120000 )); then
      why="is a symlink (owned by @U); remote-chain never follows one here"
    elif (( kind != 8#040000 && kind != 8#100000 )); then
      why="is not a regular file or folder (owned by @U)"
    elif (( uid != EUID )); then
      why="is owned by @U, not by you: another user created it; remote-chain uses only folders and files of your own"
    elif (( 16#$raw & 8#022 )); then
      why="is writable by group or others (mode $(printf '%o' $(( 16#$raw & 8#7777 ))), owned by @U): anyone who can write it can run code as you"
    fi
    if [[ -n $why ]]; then
      # The owner's name only for the path refused: no user lookup per path.
      user=$(rc_stat %U "$path"); rc_unsafe "$path ${why//@U/"${user:-uid $uid}"}"
    fi
  done <<< "$lines"
}
# rc_guard_bench DIR...: each benchmark folder and every file in it that remote-chain trusts
# (job.sh, the state, lease, secrets and marker files, the log folder), in one rc_guard.
# shellcheck disable=SC2317  # unused where the caller adds paths (the prologue): rc_bench_paths
# Many folders (a chain has a dozen trusted paths, most of them absent) go through one find
# instead: it lists only the trusted files that exist and are not plainly safe (not ours,
# writable by group or others, neither file nor folder), and rc_guard judges just those.
# If find cannot run, every path is refused, as rc_guard does.
rc_guard_bench() {
  if (( $# <= 8 )); then rc_bench_paths "$@"; rc_guard "${RC_GUARD_PATHS[@]}"; return; fi
  local names=() f suspects=() path ran
  rc_guard "$@"
  for f in __TRUSTED__; do names+=(${names[0]+-o} -name "$f"); done
  # shellcheck disable=SC2016  # $@ of the inner sh: the folders xargs passes
  while IFS= read -r -d '' path; do
    if [[ $path == rc_find=* ]]; then ran=${path#rc_find=}; else suspects+=("$path"); fi
  done < <(printf '%s\0' "$@" | command xargs -0 sh -c 'exec find "$@" -mindepth 1 -maxdepth 1 \
      \( '"${names[*]}"' \) \( ! -uid '"$EUID"' -o -perm /022 -o ! \( -type f -o -type d \) \) \
      -print0' sh 2>/dev/null; printf 'rc_find=%s\0' "$?")
  [[ $ran == 0 || $ran == 123 ]] || rc_unsafe "cannot check who owns ${1%/}: find did not run (status $ran)"
  rc_guard "${suspects[@]}"
}
# rc_bench_paths DIR...: those paths, in RC_GUARD_PATHS (for a caller adding its own).
rc_bench_paths() {
  local d f
  RC_GUARD_PATHS=()
  for d in "$@"; do
    RC_GUARD_PATHS+=("$d")
    for f in __TRUSTED__; do RC_GUARD_PATHS+=("$d/$f"); done
  done
}
rc_stat() {  # FORMAT PATH...: each path's stat in FORMAT, no exec over ARG_MAX
  local format=$1
  shift
  printf '%s\0' "$@" | command xargs -0 stat -c "$format" -- 2>/dev/null
}
rc_unsafe() {
  printf 'remote-chain refused: %s\n' "$1" >&2
  exit __UNSAFE_EXIT__
}
