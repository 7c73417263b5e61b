"""The warm launcher (issue 13, P8): its wire, and a real fork server serving real commands
byte for byte as the process itself would, relaying signals, surviving clients and dying
children, refusing other users, other checkouts and stale sockets."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from otheruser import as_test_user

from remote_chain import launch, privsock, warmwire
from remote_chain.remote import agent
from remote_chain.remote.endpoint import Endpoint
from remote_chain.settings import Settings

REPO = Path(__file__).resolve().parent.parent
THIN = [sys.executable, "-c", "from remote_chain.launch import main; main()"]
RUN_ID = "20261130-000000-abcd"


# --- the wire (pure) -------------------------------------------------------------------------
def _request() -> warmwire.Request:
    return warmwire.Request(
        identity="abc",
        argv=["remote-chain", "status", "caf\udce9", "--json"],  # b"caf\xe9": not UTF-8
        env={"HOME": "/root", "ODD": "\udcff\udcfe", "EMPTY": "", "NL": "a\nb"},
        umask=0o027,
        streams=[("utf-8", "strict"), ("utf-8", "strict"), ("ascii", "backslashreplace")],
        sent_at=12.5,
    )


def test_a_request_survives_the_wire_cut_anywhere() -> None:
    """Encoded, cut at every byte and decoded, a request is the same (non-UTF-8 bytes too)."""
    data = warmwire.encode(_request().to_json()) + warmwire.encode({"signal": 2})
    for cut in range(len(data) + 1):
        decoder = warmwire.Decoder()
        got = decoder.feed(data[:cut]) + decoder.feed(data[cut:])
        assert len(got) == 2
        assert warmwire.parse_request(got[0]) == _request()
        assert got[1] == {"signal": 2}
    assert os.fsencode(_request().argv[2]) == b"caf\xe9"


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("argv", [], "argv"),
        ("argv", ["x", 1], "argv"),
        ("env", {"A=B": "c"}, "env"),
        ("env", {"A": 1}, "env"),
        ("umask", 0o1000, "umask"),
        ("umask", "022", "umask"),
        ("streams", [["utf-8", "strict"]], "streams"),
        ("sent_at", None, "sent_at"),
    ],
)
def test_a_malformed_request_is_refused_naming_its_field(
    field: str, value: object, named: str
) -> None:
    """Each wrong field is a WireError that names it."""
    doc = {**_request().to_json(), field: value}
    with pytest.raises(warmwire.WireError, match=named):
        warmwire.parse_request(doc)


@pytest.mark.parametrize(
    "data",
    [
        warmwire.HEADER.pack(warmwire.MAX_MESSAGE + 1),
        warmwire.HEADER.pack(2) + b"[]",
        warmwire.HEADER.pack(3) + b"{x}",
        warmwire.HEADER.pack(2) + b"\xff\xfe",
    ],
)
def test_bad_bytes_are_a_wire_error(data: bytes) -> None:
    """Oversized, non-object, non-JSON and non-ASCII messages are refused."""
    with pytest.raises(warmwire.WireError):
        warmwire.Decoder().feed(data)


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({"XDG_RUNTIME_DIR": "/run/user/7", "REMOTE_CHAIN_STATE_DIR": "/s"}, "/run/user/7"),
        ({"XDG_RUNTIME_DIR": "relative", "REMOTE_CHAIN_STATE_DIR": "/s"}, None),
        ({"REMOTE_CHAIN_STATE_DIR": "/s"}, None),
        ({"XDG_STATE_HOME": "/xdg"}, None),
        ({}, None),
    ],
)
def test_the_thin_client_looks_where_the_agents_live(
    env: dict[str, str], want: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher's folder is the agents' socket folder, read from the same environment."""
    for name in ("XDG_RUNTIME_DIR", "REMOTE_CHAIN_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    state = Settings().state_home()
    endpoint = Endpoint(name="x", host="h", agent_dir=state / "agent")
    expected = agent.agent_folder(endpoint)
    assert launch.socket_folder(os.environ) == str(expected)
    if want is not None:
        assert str(expected).startswith(want)


def test_a_socket_that_is_not_private_is_named(tmp_path: Path) -> None:
    """Not a socket, a loose mode, a loose folder: each is a reason, never a silent use."""
    folder = privsock.private_folder(tmp_path / "f")
    plain = folder / "plain"
    plain.write_text("")
    assert "not a socket" in str(privsock.socket_problem(plain))
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(folder / "s.sock"))
        (folder / "s.sock").chmod(0o666)
        assert "must be 600" in str(privsock.socket_problem(folder / "s.sock"))
        (folder / "s.sock").chmod(0o600)
        assert privsock.socket_problem(folder / "s.sock") is None
        folder.chmod(0o755)
        assert "must be 700" in str(privsock.socket_problem(folder / "s.sock"))
    with pytest.raises(FileNotFoundError):
        privsock.socket_problem(folder / "none.sock")


# --- a real fork server ----------------------------------------------------------------------
@dataclass
class Launcher:
    process: subprocess.Popen[bytes]
    folder: Path
    env: dict[str, str]
    cwd: Path

    @property
    def socket(self) -> Path:
        return self.folder / launch.socket_name()

    def ping(self) -> dict[str, object]:
        answer = launch.ask(self.folder, {"op": "ping"})
        assert answer is not None, "the launcher does not answer"
        return answer

    def served(self) -> int:
        return int(str(self.ping()["served"]))


_AGENTS: list[socket.socket] = []  # the stand-ins of this test session, kept listening


@pytest.fixture(autouse=True)
def _close_stand_ins() -> Iterator[None]:
    yield
    while _AGENTS:
        _AGENTS.pop().close()


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REMOTE_CHAIN_", "XDG_"))}
    return env | {"PYTHONPATH": str(REPO), "REMOTE_CHAIN_STATE_DIR": str(state)}


def _start(folder: Path, env: dict[str, str], persist: float = 60) -> subprocess.Popen[bytes]:
    """A launcher for ``folder``, beside an agent's socket (it lives as long as one is there)."""
    privsock.private_folder(folder)
    stand_in = socket.socket(socket.AF_UNIX)  # for the agent: listens, never answers
    stand_in.bind(str(folder / "0123456789abcdef01234567.sock"))
    stand_in.listen(64)
    _AGENTS.append(stand_in)
    process = subprocess.Popen(
        [sys.executable, "-m", "remote_chain.warm", str(folder), str(persist)],
        env=env,
        cwd="/",  # as launch.ensure starts it: `-m` puts its folder first on sys.path
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not any(folder.glob("warm-*.sock")):  # another checkout's has another name
        assert process.poll() is None, "the launcher exited"
        assert time.monotonic() < deadline, "the launcher did not bind its socket"
        time.sleep(0.05)
    return process


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    """A fork server in a private state folder, with a profile and a config beside it."""
    state = tmp_path / "state"
    env = _env(state)
    folder = state / "agent"
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    (clusters / "p.toml").write_text('host = "eos"\nworkdir = "/tmp/rc"\n')
    (tmp_path / "s.yaml").write_text(
        'driver:\n  runner: "python3 run.py"\n  benchmarks:\n    b0: {}\n    b1: {}\n'
    )
    process = _start(folder, env)
    try:
        yield Launcher(process, folder, env, tmp_path)
    finally:
        _stop(folder, process)


def _stop(folder: Path, process: subprocess.Popen[bytes]) -> None:
    """Ask the launcher to stop, and reap it (killed if it does not go within 10 s)."""
    launch.ask(folder, {"op": "stop"})
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _cli(
    launcher: Launcher, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*THIN, *args],
        env=launcher.env if env is None else env,
        cwd=launcher.cwd if cwd is None else cwd,
        capture_output=True,
        timeout=60,
        check=False,
    )


def _both(
    launcher: Launcher, *args: str, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[bytes], subprocess.CompletedProcess[bytes]]:
    """The command through the launcher (checked: it served it) and in its own process."""
    before = launcher.served()
    through = _cli(launcher, *args, cwd=cwd)
    assert launcher.served() == before + 1, through.stderr
    alone = _cli(launcher, *args, env={**launcher.env, "REMOTE_CHAIN_LAUNCHER": "off"}, cwd=cwd)
    return through, alone


@pytest.mark.parametrize(
    "args",
    [
        ["clusters"],
        ["--clusters-dir", "clusters", "clusters", "--json"],
        ["--clusters-dir", "clusters", "render", "s.yaml", "-c", "p"],
        ["--clusters-dir", "clusters", "render", "s.yaml", "-c", "p", "-b", "nope"],  # bad input
        ["--clusters-dir", "clusters", "render", "missing.yaml", "-c", "nope", "--json"],
        ["status", RUN_ID, "--json"],  # no such run: exit 2
        ["no-such-command"],  # click's usage error
        ["--help"],
        ["status", "--help"],
    ],
)
def test_a_command_through_the_launcher_is_byte_for_byte_the_same(
    launcher: Launcher, args: list[str]
) -> None:
    """stdout, stderr and the exit code equal the command run in its own process."""
    through, alone = _both(launcher, *args)
    assert (through.returncode, through.stdout, through.stderr) == (
        alone.returncode,
        alone.stdout,
        alone.stderr,
    )


def test_the_child_gets_the_clients_folder_environment_umask_and_stdin(
    launcher: Launcher, tmp_path: Path
) -> None:
    """A relative --clusters-dir, a state dir from the environment and stdin are the client's."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "clusters").mkdir(parents=True)
    (elsewhere / "clusters" / "q.toml").write_text('host = "h2"\nworkdir = "/w"\n')
    through, alone = _both(launcher, "--clusters-dir", "clusters", "clusters", cwd=elsewhere)
    assert through.returncode == 0, through.stderr
    assert b" q " in through.stdout
    assert through.stdout == alone.stdout
    # stdin: the child reads the client's; the launched run uses the same bytes.
    code = (
        "import os,sys; os.environ['REMOTE_CHAIN_LAUNCHER']=''; "
        "from remote_chain.launch import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "clusters"],
        env=launcher.env,
        cwd=elsewhere,
        input=b"",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0


def test_a_deleted_working_folder_behaves_as_in_its_own_process(
    launcher: Launcher, tmp_path: Path
) -> None:
    """A client whose folder was removed: the same output either way (the folder travels as
    an fd; a command that needs its path fails as it would alone)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (
        "import os,sys,subprocess\n"
        "os.chdir(sys.argv[1]); os.rmdir(sys.argv[1])\n"
        "d=subprocess.run(sys.argv[2:], capture_output=True)\n"
        "sys.stdout.buffer.write(repr((d.returncode, d.stdout, d.stderr)).encode())\n"
    )
    argv = [sys.executable, "-c", script, str(gone), *THIN, "--clusters-dir", "/nonexistent"]
    argv += ["render", "s.yaml", "-c", "p"]
    before = launcher.served()
    through = subprocess.run(argv, env=launcher.env, capture_output=True, timeout=60, check=True)
    served = launcher.served() - before
    gone.mkdir()
    off = {**launcher.env, "REMOTE_CHAIN_LAUNCHER": "off"}
    alone = subprocess.run(argv, env=off, capture_output=True, timeout=60, check=True)
    assert through.stdout == alone.stdout
    assert served in (0, 1)  # served, or run by the client itself if "." cannot be opened


def _hanging_profile(launcher: Launcher) -> tuple[socket.socket, list[str]]:
    """A profile whose host accepts TCP and never speaks: `doctor` on it waits."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    (launcher.cwd / "clusters" / "hang.toml").write_text(
        f'host = "127.0.0.1"\nport = {port}\nworkdir = "/w"\n'
        f'known_hosts = "{launcher.cwd / "kh"}"\n'
    )
    (launcher.cwd / "kh").write_text("")
    return silent, ["--clusters-dir", "clusters", "doctor", "-c", "hang", "--json"]


def _children(launcher: Launcher, count: int) -> list[int]:
    deadline = time.monotonic() + 20
    while True:
        children = [int(p) for p in launcher.ping()["children"]]  # type: ignore[attr-defined]
        if len(children) == count or time.monotonic() > deadline:
            return children
        time.sleep(0.05)


def _popen(launcher: Launcher, args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*THIN, *args],
        env={**launcher.env, "REMOTE_CHAIN_CONNECT_TIMEOUT": "60"},
        cwd=launcher.cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, -15), (signal.SIGHUP, -1)]
)
def test_signals_reach_the_child(launcher: Launcher, sig: signal.Signals, code: int) -> None:
    """Ctrl-C (SIGINT), SIGTERM and SIGHUP to the thin client reach the hanging child; the
    client ends as the command's own process would: Ctrl-C exits 130 (the CLI's
    "interrupted"), SIGTERM and SIGHUP kill it (a parent sees the signal, not an exit 128+N:
    a shell loop stops, subprocess reports -N)."""
    silent, args = _hanging_profile(launcher)
    with silent:
        client = _popen(launcher, args)
        (child,) = _children(launcher, 1)
        time.sleep(0.5)  # into the connect
        client.send_signal(sig)
        _, err = client.communicate(timeout=30)
    assert client.returncode == code, err
    assert _wait_gone(child)
    assert _children(launcher, 0) == []


def test_a_client_that_goes_away_hangs_up_its_child(launcher: Launcher) -> None:
    """SIGKILL to the thin client: its child gets SIGHUP and is reaped (no zombie left)."""
    silent, args = _hanging_profile(launcher)
    with silent:
        client = _popen(launcher, args)
        (child,) = _children(launcher, 1)
        client.kill()
        client.communicate(timeout=30)
        assert _wait_gone(child)
    assert _children(launcher, 0) == []
    zombies = [
        p.name
        for p in Path("/proc").iterdir()
        if p.name.isdigit()
        and _stat_field(p, 1) == str(launcher.process.pid)
        and _stat_field(p, 0) == "Z"
    ]
    assert zombies == []


def _stat_field(proc: Path, index: int) -> str:
    """Field ``index`` after the command name in /proc/PID/stat: 0 state, 1 ppid."""
    with contextlib.suppress(OSError, IndexError):
        return (proc / "stat").read_text().rsplit(")", 1)[1].split()[index]
    return ""


def test_a_launcher_killed_mid_command_takes_its_child_and_says_may_have_run(
    launcher: Launcher,
) -> None:
    """SIGKILL to the server: the child dies with it; the client exits 3 (ConnectError,
    may have run) with one log line; the next command finds a stale socket and runs itself."""
    silent, args = _hanging_profile(launcher)
    with silent:
        client = _popen(launcher, args)
        (child,) = _children(launcher, 1)
        launcher.process.kill()
        launcher.process.wait()
        _, err = client.communicate(timeout=30)
        assert _wait_gone(child)
    assert client.returncode == 3
    assert err.decode().count("launcher_gone") == 1
    after = _cli(launcher, "clusters")
    assert after.returncode == 0
    assert after.stderr.decode().count("launcher_unavailable") == 1
    assert "stale socket" in after.stderr.decode()
    assert not launcher.socket.exists()  # removed: the next command pays only a stat
    again = _cli(launcher, "clusters")
    assert (again.returncode, again.stderr) == (0, b"")


def test_another_interpreter_or_flags_run_themselves_silently(launcher: Launcher) -> None:
    """A client whose identity differs (here: -W flags) is not served, and says nothing."""
    before = launcher.served()
    done = subprocess.run(
        [sys.executable, "-W", "default", *THIN[1:], "clusters"],
        env=launcher.env,
        cwd=launcher.cwd,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    assert launcher.served() == before


def test_the_launcher_exits_when_its_package_changes(tmp_path: Path) -> None:
    """A copy of the package served by a launcher: a changed file retires the launcher, and
    a client of the changed package is not served by it."""
    copy = tmp_path / "checkout"
    shutil.copytree(
        REPO / "remote_chain", copy / "remote_chain", ignore=shutil.ignore_patterns("__pycache__")
    )
    env = _env(tmp_path / "state") | {"PYTHONPATH": str(copy)}
    folder = tmp_path / "state" / "agent"
    process = _start(folder, env)
    try:
        target = copy / "remote_chain" / "durations.py"
        target.write_text(target.read_text() + "\n# changed\n")
        process.wait(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0
    assert not any(folder.glob("warm-*.sock"))


def test_a_socket_with_a_loose_mode_is_refused_with_one_line(launcher: Launcher) -> None:
    """A launcher socket that is not mode 600 is not used: one log line, the command runs."""
    before = launcher.served()
    launcher.socket.chmod(0o660)
    done = _cli(launcher, "clusters", "--json")
    launcher.socket.chmod(0o600)
    assert done.returncode == 0
    assert done.stderr.decode().count("launcher_unavailable") == 1
    assert launcher.served() == before


def test_ping_and_stop_are_answered_and_stop_removes_the_socket(launcher: Launcher) -> None:
    """`agent stop`'s request: the launcher says so, removes its socket and exits."""
    answer = launch.ask(launcher.folder, {"op": "stop"})
    assert answer == {"stopped": launcher.process.pid}
    assert launcher.process.wait(timeout=10) == 0
    assert not launcher.socket.exists()


def test_the_launcher_exits_when_idle(tmp_path: Path) -> None:
    """No request for `persist` seconds: the launcher removes its socket and exits."""
    folder = tmp_path / "state" / "agent"
    process = _start(folder, _env(tmp_path / "state"), persist=1)
    assert process.wait(timeout=15) == 0
    assert not any(folder.glob("warm-*.sock"))


_PROBE = (
    "import socket,struct,sys\n"
    "s=socket.socket(socket.AF_UNIX)\n"
    "try:\n s.connect(sys.argv[1])\nexcept OSError as e:\n print(type(e).__name__); sys.exit()\n"
    f'body=b\'{{"op":"ping","v":{warmwire.PROTOCOL}}}\'\n'
    "try:\n"
    " s.sendall(struct.pack('>I',len(body))+body)\n"
    " print('answered' if s.recv(1000) else 'closed')\n"
    "except (BrokenPipeError, ConnectionResetError):\n print('closed')\n"
)


@pytest.mark.skipif(os.getuid() != 0, reason="runs a client as another user with runuser")
def test_another_user_cannot_reach_the_launcher(launcher: Launcher) -> None:
    """A second user: the 700 folder stops them before the socket does."""
    done = as_test_user([_PROBE, str(launcher.socket)])
    assert done.stdout.strip() == "PermissionError", done.stderr
    assert launcher.served() == 0


@pytest.mark.skipif(os.getuid() != 0, reason="runs a client as another user with runuser")
def test_after_su_another_users_runtime_dir_is_passed_over_silently(tmp_path: Path) -> None:
    """`su` keeps the first user's XDG_RUNTIME_DIR (mode 700): no launcher of ours can be
    in it, so the command runs itself without a log line on every command."""
    tmp_path.chmod(0o755)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    (runtime / "remote-chain").mkdir(mode=0o700)
    done = as_test_user(
        [
            "import os, sys; sys.path.insert(0, sys.argv[1]); "
            "os.environ['XDG_RUNTIME_DIR'] = sys.argv[2]; "
            "from remote_chain import launch; print(launch.launched(['remote-chain', 'x']))",
            str(REPO),
            str(runtime),
        ]
    )
    assert (done.stdout, done.stderr) == ("None\n", "")


@pytest.mark.skipif(os.getuid() != 0, reason="runs a client as another user with runuser")
def test_another_users_peer_is_refused_even_if_reachable() -> None:
    """SO_PEERCRED: with the folder and socket opened on purpose, another user's request
    is closed unanswered."""
    with tempfile.TemporaryDirectory(prefix="rc-warm-test-") as name:
        Path(name).chmod(0o755)
        state = Path(name) / "state"
        folder = state / "agent"
        process = _start(folder, _env(state))
        try:
            state.chmod(0o755)
            folder.chmod(0o755)
            (folder / launch.socket_name()).chmod(0o777)
            done = as_test_user([_PROBE, str(folder / launch.socket_name())])
            folder.chmod(0o700)
            (folder / launch.socket_name()).chmod(0o600)
            answer = launch.ask(folder, {"op": "stop"})
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
    assert done.stdout.strip() == "closed", done.stderr
    assert answer is not None


def test_past_the_cap_a_client_runs_itself(launcher: Launcher) -> None:
    """MAX_CHILDREN commands running: the next is answered busy, says so once and runs
    itself; the running ones are not disturbed."""
    from remote_chain.warm import MAX_CHILDREN  # noqa: PLC0415 - the server's module

    silent, args = _hanging_profile(launcher)
    clients: list[subprocess.Popen[bytes]] = []
    with silent:
        try:
            clients = [_popen(launcher, args) for _ in range(MAX_CHILDREN)]
            assert len(_children(launcher, MAX_CHILDREN)) == MAX_CHILDREN
            before = launcher.served()
            extra = _cli(launcher, "clusters", "--json")
            assert extra.returncode == 0
            assert extra.stderr.decode().count("launcher_unavailable") == 1
            assert "busy" in extra.stderr.decode()
            assert launcher.served() == before
            assert all(c.poll() is None for c in clients)
        finally:
            for client in clients:
                client.send_signal(signal.SIGINT)
            for client in clients:
                client.communicate(timeout=30)
    assert [c.returncode for c in clients] == [130] * MAX_CHILDREN
    assert _children(launcher, 0) == []


def test_the_launcher_exits_when_its_socket_is_removed(launcher: Launcher) -> None:
    """Its state folder cleaned up (the socket gone): the launcher exits by itself."""
    launcher.socket.unlink()
    assert launcher.process.wait(timeout=15) == 0


@pytest.mark.parametrize("how", ["removed", "killed"])
def test_the_launcher_exits_when_no_agent_is_left(launcher: Launcher, how: str) -> None:
    """The agents' sockets gone (`agent stop`, idle agents) or refusing (a killed agent's):
    the launcher follows them."""
    for path in launcher.folder.glob("*.sock"):
        if path.name.startswith("warm-"):
            continue
        for stand_in in list(_AGENTS):
            if stand_in.getsockname() == str(path):
                stand_in.close()  # nobody listens any more: a connect is refused
                _AGENTS.remove(stand_in)
        if how == "removed":
            path.unlink()
    assert launcher.process.wait(timeout=15) == 0
    assert not launcher.socket.exists()


def test_output_lost_on_a_full_disk_fails_as_in_its_own_process(launcher: Launcher) -> None:
    """stdout on a full disk (/dev/full): the interpreter's flush at exit fails, exit 120;
    the warm child must not report success for output that was never written."""
    codes = []
    for env in (launcher.env, {**launcher.env, "REMOTE_CHAIN_LAUNCHER": "off"}):
        with open("/dev/full", "wb") as full:
            done = subprocess.run(
                [*THIN, "clusters"],
                env=env,
                cwd=launcher.cwd,
                stdout=full,
                stderr=subprocess.PIPE,
                timeout=60,
                check=False,
            )
        codes.append((done.returncode, b"No space left on device" in done.stderr))
    assert launcher.served() == 1
    assert codes[0] == codes[1]
    assert codes[1][0] != 0


@contextlib.contextmanager
def _backlog_filled(path: str) -> Iterator[None]:
    """Connections to the listening socket at ``path`` until its backlog is full (a new
    connect gets EAGAIN), held open for the block."""
    fillers: list[socket.socket] = []
    try:
        while True:
            filler = socket.socket(socket.AF_UNIX)
            filler.setblocking(False)
            try:
                filler.connect(path)
            except BlockingIOError:
                filler.close()
                break
            fillers.append(filler)
        yield
    finally:
        for filler in fillers:
            filler.close()


def test_a_full_backlog_is_not_taken_for_a_stale_socket(tmp_path: Path) -> None:
    """A server too busy to accept (its listen backlog full: EAGAIN) is alive: the client
    runs the command itself but leaves the socket there; only a refused one is stale."""
    folder = privsock.private_folder(tmp_path / "agent")
    path = folder / launch.socket_name()
    busy = socket.socket(socket.AF_UNIX)
    busy.bind(str(path))
    path.chmod(0o600)
    busy.listen(0)
    try:
        with _backlog_filled(str(path)):
            cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
            try:
                argv = ["remote-chain", "clusters"]
                assert launch._through(str(path), argv, (0, 1, 2, cwd)) is None
            finally:
                os.close(cwd)
        assert path.exists(), "a live server's socket was removed as stale"
    finally:
        busy.close()
    with socket.socket(socket.AF_UNIX) as dead:  # bound, never listening: refused
        path.unlink()
        dead.bind(str(path))
        path.chmod(0o600)
        cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
        try:
            assert launch._through(str(path), ["remote-chain"], (0, 1, 2, cwd)) is None
        finally:
            os.close(cwd)
        assert not path.exists()


def test_each_host_has_its_own_socket_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Home folders on NFS: without XDG_RUNTIME_DIR two login nodes share the socket folder;
    a socket served on one host is refused on the other, which must not unlink it."""
    here = launch.socket_name()
    real = os.uname()
    other = os.uname_result((real[0], real[1] + "-other", *real[2:]))
    monkeypatch.setattr(os, "uname", lambda: other)
    assert launch.socket_name() != here


@pytest.mark.parametrize("what", ["getgid", "getegid", "getgroups"])
def test_a_client_with_other_groups_does_not_use_the_launcher(
    monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    """A fork inherits the server's credentials, not the client's: after `newgrp`/`sg`, or
    once the user was added to a group, the child would run (and create files) with the
    groups the server had. The identity tells them apart: such a client runs itself."""
    before = launch.identity()
    real = getattr(os, what)
    other = (lambda: [*real(), 4242]) if what == "getgroups" else (lambda: real() + 4242)
    monkeypatch.setattr(os, what, other)
    assert launch.identity() != before


def test_a_client_in_another_mount_namespace_does_not_use_the_launcher(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A container (Apptainer binds $HOME, where the socket folder falls back to) sees other
    files at the same paths: its argv's paths mean something else in the server's."""
    before = launch.identity()
    real = os.readlink

    def readlink(path: str, *args: object, **kwargs: object) -> str:
        if str(path) == "/proc/self/ns/mnt":
            return "mnt:[1]"
        return real(path)

    monkeypatch.setattr(os, "readlink", readlink)
    assert launch.identity() != before


def test_a_signal_at_the_fork_reaches_the_command_not_the_servers_handler(
    tmp_path: Path,
) -> None:
    """Ctrl-C as the command starts: the client relays it right after the child's pid. A
    child that has not yet reset its handlers would run the server's (stop: unlink the live
    socket) and swallow the signal, its command running on. Signals wait (blocked) across the
    fork until the child's own handlers are in place. The child's setup is slowed here to
    hold that window open."""
    state = tmp_path / "state"
    env = _env(state)
    folder = state / "agent"
    privsock.private_folder(folder)
    stand_in = socket.socket(socket.AF_UNIX)
    stand_in.bind(str(folder / "0123456789abcdef01234567.sock"))
    stand_in.listen(64)
    _AGENTS.append(stand_in)
    slowed = (
        "import sys, time; from remote_chain import warm; die = warm._die_with; "
        "warm._die_with = lambda parent: (time.sleep(1.0), die(parent)); "
        f"sys.argv = ['warm', {str(folder)!r}, '60']; warm.main()"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", slowed], env=env, cwd="/", start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while not any(folder.glob("warm-*.sock")):
            assert process.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (tmp_path / "clusters").mkdir()
        launcher = Launcher(process, folder, env, tmp_path)
        silent, args = _hanging_profile(launcher)
        with silent:
            client = _popen(launcher, args)
            deadline = time.monotonic() + 20
            while launcher.served() == 0:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            client.send_signal(signal.SIGINT)  # within the child's slowed setup
            _, err = client.communicate(timeout=30)
        # Before the CLI's own frame: what Python does with Ctrl-C during its imports.
        assert client.returncode == -signal.SIGINT, err
        assert b"KeyboardInterrupt" in err
        assert launcher.socket.exists(), "the child ran the server's handler"
    finally:
        _stop(folder, process)


def test_the_childs_stdin_reads_as_the_interpreters_own() -> None:
    """Python's sys.stdin on POSIX keeps "\\r\\n" and "\\r" (newline="\\n"): the child's
    rebuilt stdin must read the same text, not universal newlines."""
    probe = (
        "import sys; from remote_chain import warm; "
        "warm._std_streams([('utf-8', 'strict')] * 3); "
        "sys.stdout.write(repr(sys.stdin.read()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=b"a\r\nb\rc\n",
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
        check=True,
    )
    assert done.stdout.decode() == repr("a\r\nb\rc\n")  # as `python3 -c` reads it


def test_a_busy_agent_still_counts_as_one_left(launcher: Launcher) -> None:
    """An agent whose listen backlog is full (EAGAIN) is alive: the launcher stays."""
    agent_socket = _AGENTS[-1]
    agent_socket.listen(0)
    with _backlog_filled(agent_socket.getsockname()):
        time.sleep(3 * 1.0 + 0.5)  # three of the launcher's watches (warm.WATCH_PERIOD)
        assert launcher.process.poll() is None, "the launcher took a busy agent for gone"
        assert launcher.ping()["pid"] == launcher.process.pid


# --- a command runs once: the ready/go exchange ------------------------------------------------
def _client_against(
    tmp_path: Path, serve: Callable[[socket.socket], None]
) -> tuple[int | None, float]:
    """The thin client's answer (None: it runs the command itself) from a scripted server,
    and how long it took."""
    path = str(tmp_path / "w.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)

    def server() -> None:
        conn, _ = listener.accept()
        with conn:
            _, fds = warmwire.receive(conn, warmwire.Decoder())
            for fd in fds:
                os.close(fd)
            serve(conn)

    thread = threading.Thread(target=server)
    thread.start()
    folder = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    started = time.monotonic()
    try:
        code = launch._through(path, ["remote-chain", "clusters"], (0, 1, 2, folder))
        took = time.monotonic() - started
    finally:
        os.close(folder)
        thread.join(timeout=30)
        listener.close()
    return code, took


def test_a_launcher_that_stalls_after_go_is_may_have_run_and_never_run_here_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Once the client said "go" the server may fork at any moment: a client that then ran
    the command itself on a timeout (as before the exchange) would run it twice."""
    monkeypatch.setattr(launch, "REPLY_TIMEOUT_S", 0.5)
    told: list[dict[str, object] | None] = []

    def serve(conn: socket.socket) -> None:
        warmwire.send(conn, {"ready": True})
        told.append(warmwire.receive(conn, warmwire.Decoder())[0])
        time.sleep(1.5)  # forking, stalled: past the client's timeout

    code, _ = _client_against(tmp_path, serve)
    assert told == [{"go": True}]
    assert code == 3  # ConnectError: it may have run
    assert "launcher_gone" in capfd.readouterr().err


def test_the_exit_that_arrives_with_the_pid_is_the_clients_exit(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A command that ends before the client reads its pid (the client stopped, Ctrl-Z, or
    not scheduled after "go"): "pid" and "exit" come in one read. The exit is the command's,
    not "launcher_gone" (exit 3, "may have run") or a hang."""

    def serve(conn: socket.socket) -> None:
        warmwire.send(conn, {"ready": True})
        warmwire.receive(conn, warmwire.Decoder())
        conn.sendall(warmwire.encode({"pid": 4242}) + warmwire.encode({"exit": 7}))

    code, _ = _client_against(tmp_path, serve)
    assert code == 7
    assert "launcher_gone" not in capfd.readouterr().err


def test_a_go_that_came_too_late_runs_the_command_here(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """ "dropped": the server stopped waiting for "go" and did not fork: run it here."""

    def serve(conn: socket.socket) -> None:
        warmwire.send(conn, {"ready": True})
        warmwire.receive(conn, warmwire.Decoder())
        warmwire.send(conn, {"dropped": True})

    code, _ = _client_against(tmp_path, serve)
    assert code is None
    assert "stopped waiting" in capfd.readouterr().err


def test_a_silent_launcher_is_never_told_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No "ready" in time: the client runs the command itself and says nothing more, so the
    server, which forks only on "go", cannot run it too."""
    monkeypatch.setattr(launch, "REPLY_TIMEOUT_S", 0.5)
    after: list[bytes] = []

    def serve(conn: socket.socket) -> None:
        time.sleep(1.5)
        conn.settimeout(10)
        after.append(conn.recv(4096))

    code, took = _client_against(tmp_path, serve)
    assert code is None
    assert 0.5 <= took < 1.5
    assert after == [b""]  # closed, nothing sent after the request


def test_the_launcher_forks_only_after_go(launcher: Launcher) -> None:
    """A client that says "ready" but never "go" (stopped, or gone) is dropped unforked, and
    the launcher goes on serving."""
    raw = (
        "import json, os, socket, time\n"
        "from remote_chain import launch, warmwire\n"
        "path = os.path.join(launch.socket_folder(os.environ), launch.socket_name())\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(path)\n"
        "fds = (0, 1, 2, os.open('.', os.O_RDONLY | os.O_DIRECTORY))\n"
        "warmwire.send(s, launch._request(['remote-chain', 'clusters']).to_json(), fds)\n"
        "d = warmwire.Decoder()\n"
        "first = warmwire.receive(s, d)[0]\n"
        "time.sleep(2.0)\n"
        "print(json.dumps([first, warmwire.receive(s, d)[0]]))\n"
    )
    before = launcher.served()
    done = subprocess.run(
        [sys.executable, "-c", raw],
        env=launcher.env,
        cwd=launcher.cwd,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == '[{"ready": true}, {"dropped": true}]'
    assert launcher.served() == before
    assert launcher.ping()["children"] == []
    through, alone = _both(launcher, "clusters")
    assert (through.returncode, through.stdout) == (alone.returncode, alone.stdout)


@pytest.mark.parametrize("what", ["rlimit", "nice", "affinity", "job"])
def test_a_client_with_other_limits_or_in_a_job_step_does_not_use_the_launcher(
    monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    """A forked child keeps the server's resource limits, niceness and CPU affinity, and runs
    outside the client's Slurm job step: a client with its own (`ulimit -v`, `nice`,
    `taskset`, a batch script's `srun`) runs itself."""
    import resource  # noqa: PLC0415

    before = launch.identity()
    if what == "rlimit":
        real = resource.getrlimit
        monkeypatch.setattr(
            resource, "getrlimit", lambda r: (1, 1) if r == resource.RLIMIT_AS else real(r)
        )
    elif what == "nice":
        monkeypatch.setattr(os, "getpriority", lambda *_: 19)
    elif what == "affinity":
        monkeypatch.setattr(os, "sched_getaffinity", lambda _: {4242})
    else:
        monkeypatch.setenv("SLURM_JOB_ID", "4242")
    assert launch.identity() != before


def test_a_client_in_a_job_step_runs_the_command_itself(launcher: Launcher) -> None:
    """End to end: a command from inside a job (its SLURM_JOB_ID) is not served."""
    before = launcher.served()
    env = {**launcher.env, "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0"}
    done = _cli(launcher, "clusters", env=env)
    alone = _cli(launcher, "clusters", env={**env, "REMOTE_CHAIN_LAUNCHER": "off"})
    assert launcher.served() == before
    assert (done.returncode, done.stdout, done.stderr) == (
        alone.returncode,
        alone.stdout,
        alone.stderr,
    )


def _ignore_hup_and_int() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_client_that_ignores_hangups_runs_the_command_itself(launcher: Launcher) -> None:
    """`nohup remote-chain ...` (SIGHUP ignored) or `remote-chain ... &` in a script (SIGINT
    ignored): the command's own process outlives a hangup. Through the launcher the relay
    caught the signal the client ignores and killed the command with it."""
    silent, args = _hanging_profile(launcher)
    before = launcher.served()
    with silent:
        client = subprocess.Popen(
            [*THIN, *args],
            env={**launcher.env, "REMOTE_CHAIN_CONNECT_TIMEOUT": "60"},
            cwd=launcher.cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_ignore_hup_and_int,  # noqa: PLW1509 - two signal() calls, no threads
        )
        try:
            time.sleep(1.5)  # into the connect
            client.send_signal(signal.SIGHUP)
            client.send_signal(signal.SIGINT)
            time.sleep(1.0)
            assert client.poll() is None  # still connecting, as in its own process
            assert launcher.served() == before
        finally:
            client.kill()
            client.wait(10)
