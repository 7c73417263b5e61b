"""The persistent shell channel's wire format (issue 13, P8). PURE.

The agent keeps one session channel running ``REMOTE_COMMAND`` (``bash -l -s``, started by
the user's login shell exactly as a direct exec is), and feeds it ``SHELL_LOOP`` on stdin:
a bash loop that reads one framed request at a time from the same stdin and answers it, so
a poll costs one write and one read, 1 RTT, where an exec costs a channel open and an exec
request on top (docs/performance.md, P8).

A request is a header line ``<nonce> <length>`` and then ``length`` bytes: the script as
``markers.wrap`` made it for the direct path, with the same nonce. The loop runs it in a
subshell with stdin from ``/dev/null`` (``( eval ... )``: nothing it does can read the next
request or change the loop's own shell), then prints a done line carrying the nonce on
stdout and on stderr. A reply is everything on each stream up to its done line; what lies
between is unwrapped by the direct path's own ``result_from_output``. The nonce is 128
random bits the script never sees, so no output of a script can fake a done line (a line
that looks like one but carries another nonce is payload).

The script travels as data on the channel's stdin, never in a command line (issue 14).
"""

from __future__ import annotations

import re

DONE_MARKER = "__REMOTE_CHAIN_DONE_"
READY_MARKER = "__REMOTE_CHAIN_SHELL_"
_NONCE = re.compile("[0-9a-f]{32}")

# Sent once after the login shell started `bash -l -s`: defines the loop and calls it. The
# ready line (nonce and the loop's PID) says the login files ran and the loop is reading.
# `read -N` counts characters: LC_ALL=C (local to __rc_read) makes them bytes, as the header
# counts. The header is checked: a torn or foreign line ends the loop (the channel closes and
# the agent falls back to an exec) rather than running a half-read script.
_LOOP = """\
__rc_read() {{
local LC_ALL=C
IFS=' ' read -r __rc_nonce __rc_len || return 1
case $__rc_nonce in *[!0-9a-f]*|'') return 1;; esac
case $__rc_len in *[!0-9]*|'') return 1;; esac
IFS= read -r -N "$__rc_len" __rc_body || return 1
[ "${{#__rc_body}}" -eq "$__rc_len" ]
}}
__rc_shell() {{
local __rc_nonce __rc_len __rc_body
printf '\\n%s %d\\n' '{ready}' "$$"
while __rc_read; do
( eval "$__rc_body" ) </dev/null
printf '\\n%s%s %d\\n' '{done}' "$__rc_nonce" "$?"
printf '\\n%s%s\\n' '{done}' "$__rc_nonce" >&2
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


def stdout_done(stdout: bytes, nonce: str) -> int | None:
    """Where the stdout done line of request ``nonce`` starts, or None while it has not come.

    The reply is ``stdout[:start]``; the done line ends at the next newline after it.
    """
    found = re.search(rf"\n{DONE_MARKER}{nonce} -?[0-9]+\n".encode(), stdout)
    return None if found is None else found.start()


def stderr_done(stderr: bytes, nonce: str) -> int | None:
    """Where the stderr done line of request ``nonce`` starts, or None while it has not come."""
    at = stderr.find(f"\n{DONE_MARKER}{nonce}\n".encode())
    return None if at < 0 else at


def split_reply(buffer: bytes, start: int | None) -> tuple[bytes, bytes] | None:
    """``(reply, rest)``: the bytes before a done line at ``start``, and those after the line."""
    if start is None:
        return None
    end = buffer.index(b"\n", start + 1) + 1
    return buffer[:start], buffer[end:]


def _check(nonce: str) -> None:
    # The nonce is spliced into a header and a bash literal: hex only, by construction.
    if not _NONCE.fullmatch(nonce):
        raise ValueError(f"not a 128-bit hex nonce: {nonce!r}")
