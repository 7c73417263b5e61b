"""The asyncssh transport against a real OpenSSH sshd on loopback: no mocks of SSH."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from sshd import HOST, Sshd, free_port, keygen, public_key_line, running_sshd
from structlog.testing import capture_logs

from remote_chain.errors import (
    AuthenticationError,
    ConfigError,
    ConnectError,
    HostKeyError,
    RemoteChainError,
    RemoteError,
    RemoteTimeout,
)
from remote_chain.protocol import markers
from remote_chain.protocol.markers import EXEC_COMMAND, OPENSSH_ENV_MAX_BYTES, wrap
from remote_chain.transport.base import CommandResult
from remote_chain.transport.connect import open_remote
from remote_chain.transport.endpoint import Endpoint
from remote_chain.transport.ssh import SshRemote

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def anyio_backend() -> str:
    """asyncssh runs on asyncio only."""
    return "asyncio"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """An sshd with OpenSSH's defaults (MaxSessions 10) and a quiet login shell."""
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="module")
def noisy_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """An sshd whose login shells print MOTD-like noise on stdout and stderr."""
    with running_sshd(tmp_path_factory.mktemp("noisy"), noisy_login=True) as server:
        yield server


@pytest.fixture(scope="module")
def env_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """An sshd with Debian's ``AcceptEnv LANG LC_*``: scripts arrive in the env request."""
    with running_sshd(tmp_path_factory.mktemp("env"), accept_env=True) as server:
        yield server


@pytest.fixture(scope="module")
def one_session_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """An sshd allowing one session per connection, to provoke refused channels."""
    with running_sshd(tmp_path_factory.mktemp("one"), max_sessions=1) as server:
        yield server


def test_importing_the_seam_does_not_import_asyncssh() -> None:
    """``import remote_chain.transport`` stays cheap: asyncssh loads only when a remote opens."""
    code = "import sys, remote_chain.transport; print('asyncssh' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"


@pytest.mark.ssh
@pytest.mark.anyio
async def test_run_returns_stdout_stderr_and_exit_status(sshd: Sshd) -> None:
    """A non-zero exit is data in the result, with stdout and stderr kept apart."""
    async with await open_remote(sshd.endpoint()) as remote:
        assert isinstance(remote, SshRemote)
        assert remote.name == "loopback"
        result = await remote.run("echo out; echo err >&2; exit 3")
    assert result == CommandResult(exit_status=3, stdout="out\n", stderr="err\n", noise="")


@pytest.mark.ssh
@pytest.mark.anyio
async def test_login_shell_noise_is_kept_out_of_the_output(noisy_sshd: Sshd) -> None:
    """MOTD and dotfile chatter on stdout and stderr land in ``noise``, not in the output."""
    async with await open_remote(noisy_sshd.endpoint()) as remote:
        result = await remote.run("printf 'payload\\n'; echo 'real error' >&2; exit 1")
    assert (result.exit_status, result.stdout, result.stderr) == (1, "payload\n", "real error\n")
    for noise in ("Welcome to the loopback cluster", "module init", "to stderr", "quota warning"):
        assert noise in result.noise


@pytest.mark.ssh
@pytest.mark.anyio
async def test_one_connection_serves_twenty_concurrent_runs(sshd: Sshd) -> None:
    """20 concurrent runs share one login and all succeed under the default MaxSessions."""
    logins_before = sshd.accepted_logins()
    results: dict[int, CommandResult] = {}

    async def run_one(remote: SshRemote, index: int) -> None:
        results[index] = await remote.run(f"sleep 0.2; echo {index}")

    async with await SshRemote.open(sshd.endpoint()) as remote, anyio.create_task_group() as group:
        for index in range(20):
            group.start_soon(run_one, remote, index)
    assert {index: result.stdout for index, result in results.items()} == {
        index: f"{index}\n" for index in range(20)
    }
    assert sshd.accepted_logins() == logins_before + 1


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_refused_channel_is_retried_briefly(one_session_sshd: Sshd) -> None:
    """A channel refused by MaxSessions succeeds on retry once the other session ends."""
    endpoint = one_session_sshd.endpoint(max_channels=2)
    outputs: list[str] = []

    async def run_one(remote: SshRemote) -> None:
        outputs.append((await remote.run("sleep 0.05; echo done")).stdout)

    async with await SshRemote.open(endpoint) as remote, anyio.create_task_group() as group:
        group.start_soon(run_one, remote)
        group.start_soon(run_one, remote)
    assert outputs == ["done\n", "done\n"]


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_channel_refused_past_the_retries_is_a_connect_error(
    one_session_sshd: Sshd,
) -> None:
    """When the server keeps refusing channels, the caller gets a transient ConnectError."""
    endpoint = one_session_sshd.endpoint(max_channels=2)
    outcomes: list[str | RemoteChainError] = []

    async def run_one(remote: SshRemote) -> None:
        try:
            outcomes.append((await remote.run("sleep 2; echo done")).stdout)
        except RemoteChainError as exc:
            outcomes.append(exc)

    async with await SshRemote.open(endpoint) as remote, anyio.create_task_group() as group:
        group.start_soon(run_one, remote)
        group.start_soon(run_one, remote)
    errors = [outcome for outcome in outcomes if isinstance(outcome, RemoteChainError)]
    assert outcomes.count("done\n") == 1
    assert len(errors) == 1
    assert isinstance(errors[0], ConnectError)
    assert "refused to open a channel" in str(errors[0])
    assert errors[0].transient


@pytest.mark.ssh
@pytest.mark.anyio
async def test_unknown_host_key_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    """A host missing from known_hosts is a HostKeyError naming cluster and host."""
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyError) as caught:
        await open_remote(sshd.endpoint(known_hosts=empty))
    assert str(caught.value).startswith("loopback: ")
    assert f"{HOST}:{sshd.port}" in str(caught.value)
    assert not caught.value.transient


@pytest.mark.ssh
@pytest.mark.anyio
async def test_changed_host_key_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    """A host whose key differs from the one recorded is a HostKeyError."""
    other_key = public_key_line(keygen(tmp_path / "other_host_key"))
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"[{HOST}]:{sshd.port} {other_key}\n")
    with pytest.raises(HostKeyError, match="not verified"):
        await open_remote(sshd.endpoint(known_hosts=known_hosts))


@pytest.mark.anyio
async def test_missing_known_hosts_file_is_a_host_key_error(tmp_path: Path) -> None:
    """Without a known_hosts file nothing can be verified, so no connection is attempted."""
    endpoint = Endpoint(name="nowhere", host=HOST, port=free_port(), known_hosts=tmp_path / "nope")
    with pytest.raises(HostKeyError, match="no known_hosts file exists"):
        await open_remote(endpoint)


@pytest.mark.ssh
@pytest.mark.anyio
async def test_wrong_client_key_is_an_authentication_error(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key the server does not accept is an AuthenticationError, never a prompt."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    stranger = keygen(tmp_path / "stranger")
    with pytest.raises(AuthenticationError) as caught:
        await open_remote(sshd.endpoint(identity_file=stranger))
    assert not caught.value.transient


@pytest.mark.ssh
@pytest.mark.anyio
async def test_encrypted_key_without_agent_is_an_authentication_error(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An encrypted identity file is refused with advice, instead of prompting for it."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    key = keygen(tmp_path / "locked", passphrase="secret")  # noqa: S106  a throwaway test key
    with pytest.raises(AuthenticationError, match="ssh-agent"):
        await open_remote(sshd.endpoint(identity_file=key))


@pytest.mark.anyio
async def test_closed_port_is_a_fast_connect_error(sshd: Sshd) -> None:
    """Nothing listening is a transient ConnectError, reported at once."""
    started = time.monotonic()
    with pytest.raises(ConnectError) as caught:
        await open_remote(sshd.endpoint(port=free_port()))
    assert time.monotonic() - started < 2
    assert caught.value.transient


@pytest.mark.anyio
async def test_a_silent_server_is_a_connect_timeout(sshd: Sshd) -> None:
    """A port that accepts but never speaks SSH times out after connect_timeout."""
    with socket.socket() as silent:
        silent.bind((HOST, 0))
        silent.listen()
        endpoint = sshd.endpoint(port=silent.getsockname()[1], connect_timeout=0.5)
        started = time.monotonic()
        with pytest.raises(RemoteTimeout, match="connect"):
            await open_remote(endpoint)
    assert time.monotonic() - started < 3


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_slow_command_times_out_and_the_connection_survives(sshd: Sshd) -> None:
    """A command past its timeout is a RemoteTimeout; the next command still runs."""
    async with await open_remote(sshd.endpoint()) as remote:
        started = time.monotonic()
        with pytest.raises(RemoteTimeout, match=r"0\.5 s"):
            await remote.run("sleep 3", timeout=0.5)
        assert time.monotonic() - started < 2
        assert (await remote.run("echo still here")).stdout == "still here\n"


@pytest.mark.ssh
@pytest.mark.anyio
async def test_endpoint_command_timeout_is_the_default(sshd: Sshd) -> None:
    """Without a per-call timeout, the endpoint's command_timeout applies."""
    async with await open_remote(sshd.endpoint(command_timeout=0.5)) as remote:
        with pytest.raises(RemoteTimeout):
            await remote.run("sleep 3")


# Walks up from the script's shell to its sshd session process and kills it: the server
# side of the connection vanishes mid-command, as on a network cut.
_KILL_OWN_SESSION = """
pid=$$
for _ in 1 2 3 4 5 6 7 8; do
    pid=$(awk '{print $4}' /proc/$pid/stat)
    if [ "$(cat /proc/$pid/comm)" = sshd ]; then kill -KILL "$pid"; sleep 5; fi
done
"""


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_lost_connection_is_a_connect_error_and_the_next_run_reconnects(
    sshd: Sshd,
) -> None:
    """A connection cut mid-command is a ConnectError; the next command logs in again."""
    logins_before = sshd.accepted_logins()
    async with await open_remote(sshd.endpoint()) as remote:
        with pytest.raises(ConnectError, match="connection lost"):
            await remote.run(_KILL_OWN_SESSION)
        assert (await remote.run("echo back")).stdout == "back\n"
    assert sshd.accepted_logins() == logins_before + 2


@pytest.mark.ssh
@pytest.mark.anyio
async def test_run_after_aclose_is_an_error(sshd: Sshd) -> None:
    """A closed remote does not silently open a new connection."""
    remote = await open_remote(sshd.endpoint())
    await remote.aclose()
    await remote.aclose()
    with pytest.raises(RemoteError, match="aclose"):
        await remote.run("true")


@pytest.mark.ssh
@pytest.mark.anyio
async def test_ssh_config_alias_and_default_known_hosts_are_used(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host alias from ~/.ssh/config supplies host, port, user and key."""
    # asyncssh finds ~ through $HOME, so a fake home keeps the real one untouched.
    monkeypatch.setenv("HOME", str(tmp_path))
    dot_ssh = tmp_path / ".ssh"
    dot_ssh.mkdir()
    (dot_ssh / "known_hosts").write_text(sshd.known_hosts.read_text())
    (dot_ssh / "config").write_text(
        f"Host loopback-alias\n  HostName {HOST}\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n"
    )
    endpoint = Endpoint(name="aliased", host="loopback-alias")
    async with await open_remote(endpoint) as remote:
        assert (await remote.run("echo via alias")).stdout == "via alias\n"


@pytest.mark.ssh
@pytest.mark.anyio
async def test_connect_and_commands_are_logged(sshd: Sshd) -> None:
    """ssh_connected and ssh_command are logged with timings, for -v and bench."""
    with capture_logs() as logs:
        async with await open_remote(sshd.endpoint()) as remote:
            await remote.run("printf 12345; exit 2")
    events = {entry["event"]: entry for entry in logs}
    assert events["ssh_connected"]["host"] == HOST
    assert events["ssh_connected"]["seconds"] >= 0
    assert events["ssh_command"]["exit_status"] == 2
    assert events["ssh_command"]["bytes"] > 5
    assert {entry["log_level"] for entry in logs} == {"debug"}


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_login_file_that_reads_stdin_never_holds_the_command(
    sshd: Sshd, env_sshd: Sshd
) -> None:
    """A ``.bash_profile`` that reads stdin (a site's prompt) gets an ended stdin when the
    script comes in the env request: it runs once, at once. Where the server refuses the env
    request the script is on stdin and the profile eats its first line: the wrapper's syntax
    check then runs none of it, and the error names the host."""
    for server in (env_sshd, sshd):
        (server.home / ".bash_profile").write_text(
            'read -r answer; echo "profile read: [${answer:0:12}]" >&2\n'
        )
    try:
        async with await open_remote(env_sshd.endpoint(command_timeout=20)) as remote:
            started = time.monotonic()
            result = await remote.run("echo ran")
            assert time.monotonic() - started < 10
        async with await open_remote(sshd.endpoint(command_timeout=20)) as remote:
            with pytest.raises(RemoteError, match="did not run the command") as caught:
                await remote.run('touch "$HOME/never-ran"')
    finally:
        for server in (env_sshd, sshd):
            (server.home / ".bash_profile").unlink()
    assert (result.exit_status, result.stdout) == (0, "ran\n")
    assert "profile read: []" in result.noise
    assert "__REMOTE_CHAIN_STDIN__" not in result.noise + result.stderr
    assert "loopback" in str(caught.value)
    assert not (sshd.home / "never-ran").exists()


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_login_shell_that_exits_early_is_a_remote_error(sshd: Sshd) -> None:
    """A ``.bash_profile`` that exits before the script is a non-transient RemoteError."""
    profile = sshd.home / ".bash_profile"
    profile.write_text("echo 'account expired' >&2\nexit 7\n")
    try:
        async with await open_remote(sshd.endpoint()) as remote:
            with pytest.raises(RemoteError, match="did not run the command") as caught:
                await remote.run("echo never")
    finally:
        profile.unlink()
    assert "account expired" in str(caught.value)
    assert "exit status 7" in str(caught.value)
    assert not caught.value.transient


@pytest.mark.anyio
async def test_a_broken_ssh_config_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unparsable ~/.ssh/config is the user's config problem, named with file and line."""
    monkeypatch.setenv("HOME", str(tmp_path))
    dot_ssh = tmp_path / ".ssh"
    dot_ssh.mkdir()
    (dot_ssh / "known_hosts").write_text("")
    (dot_ssh / "config").write_text("Host broken\n  Port notanumber\n")
    with pytest.raises(ConfigError, match="line 2"):
        await open_remote(Endpoint(name="broken", host="broken"))


ANCESTRY = """
# Print the command line of the shell running us and of its ancestors, up to sshd.
pid=$$
for _ in 1 2 3 4 5 6; do
  tr '\\0' ' ' < "/proc/$pid/cmdline"; echo
  pid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status")
  [[ $pid -gt 1 ]] || break
done
"""


@pytest.mark.ssh
@pytest.mark.anyio
@pytest.mark.parametrize("accept_env", [False, True])
@pytest.mark.parametrize("sensitive", [False, True])
async def test_no_script_rides_in_a_command_line(
    sshd: Sshd, env_sshd: Sshd, sensitive: bool, accept_env: bool
) -> None:
    """Every script travels as data (env request, stdin): the only command line is the fixed
    bootstrap (14.2), whether or not the server accepts the env request."""
    marker = "SECRET-VALUE-4711"
    script = f": {marker}\n{ANCESTRY}"
    server = env_sshd if accept_env else sshd
    async with await open_remote(server.endpoint()) as remote:
        result = await remote.run(script, sensitive=sensitive)
    assert result.exit_status == 0
    assert marker not in result.stdout  # nothing of the script in any command line
    assert "base64" not in result.stdout
    assert EXEC_COMMAND.replace("'", "") in result.stdout


# Whether this bash was started with the script in its environment, and what its children get.
ENV_PROBE = """
tr '\\0' '\\n' </proc/$$/environ | grep -c '^LC_REMOTE_CHAIN=.' || true
env | grep -c '^LC_REMOTE_CHAIN=' || true
"""


@pytest.mark.ssh
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("accept_env", "sensitive", "via_env"),
    [(True, False, 1), (True, True, 0), (False, False, 0), (False, True, 0)],
)
async def test_the_script_rides_in_the_env_request_unless_refused_or_secret(
    sshd: Sshd, env_sshd: Sshd, accept_env: bool, sensitive: bool, via_env: int
) -> None:
    """With AcceptEnv the script arrives in the exec's own flight; without it (OpenSSH's own
    default) or when it carries secrets, from stdin: the same result either way, and the
    variable is gone before the script runs, so nothing it starts (sbatch) inherits it."""
    server = env_sshd if accept_env else sshd
    async with await open_remote(server.endpoint()) as remote:
        result = await remote.run(f"{ENV_PROBE}echo done; exit 5", sensitive=sensitive)
    assert result == CommandResult(
        exit_status=5, stdout=f"{via_env}\n0\ndone\n", stderr="", noise=""
    )


@pytest.mark.ssh
@pytest.mark.anyio
async def test_scripts_up_to_the_env_cap_ride_in_env_and_bigger_ones_on_stdin(
    env_sshd: Sshd,
) -> None:
    """The cap for OpenSSH's sshd (96 KiB: its packets may be 256 KiB, and Linux's limit per
    environment string is 128 KiB; other servers get 32 KiB less 64 bytes, the packet every
    SSH server must accept, RFC 4253 6.1) is the boundary: a wrapped script of exactly the
    cap runs from the env request, one byte more from stdin."""
    overhead = len(wrap("")[0].encode())
    async with await open_remote(env_sshd.endpoint()) as remote:
        for size, via_env in [(OPENSSH_ENV_MAX_BYTES, 1), (OPENSSH_ENV_MAX_BYTES + 1, 0)]:
            head = f"{ENV_PROBE}# "
            script = head + "x" * (size - overhead - len(head))
            assert len(wrap(script)[0].encode()) == size
            result = await remote.run(script)
            assert (result.exit_status, result.stdout) == (0, f"{via_env}\n0\n")


@pytest.mark.ssh
@pytest.mark.anyio
async def test_an_env_string_over_max_arg_strlen_would_not_start(
    env_sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why the cap: past 128 KiB the login shell cannot execve bash (E2BIG), so nothing runs."""
    monkeypatch.setattr(markers, "OPENSSH_ENV_MAX_BYTES", 256 * 1024)
    async with await open_remote(env_sshd.endpoint()) as remote:
        with pytest.raises(RemoteError, match="did not run the command") as caught:
            await remote.run("# " + "x" * 140 * 1024 + "\necho ran")
    assert "Argument list too long" in str(caught.value)


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_session_that_ended_before_its_stdin_is_no_connect_error(
    env_sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command ran from the env request and the channel closed before stdin could leave
    (or the command could not start at all): asyncssh's "Channel not open for sending" read as
    "cannot connect", a ConnectError a caller may retry, which could run a command twice. The
    command's own output and status are the answer."""
    import asyncssh  # noqa: PLC0415 - the transport's import, as the module under test does

    def closed(self: object, data: object) -> None:
        raise BrokenPipeError("Channel not open for sending")

    monkeypatch.setattr(asyncssh.SSHWriter, "write", closed)
    async with await open_remote(env_sshd.endpoint()) as remote:
        result = await remote.run("echo ran; exit 3")
    assert (result.stdout, result.exit_status) == ("ran\n", 3)


@pytest.mark.ssh
@pytest.mark.anyio
async def test_debug_logs_never_hold_the_script(
    env_sshd: Sshd, caplog: pytest.LogCaptureFixture
) -> None:
    """With asyncssh and our loggers at DEBUG (-vv), no log record carries the script."""
    marker = "BUNDLE-CONTENT-0451"
    caplog.set_level(logging.DEBUG)
    asyncssh_logger = logging.getLogger("asyncssh")
    level = asyncssh_logger.level
    asyncssh_logger.setLevel(logging.DEBUG)
    try:
        with capture_logs() as events:
            async with await open_remote(env_sshd.endpoint()) as remote:
                assert (await remote.run(f": {marker}\necho ok")).stdout == "ok\n"
    finally:
        asyncssh_logger.setLevel(level)
    assert any("LC_REMOTE_CHAIN" in r.getMessage() for r in caplog.records)  # asyncssh did log
    assert not [r.getMessage() for r in caplog.records if marker in r.getMessage()]
    assert not [e for e in events if marker in repr(e)]


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_long_script_goes_on_stdin(sshd: Sshd) -> None:
    """A script far longer than any command line runs whole."""
    big = "x" * 400_000
    async with await open_remote(sshd.endpoint()) as remote:
        result = await remote.run(f"v='{big}'; echo ${{#v}}")
    assert result.stdout.splitlines()[0] == "400000"


@pytest.mark.ssh
@pytest.mark.anyio
@pytest.mark.parametrize(
    "rc_file",
    [
        "head -c 3000000 /dev/zero | tr '\\0' x\n",  # 3 MB of noise, then a working shell
        "while :; do echo endless login noise; done\n",  # never reaches the script
        "while :; do echo endless login noise >&2; done\n",  # the same on stderr
    ],
    ids=["3MB", "endless-stdout", "endless-stderr"],
)
async def test_a_flooding_login_shell_is_stopped_at_the_cap(tmp_path: Path, rc_file: str) -> None:
    """Output past max_output_bytes is an error naming the host, not the client's memory (14.4)."""
    with running_sshd(tmp_path) as server:
        (server.home / ".bash_profile").write_text(rc_file)
        endpoint = server.endpoint(max_output_bytes=1024 * 1024, command_timeout=20)
        async with await open_remote(endpoint) as remote:
            started = time.monotonic()
            with pytest.raises(RemoteError, match=r"loopback printed more than 1048576 bytes"):
                await remote.run("echo never-trusted")
            assert time.monotonic() - started < 15
            # The connection is still usable for the next command's own verdict.
            (server.home / ".bash_profile").write_text("")
            assert (await remote.run("echo ok")).stdout == "ok\n"
