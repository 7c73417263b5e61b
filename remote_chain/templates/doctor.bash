# The single remote exec of `doctor` (see actions.py): each check prints
# CHECK<TAB>name<TAB>ok|fail<TAB>detail (base64).
rc_check() { printf 'CHECK\t%s\t%s\t%s\n' "$1" "$2" "$(printf '%s' "$3" | base64 | tr -d '\n')"; }
rc_check login ok "$(id -un) on $(hostname)"
if [[ $RC_EXECUTOR == slurm ]]; then
  for cmd in sbatch sacct squeue scancel scontrol; do
    if p=$(command -v "$cmd"); then rc_check "command:$cmd" ok "$p"; else rc_check "command:$cmd" fail "not on PATH"; fi
  done
  if out=$(timeout 20 sacct -X --noheader --parsable2 --starttime now-1hours --format=JobIDRaw 2>&1); then
    rc_check accounting ok "sacct answers ($(printf '%s\n' "$out" | grep -c .) jobs in the last hour)"
  else
    rc_check accounting fail "$out"
  fi
  if [[ -n $RC_PARTITION ]]; then
    if out=$(scontrol show partition "$RC_PARTITION" 2>&1); then
      rc_check partition ok "$RC_PARTITION exists"
    else
      rc_check partition fail "$out"
    fi
  fi
fi
if out=$(mkdir -p -- "$RC_WORKDIR" 2>&1) && t=$(mktemp -p "$RC_WORKDIR" .doctor.XXXXXX 2>&1); then
  rm -f -- "$t"; rc_check workdir ok "$RC_WORKDIR is writable"
else
  rc_check workdir fail "${out:-$t}"
fi
printf 'DONE\n'
