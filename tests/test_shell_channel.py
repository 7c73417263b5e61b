"""The agent's persistent shell channel: the framing as pure functions and
through a local bash running the very loop, then ``ShellRemote`` against a real sshd on
loopback: the same results as an exec, a fake delimiter cannot confuse it, a killed loop or
a timeout costs a new channel and never a command."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from sshd import Sshd, running_sshd
from structlog.testing import capture_logs

from remote_chain.errors import RemoteError, RemoteTimeout
from remote_chain.protocol.markers import END_MARKER, wrap
from remote_chain.transport.base import CommandResult, result_from_output
from remote_chain.transport.shell import ShellRemote
from remote_chain.transport.shellframe import (
    DONE_MARKER,
    frame_request,
    parse_reply,
    ready_pid,
    shell_loop,
)
from remote_chain.transport.ssh import SshRemote

# Lines a hostile or unlucky script prints: done and end markers of other nonces, a header.
_FAKES = (
    f"printf '\\n{DONE_MARKER}{'0' * 32} 0\\n'; "
    f"printf '\\n{DONE_MARKER}{'0' * 32}\\n' >&2; "
    f"printf '\\n{END_MARKER}{'1' * 32} 7\\n'; "
    f"echo '{'2' * 32} 5'; echo after"
)


def test_frame_is_a_header_and_the_bytes() -> None:
    """A framed request is a line of the nonce and the script's length in bytes, then the script's
    bytes."""
    nonce = secrets.token_hex(16)
    framed = frame_request("echo é\n", nonce)
    assert framed == f"{nonce} 8\n".encode() + "echo é\n".encode()


@pytest.mark.parametrize("nonce", ["", "x" * 32, "0" * 31, "0" * 32 + "; rm -rf ~"])
def test_a_nonce_that_is_not_128_bit_hex_is_refused(nonce: str) -> None:
    """A nonce that is not 32 hex digits is refused by the framing and by the loop."""
    with pytest.raises(ValueError, match="nonce"):
        frame_request("true", nonce)
    with pytest.raises(ValueError, match="nonce"):
        shell_loop(nonce)


def test_done_lines_of_another_nonce_are_payload() -> None:
    """A reply ends only at its own nonce's done line (another nonce's is payload), its stderr is
    cut by the announced length, nothing parses until every announced byte came, and the ready
    line's pid is read out of the login noise."""
    nonce, other = secrets.token_hex(16), secrets.token_hex(16)
    err = f"e\n{DONE_MARKER}{nonce} 0 0\n".encode()  # stderr is cut by length, not searched
    out = f"a\n{DONE_MARKER}{other} 0 1\nb\n{DONE_MARKER}{nonce} 3 {len(err)}\n".encode()
    whole = out + err + b"next"
    assert parse_reply(whole, nonce) == (
        f"a\n{DONE_MARKER}{other} 0 1\nb".encode(),
        err,
        b"next",
    )
    for cut in range(len(out) + len(err)):  # nothing until every announced byte came
        assert parse_reply(whole[:cut], nonce) is None
    assert parse_reply(whole, nonce, since=len(whole) - 4) is None
    ready = b"motd\n__REMOTE_CHAIN_SHELL_" + nonce.encode() + b" 42\n"
    assert ready_pid(ready + b"rest", nonce) == (42, b"motdrest")


def _local_loop(scripts: list[str], env: dict[str, str] | None = None) -> list[CommandResult]:
    """Run the loop in a local ``bash -s`` (what ``bash -l -s`` runs after login files)."""
    ready = secrets.token_hex(16)
    wrapped = [wrap(s) for s in scripts]
    stdin = shell_loop(ready) + b"".join(frame_request(w, n) for w, n in wrapped)
    done = subprocess.run(
        ["bash", "-s"], input=stdin, capture_output=True, timeout=30, check=True, env=env
    )
    found = ready_pid(done.stdout, ready)
    assert found is not None
    out = found[1]
    assert done.stderr == b""
    results = []
    for _, nonce in wrapped:
        reply = parse_reply(out, nonce)
        assert reply is not None
        o, e, out = reply
        results.append(
            result_from_output(
                name="local",
                nonce=nonce,
                stdout=o.decode(),
                stderr=e.decode(),
                exit_status=0,
                lost=False,
            )
        )
    assert out == b""
    return results


def test_the_loop_answers_requests_in_order_locally() -> None:
    """Exit statuses, stderr, multibyte text, a script reading stdin, a fake delimiter."""
    scripts = [
        "echo out; echo err >&2; exit 3",
        "printf 'é\\n€'",
        "cat; read -r x; echo read=$?",  # stdin is /dev/null: the next request is safe
        _FAKES,
        "x=1; cd /; set -e; trap 'echo trapped' EXIT; false",
        "echo x=${x:-unset} $PWD",  # each request in its own subshell
        "printf 'a\\0b\\n'; printf 'c\\0d' >&2; exit 2",  # NUL bytes: kept, as an exec keeps them
        "printf 'after a NUL: text again'",
    ]
    results = _local_loop(scripts)
    assert results[0] == CommandResult(3, "out\n", "err\n", "")
    assert results[1].stdout == "é\n€"
    assert results[2].stdout == "read=1\n"
    assert results[3].stdout.endswith("after\n")
    assert f"{DONE_MARKER}{'0' * 32}" in results[3].stdout
    assert results[3].stderr == f"\n{DONE_MARKER}{'0' * 32}\n"  # stderr: by its length
    assert (results[4].exit_status, results[4].stdout) == (1, "trapped\n")
    assert results[5].stdout.startswith("x=unset ")
    assert results[6] == CommandResult(2, "a\0b\n", "c\0d", "")
    assert results[7].stdout == "after a NUL: text again"


def test_replies_are_kept_in_the_login_s_runtime_dir_else_tmpdir(tmp_path: Path) -> None:
    """$XDG_RUNTIME_DIR first (a per-user tmpfs: other users cannot fill it), else $TMPDIR;
    either way the folder is gone once the loop ends."""
    runtime, tmp = tmp_path / "run", tmp_path / "tmp"
    runtime.mkdir(mode=0o700)
    tmp.mkdir()
    where = ['dirname "$__rc_dir"']
    env = {"PATH": os.environ["PATH"], "TMPDIR": str(tmp)}
    assert _local_loop(where, {**env, "XDG_RUNTIME_DIR": str(runtime)})[0].stdout == f"{runtime}\n"
    missing = str(tmp_path / "gone")
    assert _local_loop(where, {**env, "XDG_RUNTIME_DIR": missing})[0].stdout == f"{tmp}\n"
    assert _local_loop(where, env)[0].stdout == f"{tmp}\n"
    assert list(runtime.iterdir()) == list(tmp.iterdir()) == []


@pytest.mark.parametrize("signal_number", [signal.SIGHUP, signal.SIGTERM])
def test_a_loop_ended_by_a_signal_removes_its_folder(tmp_path: Path, signal_number: int) -> None:
    """sshd hangs up on the loop when the connection drops: the folder still goes."""
    ready = secrets.token_hex(16)
    env = {"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path)}
    with subprocess.Popen(
        ["bash", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    ) as loop:
        assert loop.stdin is not None
        assert loop.stdout is not None
        loop.stdin.write(shell_loop(ready))
        loop.stdin.flush()
        line = b""
        while ready.encode() not in line:
            line += loop.stdout.readline()
        assert len(list(tmp_path.iterdir())) == 1
        loop.send_signal(signal_number)
        assert loop.wait(timeout=10) == 128 + signal_number
    assert list(tmp_path.iterdir()) == []


# --- against a real sshd --------------------------------------------------------------------
@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def noisy_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """Login shells that print MOTD-like noise: the loop must start as an exec's script does."""
    with running_sshd(tmp_path_factory.mktemp("shell"), noisy_login=True) as server:
        yield server


_SCRIPTS = [
    "echo out; echo err >&2; exit 3",
    "printf 'no newline'",
    # $- less c/s: an exec's bash runs `-c` (markers.EXEC_COMMAND), the loop's `-s`.
    "echo $0 ${-//[cs]}; command -v bash; echo $PATH | tr : '\\n' | tail -1",
    _FAKES,
    "head -c 200000 /dev/zero | tr '\\0' x; echo",  # more than one read chunk
    "printf 'x\\0y\\n'; head -c 3 /dev/zero >&2",  # NUL bytes (a state file after a crash)
]


@pytest.mark.ssh
@pytest.mark.anyio
async def test_the_shell_channel_gives_what_an_exec_gives(noisy_sshd: Sshd) -> None:
    """Same stdout, stderr and exit status as the direct exec; one channel for all of them."""
    async with await SshRemote.open(noisy_sshd.endpoint()) as direct:
        expected = [await direct.run(s) for s in _SCRIPTS]
    async with ShellRemote(await SshRemote.open(noisy_sshd.endpoint())) as shell:
        got = [await shell.run(s) for s in _SCRIPTS]
        pid = shell.shell_pid
        again = await shell.run("echo again")
        assert shell.shell_pid == pid is not None  # the same loop answered every request
    for want, have in zip(expected, got, strict=True):
        assert (have.exit_status, have.stdout, have.stderr) == (
            want.exit_status,
            want.stdout,
            want.stderr,
        )
    assert "module init says hello" in got[0].noise  # the login shell's, as an exec's
    assert again.stdout == "again\n"


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_killed_loop_costs_a_new_channel_not_the_command(noisy_sshd: Sshd) -> None:
    """After the loop is killed from outside, the next command still runs, on a new loop."""
    async with ShellRemote(await SshRemote.open(noisy_sshd.endpoint())) as shell:
        assert (await shell.run("echo one")).stdout == "one\n"
        pid = shell.shell_pid
        assert pid is not None
        # Killed from outside (here by the sshd's own user, over another channel).
        async with await SshRemote.open(noisy_sshd.endpoint()) as other:
            assert (await other.run(f"kill -KILL {pid}")).exit_status == 0
        await anyio.sleep(0.3)
        assert (await shell.run("echo two")).stdout == "two\n"
        assert shell.shell_pid not in (None, pid)


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_timeout_discards_the_channel(noisy_sshd: Sshd) -> None:
    """A command that times out raises RemoteTimeout and drops its channel, and the next command
    runs on a new loop."""
    async with ShellRemote(await SshRemote.open(noisy_sshd.endpoint())) as shell:
        await shell.warm()
        pid = shell.shell_pid
        with pytest.raises(RemoteTimeout, match=r"0\.5 s"):
            await shell.run("sleep 3; echo late", timeout=0.5)
        assert shell.shell_pid is None  # never reused with "late" still to come
        assert (await shell.run("echo next")).stdout == "next\n"
        assert shell.shell_pid not in (None, pid)


@pytest.mark.ssh
@pytest.mark.anyio
async def test_concurrent_requests_run_as_execs_meanwhile(noisy_sshd: Sshd) -> None:
    """Four requests made at once through one ShellRemote each get their own output."""
    results: dict[int, str] = {}
    async with ShellRemote(await SshRemote.open(noisy_sshd.endpoint())) as shell:

        async def one(i: int) -> None:
            results[i] = (await shell.run(f"sleep 0.3; echo {i}")).stdout

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(one, i)
    assert results == {i: f"{i}\n" for i in range(4)}


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_login_shell_that_exits_early_gives_the_exec_error(noisy_sshd: Sshd) -> None:
    """No loop can start: the command runs as an exec, with the direct path's error; after
    two failed openings the channel is no longer tried."""
    profile = noisy_sshd.home / ".bash_profile"
    saved = profile.read_bytes() if profile.exists() else None
    profile.write_text("echo 'account expired' >&2\nexit 7\n")
    try:
        async with ShellRemote(await SshRemote.open(noisy_sshd.endpoint())) as shell:
            for _ in range(3):
                with pytest.raises(RemoteError, match="did not run the command") as caught:
                    await shell.run("echo never")
                assert "account expired" in str(caught.value)
                assert shell.shell_pid is None
            with capture_logs() as logs, pytest.raises(RemoteError):
                await shell.run("echo never")
            assert not [e for e in logs if e["event"] == "shell_channel_unavailable"]
    finally:
        if saved is None:
            profile.unlink()
        else:
            profile.write_bytes(saved)


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_cancelled_request_discards_the_channel(noisy_sshd: Sshd) -> None:
    """Cancelled mid-reply (the agent stopping): the channel is never reused half read."""
    async with ShellRemote(await SshRemote.open(noisy_sshd.endpoint())) as shell:
        await shell.warm()
        pid = shell.shell_pid
        with anyio.move_on_after(0.5):
            await shell.run("sleep 2; echo late")
        assert shell.shell_pid is None
        assert (await shell.run("echo next")).stdout == "next\n"
        assert shell.shell_pid not in (None, pid)
