# The chain prologue (resumable-runs.md, "How it works"). Not a standalone script: script.py
# substitutes the __NAMES__ (file names, actions, outcomes from chain.py) and prepends the
# constants and the generated rc_outcome/rc_rule functions.
RC_SELF="$RC_DIR/job.sh"
# Under the shell executor (no Slurm) the job id is the detached wrapper's pid.
RC_JOB_ID=${SLURM_JOB_ID:-${RC_SHELL_JOB_ID:-$$}}
RC_UID=$(id -u)
# The sacct window start, written by submit in the cluster's clock: a recycled job id cannot
# match a job from before the run.
RC_SACCT_START=$(head -c 40 "$RC_DIR/../__SINCE__" 2>/dev/null) || RC_SACCT_START=""
[[ $RC_SACCT_START =~ ^[0-9T:-]+$ ]] || RC_SACCT_START=now-30days

# Logs go to stderr (the job's log file): stdout of helpers is captured by $(...).
rc_log() { printf '[remote-chain %s] %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
# One line per fact, appended: status reads it; a requeued job only ever adds lines.
rc_event() { printf '%s %s %s\n' "$(date +%s)" "$RC_JOB_ID" "$*" >> __EVENTS__; }

# Write a state file atomically (tmp + rename), so a job killed mid-write never leaves it torn.
rc_write() { printf '%s\n' "$2" > "$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"; }

# A corrupt state file stops the chain loudly: never a silent reset, never a runaway chain.
rc_corrupt() {
  rc_log "corrupt state file $1: $2; the chain stops here (fix or remove the file, then remote-chain resume)"
  rc_event "corrupt_state $1 $2"
  exit 65
}

rc_read_int() {
  local v
  if [[ ! -e $1 ]]; then echo 0; return 0; fi
  if [[ ! -r $1 ]]; then rc_corrupt "$1" "unreadable" ; fi
  v=$(<"$1")
  if [[ ! $v =~ ^[0-9]+$ ]] || (( ${#v} > 15 )); then rc_corrupt "$1" "not a whole number: '${v:0:40}'"; fi
  echo "$v"
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
    [[ $line =~ ^[0-9]+([_+][0-9]+)?$ ]] || rc_corrupt __CHAIN__ "bad line '${line:0:40}'"
    RC_CHAIN+=("$line")
  done <<< "${content%$'\n'}"
}

# Look the predecessor up in accounting. Sets P_STATE (empty: never seen), P_BY, P_ELAPSED.
# Retries about a minute when the job is not visible yet or only a stale non-terminal state
# shows (accounting lag), and stops early when squeue still holds the job (it was requeued).
rc_lookup() {
  local pred=$1 deadline=$((SECONDS + RC_LOOKUP_TIMEOUT)) out line f1 f2 f3 rest sq asked=0
  P_STATE="" P_BY="" P_ELAPSED="" P_IN_QUEUE=0 P_CTLD_ELAPSED=""
  while :; do
    out=$(sacct -X --parsable2 --noheader --format=__SACCT_FIELDS__ \
      --starttime "$RC_SACCT_START" --endtime now --jobs "$pred" 2>/dev/null) || out=""
    while IFS='|' read -r f1 f2 f3 rest; do
      # The last line for our id wins: with requeue, sacct lists the newest run last.
      if [[ $f1 == "$pred" ]]; then P_STATE=${f2%% *} P_ELAPSED=$f3
        if [[ $f2 =~ ^CANCELLED\ by\ ([0-9]+) ]]; then P_BY=${BASH_REMATCH[1]}; else P_BY=""; fi
      fi
    done <<< "$out"
    if [[ -n $P_STATE && $(rc_outcome "$P_STATE") != not_visible ]]; then return 0; fi
    sq=$(squeue --noheader --format=%T --jobs "$pred" 2>/dev/null | head -n 1) || sq=""
    case "$sq" in
      PENDING|RUNNING|REQUEUED|REQUEUE_HOLD|REQUEUE_FED|SUSPENDED|CONFIGURING|RESIZING)
        P_IN_QUEUE=1; return 0 ;;
    esac
    # Ask slurmctld once, now: it forgets a job MinJobAge after its end, maybe before the
    # window is over.
    if (( ! asked )); then asked=1; rc_lookup_ctld "$pred"; fi
    if (( SECONDS >= deadline )); then
      P_STATE="" P_ELAPSED=$P_CTLD_ELAPSED
      [[ -z $P_ELAPSED ]] || rc_log "accounting never showed job $pred; slurmctld said it ran ${P_ELAPSED}s: counted as walltime"
      return 0
    fi
    rc_log "predecessor $pred not final in accounting yet (state '${P_STATE:-none}'); retrying"
    sleep "$RC_LOOKUP_INTERVAL"
  done
}

# When accounting never shows a final state the row is "not visible" (no retry spent), but the
# controller still knows a job for MinJobAge after its end, so its run time can be counted
# toward max_walltime instead of being lost (a stale sacct elapsed is never used). Sets
# P_CTLD_ELAPSED when slurmctld knows the job ended.
rc_lookup_ctld() {
  local info days=0 h m s
  info=$(scontrol show job -o "$1" 2>/dev/null) || return 0
  [[ $info =~ JobState=([A-Z_]+) ]] || return 0
  [[ $(rc_outcome "${BASH_REMATCH[1]}") != not_visible ]] || return 0
  [[ $info =~ RunTime=(([0-9]+)-)?([0-9]+):([0-9]+):([0-9]+) ]] || return 0
  days=${BASH_REMATCH[2]:-0} h=${BASH_REMATCH[3]} m=${BASH_REMATCH[4]} s=${BASH_REMATCH[5]}
  P_CTLD_ELAPSED=$(( 10#$days * 86400 + 10#$h * 3600 + 10#$m * 60 + 10#$s ))
}

# Queue this very file again, to run only if this job ends not-ok (spec: before any work).
rc_queue_successor() {
  local out
  # Checked again here: a cancel may have landed while this job looked its predecessor up.
  if [[ -e __CANCEL__ ]]; then rc_log "cancel marker found: not queuing a successor"; return 0; fi
  out=$(env -u SLURM_MEM_PER_CPU -u SLURM_MEM_PER_NODE -u SLURM_MEM_PER_GPU \
    sbatch --parsable --dependency="afternotok:$RC_JOB_ID" --kill-on-invalid-dep=yes \
    "$RC_SELF" "$RC_JOB_ID" 2>&1)
  local rc=$? id
  id=$(printf '%s\n' "$out" | grep -E '^[0-9]+(;.*)?$' | tail -n 1) ; id=${id%%;*}
  if (( rc != 0 )) || [[ -z $id ]]; then
    out=$(printf '%s' "$out" | tr '\n\t' '  ' | cut -c1-300)
    rc_log "WARNING: could not queue a successor: $out"
    rc_log "__WARNING__"
    rc_event "successor_failed $out"
    return 0
  fi
  rc_log "queued successor $id (afternotok:$RC_JOB_ID)"
  rc_event "successor $id"
}

# Whether the successor this job queued on an earlier run (before a requeue) is still queued.
rc_successor_alive() {
  local id
  id=$(awk -v j="$RC_JOB_ID" '$2 == j && $3 == "successor" {s = $4} END {print s}' __EVENTS__ 2>/dev/null)
  [[ -n $id ]] || return 1
  [[ -n $(squeue --noheader --format=%i --jobs "$id" 2>/dev/null) ]]
}

# Users may lower (never raise) their own time limit: keep the chain inside max_walltime.
rc_clip_time_limit() {
  local budget=$1 minutes
  [[ -n $budget && $RC_EXECUTOR == slurm ]] || return 0
  if [[ -n $RC_TIME_LIMIT ]] && (( budget >= RC_TIME_LIMIT )); then return 0; fi
  minutes=$(( budget / 60 )); (( minutes >= 1 )) || minutes=1
  if scontrol update JobId="$RC_JOB_ID" TimeLimit="$minutes" 2>&1; then
    rc_log "time limit lowered to $minutes min: the walltime budget left"
  else
    rc_log "could not lower the time limit to $minutes min"
  fi
}

# Done (or stopped): cancel our own pending successor now rather than trust
# --kill-on-invalid-dep, which some sites disable.
rc_cancel_own_successor() {
  local succ
  (( RC_RESUMABLE )) && [[ $RC_EXECUTOR == slurm ]] || return 0
  succ=$(awk -v j="$RC_JOB_ID" '$2 == j && $3 == "successor" {s = $4} END {print s}' __EVENTS__)
  if [[ -n $succ ]]; then
    rc_event "successor_cancelled $succ"
    scancel "$succ" 2>/dev/null || true
  fi
}

rc_main() {
  local pred=${1:-} action outcome="" counts_retry=0 checks_walltime=0
  mkdir -p logs artifacts
  if [[ -n $pred && ! $pred =~ ^[0-9]+([_+][0-9]+)?$ ]]; then
    rc_log "invalid predecessor job id '${pred:0:40}'"; exit 64
  fi
  # The cancel marker of `remote-chain cancel` is checked before anything else.
  if [[ -e __CANCEL__ ]]; then
    rc_log "cancel marker found: the chain was cancelled; exiting without work"
    rc_event "decided __STOP_CANCELLED__ marker"
    exit 0
  fi
  rc_read_chain
  local walltime retries
  walltime=$(rc_read_int __WALLTIME__) || exit 65
  retries=$(rc_read_int __RETRIES__) || exit 65
  local -i restarted=0
  for id in "${RC_CHAIN[@]}"; do [[ $id == "$RC_JOB_ID" ]] && restarted=1; done

  # The successor is queued before anything that can take time (the lookup may wait a minute
  # for accounting): a link killed in its prologue must not end the chain. Paths that decide
  # not to run cancel it again before they exit.
  if (( RC_RESUMABLE )) && [[ $RC_EXECUTOR == slurm ]]; then
    if (( restarted )) && rc_successor_alive; then
      rc_log "successor from before the requeue is still queued"
    else
      rc_queue_successor
    fi
  fi

  if (( restarted )); then
    # Requeued (same id, already in the chain): count nothing twice, queue nothing twice.
    action=__RESTART__
  elif (( ! RC_RESUMABLE )) || [[ -z $pred ]]; then
    outcome=__FIRST__; rc_rule "$outcome"
  else
    rc_lookup "$pred"
    if (( P_IN_QUEUE )); then
      rc_log "predecessor $pred is queued again (requeued): it keeps the chain; exiting"
      rc_event "decided __YIELD__ $pred ${P_STATE:-none}"
      rc_cancel_own_successor
      exit 0
    fi
    if [[ -z $P_STATE ]]; then outcome=__NOT_VISIBLE__; else outcome=$(rc_outcome "$P_STATE"); fi
    if [[ $outcome == __CANCELLED__ && $RC_ADMIN_CANCEL == preempt && -n $P_BY && $P_BY != "$RC_UID" ]]; then
      outcome=__INFRA__  # an admin's cancel, read as preemption by policy
    fi
    rc_rule "$outcome"
    # A stale non-terminal record's elapsed is not final: only a final one counts (from
    # sacct, or from slurmctld when accounting never showed the job).
    if [[ ( -z $P_STATE || $outcome != __NOT_VISIBLE__ ) && $P_ELAPSED =~ ^[0-9]+$ ]]; then
      walltime=$(( walltime + P_ELAPSED ))
    fi
  fi
  # The arithmetic of chain.decide(): one retry per counted row, then the walltime cap.
  if (( counts_retry )); then
    retries=$(( retries + 1 ))
    if (( retries > RC_MAX_RETRIES )); then action=__EXIT_ERROR__; fi
  fi
  if [[ $action != __EXIT_ERROR__ ]] && (( checks_walltime )) && [[ -n $RC_MAX_WALLTIME ]] \
      && (( walltime >= RC_MAX_WALLTIME )); then
    action=__STOP_WALLTIME__
  fi

  if (( ! restarted )); then
    rc_write __WALLTIME__ "$walltime"
    rc_write __RETRIES__ "$retries"
    printf '%s\n' "$RC_JOB_ID" >> __CHAIN__
    RC_CHAIN+=("$RC_JOB_ID")
  fi
  rc_log "predecessor ${pred:-none} state ${P_STATE:-none}: $action (walltime ${walltime}s, retries $retries)"
  rc_event "decided $action ${pred:-none} ${P_STATE:-none} $walltime $retries"

  case "$action" in
    __EXIT_SUCCESS__) rc_log "the run already completed" ;;
    __STOP_CANCELLED__) rc_log "predecessor was cancelled: the chain stops" ;;
    __STOP_WALLTIME__) rc_log "max_walltime reached (${walltime}s >= ${RC_MAX_WALLTIME}s): the chain stops" ;;
    __EXIT_ERROR__) rc_log "max_retries ($RC_MAX_RETRIES) exceeded: the chain ends with an error" ;;
  esac
  case "$action" in
    __START__|__RESUME__|__RESTART__) ;;
    # Not running: the successor queued above must not start (an error exit would fire it).
    __EXIT_ERROR__) rc_cancel_own_successor; exit 1 ;;
    *) rc_cancel_own_successor; exit 0 ;;
  esac

  if (( RC_RESUMABLE )) && [[ $RC_EXECUTOR == slurm && -n $RC_MAX_WALLTIME ]]; then
    rc_clip_time_limit $(( RC_MAX_WALLTIME - walltime ))
  fi

  if [[ -e __CANCEL__ ]]; then
    rc_log "cancel marker found before the runner started: exiting without work"
    rc_event "decided __STOP_CANCELLED__ marker"
    rc_cancel_own_successor
    exit 0
  fi
  export REMOTE_CHAIN_RUN_ID=$RC_RUN_ID REMOTE_CHAIN_BENCHMARK=$RC_BENCHMARK REMOTE_CHAIN_CLUSTER=$RC_CLUSTER
  export REMOTE_CHAIN_ATTEMPT=${#RC_CHAIN[@]}
  if (( ${#RC_CHAIN[@]} > 1 )); then export REMOTE_CHAIN_RESUME=1; else export REMOTE_CHAIN_RESUME=0; fi
  rc_event "runner_start"
  local status=0 budget="" started=$SECONDS
  if (( RC_RESUMABLE )) && [[ -n $RC_MAX_WALLTIME ]]; then
    budget=$(( RC_MAX_WALLTIME - walltime - SECONDS )); (( budget > 0 )) || budget=1
  fi
  if [[ -n $budget ]]; then
    # The cap is enforced to the second by us; Slurm's limit (minutes, checked every ~30 s)
    # is only the backstop lowered above.
    timeout --signal=TERM --kill-after=15 "$budget" "${RC_RUNNER[@]}" || status=$?
  else
    "${RC_RUNNER[@]}" || status=$?
  fi
  rc_event "runner_exit $status"
  rc_log "runner exited with status $status"
  if [[ -n $budget ]] && (( status == 124 && SECONDS - started >= budget )); then
    walltime=$(( walltime + SECONDS ))
    rc_write __WALLTIME__ "$walltime"
    rc_log "max_walltime reached while running (${walltime}s >= ${RC_MAX_WALLTIME}s): the chain stops"
    rc_event "decided __STOP_WALLTIME__ budget ${pred:-none} $walltime $retries"
    rc_cancel_own_successor
    exit 0
  fi
  if (( status == 0 )); then rc_cancel_own_successor; fi
  exit "$status"
}
