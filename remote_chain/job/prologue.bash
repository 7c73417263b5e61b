# The chain prologue (resumable-runs.md, "How it works"). Not a standalone script: script.py
# substitutes the __NAMES__ (file names, actions, outcomes, Slurm command lines) and prepends the
# constants and the generated rc_outcome/rc_decide (core/rules.py's tables): this file is only
# the I/O around rc_decide.
RC_SELF="$RC_DIR/__JOB__"
# Under the shell executor (no Slurm) the job id is the detached wrapper's pid.
RC_JOB_ID=${SLURM_JOB_ID:-${RC_SHELL_JOB_ID:-$$}}
RC_UID=$(id -u)
# The sacct window start, written by submit in the cluster's clock: a recycled job id cannot
# match a job from before the run.
RC_SACCT_START=$(head -c 40 "$RC_DIR/../__SINCE__" 2>/dev/null) || RC_SACCT_START=""
[[ $RC_SACCT_START =~ ^[0-9T:-]+$ ]] || RC_SACCT_START=now-30days
# Our own files are never group/other writable (the prologue refuses such files).
umask go-w
RC_PHASE=prologue  # prologue | runner: what an exit means for the successor
RC_SUCC=""         # the successor this run may withdraw (queued by it, or pending from before)
RC_LEASE=0         # 1 while this job holds the runner lease
RC_QT="" RC_RUNNER_PID="" RC_SIGNAL="" RC_SIGNALS=0 RC_FORWARDED="" RC_BUDGET_HIT=0 RC_INT=0
F_CANCEL_REQUESTED=0 F_LEASE_HELD=0 F_RESTARTED=0 F_PREDECESSOR_QUEUED=0
P_STATE="" P_BY="" P_ELAPSED="" P_END="" P_IN_QUEUE=0 P_CTLD_STATE="" P_CTLD_ELAPSED=""

# Logs go to stderr (the job's log file): stdout of helpers is captured by $(...).
rc_log() { printf '[remote-chain %s] %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
# One line per fact, appended: status reads it; a requeued job only ever adds lines. Returns
# non-zero when the line could not be written (full disk, quota).
rc_event() { printf '%s %s %s\n' "$(date +%s)" "$RC_JOB_ID" "$*" 2>/dev/null >> __EVENTS__; }

# Write a state file atomically (tmp + rename), so a job killed mid-write never leaves it torn;
# the rename replaces a symlink planted there, it never writes through it.
rc_write() { printf '%s\n' "$2" 2>/dev/null > "$1.tmp.$$" && mv -f -- "$1.tmp.$$" "$1"; }

# A link that cannot record its decision stops, its successor withdrawn (by the EXIT trap),
# and says why: never a link whose counters cannot advance and so loops forever.
rc_cannot_record() {
  rc_log "cannot write $1 (disk full or over quota?): the chain stops here, its successor withdrawn; free space, then remote-chain resume"
  rm -f -- "$1.tmp.$$" 2>/dev/null
  exit 74
}

# A corrupt state file stops the chain loudly: never a silent reset, never a runaway chain.
rc_corrupt() {
  rc_log "corrupt state file $1: $2; the chain stops here (fix or remove the file, then remote-chain resume)"
  rc_event "__EV_CORRUPT_STATE__ $1 $2"
  exit 65
}

# A whole number from a state file a person may have edited: surrounding blanks and a CR are
# dropped, leading zeros are decimal (never octal); anything else is corruption. Sets RC_INT
# (no $(...): an exit inside a subshell would not end the link).
rc_read_int() {
  local v ws=$' \t\r' LC_ALL=C
  RC_INT=0
  [[ -e $1 ]] || return 0
  [[ -f $1 && -r $1 ]] || rc_corrupt "$1" "unreadable"
  # NUL bytes would be dropped by bash: make them visible, hence refused.
  v=$(command tr '\0' '#' < "$1") || rc_corrupt "$1" "unreadable"
  v=${v#"${v%%[!"$ws"]*}"}; v=${v%"${v##*[!"$ws"]}"}
  [[ $v =~ ^[0123456789]+$ ]] || rc_corrupt "$1" "not a whole number: '${v:0:40}'"
  v=${v#"${v%%[!0]*}"}; v=${v:-0}
  (( ${#v} <= 15 )) || rc_corrupt "$1" "not a whole number: too large"
  RC_INT=$v
}

# Fill RC_CHAIN (array of job ids) from the chain file; any malformed line is corruption.
rc_read_chain() {
  RC_CHAIN=()
  [[ -e __CHAIN__ ]] || return 0
  [[ -r __CHAIN__ ]] || rc_corrupt __CHAIN__ "unreadable"
  local content line
  # The trailing x keeps $(...) from eating the final newline we need to see.
  content=$(cat -- __CHAIN__; printf x); content=${content%x}
  [[ -n $content ]] || return 0
  [[ ${content: -1} == $'\n' ]] || rc_corrupt __CHAIN__ "truncated (no final newline)"
  while IFS= read -r line; do
    [[ $line =~ ^$RC_JOB_ID_ERE$ ]] || rc_corrupt __CHAIN__ "bad line '${line:0:40}'"
    RC_CHAIN+=("$line")
  done <<< "${content%$'\n'}"
}

# The folder and every file the prologue trusts (job.sh, the state, lease and secrets
# files, the cluster folder and its window file) are the user's own and not writable by group
# or others, and none is a symlink (refused, never written through). guard.bash's check, the
# one the client's scripts run: it exits 77 before the EXIT trap is set, so nothing is written
# and no successor is queued. One stat for every path, not one per path.
__GUARD__
rc_check_trust() {
  rc_bench_paths "$PWD"
  rc_guard "${RC_GUARD_PATHS[@]}" "$RC_SELF" "$RC_DIR/.." "$RC_DIR/../__SINCE__"
}

# A bounded Slurm query: `command` so no shell function or alias stands in for it,
# `timeout` so a wedged slurmctld/slurmdbd cannot hold the allocation.
# squeue's filters from the environment sbatch handed the job (--export=ALL: a user's rc file
# with SQUEUE_STATES=RUNNING, a partition, ...) would hide the jobs these queries look for: a
# pending successor (a second one queued) or a running lease owner (its lease broken, two
# runners). Dropped for our own queries only; the runner keeps the user's environment.
rc_slurm() {
  command env __SLURM_ENV_DROP__ timeout -k 2 "${RC_QT:-$RC_QUERY_TIMEOUT}" "$@"
}
# Inside the lookup a query gets at most what is left of the window (+2 s), so the whole lookup
# ends within the window plus a few seconds even when every query hangs.
rc_bound() {
  RC_QT=$(( $1 - SECONDS + 2 ))
  (( RC_QT <= RC_QUERY_TIMEOUT )) || RC_QT=$RC_QUERY_TIMEOUT
  (( RC_QT >= 1 )) || RC_QT=1
}

# Look the predecessor up. Sets P_STATE (empty: never seen), P_BY, P_ELAPSED (every run's,
# --duplicates), P_IN_QUEUE. Retries about a minute while the job is not visible or only a
# stale non-terminal state shows (accounting lag); stops early when squeue holds it again.
rc_lookup() {
  local pred=$1 deadline=$((SECONDS + RC_LOOKUP_TIMEOUT)) out f1 f2 f3 f4 f5 sq asked=0 sum
  while :; do
    P_STATE="" P_BY="" sum=0
    rc_bound "$deadline"
    out=$(rc_slurm sacct __SACCT_ARGS__ \
      --starttime "$RC_SACCT_START" --endtime now --jobs "$pred" 2>/dev/null) || out=""
    while IFS='|' read -r f1 f2 f3 f4 f5; do
      # Our id AND our chain's name and folder: a recycled id is someone else's job.
      [[ $f1 == "$pred" && $f4 == "$RC_JOB_NAME" ]] || continue
      [[ $f5 == "$RC_DIR" || $f5 == "$PWD" ]] || continue
      # The last line wins (the newest run); every run's elapsed adds up.
      P_STATE=${f2%% *}
      if [[ $f2 =~ ^CANCELLED\ by\ ([0-9]+) ]]; then P_BY=${BASH_REMATCH[1]}; else P_BY=""; fi
      [[ $f3 =~ ^[0-9]{1,12}$ ]] && sum=$(( sum + 10#$f3 ))
    done <<< "$out"
    P_ELAPSED=$sum
    if [[ -n $P_STATE ]]; then rc_outcome "$P_STATE"; [[ $RC_OUTCOME != __NOT_VISIBLE__ ]] && { RC_QT=""; return 0; }; fi
    rc_bound "$deadline"
    sq=$(rc_slurm squeue __SQUEUE_STATE_ARGS__ --jobs "$pred" 2>/dev/null | head -n 1) || sq=""
    case "$sq" in
      __QUEUED_STATES__) P_IN_QUEUE=1; RC_QT=""; return 0 ;;
    esac
    # Ask slurmctld once, now: it forgets a job MinJobAge after its end, maybe before the
    # window is over.
    if (( ! asked )); then asked=1; rc_bound "$deadline"; rc_lookup_ctld "$pred"; fi
    if (( SECONDS >= deadline )); then
      RC_QT=""
      # Accounting never showed a final state: slurmctld's final state decides, then the
      # predecessor's own end record (rc_decide), then "not visible".
      P_STATE=$P_CTLD_STATE P_ELAPSED=$P_CTLD_ELAPSED P_BY=""
      [[ -z $P_STATE ]] || rc_log "accounting never showed job $pred; slurmctld says $P_STATE after ${P_ELAPSED}s"
      return 0
    fi
    rc_log "predecessor $pred not final in accounting yet (state '${P_STATE:-none}'); retrying"
    sleep "$RC_LOOKUP_INTERVAL"
  done
}

# slurmctld keeps a job for MinJobAge after its end. Sets P_CTLD_STATE/P_CTLD_ELAPSED when it
# knows the job (of our chain: same name) ended.
rc_lookup_ctld() {
  local info days=0 h m s
  info=$(rc_slurm scontrol show job -o "$1" 2>/dev/null) || return 0
  [[ $info == *" JobName=$RC_JOB_NAME "* ]] || return 0
  [[ $info =~ JobState=([A-Z_]+) ]] || return 0
  rc_outcome "${BASH_REMATCH[1]}"
  [[ $RC_OUTCOME != __NOT_VISIBLE__ ]] || return 0
  P_CTLD_STATE=${BASH_REMATCH[1]}
  [[ $info =~ RunTime=(([0-9]+)-)?([0-9]+):([0-9]+):([0-9]+) ]] || return 0
  days=${BASH_REMATCH[2]:-0} h=${BASH_REMATCH[3]} m=${BASH_REMATCH[4]} s=${BASH_REMATCH[5]}
  P_CTLD_ELAPSED=$(( 10#$days * 86400 + 10#$h * 3600 + 10#$m * 60 + 10#$s ))
}

# The predecessor's own last end record: "end <ok|error|signalled> <status> <elapsed> [SIG]".
rc_read_end() {
  local kind elapsed
  read -r kind elapsed < <(awk -v j="$1" '$2 == j && $3 == "__EV_END__" {k = $4; e = $6} END {print k, e}' __EVENTS__ 2>/dev/null)
  case "$kind" in
    __END_KINDS__) P_END=$kind ;;
    *) P_END=""; return 0 ;;
  esac
  # Known to no other source: the record's own run time is what is counted.
  if [[ -z $P_STATE && $elapsed =~ ^[0-9]{1,12}$ ]]; then P_ELAPSED=$elapsed; fi
}

# Queue this very file again, to run only if this job ends not-ok (spec: before any work).
rc_queue_successor() {
  local out rc id="" line limit
  # Checked again here: a cancel may have landed while this job looked its predecessor up.
  if [[ -e __CANCEL__ ]]; then rc_log "cancel marker found: not queuing a successor"; return 0; fi
  out=$(command env -u SLURM_MEM_PER_CPU -u SLURM_MEM_PER_NODE -u SLURM_MEM_PER_GPU \
    timeout -k 5 "$RC_SBATCH_TIMEOUT" sbatch --parsable --dependency="afternotok:$RC_JOB_ID" \
    --kill-on-invalid-dep=yes "$RC_SELF" "$RC_JOB_ID" 2>&1)
  rc=$?
  while IFS= read -r line; do
    [[ $line =~ ^($RC_JOB_ID_ERE)(\;.*)?$ ]] && id=${BASH_REMATCH[1]}
  done <<< "$out"
  if (( rc != 0 )) && [[ -z $id ]] && (( rc == 124 || rc == 137 )); then
    # A timed-out sbatch may still have queued the job: look for it before giving up.
    id=$(rc_find_successor)
    [[ -z $id ]] || rc_log "sbatch timed out but queued successor $id"
  fi
  if [[ -z $id ]]; then
    out=$(printf '%s' "$out" | tr '\n\t' '  ' | cut -c1-300)
    (( rc == 124 || rc == 137 )) && out="sbatch timed out after ${RC_SBATCH_TIMEOUT}s $out"
    limit=""
    [[ $out =~ $RC_LIMIT_ERE ]] && limit="limit=${BASH_REMATCH[0]// /_} "
    rc_log "WARNING: could not queue a successor: $limit$out"
    rc_log "__WARNING__"
    rc_event "__EV_SUCCESSOR_FAILED__ $limit$out" || rc_cannot_record __EVENTS__
    return 0
  fi
  RC_SUCC=$id
  rc_log "queued successor $id (afternotok:$RC_JOB_ID)"
  rc_event "__EV_SUCCESSOR__ $id" || rc_cannot_record __EVENTS__
}

rc_find_successor() {
  local f1 f2 f3
  while IFS='|' read -r f1 f2 f3; do
    if [[ $f1 =~ ^$RC_JOB_ID_ERE$ && $f2 == *"afternotok:$RC_JOB_ID"* && ( $f3 == "$RC_DIR" || $f3 == "$PWD" ) ]]; then
      printf '%s\n' "$f1"; return 0
    fi
  done < <(rc_slurm squeue --noheader --me --name "$RC_JOB_NAME" --format '__SQUEUE_SUCC_FORMAT__' 2>/dev/null)
}

# Whether the successor this job queued on an earlier run (before a requeue) is still queued;
# only a PENDING one is ours to withdraw (a running one carries the chain now).
rc_successor_alive() {
  local id st
  id=$(awk -v j="$RC_JOB_ID" '$2 == j && $3 == "__EV_SUCCESSOR__" {s = $4} END {print s}' __EVENTS__ 2>/dev/null)
  [[ -n $id ]] || return 1
  st=$(rc_slurm squeue __SQUEUE_STATE_ARGS__ --jobs "$id" 2>/dev/null | head -n 1)
  [[ -n $st ]] || return 1
  [[ $st == PENDING ]] && RC_SUCC=$id
  return 0
}

# Withdraw the successor this run may withdraw: the run ended, stopped, or never reached its
# runner. Not trusting --kill-on-invalid-dep, which some sites disable.
rc_withdraw_successor() {
  [[ -n $RC_SUCC ]] || return 0
  rc_event "__EV_SUCCESSOR_CANCELLED__ $RC_SUCC"
  rc_slurm scancel "$RC_SUCC" 2>/dev/null || rc_log "could not cancel successor $RC_SUCC"
  RC_SUCC=""
}

# --- The runner lease: two links never run the runner at once -------------------------------
# A hard link of a file naming the owner (atomic, fails when the lease exists). Broken only
# when squeue says the owner no longer runs, by one breaker per owner (an atomic mkdir) and by
# an atomic rename: never rmdir-then-mkdir, so two links cannot delete each other's new lease.
rc_lease_owner() { RC_OWNER=$(head -c 40 __LEASE__ 2>/dev/null); RC_OWNER=${RC_OWNER%%$'\n'*}; }

rc_owner_runs() {
  local out rc
  out=$(rc_slurm squeue __SQUEUE_STATE_ARGS__ --jobs "$1" 2>&1); rc=$?
  if (( rc == 0 )); then
    case "${out%%$'\n'*}" in
      __LEASE_LIVE_STATES__) return 0 ;;
      *) return 1 ;;
    esac
  fi
  [[ $out == *"Invalid job id"* ]] && return 1
  return 0  # squeue did not answer: assume it runs (safety first, see docs/reliability.md)
}

rc_take_lease() {
  local tmp="__LEASE__.$RC_JOB_ID.$$" deadline=$((SECONDS + RC_LOOKUP_TIMEOUT))
  printf '%s\n' "$RC_JOB_ID" 2>/dev/null > "$tmp" || rc_cannot_record "$tmp"
  while :; do
    if ln -- "$tmp" __LEASE__ 2>/dev/null; then RC_LEASE=1; break; fi
    if [[ ! -e __LEASE__ ]]; then
      # ln failed, yet there is no lease: once more (it may just have been released)...
      if ln -- "$tmp" __LEASE__ 2>/dev/null; then RC_LEASE=1; break; fi
      if [[ ! -e __LEASE__ ]]; then
        # ...else a filesystem without hard links. Run as before the lease existed rather
        # than stop the chain, and say so.
        rc_log "WARNING: cannot take the runner lease (hard links unsupported here?)"
        rc_event "__EV_LEASE_UNSUPPORTED__"
        break
      fi
    fi
    rc_lease_owner
    if [[ $RC_OWNER == "$RC_JOB_ID" ]]; then RC_LEASE=1; break; fi  # ours, from before a requeue
    if [[ -n $RC_OWNER ]] && ! rc_owner_runs "$RC_OWNER"; then
      if mkdir -- "__LEASE__.break.$RC_OWNER" 2>/dev/null; then
        # The only breaker of this owner's lease; a new owner needs the lease gone first.
        local owner=$RC_OWNER
        rc_lease_owner
        if [[ $RC_OWNER == "$owner" ]] && mv -f -- __LEASE__ "__LEASE__.broken.$owner"; then
          rm -f -- "__LEASE__.broken.$owner"
          rc_log "broke the runner lease of job $owner: Slurm says it no longer runs"
          rc_event "__EV_LEASE_BROKEN__ $owner"
        fi
        rmdir -- "__LEASE__.break.$owner" 2>/dev/null
        continue
      fi
      # Another link is breaking it (a moment: mkdir to rmdir), or a breaker died in between
      # and left its folder. A break takes milliseconds, so one older than RC_BREAK_STALE
      # minutes (NFS clocks may differ by a few) is a dead breaker's: remove it, try again.
      # Never `continue` without this: a left-over folder once made the loop ask squeue
      # without pause until the time limit.
      if [[ -n $(find "__LEASE__.break.$RC_OWNER" -maxdepth 0 -mmin "+$RC_BREAK_STALE" 2>/dev/null) ]] \
        && rmdir -- "__LEASE__.break.$RC_OWNER" 2>/dev/null; then
        rc_log "removed the runner lease's break folder of job $RC_OWNER: older than ${RC_BREAK_STALE} min"
        continue
      fi
    fi
    if (( SECONDS >= deadline )); then F_LEASE_HELD=1; break; fi
    sleep "$RC_LOOKUP_INTERVAL"
  done
  rm -f -- "$tmp"
}

# shellcheck disable=SC2317  # called from a trap
rc_release_lease() {
  (( RC_LEASE )) || return 0
  RC_LEASE=0
  rc_lease_owner
  [[ $RC_OWNER == "$RC_JOB_ID" ]] && rm -f -- __LEASE__
}

# --- Signals ----------------------------------------------------------------------------------
# `--signal=B:SIG@N` reaches only this shell: forward it, once, to the runner's process group.
# At the time limit or a preemption Slurm signals every process of the job itself (this job is
# then COMPLETING): that TERM is not forwarded again.
# shellcheck disable=SC2317  # called from a trap
rc_on_signal() {
  RC_SIGNALS=$(( RC_SIGNALS + 1 ))
  [[ -n $RC_SIGNAL ]] || RC_SIGNAL=$1
  if [[ $RC_PHASE != runner ]]; then
    # Before the runner: a warning is kept for it; TERM/INT end the link, successor kept.
    [[ $1 == TERM || $1 == INT ]] && { rc_log "received SIG$1 before the runner started"; exit $(( 128 + $(kill -l "$1") )); }
    return 0
  fi
  [[ " $RC_FORWARDED " == *" $1 "* ]] && return 0
  RC_FORWARDED+=" $1"
  if [[ $1 == TERM && $RC_EXECUTOR == slurm ]] \
      && [[ $(rc_slurm squeue __SQUEUE_STATE_ARGS__ --jobs "$RC_JOB_ID" 2>/dev/null) == COMPLETING* ]]; then
    rc_log "SIGTERM from Slurm to every process of the job: not forwarded again"
  elif [[ -n $RC_RUNNER_PID ]]; then
    kill -s "$1" -- "-$RC_RUNNER_PID" 2>/dev/null || kill -s "$1" "$RC_RUNNER_PID" 2>/dev/null
    rc_log "forwarded SIG$1 to the runner"
  fi
  rc_event "__EV_SIGNAL__ $1"
  # The allocation may be KILLed after KillWait: record the end now, rewritten at the exit.
  [[ $1 == TERM ]] && rc_event "__EV_END__ __END_SIGNALLED__ 143 $SECONDS $1"
  return 0
}

# The walltime budget ran out (a timer sent ALRM): TERM the runner, KILL it 15 s later if it
# ignores TERM (RC_KILL_AFTER); either way the link records a walltime stop.
# shellcheck disable=SC2317  # called from a trap
rc_on_budget() {
  RC_SIGNALS=$(( RC_SIGNALS + 1 ))
  RC_BUDGET_HIT=1
  [[ -n $RC_RUNNER_PID ]] || return 0
  kill -TERM -- "-$RC_RUNNER_PID" 2>/dev/null || kill -TERM "$RC_RUNNER_PID" 2>/dev/null
  rc_timer "$RC_KILL_AFTER" kill -KILL -- "-$RC_RUNNER_PID"
  RC_KILLER=$!
}

# Run "$@" after $1 seconds in the background, cancellable with `kill $!`.
rc_timer() {
  local t=$1; shift
  ( sleep "$t" & s=$!; trap 'kill "$s" 2>/dev/null; exit 0' TERM; wait "$s" && "$@" ) \
    </dev/null >/dev/null 2>&1 &
}

# The runner, in its own process group, with the secrets in ITS environment only (never in
# the environment of sbatch, so never in slurmctld's saved job state).
rc_start_runner() {
  (
    trap - INT QUIT TERM USR1 USR2 ALRM EXIT
    if (( RC_SECRETS )) && [[ -r __SECRETS__ && ! -L __SECRETS__ ]]; then
      set -a
      # shellcheck source=/dev/null
      . ./__SECRETS__
      set +a
    elif (( RC_SECRETS )); then
      rc_log "WARNING: no secrets file: the chain ended before and its secrets were removed; the runner starts without them (submit again to send them)"
    fi
    if command -v setsid >/dev/null; then exec setsid "${RC_RUNNER[@]}"; fi
    exec "${RC_RUNNER[@]}"
  ) &
  RC_RUNNER_PID=$!
}

# The secrets file goes when the chain ends (completed, failed, cancelled, stopped).
rc_drop_secrets() { [[ -e __SECRETS__ && ! -L __SECRETS__ ]] && rm -f -- __SECRETS__; return 0; }

# Every exit passes here. Before the runner started, no exit may leave a live successor (an
# error of any kind, `set -u` included); a link ended by a signal keeps it (the chain goes on).
# shellcheck disable=SC2317  # called from a trap
rc_on_exit() {
  local status=$?
  trap - EXIT
  if [[ $RC_PHASE == prologue ]]; then
    if [[ -n $RC_SIGNAL ]] && (( status > 128 )); then
      rc_event "__EV_END__ __END_SIGNALLED__ $status $SECONDS $RC_SIGNAL"
    else
      rc_withdraw_successor
    fi
  fi
  rc_release_lease
  exit "$status"
}

# Act on rc_decide's action: stop here (successor withdrawn by the EXIT trap) or go on.
rc_act() {
  case "$action" in
    __EXIT_SUCCESS__) rc_log "the run already completed" ;;
    __STOP_CANCELLED__) rc_log "the chain was cancelled: it stops (${message:-predecessor cancelled})" ;;
    __STOP_WALLTIME__) rc_log "$message: the chain stops" ;;
    __EXIT_ERROR__) rc_log "$message: the chain ends with an error" ;;
    __YIELD__) rc_log "$message: this link leaves the chain to it and exits" ;;
  esac
  case "$action" in
    __START__|__RESUME__|__RESTART__) return 0 ;;
    __YIELD__) exit 0 ;;
    __EXIT_ERROR__) rc_drop_secrets; exit 1 ;;
    *) rc_drop_secrets; exit 0 ;;
  esac
}

rc_main() {
  local pred=${1:-} action="" outcome="" message="" walltime=0 retries=0 unknown=0
  if [[ -n $pred && ! $pred =~ ^$RC_JOB_ID_ERE$ ]]; then
    rc_log "invalid predecessor job id '${pred:0:40}'"; exit 64
  fi
  rc_check_trust
  trap rc_on_exit EXIT
  trap 'rc_on_signal USR1' USR1
  trap 'rc_on_signal USR2' USR2
  trap 'rc_on_signal TERM' TERM
  trap 'rc_on_signal INT' INT
  trap rc_on_budget ALRM
  mkdir -p __LOGS__ __ARTIFACTS__
  # The cancel marker of `remote-chain cancel` is checked before anything else.
  if [[ -e __CANCEL__ ]]; then
    F_CANCEL_REQUESTED=1; rc_decide
    rc_event "__EV_DECIDED__ $action marker" || rc_cannot_record __EVENTS__
    rc_act
  fi
  rc_read_chain
  rc_read_int __WALLTIME__; walltime=$RC_INT
  rc_read_int __RETRIES__; retries=$RC_INT
  rc_read_int __UNKNOWN__; unknown=$RC_INT
  for id in "${RC_CHAIN[@]}"; do [[ $id == "$RC_JOB_ID" ]] && F_RESTARTED=1; done

  # The successor is queued before anything that can take time (the lookup may wait a minute
  # for accounting): a link killed in its prologue must not end the chain. Every path that
  # decides not to run withdraws it again (the EXIT trap).
  if (( RC_RESUMABLE )) && [[ $RC_EXECUTOR == slurm ]]; then
    if (( F_RESTARTED )) && rc_successor_alive; then
      rc_log "successor from before the requeue is still queued"
    else
      rc_queue_successor
    fi
    rc_take_lease
  fi
  if (( RC_RESUMABLE && ! F_RESTARTED && ! F_LEASE_HELD )) && [[ -n $pred ]]; then
    rc_lookup "$pred"
    F_PREDECESSOR_QUEUED=$P_IN_QUEUE
    rc_read_end "$pred"
  fi
  (( RC_RESUMABLE )) || pred=""
  rc_decide

  if [[ -n $outcome ]]; then
    # A row of the table was applied: record it (every write checked).
    rc_write __WALLTIME__ "$walltime" || rc_cannot_record __WALLTIME__
    rc_write __RETRIES__ "$retries" || rc_cannot_record __RETRIES__
    if (( unknown )) || [[ -e __UNKNOWN__ ]]; then
      rc_write __UNKNOWN__ "$unknown" || rc_cannot_record __UNKNOWN__
    fi
    printf '%s\n' "$RC_JOB_ID" 2>/dev/null >> __CHAIN__ || rc_cannot_record __CHAIN__
    RC_CHAIN+=("$RC_JOB_ID")
  fi
  rc_log "predecessor ${pred:-none} state ${P_STATE:-none}${P_END:+ (end record $P_END)}: $action (walltime ${walltime}s, retries $retries)"
  rc_event "__EV_DECIDED__ $action ${pred:-none} ${P_STATE:-none} $walltime $retries" \
    || rc_cannot_record __EVENTS__
  rc_act

  if (( RC_RESUMABLE )) && [[ $RC_EXECUTOR == slurm && -n $RC_MAX_WALLTIME ]]; then
    # A requeued link's earlier runs used the budget too (never a fresh one after a requeue);
    # its successor counts them all (--duplicates), so they are not written here.
    [[ $action == __RESTART__ ]] && rc_earlier_runs && walltime=$(( walltime + RC_EARLIER ))
    rc_clip_time_limit $(( RC_MAX_WALLTIME - walltime ))
  fi
  if [[ -e __CANCEL__ ]]; then
    rc_log "cancel marker found before the runner started: exiting without work"
    rc_event "__EV_DECIDED__ __STOP_CANCELLED__ marker"
    rc_drop_secrets
    exit 0
  fi
  rc_run "${pred:-none}" "$walltime" "$retries"
}

# Sets RC_EARLIER: the elapsed seconds of this job's earlier runs (before Slurm requeued it).
rc_earlier_runs() {
  local out f1 f2 f3 f4 f5
  RC_EARLIER=0
  out=$(rc_slurm sacct __SACCT_ARGS__ \
    --starttime "$RC_SACCT_START" --endtime now --jobs "$RC_JOB_ID" 2>/dev/null) || out=""
  while IFS='|' read -r f1 f2 f3 f4 f5; do
    [[ $f1 == "$RC_JOB_ID" && $f4 == "$RC_JOB_NAME" && ${f2%% *} != RUNNING ]] || continue
    [[ $f5 == "$RC_DIR" || $f5 == "$PWD" ]] || continue
    [[ $f3 =~ ^[0-9]{1,12}$ ]] && RC_EARLIER=$(( RC_EARLIER + 10#$f3 ))
  done <<< "$out"
  return 0
}

# Users may lower (never raise) their own time limit: keep the chain inside max_walltime.
rc_clip_time_limit() {
  local budget=$1 minutes
  [[ -n $budget && $RC_EXECUTOR == slurm ]] || return 0
  if [[ -n $RC_TIME_LIMIT ]] && (( budget >= RC_TIME_LIMIT )); then return 0; fi
  minutes=$(( budget / 60 )); (( minutes >= 1 )) || minutes=1
  if rc_slurm scontrol update JobId="$RC_JOB_ID" TimeLimit="$minutes" 2>&1; then
    rc_log "time limit lowered to $minutes min: the walltime budget left"
  else
    rc_log "could not lower the time limit to $minutes min"
  fi
}

# Start the runner, wait for it through any signals, record how the link ended.
rc_run() {
  local pred=$1 walltime=$2 retries=$3 status=0 budget="" seen timer="" kind
  export REMOTE_CHAIN_RUN_ID=$RC_RUN_ID REMOTE_CHAIN_BENCHMARK=$RC_BENCHMARK REMOTE_CHAIN_CLUSTER=$RC_CLUSTER
  export REMOTE_CHAIN_ATTEMPT=${#RC_CHAIN[@]}
  if (( ${#RC_CHAIN[@]} > 1 )); then export REMOTE_CHAIN_RESUME=1; else export REMOTE_CHAIN_RESUME=0; fi
  rc_event "__EV_RUNNER_START__" || rc_cannot_record __EVENTS__
  if (( RC_RESUMABLE )) && [[ -n $RC_MAX_WALLTIME ]]; then
    # The cap is enforced to the second by us; Slurm's limit (minutes, checked every ~30 s)
    # is only the backstop lowered above.
    budget=$(( RC_MAX_WALLTIME - walltime - SECONDS )); (( budget > 0 )) || budget=1
    rc_timer "$budget" kill -ALRM $$
    timer=$!
  fi
  rc_start_runner
  RC_PHASE=runner
  # A warning that arrived before the runner existed is delivered now.
  if [[ -n $RC_SIGNAL ]]; then
    local sig=$RC_SIGNAL; RC_SIGNAL=""; rc_on_signal "$sig"
  fi
  # `wait` returns early on every trapped signal, and on Slurm's SIGCONT (bash 5 then reports
  # -1): wait until the runner is gone, then ask bash once more for its stored exit status.
  while :; do
    wait "$RC_RUNNER_PID"; status=$?
    kill -0 "$RC_RUNNER_PID" 2>/dev/null || break
  done
  wait "$RC_RUNNER_PID" 2>/dev/null; seen=$?
  (( seen >= 0 && seen <= 255 && seen != 127 )) && status=$seen
  if (( status < 0 || status > 255 )); then
    if [[ -n $RC_SIGNAL ]]; then status=143; else status=1; fi
  fi
  [[ -z $timer ]] || kill "$timer" 2>/dev/null
  [[ -z ${RC_KILLER:-} ]] || kill "$RC_KILLER" 2>/dev/null
  rc_event "__EV_RUNNER_EXIT__ $status"
  rc_log "runner exited with status $status${RC_SIGNAL:+ after SIG$RC_SIGNAL}"
  if (( RC_BUDGET_HIT )); then
    walltime=$(( walltime + SECONDS ))
    rc_write __WALLTIME__ "$walltime" || rc_log "could not record the walltime ${walltime}s"
    rc_log "max_walltime reached while running (${walltime}s >= ${RC_MAX_WALLTIME}s): the chain stops"
    rc_event "__EV_END__ __END_SIGNALLED__ $status $SECONDS budget"
    rc_event "__EV_DECIDED__ __STOP_WALLTIME__ budget $pred $walltime $retries"
    rc_withdraw_successor
    rc_drop_secrets
    exit 0
  fi
  if (( status == 0 )); then
    kind=__END_OK__
  elif [[ -n $RC_SIGNAL ]]; then
    kind=__END_SIGNALLED__  # checkpointed on the signal: the next link resumes, no retry spent
  else
    kind=__END_ERROR__
  fi
  rc_event "__EV_END__ $kind $status $SECONDS${RC_SIGNAL:+ $RC_SIGNAL}" || rc_log "could not record the end of this link"
  if (( status == 0 )); then rc_withdraw_successor; rc_drop_secrets; fi
  # No successor carries a chain that is not resumable (or runs without Slurm): it ends here,
  # failed or not, so its secrets go.
  if (( ! RC_RESUMABLE )) || [[ $RC_EXECUTOR != slurm ]]; then rc_drop_secrets; fi
  exit "$status"
}
