"""Wrap a bash script so that its output can be told apart from login-shell noise. PURE.

Both transports run ``REMOTE_COMMAND`` and send the wrapped script on stdin, so the user's
login shell (bash, zsh, even csh) only ever sees ``bash -l -s``. A login shell prints what it
likes first (MOTD, ``module`` init, an ``echo`` in ``.bashrc``); the wrapped script then prints
a begin marker carrying a random nonce, the script's own output, and an end marker carrying
the script's exit status. ``unwrap`` cuts the payload out between the two.

The wrapped script is function definitions followed by the main one's call on the last line. bash
parses the whole definition before running any of it, so a script cut short in transit (the
connection dropped mid-upload) ends in a syntax error and runs nothing, never half a script.
The user's script runs in a subshell, so its ``exit``, ``set -e`` and ``trap ... EXIT``
cannot skip the end marker, and with stdin from ``/dev/null``, so a command that reads stdin
cannot swallow the rest of the script or wait for input.
"""

from __future__ import annotations

import re
import secrets

# The fixed bootstrap: the only command line we ever send. Everything derived from the user's
# config or files rides on its stdin, since a command line is readable by every user of the
# login node in /proc/*/cmdline (and by the local machine's `ps` for the openssh transport).
REMOTE_COMMAND = "bash -l -s"
BEGIN_MARKER = "__REMOTE_CHAIN_BEGIN_"
END_MARKER = "__REMOTE_CHAIN_END_"

# The login shell's PATH, appended to the one `bash -l` built: for a tcsh or zsh user the rc
# file that shell reads (.tcshrc, .zshenv: a site's `module load slurm`) may be the only thing
# that puts sbatch on PATH, and `bash -l` loses it (Debian's /etc/profile sets PATH afresh).
# bash's own /proc/$$/environ is the environment it was started with, i.e. the login shell's,
# so nothing needs to ride on the command line (docs/dev-cluster.md, "Login shells").
_LOGIN_PATH = """\
__rc_login_path() {{
local entry
while IFS= read -r -d '' entry; do
case $entry in PATH=?*) PATH="$PATH:${{entry#PATH=}}"; return;; esac
done 2>/dev/null </proc/$$/environ
}}
"""

# Every marker line is printed after a newline of its own, so noise (or a payload) that does
# not end in a newline cannot share the marker's line; unwrap takes that newline back off.
_TEMPLATE = (
    _LOGIN_PATH
    + """\
__rc_main() {{
__rc_login_path
printf '\\n%s\\n' '{begin}'
printf '\\n%s\\n' '{begin}' >&2
( :
{script}
) </dev/null
printf '\\n%s %d\\n' '{end}' "$?"
}}
__rc_main
"""
)


class MarkerError(ValueError):
    """The remote output lacks a marker: the script did not start, or was cut short."""


def wrap(script: str) -> tuple[str, str]:
    """Return ``(wrapped_script, nonce)`` for sending on the stdin of ``REMOTE_COMMAND``."""
    nonce = secrets.token_hex(16)
    wrapped = _TEMPLATE.format(begin=BEGIN_MARKER + nonce, end=END_MARKER + nonce, script=script)
    return wrapped, nonce


def unwrap(stdout: str, nonce: str) -> tuple[str, int, str]:
    """Return ``(payload, exit_status, noise_before)`` from the stdout of a wrapped script."""
    begin = f"\n{BEGIN_MARKER}{nonce}\n"
    start = stdout.find(begin)
    if start < 0:
        raise MarkerError("the script never started (no begin marker in the output)")
    body = start + len(begin)
    end = re.compile(f"\n{END_MARKER}{nonce} ([0-9]+)\n").search(stdout, body)
    if end is None:
        raise MarkerError("the script's output ended before its end marker (cut short?)")
    return stdout[body : end.start()], int(end.group(1)), stdout[:start]


def split_stderr(stderr: str, nonce: str) -> tuple[str, str]:
    """Return ``(stderr, noise_before)``: the login shell's stderr noise cut off the script's.

    Without a begin marker (the script never started) everything is returned as stderr,
    since that is where the reason is.
    """
    begin = f"\n{BEGIN_MARKER}{nonce}\n"
    start = stderr.find(begin)
    if start < 0:
        return stderr, ""
    return stderr[start + len(begin) :], stderr[:start]
