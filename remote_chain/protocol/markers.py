"""Wrap a bash script so that its output can be told apart from login-shell noise. PURE.

Both transports send the wrapped script on stdin of a fixed command, so the user's login
shell (bash, zsh, even csh) only ever sees ``bash -l -s`` (openssh, the agent's shell channel)
or ``EXEC_COMMAND`` (asyncssh, which also carries the script in an ``env`` request: one round
trip less, see ``script_env``). A login shell prints what it
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

# The asyncssh transport's command: the wrapped script rides in an SSH `env` request named
# SCRIPT_ENV, sent without want_reply in the exec request's own flight. sshd opens a session's
# window only once the command has started, so a script on stdin costs a round trip more; the
# env value is there when the command starts, and stdin is ended at once (a login file that
# reads stdin never waits). A server that refuses the name (not in its AcceptEnv) leaves it
# unset: the command then says so on stderr (STDIN_WANTED) and reads the script from stdin,
# exactly as `bash -l -s` would; that stdin has ended, so it runs nothing, and the client
# sends the script again on stdin (and so from then on, on that connection).
# - LC_*: Debian and Ubuntu ship `AcceptEnv LANG LC_*`; glibc's setlocale reads only its own
#   categories (LC_CTYPE, ...), so an unknown LC_ name changes no locale.
# - The command is shell-neutral: single quotes and no `!` or newline mean the same to bash,
#   zsh and tcsh login shells (tested); the expansion happens in the bash it starts.
# - The template unsets it before anything runs: sbatch exports the environment to the jobs.
# Not argv: a process's environment is readable by its own uid and root only (/proc/PID/environ
# is mode 0400 and ptrace-checked), as its stdin pipe is, never by other users of the node.
SCRIPT_ENV = "LC_REMOTE_CHAIN"
STDIN_WANTED = "__REMOTE_CHAIN_STDIN__"
EXEC_COMMAND = f"""bash -l -c 'eval "${{{SCRIPT_ENV}:-$(echo {STDIN_WANTED} >&2; cat)}}"'"""
# The env request is one SSH packet, and RFC 4253 6.1 obliges a server to accept payloads of
# 32768 bytes only: Dropbear (RECV_MAX_PAYLOAD_LEN) drops the connection on a bigger one,
# before any fallback to stdin could happen. OpenSSH takes 256 KiB, but then Linux refuses to
# execve an environment string over MAX_ARG_STRLEN (128 KiB). Bigger scripts: stdin only.
SCRIPT_ENV_MAX_BYTES = 32 * 1024 - 64  # the request's own fields fit in the 64 bytes
# OpenSSH's sshd, named by its version string, takes packets of 256 KiB: there the cap is what
# execve allows, with room for the name (a submit's wrapped script, its payload included, may
# exceed 32 KiB).
OPENSSH_ENV_MAX_BYTES = 96 * 1024
_OPENSSH = "SSH-2.0-OpenSSH_"
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
unset {env}
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
    """Return ``(wrapped_script, nonce)`` for the stdin of ``REMOTE_COMMAND`` or of
    ``EXEC_COMMAND`` (and its env request)."""
    nonce = secrets.token_hex(16)
    wrapped = _TEMPLATE.format(
        env=SCRIPT_ENV, begin=BEGIN_MARKER + nonce, end=END_MARKER + nonce, script=script
    )
    return wrapped, nonce


def env_cap(server_version: str) -> int:
    """The largest wrapped script (bytes) to send in the env request to this server."""
    if server_version.startswith(_OPENSSH):
        return OPENSSH_ENV_MAX_BYTES
    return SCRIPT_ENV_MAX_BYTES


def script_env(wrapped: str, *, sensitive: bool, cap: int | None = None) -> dict[str, str]:
    """The ``env`` request to send with ``EXEC_COMMAND``: the wrapped script, or empty.

    Empty (the script goes on stdin) when the script carries secrets: sshd logs every env
    request's value at LogLevel DEBUG2 ("Setting env"), never stdin. Empty too past ``cap``
    (``env_cap``; by default ``SCRIPT_ENV_MAX_BYTES``, what every server must take).
    Always sent, even empty: it overrides a value the ssh config's ``SendEnv LC_*`` would
    forward from the local environment, which the remote would otherwise run.
    """
    limit = SCRIPT_ENV_MAX_BYTES if cap is None else cap
    if sensitive or len(wrapped.encode()) > limit:
        return {SCRIPT_ENV: ""}
    return {SCRIPT_ENV: wrapped}


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
