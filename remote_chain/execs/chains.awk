# chains.awk: the status exec's guard and reader of every chain in one process (status.bash,
# rc_read_run) on a login node without perl (chains.pl, which answers the same, is the first
# choice). bash spent ~0.15 ms of CPU per chain on the login node guarding and reading
# them itself: 1.5 s for a 10,000-chain poll, most of what it cost (issue 13, P7).
#   - The guard first: from find's listing, the paths rc_guard_bench would check (each
#     benchmark folder asked, each trusted file in it) that are not ours, are writable by
#     group or others, or are neither folder nor regular file. Any such path is printed
#     ("SUSPECT", then the paths) and nothing is read: rc_guard judges them, as always.
#   - Then every plain chain: the records rc_bench prints for it, byte for byte (a test holds
#     the two to it); rc_bench stays the one definition of a record. A chain is deferred
#     ("DEFER" in its place) when one of its files is larger than __INLINE__ bytes, holds a
#     byte outside printable ASCII, a tab or a backslash (rc_emit's escapes and base64 are
#     rc_bench's), or changed while it was read (not find's size). The whole run falls back
#     ("FALLBACK") when the listing is not what a run of ours holds: a folder named as a
#     chain's file, an odd file the guard does not check, a benchmark named outside NAME_RE,
#     find failing.
# POSIX awk (mawk, Debian's default, and gawk) with RS="\0", under LC_ALL=C: lengths are bytes,
# and a file is one record, read whole, its last newline kept or not as it is.
#
# Input, records ending in NUL: "W<TAB>bench" for each benchmark, in status.bash's order (or
# "C<TAB>name" for each name in the run folder, sorted: every benchmark folder of them is
# asked, those rc_folders would keep: with a job.sh, or not for us to look into), then
# find's listing (rc_read_run: the run folder's entries, then the names we trust or read in
# each benchmark folder, and nothing else there), then "END<TAB>find's status".
# Output, lines: "OK <records> <names> <ids>", a record or "DEFER<TAB>bench" for each benchmark
# asked, the job names for squeue, the job ids for sacct. Environment: RC_AWK_RUN (the run's
# index in RC_RUN_DIRS), RC_AWK_RUN_ID, RC_AWK_DIR (its folder).
BEGIN {
  RS = "\0"; FS = "\t"
  nk = split("__AWK_KINDS__", pairs, " ")
  for (k = 1; k <= nk; k++) {
    split(pairs[k], kv, "=")
    kind[k] = kv[1]; file[k] = kv[2]; named[kv[2]] = 1; kindno[kv[1]] = k
  }
  named["__CANCEL__"] = 1; named["__JOB__"] = 1
  nt = split("__TRUSTED__", list, " ")
  for (k = 1; k <= nt; k++) trusted[list[k]] = 1
  run = ENVIRON["RC_AWK_RUN"]; runid = ENVIRON["RC_AWK_RUN_ID"]; dir = ENVIRON["RC_AWK_DIR"]
  nw = 0; bad = ""; ended = 0
}
# A name holding a tab has more fields: it is no benchmark, nor a file of a chain, and is
# skipped (a benchmark outside NAME_RE is for rc_bench to print).
# A suspect: the guard's when it is a path the guard checks (a benchmark folder, a trusted
# file in one); a file read here that the guard does not check is not for awk to judge.
$1 == "S" && NF == 3 {
  if ($2 == 1) sdir[$3] = 1
  else {
    split($3, q, "/")
    if (q[2] in trusted) sfiles[q[1]] = sfiles[q[1]] SUBSEP q[2]
    else if (q[2] in named) bad = $3
  }
  next
}
$1 == "W" { if (NF == 2 && $2 ~ /^[A-Za-z0-9._-]+$/) want[++nw] = $2; else bad = "a name"; next }
$1 == "C" { if (NF == 2) { if ($2 != "__UPLOADS__") cand[++nc] = $2 } else bad = "a name"; next }
$1 == "D" && NF == 3 { if ($2 == 1) isdir[$3] = 1; else if (base($3) in named) bad = $3; next }
$1 == "U" && NF == 3 { if ($2 == 1) closed[$3] = 1; else if (base($3) in named) bad = $3; next }
$1 == "F" && NF == 4 { if ($2 == 2) { split($4, q, "/"); size[q[1], q[2]] = $3 }; next }
$1 == "R" && NF == 3 { if ($2 == 2) { split($3, q, "/"); unread[q[1], q[2]] = 1 }; next }
$1 == "END" && NF == 2 { ended = 1; if ($2 != 0) bad = "find " $2; next }
$1 ~ /^[SDURFWC]$/ { next }
{ bad = "an unexpected record" }
function base(path,    q, n) { n = split(path, q, "/"); return q[n] }
# One file of chain b, kind k: 1 with its text split at newlines in part[k, 1..parts[k]]
# (the last part: what follows the last newline), 0 when rc_bench must read the chain.
function slurp(b, k, expect,    path, r, n, text, rec, i, part_of) {
  path = dir "/" b "/" file[k]; n = 0; text = ""
  while ((r = (getline rec < path)) > 0) { n++; text = rec }
  close(path)
  if (r < 0 || n > 1 || length(text) != expect) return 0  # gone, a NUL in it, or changed
  if (text ~ /[^\n -~]/ || index(text, "\\")) return 0
  parts[k] = split(text, part_of, "\n")
  for (i = 1; i <= parts[k]; i++) part[k, i] = part_of[i]
  return 1
}
function escaped(k,    i, out) {  # the escape of rc_emit, for a text with newlines only
  out = ""
  for (i = 1; i <= parts[k]; i++) out = out (i > 1 ? "\\n" : "") part[k, i]
  return out
}
function ids_of(k,    i, w) {  # the job ids of complete lines (rc_lines drops the last part)
  if (!(k in parts)) return
  for (i = 1; i < parts[k]; i++) {
    if (kind[k] == "events") {
      if (index(part[k, i], "successor") && split(part[k, i], w, " ") >= 4 \
          && w[3] == "successor" && w[4] ~ /^[0-9_+]+$/) ids[++nid] = w[4]
    } else if (part[k, i] ~ /^[0-9_+]+$/) ids[++nid] = part[k, i]
  }
}
END {
  if (!ended && bad == "") bad = "no end of the listing"
  # The benchmark folders among the names, in their order: a folder with a job.sh, or one
  # we may not read. What only a stat could tell (an entry the guard flags: a link, another
  # user's folder; a job.sh that is a link) is rc_folders' to judge.
  for (c = 1; c <= nc && bad == ""; c++) {
    b = cand[c]
    if (b in sdir || (b in sfiles && index(sfiles[b] SUBSEP, SUBSEP "__JOB__" SUBSEP)))
      bad = "a folder to stat"
    else if (b in closed || (b in isdir && ((b, "__JOB__") in size || (b, "__JOB__") in unread))) {
      if (b ~ /^[A-Za-z0-9._-]+$/) want[++nw] = b; else bad = "a name"
    }
  }
  if (bad != "") { print "FALLBACK\t" bad; exit }
  # The guard first: the suspects among the folders and trusted files of the chains asked.
  ns = 0
  for (w = 1; w <= nw; w++) {
    if (want[w] in sdir) found[++ns] = dir "/" want[w]
    if (!(want[w] in sfiles)) continue
    n = split(sfiles[want[w]], q, SUBSEP)
    for (k = 2; k <= n; k++) found[++ns] = dir "/" want[w] "/" q[k]
  }
  if (ns) { print "SUSPECT"; for (k = 1; k <= ns; k++) print found[k]; exit }
  nid = 0; nn = 0; nr = 0
  for (w = 1; w <= nw; w++) {
    b = want[w]
    if (b in closed) { out[++nr] = "UNREADABLE\t" run "\t" b; continue }
    if (!(b in isdir)) { out[++nr] = "NOBENCH\t" run "\t" b; continue }
    marker = ((b, "__CANCEL__") in size || (b, "__CANCEL__") in unread) ? 1 : 0
    rec = "BENCH\t" run "\t" b "\t" marker; defer = 0
    for (k = 1; k <= nk; k++) delete parts[k]
    for (k = 1; k <= nk && !defer; k++) {
      if ((b, file[k]) in unread) { rec = rec "\t" kind[k] "\tunreadable\t"; continue }
      if (!((b, file[k]) in size)) continue
      if (size[b, file[k]] + 0 > __INLINE__ || !slurp(b, k, size[b, file[k]] + 0)) defer = 1
      else rec = rec "\t" kind[k] "\tok\t" escaped(k)
    }
    if (defer) { out[++nr] = "DEFER\t" b; continue }
    out[++nr] = rec
    names[++nn] = runid ":" b
    ids_of(kindno["chain"]); ids_of(kindno["first"]); ids_of(kindno["events"])
  }
  print "OK " nr " " nn " " nid
  for (i = 1; i <= nr; i++) print out[i]
  for (i = 1; i <= nn; i++) print names[i]
  for (i = 1; i <= nid; i++) print ids[i]
}
