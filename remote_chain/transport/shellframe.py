"""The persistent shell channel's wire format. PURE.

The agent keeps one session channel running ``REMOTE_COMMAND`` (``bash -l -s``, started by
the user's login shell exactly as a direct exec is), and feeds it ``shell_loop()`` on stdin:
a bash loop that reads one framed request at a time from the same stdin and answers it, so
a poll costs one write and one read, 1 RTT, where an exec costs a channel open and an exec
request on top.

A request is a header line ``<nonce> <length>`` and then ``length`` bytes: the script as
``markers.wrap`` made it for the direct path, with the same nonce. The loop runs it in a
subshell with stdin from ``/dev/null`` (``( eval ... )``: nothing it does can read the next
request or change the loop's own shell), its stdout and stderr into two files of a private
folder (``mktemp -d``), and then answers on stdout in one ``printf``: the stdout bytes, a
done line ``<DONE_MARKER><nonce> <status> <stderr length>``, and the stderr bytes.

One write, because sshd does not set TCP_NODELAY on a session without a pty: a reply that
left in pieces (a begin marker first, the payload once ``sacct`` answered) would have its
last piece held by Nagle's algorithm until the first was acknowledged, up to an RTT plus
the client's delayed ACK. Both streams on stdout for the same reason. What lies between the
markers is unwrapped by the direct path's own ``result_from_output``. The nonce is 128
random bits the script never sees, so no output of a script can fake a done line (a line
that looks like one but carries another nonce is payload), and stderr is cut by its length,
never searched.

The script travels as data on the channel's stdin, never in a command line, which other users
of the login node can read.
Output is given byte for byte, NUL bytes included (see ``_LOOP``).
"""

from __future__ import annotations

import re

DONE_MARKER = "__REMOTE_CHAIN_DONE_"
READY_MARKER = "__REMOTE_CHAIN_SHELL_"
_NONCE = re.compile("[0-9a-f]{32}")

# Sent once after the login shell started `bash -l -s`: defines the loop and calls it. The
# ready line (nonce and the loop's PID) says the login files ran and the loop is reading.
# `read -N` counts characters and ${#...} too: LC_ALL=C (local to the two helpers) makes
# them bytes, as the header and the done line count. The header is checked: a torn or
# foreign line ends the loop (the channel closes and the agent falls back to an exec)
# rather than running a half-read script. The reply folder is in $XDG_RUNTIME_DIR when the
# login has one (pam_systemd's per-user tmpfs), else $TMPDIR or /tmp: a login node's /tmp is
# filled by its other users, and a reply that cannot be written reads as a lost connection
# ("may have run") where an exec would have answered. It goes when the loop ends: EOF on
# stdin when the agent closes the channel, or sshd's SIGHUP on a dropped connection (the
# variable is global so that the EXIT trap still sees it after the function returned); a
# loop killed by SIGKILL leaves it, empty-sized.
# The reply is built in bash variables (no fork), which cannot hold a NUL: `read -d ''`
# stops at the first one, and then succeeds, where it fails at the end of a file without
# one. So a stdout or stderr holding a NUL (a state file an NFS crash filled with them) is
# sent through `cat` instead, byte for byte and still in one write, as an exec would give it.
_LOOP = """\
__rc_read() {{
local LC_ALL=C
IFS=' ' read -r __rc_nonce __rc_len || return 1
case $__rc_nonce in *[!0-9a-f]*|'') return 1;; esac
case $__rc_len in *[!0-9]*|'') return 1;; esac
IFS= read -r -N "$__rc_len" __rc_body || return 1
[ "${{#__rc_body}}" -eq "$__rc_len" ]
}}
__rc_reply() {{
local LC_ALL=C __rc_o='' __rc_e=''
if IFS= read -r -d '' __rc_o <"$__rc_dir/o" || IFS= read -r -d '' __rc_e <"$__rc_dir/e"; then
__rc_e=$(wc -c <"$__rc_dir/e")
{{ cat "$__rc_dir/o"
printf '\\n%s%s %d %d\\n' '{done}' "$__rc_nonce" "$1" "$__rc_e"
cat "$__rc_dir/e"; }} >"$__rc_dir/r"
cat "$__rc_dir/r"
return
fi
printf '%s\\n%s%s %d %d\\n%s' "$__rc_o" '{done}' "$__rc_nonce" "$1" "${{#__rc_e}}" "$__rc_e"
}}
__rc_shell() {{
local __rc_nonce __rc_len __rc_body __rc_name=remote-chain-shell.XXXXXXXX
__rc_dir=$(mktemp -d "${{XDG_RUNTIME_DIR:-/nonexistent}}/$__rc_name" 2>/dev/null) ||
__rc_dir=$(mktemp -d "${{TMPDIR:-/tmp}}/$__rc_name") || return 1
trap 'rm -rf "$__rc_dir"' EXIT
trap 'exit 129' HUP
trap 'exit 143' TERM
printf '\\n%s %d\\n' '{ready}' "$$"
while __rc_read; do
( eval "$__rc_body" ) </dev/null >"$__rc_dir/o" 2>"$__rc_dir/e"
__rc_reply "$?"
done
}}
__rc_shell
"""


def shell_loop(ready_nonce: str) -> bytes:
    """The bootstrap for ``bash -l -s``'s stdin; ``ready_nonce`` marks its ready line."""
    _check(ready_nonce)
    return _LOOP.format(ready=READY_MARKER + ready_nonce, done=DONE_MARKER).encode()


def frame_request(wrapped: str, nonce: str) -> bytes:
    """One request: the header line, then the wrapped script's bytes."""
    _check(nonce)
    body = wrapped.encode()
    return f"{nonce} {len(body)}\n".encode() + body


def ready_pid(stdout: bytes, ready_nonce: str) -> tuple[int, bytes] | None:
    """``(pid, stdout without the ready line)`` once that line came, else None."""
    found = re.search(rf"\n{READY_MARKER}{ready_nonce} ([0-9]+)\n".encode(), stdout)
    if found is None:
        return None
    return int(found.group(1)), stdout[: found.start()] + stdout[found.end() :]


def parse_reply(
    stdout: bytes | bytearray, nonce: str, since: int = 0
) -> tuple[bytes, bytes, bytes] | None:
    """``(stdout, stderr, rest)`` of request ``nonce`` once all of it is in ``stdout``.

    None while the done line or the stderr bytes it announces have not all come. ``since``:
    no done line starts before it (what was searched already; the buffer only grows).
    """
    done = re.compile(rf"\n{DONE_MARKER}{nonce} -?[0-9]+ ([0-9]+)\n".encode())
    found = done.search(stdout, since)
    if found is None:
        return None
    end = found.end() + int(found.group(1))
    if len(stdout) < end:
        return None
    return bytes(stdout[: found.start()]), bytes(stdout[found.end() : end]), bytes(stdout[end:])


def _check(nonce: str) -> None:
    # The nonce is spliced into a header and a bash literal: hex only, by construction.
    if not _NONCE.fullmatch(nonce):
        raise ValueError(f"not a 128-bit hex nonce: {nonce!r}")
