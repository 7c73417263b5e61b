"""The marker protocol: wrapped scripts run by a real local bash, login noise and all."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remote_chain.protocol.markers import (
    BEGIN_MARKER,
    END_MARKER,
    EXEC_COMMAND,
    OPENSSH_ENV_MAX_BYTES,
    REMOTE_COMMAND,
    SCRIPT_ENV,
    SCRIPT_ENV_MAX_BYTES,
    STDIN_WANTED,
    MarkerError,
    env_cap,
    script_env,
    split_stderr,
    unwrap,
    wrap,
)

# Any text a remote could print, minus NUL (bash strings cannot hold it) and lone
# surrogates (not encodable, so no remote can send them).
_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
# Text salted with marker-looking fragments that lack the right nonce.
_TRICKY = st.lists(
    st.one_of(
        _TEXT,
        st.sampled_from(
            [
                BEGIN_MARKER,
                END_MARKER,
                f"\n{BEGIN_MARKER}\n",
                f"\n{END_MARKER} 0\n",
                f"\n{BEGIN_MARKER}{'0' * 32}\n",
                f"\n{END_MARKER}{'0' * 32} 7\n",
                "\n",
            ]
        ),
    ),
    max_size=6,
).map("".join)


def run_bash(stdin: str, *, noise: str = "", noise_err: str = "") -> tuple[str, str]:
    """Feed ``stdin`` to ``bash -s`` after commands that print login noise; (stdout, stderr).

    Bytes, decoded as the transports do: text mode would turn ``\r`` into ``\n``.
    """
    preamble = f"printf '%s' {shlex.quote(noise)}\nprintf '%s' {shlex.quote(noise_err)} >&2\n"
    argv = ["bash", "--norc", "--noprofile", "-s"]
    done = subprocess.run(argv, input=(preamble + stdin).encode(), capture_output=True, check=False)
    return done.stdout.decode(), done.stderr.decode()


# What EXEC_COMMAND's bash runs once its login files are read: the script from the env
# variable, else from stdin.
_EVAL = EXEC_COMMAND.removeprefix("bash -l -c '").removesuffix("'")


def run_exec(wrapped: str, *, via_env: bool, stdin: str | None = None) -> tuple[str, str]:
    """Run ``EXEC_COMMAND``'s eval in a local bash, the script in its env or on its stdin."""
    env = {k: v for k, v in os.environ.items() if k != SCRIPT_ENV}
    if via_env:
        env[SCRIPT_ENV] = wrapped
    argv = ["bash", "--norc", "--noprofile", "-c", _EVAL]
    data = (wrapped if stdin is None else stdin).encode()
    done = subprocess.run(argv, input=data, env=env, capture_output=True, check=False)
    return done.stdout.decode(), done.stderr.decode()


def test_remote_command_reads_the_script_from_stdin() -> None:
    """The remote command lines are fixed and carry no script, whatever the login shell: no
    `!` (tcsh history) or newline, single quotes only, so every login shell passes it as is."""
    assert REMOTE_COMMAND == "bash -l -s"
    assert EXEC_COMMAND == (
        """bash -l -c 'eval "${LC_REMOTE_CHAIN:-$(echo __REMOTE_CHAIN_STDIN__ >&2; cat)}"'"""
    )
    assert EXEC_COMMAND.count("'") == 2
    assert not set("!\n") & set(EXEC_COMMAND)


def test_script_env_carries_the_script_unless_secret_or_too_big() -> None:
    """The env value is the wrapped script, or empty (stdin only): secrets, or over the cap."""
    wrapped, _ = wrap("echo hi")
    assert script_env(wrapped, sensitive=False) == {SCRIPT_ENV: wrapped}
    assert script_env(wrapped, sensitive=True) == {SCRIPT_ENV: ""}
    at_cap = "x" * SCRIPT_ENV_MAX_BYTES
    assert script_env(at_cap, sensitive=False) == {SCRIPT_ENV: at_cap}
    assert script_env(at_cap + "x", sensitive=False) == {SCRIPT_ENV: ""}
    # Bytes, not characters: the kernel's limit is on bytes.
    assert script_env("é" * (SCRIPT_ENV_MAX_BYTES // 2 + 1), sensitive=False) == {SCRIPT_ENV: ""}
    # Under Linux's MAX_ARG_STRLEN (32 pages) with its name, `=` and NUL.
    assert len(SCRIPT_ENV) + 2 + SCRIPT_ENV_MAX_BYTES < 32 * 4096
    # And the env request's packet within what every SSH server must accept (RFC 4253 6.1:
    # a payload of 32768 bytes): byte SSH_MSG_CHANNEL_REQUEST, uint32 recipient channel,
    # string "env", boolean want_reply, string name, string value. A server that enforces
    # the RFC's floor (Dropbear) drops the connection on a bigger packet: no fallback then.
    payload = 1 + 4 + (4 + len("env")) + 1 + (4 + len(SCRIPT_ENV)) + (4 + SCRIPT_ENV_MAX_BYTES)
    assert payload <= 32768


def test_the_cap_is_openssh_s_only_for_openssh() -> None:
    """OpenSSH's sshd (its version string says so) takes 256 KiB packets: there the cap is
    execve's; any other server gets what RFC 4253 obliges every server to take."""
    assert env_cap("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3") == OPENSSH_ENV_MAX_BYTES
    assert env_cap("SSH-2.0-OpenSSH_7.4") == OPENSSH_ENV_MAX_BYTES
    for other in ("SSH-2.0-dropbear_2022.83", "SSH-2.0-Go", "", "SSH-2.0-openssh_9.0"):
        assert env_cap(other) == SCRIPT_ENV_MAX_BYTES
    assert len(SCRIPT_ENV) + 2 + OPENSSH_ENV_MAX_BYTES < 32 * 4096  # MAX_ARG_STRLEN
    big = "x" * OPENSSH_ENV_MAX_BYTES
    assert script_env(big, sensitive=False, cap=OPENSSH_ENV_MAX_BYTES) == {SCRIPT_ENV: big}
    assert script_env(big, sensitive=False) == {SCRIPT_ENV: ""}


@pytest.mark.parametrize("via_env", [True, False])
def test_exec_command_runs_the_same_script_from_env_or_stdin(via_env: bool) -> None:
    """Either way the same wrapped script runs once, the variable unset before it starts;
    only without the variable does the command ask for stdin (one line on stderr)."""
    wrapped, nonce = wrap(f"echo ${{{SCRIPT_ENV}-unset}}; env | grep -c ^{SCRIPT_ENV}= ; exit 3")
    stdout, stderr = run_exec(wrapped, via_env=via_env)
    assert unwrap(stdout, nonce) == ("unset\n0\n", 3, "")
    asked = split_stderr(stderr, nonce)[1]
    assert asked == ("" if via_env else f"{STDIN_WANTED}\n")


def test_an_empty_env_value_means_stdin() -> None:
    """A secret script sends the variable empty (overriding a forwarded one): stdin runs."""
    wrapped, nonce = wrap("echo from-stdin")
    env = {k: v for k, v in os.environ.items() if k != SCRIPT_ENV} | {SCRIPT_ENV: ""}
    argv = ["bash", "--norc", "--noprofile", "-c", _EVAL]
    done = subprocess.run(argv, input=wrapped.encode(), env=env, capture_output=True, check=False)
    assert unwrap(done.stdout.decode(), nonce)[:2] == ("from-stdin\n", 0)


@settings(max_examples=100, deadline=None)
@given(payload=_TRICKY, noise=_TRICKY, noise_err=_TRICKY, status=st.integers(0, 255))
def test_any_payload_and_noise_round_trip_through_bash(
    payload: str, noise: str, noise_err: str, status: int
) -> None:
    """Whatever the login shell and the script print, unwrap returns exactly the script's part."""
    script = (
        f"printf '%s' {shlex.quote(payload)}\nprintf '%s' {shlex.quote(payload)} >&2\nexit {status}"
    )
    wrapped, nonce = wrap(script)
    stdout, stderr = run_bash(wrapped, noise=noise, noise_err=noise_err)
    assert unwrap(stdout, nonce) == (payload, status, noise)
    assert split_stderr(stderr, nonce) == (payload, noise_err)


@given(payload=_TRICKY, noise=_TRICKY, after=_TRICKY, status=st.integers(0, 255))
def test_unwrap_ignores_text_after_the_end_marker(
    payload: str, noise: str, after: str, status: int
) -> None:
    """Output after the end marker (``.bash_logout``) is not part of the payload."""
    nonce = "f" * 32
    stdout = f"{noise}\n{BEGIN_MARKER}{nonce}\n{payload}\n{END_MARKER}{nonce} {status}\n{after}"
    assert unwrap(stdout, nonce) == (payload, status, noise)


@pytest.mark.parametrize(
    ("script", "stdout", "status"),
    [
        ("echo hi", "hi\n", 0),
        ("", "", 0),
        ("# only a comment", "", 0),
        ("exit 3", "", 3),
        ("echo partial; exit 4", "partial\n", 4),
        ("set -e\nfalse\necho unreachable", "", 1),
        ("trap 'echo bye' EXIT\necho hi", "hi\nbye\n", 0),
        ("cat\necho after-cat", "after-cat\n", 0),
        ("kill -TERM $BASHPID", "", 143),
        ("printf 'no newline'", "no newline", 0),
        ("cat <<'EOF'\n}\n)\nEOF", "}\n)\n", 0),
        ("echo 'with {braces} and %s'", "with {braces} and %s\n", 0),
    ],
)
@pytest.mark.parametrize("how", ["bash -s", "env", "eval of stdin"])
def test_script_semantics_survive_the_wrapping(
    script: str, stdout: str, status: int, how: str
) -> None:
    """exit, set -e, traps, signals, stdin readers and odd text still yield an end marker,
    run as `bash -l -s` does or as EXEC_COMMAND does from the env value or stdin."""
    wrapped, nonce = wrap(script)
    out = run_bash(wrapped)[0] if how == "bash -s" else run_exec(wrapped, via_env=how == "env")[0]
    assert unwrap(out, nonce)[:2] == (stdout, status)


def test_each_wrap_gets_a_fresh_nonce() -> None:
    """Two wraps of one script differ, so a stale output can never match a new nonce."""
    (first, nonce1), (second, nonce2) = wrap("true"), wrap("true")
    assert nonce1 != nonce2
    assert first != second
    assert nonce1 in first


def test_a_script_cut_anywhere_before_its_last_line_runs_nothing(tmp_path: Path) -> None:
    """A truncated upload is a syntax error, so not one command of the script runs."""
    witness = tmp_path / "ran"
    wrapped, nonce = wrap(f"echo started\ntouch {shlex.quote(str(witness))}\necho finished")
    # Only the whole script, or the whole script but its final newline, contains the call.
    call_complete = len(wrapped) - len("\n")
    for cut in range(call_complete):
        stdout, _ = run_bash(wrapped[:cut])
        assert not witness.exists(), f"cut at {cut} ran the script: {wrapped[:cut]!r}"
        assert "started" not in stdout
        with pytest.raises(MarkerError):
            unwrap(stdout, nonce)
    stdout, _ = run_bash(wrapped[:call_complete])
    assert witness.exists()
    assert unwrap(stdout, nonce) == ("started\nfinished\n", 0, "")


@pytest.mark.parametrize("via_env", [True, False])
def test_a_cut_script_runs_nothing_through_the_exec_command(tmp_path: Path, via_env: bool) -> None:
    """The same guarantee through EXEC_COMMAND's eval, from the env value or from stdin: eval
    parses each function definition whole, so a cut one is a syntax error and nothing runs."""
    witness = tmp_path / "ran"
    wrapped, nonce = wrap(f"echo started\ntouch {shlex.quote(str(witness))}\necho finished")
    call_complete = len(wrapped) - len("\n")
    for cut in range(call_complete):
        stdout, _ = run_exec(wrapped[:cut], via_env=via_env, stdin="" if via_env else None)
        assert not witness.exists(), f"cut at {cut} ran the script: {wrapped[:cut]!r}"
        with pytest.raises(MarkerError):
            unwrap(stdout, nonce)
    stdout, _ = run_exec(wrapped[:call_complete], via_env=via_env)
    assert unwrap(stdout, nonce) == ("started\nfinished\n", 0, "")


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("", "never started"),
        ("Welcome!\nbash: command not found\n", "never started"),
        (f"\n{BEGIN_MARKER}{'a' * 32}\nhalf of the out", "ended before its end marker"),
        (f"\n{BEGIN_MARKER}{'a' * 32}\nout\n{END_MARKER}{'b' * 32} 0\n", "ended before"),
        (f"\n{BEGIN_MARKER}{'a' * 32}\nout\n{END_MARKER}{'a' * 32} x\n", "ended before"),
        (f"\n{BEGIN_MARKER}{'b' * 32}\nout\n{END_MARKER}{'a' * 32} 0\n", "never started"),
    ],
)
def test_missing_or_foreign_markers_raise(stdout: str, message: str) -> None:
    """Output without this nonce's markers is an error that says which marker is missing."""
    with pytest.raises(MarkerError, match=message):
        unwrap(stdout, "a" * 32)


def test_split_stderr_without_a_marker_keeps_everything_as_stderr() -> None:
    """When the script never started, stderr holds the reason, so none of it is called noise."""
    assert split_stderr("bash: not found\n", "a" * 32) == ("bash: not found\n", "")
