"""The persistent connection's agent, with a fake Remote at the seam: its
folder and socket are private, another user is refused, results and errors travel back as
the direct path gives them, and a changed host key or a stale socket retires it."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pwd
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from otheruser import TEST_USER, as_test_user
from structlog.testing import capture_logs

from remote_chain.config import load_profile
from remote_chain.core.durations import parse_persist
from remote_chain.errors import ConfigError, ConnectError, RemoteTimeout
from remote_chain.transport import agent, agentd, privsock
from remote_chain.transport.base import CommandResult, Remote
from remote_chain.transport.endpoint import Endpoint


class _FakeRemote:
    """Answers ``echo`` scripts; ``slow`` blocks; ``timeout`` raises RemoteTimeout."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.name = endpoint.name
        self.sensitive: list[bool] = []
        self.closed = False

    async def run(
        self, script: str, *, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        self.sensitive.append(sensitive)
        if script == "timeout":
            raise RemoteTimeout("command on fake took longer than 1 s", host=self.name)
        if script == "slow":
            await anyio.sleep(60)
        return CommandResult(0, f"ran {script}\n", "", "motd\n")

    async def aclose(self) -> None:
        self.closed = True

    async def __aenter__(self) -> _FakeRemote:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# Connects, sends a run request, prints "closed" when the agent hangs up unanswered (before
# or after reading the request: EOF, a broken pipe or a reset).
_PEER_PROBE = (
    "import json,socket,sys\n"
    "s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
    "try:\n"
    ' s.sendall(json.dumps({"v":1,"op":"run","script":"id","fingerprint":sys.argv[2]})'
    '.encode()+b"\\n")\n'
    " print('answered' if s.recv(1000) else 'closed')\n"
    "except (BrokenPipeError, ConnectionResetError):\n print('closed')\n"
)


@contextlib.contextmanager
def _open_folder() -> Iterator[Path]:
    """A folder every user may enter (pytest's own tmp folders are 700 for root)."""
    with tempfile.TemporaryDirectory(prefix="rc-agent-test-") as name:
        Path(name).chmod(0o755)
        yield Path(name)


def _reachable(path: Path) -> None:
    path.chmod(0o777)  # on purpose: only the uid check stands in the way


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _endpoint(tmp_path: Path, persist: float = 60) -> Endpoint:
    known_hosts = tmp_path / "known_hosts"
    if not known_hosts.exists():
        known_hosts.write_text("[127.0.0.1]:2222 ssh-ed25519 AAAA\n")
    return Endpoint(
        name="fake",
        host="127.0.0.1",
        known_hosts=known_hosts,
        persist=persist,
        agent_dir=tmp_path / "state" / "agent",
    )


@pytest.fixture
async def served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Endpoint, Path, list[_FakeRemote]]]:
    """An agent serving a fake remote in this event loop; stopped after the test."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    endpoint = _endpoint(tmp_path)
    path = agent.socket_path(endpoint)
    remotes: list[_FakeRemote] = []

    async def opener(ep: Endpoint) -> Remote:
        remotes.append(_FakeRemote(ep))
        return remotes[-1]

    ready = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: agentd.serve(endpoint, path, opener, ready=lambda _line: ready.set()))
        await ready.wait()
        yield endpoint, path, remotes
        await agent.request(path, {"op": "stop"})


def test_folder_must_be_ours_and_private(tmp_path: Path) -> None:
    """The socket folder is created 700; a group/other-readable or symlinked one is refused."""
    made = privsock.private_folder(tmp_path / "a" / "agent")
    assert made.stat().st_mode & 0o777 == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    with pytest.raises(ConfigError, match="mode 755"):
        privsock.private_folder(loose)
    link = tmp_path / "link"
    link.symlink_to(made)
    with pytest.raises(ConfigError, match="symlink"):
        privsock.private_folder(link)


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    """A 700 folder owned by someone else is never used."""
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, pwd.getpwnam(TEST_USER).pw_uid, -1)
    with pytest.raises(ConfigError, match="belongs to uid"):
        privsock.private_folder(theirs)


@pytest.mark.anyio
async def test_results_and_errors_travel_back(
    served: tuple[Endpoint, Path, list[_FakeRemote]],
) -> None:
    """Through the agent: the same CommandResult, the same error class naming the cluster."""
    endpoint, path, remotes = served
    assert path.stat().st_mode & 0o777 == 0o600
    remote = agent.AgentRemote(endpoint, path)
    result = await remote.run("echo hi", sensitive=True)
    assert result == CommandResult(0, "ran echo hi\n", "", "motd\n")
    assert remotes[0].sensitive == [True]
    with pytest.raises(RemoteTimeout, match="took longer") as caught:
        await remote.run("timeout")
    assert caught.value.host == "fake"
    assert len(remotes) == 1  # one connection for every command


@pytest.mark.anyio
async def test_changed_host_key_retires_the_agent(
    served: tuple[Endpoint, Path, list[_FakeRemote]], tmp_path: Path
) -> None:
    """A known_hosts edit changes the fingerprint: the agent answers 'stale' and exits."""
    endpoint, path, _ = served
    remote = agent.AgentRemote(endpoint, path)
    assert (await remote.run("a")).exit_status == 0
    (tmp_path / "known_hosts").write_text("[127.0.0.1]:2222 ssh-ed25519 BBBB\n")
    await anyio.sleep(agent.WATCH_PERIOD * 2.5)  # the watcher looks once a second
    assert not path.exists()
    assert await agent.request(path, {"op": "ping"}) is None


@pytest.mark.anyio
async def test_stale_socket_falls_back_with_one_log_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A socket nobody answers on (agent killed) is removed; the command goes direct."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    endpoint = _endpoint(tmp_path, persist=0)
    path = agent.socket_path(endpoint)
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))
    dead.close()  # the file stays, nobody listens: ECONNREFUSED
    with capture_logs() as logs:
        assert await agent.open_via_agent(endpoint) is None
    assert [e["event"] for e in logs] == ["agent_unavailable"]
    assert not path.exists()


@pytest.mark.anyio
async def test_no_agent_and_none_wanted_is_silent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without persist and without a socket: the direct path, no folder made, no log."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    endpoint = _endpoint(tmp_path, persist=0)
    with capture_logs() as logs:
        assert await agent.open_via_agent(endpoint) is None
    assert logs == []
    assert not (tmp_path / "state").exists()


@pytest.mark.anyio
async def test_agent_gone_mid_command_is_a_connect_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that dies while a command runs: ConnectError (it may have run), like a cut
    SSH connection; the session then goes direct (here: the direct connect fails, logged)."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    endpoint = _endpoint(tmp_path)
    path = agent.socket_path(endpoint)

    async def opener(ep: Endpoint) -> Remote:
        return _FakeRemote(ep)

    ready = anyio.Event()
    remote = agent.AgentRemote(endpoint, path)
    opened: list[str] = []

    async def go_direct(why: str) -> Remote:
        opened.append(why)
        return _FakeRemote(endpoint)

    monkeypatch.setattr(remote, "_go_direct", go_direct)
    server_scope = anyio.CancelScope()

    async def run_server() -> None:
        with server_scope:
            await agentd.serve(endpoint, path, opener, ready=lambda _l: ready.set())

    async def kill_soon() -> None:
        await anyio.sleep(0.5)
        server_scope.cancel()  # the agent dies while "slow" runs

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_server)
        await ready.wait()
        tg.start_soon(kill_soon)
        with pytest.raises(ConnectError, match="went away"):
            await remote.run("slow")
    assert opened
    assert (await remote.run("after")).stdout == "ran after\n"


@pytest.mark.skipif(os.getuid() != 0, reason="runs a client as another user with runuser")
@pytest.mark.anyio
async def test_another_user_cannot_reach_the_socket(
    served: tuple[Endpoint, Path, list[_FakeRemote]],
) -> None:
    """A second user on the machine: the 700 folder stops them before the socket does."""
    _, path, _ = served
    probe = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX)\n"
        "try:\n s.connect(sys.argv[1])\nexcept OSError as e:\n print(type(e).__name__)\n"
        "else:\n print('connected')\n"
    )
    done = await anyio.to_thread.run_sync(as_test_user, [probe, str(path)])
    assert done.stdout.strip() == "PermissionError", done.stderr


@pytest.mark.skipif(os.getuid() != 0, reason="runs a client as another user with runuser")
@pytest.mark.anyio
async def test_another_users_peer_is_refused_even_if_reachable(tmp_path: Path) -> None:
    """SO_PEERCRED: a peer of another uid gets no answer even on a reachable socket."""
    endpoint = _endpoint(tmp_path)
    with _open_folder() as folder:
        path = folder / "agent.sock"
        served = agentd._Agent(endpoint, path, _FakeRemote(endpoint))
        listener = await anyio.create_unix_listener(path)
        _reachable(path)
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, served.handle)
            done = await anyio.to_thread.run_sync(
                as_test_user, [_PEER_PROBE, str(path), served.fingerprint]
            )
            tg.cancel_scope.cancel()
    assert done.stdout.strip() == "closed", done.stderr


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("10m", 600), ("2h", 7200), ("1d", 86400), ("off", 0),
                          ("0", 0), ("30", 1800), ("1:00:00", 3600)],
)  # fmt: skip
def test_persist_forms(text: str, seconds: int) -> None:
    """persist takes 90s/10m/2h/1d, a Slurm duration (a bare number is minutes), or off."""
    assert parse_persist(text) == seconds


def test_persist_in_a_profile(tmp_path: Path) -> None:
    """A profile's persist is validated with the file and field named; not for openssh."""
    base = 'host = "h"\nworkdir = "/w"\n'
    good = tmp_path / "good.toml"
    good.write_text(base + 'persist = "10m"\n')
    assert load_profile(good).persist == 600
    bad = tmp_path / "bad.toml"
    bad.write_text(base + 'persist = "soon"\n')
    with pytest.raises(ConfigError, match="persist") as caught:
        load_profile(bad)
    assert "bad.toml" in str(caught.value)
    openssh = tmp_path / "cm.toml"
    openssh.write_text(base + 'transport = "openssh"\npersist = "10m"\n')
    with pytest.raises(ConfigError, match="persist"):
        load_profile(openssh)


@pytest.mark.anyio
async def test_a_stale_agent_refuses_and_the_command_goes_direct(
    served: tuple[Endpoint, Path, list[_FakeRemote]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client whose endpoint differs gets 'stale' before anything runs: it goes direct,
    with one log line, and the agent exits."""
    endpoint, path, remotes = served
    changed = dataclasses.replace(endpoint, command_timeout=99)
    remote = agent.AgentRemote(changed, path)
    direct = _FakeRemote(changed)

    async def go_direct(why: str) -> Remote:
        agent._log.warning("agent_unavailable", cluster=changed.name, reason=why)
        return direct

    monkeypatch.setattr(remote, "_go_direct", go_direct)
    with capture_logs() as logs:
        result = await remote.run("echo direct")
    assert result.stdout == "ran echo direct\n"
    assert direct.sensitive == [False]
    assert remotes[0].sensitive == []  # nothing ran in the agent
    assert [e["event"] for e in logs] == ["agent_unavailable"]


@pytest.mark.anyio
async def test_garbage_from_a_peer_does_not_take_the_agent_down(
    served: tuple[Endpoint, Path, list[_FakeRemote]],
) -> None:
    """A malformed request is dropped; the agent keeps serving."""
    endpoint, path, _ = served
    async with await anyio.connect_unix(path) as stream:
        await stream.send(b"{not json\n")
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            await stream.receive()
    remote = agent.AgentRemote(endpoint, path)
    assert (await remote.run("still")).stdout == "ran still\n"


def test_another_host_s_agent_has_another_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two machines sharing an NFS home (no XDG_RUNTIME_DIR) never name the same socket: one
    would find the other's refused, take it for stale and unlink it."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    endpoint = Endpoint(name="c", host="h", agent_dir=tmp_path / "agent")
    here = agent.socket_path(endpoint)
    assert agent.socket_path(endpoint) == here  # stable on one host
    real = os.uname()
    other = os.uname_result((real.sysname, "login2", real.release, real.version, real.machine))
    monkeypatch.setattr(os, "uname", lambda: other)
    assert agent.socket_path(endpoint) != here
