# The single remote exec of `cancel` (see cancel.py). Not standalone: cancel.py prepends the
# RC_* variables. Order matters: the marker first (every later prologue honours it), then
# pending jobs (so none of them can start when a running link dies), then running ones, and
# the queue is re-read until nothing of the chain is left (bounded).
__WIRE__
__GUARD__
# What we create is ours alone (a login umask of 002 would make the marker group-writable,
# which the guard then refuses).
umask 077
[[ -d $RC_RUN_DIR || -L $RC_RUN_DIR ]] || { rc_emit NORUN; rc_emit DONE; exit 0; }
rc_guard "${RC_RUN_DIR%/*}" "$RC_RUN_DIR"
# A cancelled chain's mode-600 secrets file goes once no link of it is left (a running link
# has its secrets in its runner's environment already; a queued one would start without them,
# but the marker stops it first). Never through a symlink.
rc_drop_secrets() {
  local bench f
  for bench in "${benches[@]}"; do
    f="$RC_RUN_DIR/$bench/__SECRETS__"
    if [[ -f $f && ! -L $f ]] && rm -f -- "$f"; then rc_emit SECRETS_REMOVED "$bench"; fi
  done
}
names=() benches=()
if (( ${#RC_BENCHES[@]} == 0 )); then  # no benchmark named: every chain of the run
  # Parameter expansions, not basename/dirname: no two processes per chain.
  for job in "$RC_RUN_DIR"/*/__JOB__; do [[ -e $job ]] && { job=${job%/__JOB__}; RC_BENCHES+=("${job##*/}"); }; done
  rc_emit BENCHES "${RC_BENCHES[*]}"
fi
rc_guard_bench "${RC_BENCHES[@]/#/$RC_RUN_DIR/}"
for bench in "${RC_BENCHES[@]}"; do
  b="$RC_RUN_DIR/$bench"
  if [[ ! -d $b ]]; then rc_emit NOBENCH "$bench"; continue; fi
  # noclobber creates the marker with O_EXCL: an existing one (ours, guarded above) stays, and
  # a symlink planted since is refused, never written through.
  if [[ ! -f $b/__CANCEL__ || -L $b/__CANCEL__ ]] && ! (set -C; : > "$b/__CANCEL__") 2>/dev/null; then
    rc_emit NOMARK "$bench"
  fi
  benches+=("$bench"); names+=("$RC_RUN_ID:$bench")
done
(( ${#names[@]} )) || { rc_emit DONE; exit 0; }
if [[ $RC_EXECUTOR == shell ]]; then
  # No scheduler: the "job" is a detached process group led by the pid submit recorded.
  for bench in "${benches[@]}"; do
    pid=$(head -n 1 "$RC_RUN_DIR/$bench/__FIRST__" 2>/dev/null)
    if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
      rc_emit SEEN "$bench" "$pid" RUNNING
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
      rc_emit SCANCEL "$pid"
    fi
  done
  rc_drop_secrets
  rc_emit DONE; exit 0
fi
rc_chunks "${names[@]}"
for (( round = 0; round < __ROUNDS__; round++ )); do
  q="" failed=""
  for namelist in "${rc_chunk_list[@]}"; do
    part=$(rc_query squeue --noheader --me --format='%i|%T|%Z|%j' --name="$namelist" 2>&1) || { failed=$part; break; }
    q+=${q:+$'\n'}$part
  done
  if [[ -n $failed ]]; then rc_emit SQUEUE_FAILED "$failed"; sleep 1; continue; fi
  pending=() running=()
  while IFS='|' read -r id state wd name; do
    [[ $id =~ ^[0-9_+]+$ ]] || continue
    # Same name, other folder: the twin chain of this run on another profile of this cluster.
    [[ $wd == "$RC_RUN_DIR/${name#"$RC_RUN_ID":}" ]] || continue
    rc_emit SEEN "${name#"$RC_RUN_ID":}" "$id" "$state"
    case $state in
      PENDING|REQUEUED|REQUEUE_HOLD|REQUEUE_FED|SUSPENDED) pending+=("$id") ;;
      COMPLETED|CANCELLED|FAILED|TIMEOUT|PREEMPTED|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE) ;;
      *) running+=("$id") ;;
    esac
  done <<< "$q"
  (( ${#pending[@]} + ${#running[@]} )) || { rc_drop_secrets; rc_emit DONE; exit 0; }
  if (( ${#pending[@]} )); then command scancel "${pending[@]}" 2>/dev/null; fi
  if (( ${#running[@]} )); then command scancel "${running[@]}" 2>/dev/null; fi
  for id in "${pending[@]}" "${running[@]}"; do rc_emit SCANCEL "$id"; done
  sleep 1
done
rc_emit LEFT
rc_emit DONE
