# rc_emit: the one wire codec of everything a client script prints back (protocol/wire.py
# decodes it). Included by every client script through __WIRE__ (execs/templates.py).
#
# A record is one line: TAG, then each field after a tab. A field of printable ASCII, tabs and
# newlines is sent as it is with \ -> \\, tab -> \t, newline -> \n (bash alone, no process: a
# status emits several fields per chain). Any other byte (non-ASCII, control
# characters, invalid UTF-8) sends the field as \b and its base64, so every byte survives a
# transport that decodes UTF-8, and bash never has to judge an encoding. So does a field above
# 64 KiB: bash's substitutions over a big field cost far more than one base64 process.
# (The range " -~" is ASCII's printable characters: bash >= 5.0 matches ranges by code point,
# globasciiranges.)
rc_wire_bs='\' rc_wire_tab=$'\t' rc_wire_nl=$'\n' rc_wire_odd=$'*[!\t\n -~]*'
rc_wire_esc=$'*[\\\\\t\n]*'  # holds a backslash, tab or newline
rc_wire_line() {  # TAG FIELD...: the record, field by field, in $rc_wire
  local f
  rc_wire=$1
  shift
  for f in "$@"; do
    if (( ${#f} > 65536 )) || [[ $f == $rc_wire_odd ]]; then
      f=${rc_wire_bs}b$(printf '%s' "$f" | base64 -w 0)
    elif [[ $f == $rc_wire_esc ]]; then
      # Quoted pattern and replacement are literal in every bash (5.2's patsub_replacement too).
      f=${f//"$rc_wire_bs"/"$rc_wire_bs$rc_wire_bs"}; f=${f//"$rc_wire_tab"/"${rc_wire_bs}t"}
      f=${f//"$rc_wire_nl"/"${rc_wire_bs}n"}
    fi
    rc_wire+=$rc_wire_tab$f
  done
}
# Buffering: a script that emits many small records sets rc_wire_buffered=1 (status: one record
# per chain) and calls rc_flush before it runs anything else or ends. Records are then written
# 256 at a time, so sshd sends a few big packets: one write per record would be one SSH packet
# per chain, each decrypted by the client in its event loop. A subshell must not inherit
# a full buffer (it would write it again): flush and clear rc_wire_buffered before one.
rc_wire_out=()
rc_flush() {
  if (( ${#rc_wire_out[@]} )); then printf '%s' "${rc_wire_out[@]}"; rc_wire_out=(); fi
}
rc_put() {  # LINE: one record line, written or buffered
  if [[ -n ${rc_wire_buffered:-} ]]; then
    rc_wire_out+=("$1"$'\n')
    (( ${#rc_wire_out[@]} < 256 )) || rc_flush
  else
    printf '%s\n' "$1"
  fi
}
# rc_emit TAG FIELD...: one record. The common case, every field short printable ASCII, is
# judged once for the whole record and escaped in one expansion over all fields: a status
# poll calls this several times per chain.
rc_emit() {
  local IFS=' ' all
  all=$*
  if (( ${#all} > 65536 )) || [[ $all == $rc_wire_odd ]]; then
    rc_wire_line "$@"; rc_put "$rc_wire"; return
  fi
  if [[ $all == $rc_wire_esc ]]; then
    set -- "${@//"$rc_wire_bs"/"$rc_wire_bs$rc_wire_bs"}"
    set -- "${@//"$rc_wire_tab"/"${rc_wire_bs}t"}"
    set -- "${@//"$rc_wire_nl"/"${rc_wire_bs}n"}"
  fi
  IFS=$'\t'
  rc_put "$*"
}
# rc_emit_file TAG FIELD... PATH: one record whose last field is every byte of PATH (NULs
# too; empty when PATH cannot be read). PATH may be a <(pipeline).
rc_emit_file() {
  rc_flush
  rc_wire_line "${@:1:$#-1}"
  printf '%s\t%sb%s\n' "$rc_wire" "$rc_wire_bs" "$(base64 -w 0 < "${!#}" 2>/dev/null)"
}
# rc_emit_gz TAG FIELD... PATH: rc_emit_file, the last field sent as \z and the base64 of
# PATH's bytes gzipped. For what is big and repetitive: a status poll's run record (every
# chain's folder and job name), its sacct and squeue lines, which gzip shrinks several times
# over. A regular file of 4 KiB or less, or where gzip is missing,
# goes as rc_emit_file (no gzip process for a 1-chain poll); a pipe is never peeked at.
rc_emit_gz() {
  local head=""
  [[ -f ${!#} ]] && IFS= read -r -d '' -N 4097 head < "${!#}" 2>/dev/null
  if [[ -f ${!#} ]] && (( ${#head} <= 4096 )) || ! command -v gzip >/dev/null 2>&1; then
    rc_emit_file "$@"; return
  fi
  rc_flush
  rc_wire_line "${@:1:$#-1}"
  printf '%s\t%sz%s\n' "$rc_wire" "$rc_wire_bs" "$(command gzip -c < "${!#}" 2>/dev/null | base64 -w 0)"
}
# rc_query COMMAND ARG...: one of our own Slurm queries (squeue, sacct), run without the
# variables that filter or reshape what it prints (sacct.py's SLURM_QUERY_ENV_DROP): a login
# shell's rc file may export SQUEUE_STATES=RUNNING, and a pending chain would read as gone.
# `command env` execs the binary, never a shell function or alias of that name.
rc_query() { command env __SLURM_ENV_DROP__ "$@"; }
