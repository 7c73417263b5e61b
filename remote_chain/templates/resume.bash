# The single remote exec of `resume` (see actions.py): for each chain the client judged
# resumable (failed, stopped or broken), queue job.sh again in the same folder with no
# predecessor, unless something of the chain is still queued.
for bench in "${RC_BENCHES[@]}"; do
  b="$RC_RUN_DIR/$bench"
  if [[ ! -f $b/job.sh ]]; then printf 'NOBENCH\t%s\n' "$bench"; continue; fi
  live=$(squeue --noheader --me --format='%i %Z' --name="$RC_RUN_ID:$bench" 2>&1) || { printf 'FAILED\t%s\t%s\n' "$bench" "$(printf '%s' "$live" | base64 | tr -d '\n')"; continue; }
  live=$(printf '%s\n' "$live" | awk -v d="$b" '$2 == d {print $1}')  # not a twin chain's
  if [[ -n $live ]]; then printf 'LIVE\t%s\t%s\n' "$bench" "$(printf '%s' "$live" | tr '\n' ' ')"; continue; fi
  out=$(sbatch --parsable "$b/job.sh" 2>&1)
  id=$(printf '%s\n' "$out" | grep -E '^[0-9]+(;.*)?$' | tail -n 1); id=${id%%;*}
  if [[ -n $id ]]; then
    printf '%s %s resumed_by_user %s\n' "$(date +%s)" "$id" "$(id -un)" >> "$b/__EVENTS__"
    printf 'SUBMITTED\t%s\t%s\n' "$bench" "$id"
  else
    printf 'FAILED\t%s\t%s\n' "$bench" "$(printf '%s' "$out" | base64 | tr -d '\n')"
  fi
done
printf 'DONE\n'
