# The single remote exec of `doctor` (see doctor.py): each check is a record
# CHECK name ok|fail detail; each raw fact for the client to parse is a record
# FACT name exit-status output (wire.py), so every interpretation stays in Python.
__WIRE__
rc_check() { rc_emit CHECK "$1" "$2" "$3"; }
rc_fact() { rc_emit FACT "$1" "$2" "$3"; }
# Every Slurm query is bounded: a wedged slurmdbd must not hold doctor.
rc_run() { timeout 10 "$@" 2>&1; }
rc_check login ok "$(id -un) on $(hostname)"
rc_fact login_shell 0 "$(getent passwd "$(id -un)" 2>/dev/null | cut -d: -f7)"
if [[ $RC_EXECUTOR == slurm ]]; then
  # type -P: the file on PATH that `command sbatch` runs; a function or alias of that name in
  # the login files is not Slurm, and must not stand in for it.
  for cmd in sbatch sacct squeue scancel scontrol; do
    if p=$(type -P "$cmd"); then rc_check "command:$cmd" ok "$p"; else rc_check "command:$cmd" fail "not on PATH"; fi
  done
  out=$(rc_run sbatch --version); rc_fact version $? "$out"
  out=$(rc_run scontrol show config); rc_fact config $? "$out"
  if out=$(rc_query timeout 20 sacct -X --noheader --parsable2 --starttime now-1hours --format=JobIDRaw 2>&1); then
    rc_check accounting ok "sacct answers ($(printf '%s\n' "$out" | grep -c .) jobs in the last hour)"
  else
    rc_check accounting fail "$out"
  fi
  if [[ -n $RC_PARTITION ]]; then
    if out=$(command scontrol show partition "$RC_PARTITION" 2>&1); then
      rc_check partition ok "$RC_PARTITION exists"
    else
      rc_check partition fail "$out"
    fi
  fi
  if type -P sacctmgr >/dev/null; then
    out=$(rc_run sacctmgr -nP show assoc where user="$(id -un)" format="$RC_ASSOC_FORMAT"); rc_fact assoc $? "$out"
    out=$(rc_run sacctmgr -nP show qos format="$RC_QOS_FORMAT"); rc_fact qos $? "$out"
  fi
  out=$(rc_query squeue --noheader --me --format=%i 2>/dev/null | grep -c .); rc_fact queued 0 "$out"
  # sbatch --test-only validates a submission without queuing it: first as a chain's links are
  # submitted (the profile's own options), then with each option a chain relies on. 24.11
  # refuses afternotok on a job slurmctld does not know, so the probe depends on a job it
  # knows when there is one (anyone's: depending on another user's job is allowed).
  dep=$(rc_query squeue --noheader --format=%i 2>/dev/null | grep -E '^[0-9]+$' | head -n 1); dep=${dep:-1}
  rc_fact probe_job 0 "$dep"
  out=$(rc_run sbatch --test-only "${RC_SBATCH[@]}" --wrap=true); rc_fact test_base $? "$out"
  out=$(rc_run sbatch --test-only "${RC_SBATCH[@]}" --kill-on-invalid-dep=yes --wrap=true); rc_fact test_kill $? "$out"
  out=$(rc_run sbatch --test-only "${RC_SBATCH[@]}" --dependency="afternotok:$dep" --wrap=true); rc_fact test_afternotok $? "$out"
  out=$(rc_run sbatch --test-only "${RC_SBATCH[@]}" --dependency="afterok:$dep" --wrap=true); rc_fact test_afterok $? "$out"
fi
if out=$(mkdir -p -- "$RC_WORKDIR" 2>&1) && t=$(mktemp -p "$RC_WORKDIR" .doctor.XXXXXX 2>&1); then
  rm -f -- "$t"; rc_check workdir ok "$RC_WORKDIR is writable"
else
  rc_check workdir fail "${out:-$t}"
fi
rc_emit DONE
