"""Fixtures and helpers of the fault-injection, bad-input and security suite.

Everything here drives the real client (the ``Orchestrator`` in-process, the ``remote-chain``
CLI as a subprocess) over the dev cluster's real sshd into real Slurm. A dev cluster that is
not up FAILS these tests (the fixtures raise), never skips them.

Evidence is read where it lives: Slurm's view with ``squeue``/``sacct`` run as root, and the
run folders straight from disk (the dev cluster's workdir is on this machine, readable by
root). Runs of this suite live under ``<dev workdir>/faults/`` so that listings before/after
are not disturbed by the other suites sharing the cluster.

Shared dev cluster, shared outages. Other suites run on the same cluster at the same time and
one of them stops slurmdbd for about a minute. Tests that stop slurmdbd or sshd take
``<dev state dir>/.outage.lock`` exclusively (``fcntl.flock``); every other cluster test here
takes it shared, so an outage waits for running tests and tests wait for an outage to end.
Suites that do not take the lock are tolerated: ``load_cluster`` waits out a stopped slurmdbd
or sshd, and every ``sacct`` check polls (bounded) until accounting answers.

Repetition counts are the full ones CI runs; ``REMOTE_CHAIN_FAULTS_QUICK=1`` lowers them
for a quick local run. ``REMOTE_CHAIN_FAULTS_REPORT=FILE`` writes the tally of faults injected
and survived, and bad inputs tried and refused, as JSON (it is also printed at the end).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import functools
import importlib.util
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import anyio
import devcluster  # tests/ is on sys.path: pytest's rootdir-relative import of this package
import pytest
import yaml

from remote_chain.client.cluster import Opener
from remote_chain.client.orchestrator import Orchestrator
from remote_chain.config.settings import Settings
from remote_chain.transport.base import Remote
from remote_chain.transport.connect import open_remote
from remote_chain.transport.endpoint import Endpoint

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
QUICK = os.environ.get("REMOTE_CHAIN_FAULTS_QUICK", "") not in ("", "0")
REPORT_ENV = "REMOTE_CHAIN_FAULTS_REPORT"

LOCK_NAME = ".outage.lock"
LOCK_WAIT_S = 540.0  # below the 600-900 s timeouts of the tests that wait longest
# A slurmdbd or sshd outage of another suite lasts about a minute (docs/dev-cluster.md).
OUTAGE_WAIT_S = 300.0
OUTAGE_COMPONENTS = frozenset({"slurmdbd", "sshd"})
SUITE_DIR = "faults"
GATES_DIR = ".gates"
HOST = "127.0.0.1"
CONNECT_TIMEOUT_S = 10.0
# sacct/squeue as root; accounting of a job that just ended lags by a second or so.
SACCT_FIELDS = "JobIDRaw,JobName%200,State,Start,End,NodeList,AllocCPUS,ExitCode"
CLI_BOOT = "import sys; from remote_chain.cli import main; sys.argv[0] = 'remote-chain'; main()"


def reps(full: int, quick: int) -> int:
    """The full repetition count, or the lowered one under ``REMOTE_CHAIN_FAULTS_QUICK``."""
    return quick if QUICK else full


# --- the tally of faults and bad inputs ------------------------------------------------------


@dataclass
class Tally:
    """Faults injected and survived (and bad inputs tried and refused), for docs/reliability.md."""

    rows: dict[str, dict[str, int]] = field(default_factory=dict)

    def _row(self, what: str) -> dict[str, int]:
        return self.rows.setdefault(what, {"injected": 0, "survived": 0})

    def injected(self, what: str, count: int = 1) -> None:
        self._row(what)["injected"] += count

    def survived(self, what: str, count: int = 1) -> None:
        self._row(what)["survived"] += count


TALLY = Tally()


@pytest.fixture
def tally() -> Tally:
    """The session's tally (one object for the whole run, printed at the end)."""
    return TALLY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the tally and, with ``REMOTE_CHAIN_FAULTS_REPORT``, write it as JSON."""
    if not TALLY.rows:
        return
    terminalreporter.section("faults injected / survived")
    width = max(len(what) for what in TALLY.rows)
    for what, row in sorted(TALLY.rows.items()):
        terminalreporter.write_line(
            f"{what:<{width}}  injected {row['injected']:>4}  survived {row['survived']:>4}"
        )
    target = os.environ.get(REPORT_ENV)
    if target:
        Path(target).write_text(json.dumps(TALLY.rows, indent=2, sort_keys=True) + "\n")


# --- the shared cluster: lock and liveness ----------------------------------------------------


def _flock(fd: int, mode: int, deadline: float, what: Path) -> None:
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                kind = "exclusive" if mode == fcntl.LOCK_EX else "shared"
                raise RuntimeError(f"no {kind} lock on {what} within the wait") from None
            time.sleep(0.2)


@contextlib.contextmanager
def outage_lock(state_dir: Path, *, exclusive: bool, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold ``<state_dir>/.outage.lock``: exclusive to stop slurmdbd/sshd, shared otherwise.

    Writer-preferring: everyone passes through ``.outage.lock.gate`` (held exclusively, and
    briefly by a shared taker), and an outage keeps the gate while it waits for the running
    tests to finish, so a stream of overlapping shared holders from several processes cannot
    starve it (``flock`` itself does not queue an exclusive request ahead of shared ones).
    """
    deadline = time.monotonic() + wait_s
    main_path, gate_path = state_dir / LOCK_NAME, state_dir / (LOCK_NAME + ".gate")
    gate = os.open(gate_path, os.O_RDWR | os.O_CREAT, 0o666)
    main = os.open(main_path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        _flock(gate, fcntl.LOCK_EX, deadline, gate_path)
        _flock(main, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, deadline, main_path)
        if not exclusive:
            fcntl.flock(gate, fcntl.LOCK_UN)  # let the next taker through at once
        yield
    finally:
        os.close(main)  # closing releases the flocks
        os.close(gate)


def _stopped(status_text: str) -> set[str]:
    return {line.split()[0] for line in status_text.splitlines() if " stopped" in line}


def load_cluster(wait_s: float = OUTAGE_WAIT_S) -> devcluster.DevCluster:
    """``devcluster.load()``, waiting out another suite's slurmdbd/sshd outage (bounded).

    Anything else missing fails at once: a dev cluster that is not up is a failure.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return devcluster.load()
        except RuntimeError:
            stopped = _stopped(devcluster.dev_cluster("status").stdout)
            if not stopped or not stopped <= OUTAGE_COMPONENTS or time.monotonic() > deadline:
                raise
            time.sleep(2)


@pytest.fixture
def anyio_backend() -> str:
    """asyncssh runs on asyncio only."""
    return "asyncio"


@pytest.fixture
def dev() -> Iterator[devcluster.DevCluster]:
    """The running dev cluster, with the outage lock held shared for the test."""
    described = devcluster._describe()
    with outage_lock(described.state_dir, exclusive=False):
        yield load_cluster()


@pytest.fixture
def outage_dev() -> Iterator[devcluster.DevCluster]:
    """The running dev cluster, with the outage lock held exclusively (may stop daemons)."""
    described = devcluster._describe()
    with outage_lock(described.state_dir, exclusive=True):
        cluster = load_cluster()
        try:
            yield cluster
        finally:
            # Whatever the test did, leave the cluster whole for the next suite.
            devcluster.dev_cluster("dbd-start")
            devcluster.dev_cluster("sshd-start")


# --- Slurm's own view, as root ----------------------------------------------------------------


def _ts(text: str) -> float | None:
    if text in ("", "None", "Unknown"):
        return None
    return dt.datetime.fromisoformat(text).timestamp()  # the cluster's clock is this machine's


@dataclass(frozen=True)
class JobRow:
    """One job as ``sacct -X`` records it."""

    job_id: str
    name: str
    state: str
    start: float | None
    end: float | None
    node_list: str
    alloc_cpus: int
    exit_code: str

    @property
    def allocated(self) -> bool:
        """Whether the job ever held an allocation (a job cancelled while pending never did,
        although Slurm may still fill in its Start with the cancel time)."""
        return self.node_list not in ("", "None assigned") and self.alloc_cpus > 0


def slurm(cluster: str, *argv: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return devcluster.slurm(cluster, *argv, timeout=timeout)


def sacct_jobs(cluster: str, job_ids: Sequence[str]) -> list[JobRow] | None:
    """The jobs' accounting records, or None while sacct fails (slurmdbd down)."""
    if not job_ids:
        return []
    out = slurm(
        cluster,
        *("sacct", "-X", "--parsable2", "--noheader", f"--format={SACCT_FIELDS}"),
        *("--starttime", "now-2days", "--endtime", "now", "--jobs", ",".join(job_ids)),
    )
    if out.returncode != 0:
        return None
    rows = []
    for line in out.stdout.splitlines():
        parts = line.split("|")
        if len(parts) != 8:
            continue
        job, name, state, start, end, nodes, cpus, code = parts
        rows.append(JobRow(job, name, state, _ts(start), _ts(end), nodes, int(cpus or 0), code))
    return rows


def sacct_final(cluster: str, job_ids: Sequence[str], *, timeout: float = 150.0) -> list[JobRow]:
    """Wait (bounded) until sacct answers and every job is recorded in a final state."""
    final = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF")

    def ready() -> list[JobRow] | None:
        rows = sacct_jobs(cluster, job_ids)
        if rows is None or {r.job_id for r in rows} != set(job_ids):
            return None
        return rows if all(r.state.startswith(final) for r in rows) else None

    return wait_until(ready, timeout=timeout, what=f"sacct to record {job_ids} final")


def squeue_jobs(cluster: str, names: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Job id -> (state, name) of every queued (pending or running) job with one of these names."""
    if not names:
        return {}
    out = slurm(cluster, "squeue", "--noheader", "--format=%i|%T|%j", f"--name={','.join(names)}")
    if out.returncode != 0:
        raise RuntimeError(f"squeue failed: {out.stderr.strip()}")
    jobs = {}
    for line in out.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            jobs[parts[0]] = (parts[1], parts[2])
    return jobs


def scancel_names(cluster: str, names: Sequence[str]) -> None:
    for name in names:  # scancel takes one --name
        slurm(cluster, "scancel", f"--name={name}")


def wait_until(
    check: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.2
) -> T:
    """Poll ``check`` until it returns something other than None (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


async def blocking(function: Callable[..., T], *args: Any) -> T:
    """Run a blocking helper (subprocess, file polling) in a worker thread of the test's loop."""
    return await anyio.to_thread.run_sync(functools.partial(function, *args))


async def await_until(
    check: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.2
) -> T:
    """``wait_until`` for async tests: each check runs in a worker thread."""
    deadline = anyio.current_time() + timeout
    while True:
        value = await anyio.to_thread.run_sync(check)
        if value is not None:
            return value
        if anyio.current_time() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await anyio.sleep(interval)


# --- the lab: profiles, configs, clients -------------------------------------------------------


def gate_runner(gates: Path) -> str:
    """A runner that waits (bounded, 5 min) for its gate file and exits with the code in it.

    The gate is ``<gates>/<run_id>.<cluster>.<benchmark>.<attempt>`` (the variables every job
    exports), an absolute path outside the benchmark folder, so a test can open it even when
    it made that folder unreadable.
    """
    script = (
        f'g={gates}/"$REMOTE_CHAIN_RUN_ID.$REMOTE_CHAIN_CLUSTER.$REMOTE_CHAIN_BENCHMARK.'
        '$REMOTE_CHAIN_ATTEMPT"; '
        'for i in $(seq 1500); do if [ -r "$g" ]; then exit "$(cat "$g")"; fi; sleep 0.2; done; '
        "exit 3"
    )
    return f"bash -c '{script}' gate"


def chown_to(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


class Lab:
    """One test's client side: profiles (and their known_hosts), configs, settings, clients.

    Remote runs go to ``<dev workdir>/faults`` unless a profile says otherwise; every queued
    job of a run this lab tracked is cancelled (as root) when the test ends.
    """

    def __init__(self, dev: devcluster.DevCluster, root: Path) -> None:
        self.dev = dev
        self.root = root
        self.clusters = root / "clusters"
        self.home = root / "home"
        self.state = root / "state"
        for folder in (self.clusters, self.home, self.state):
            folder.mkdir(parents=True, exist_ok=True)
        self.known_hosts = root / "known_hosts"
        shutil.copy(dev.known_hosts, self.known_hosts)
        first = dev.known_hosts.read_text().split()
        self.host_key = f"{first[1]} {first[2]}"
        self.workdir = f"{dev.workdir}/{SUITE_DIR}"
        self.gates = Path(self.workdir) / GATES_DIR
        self._ensure_remote_dirs()
        self.cluster_of: dict[str, str] = {}
        self._tracked: list[tuple[str, str]] = []

    def _ensure_remote_dirs(self) -> None:
        base = Path(self.workdir)
        if not base.exists():
            base.mkdir(mode=0o700)
            chown_to(base, self.dev.test_user)
        self.gates.mkdir(mode=0o755, exist_ok=True)

    # profiles ----------------------------------------------------------------------------------
    def trust(self, port: int) -> None:
        """Accept the dev sshd's host key on another port (a proxy in front of it)."""
        with self.known_hosts.open("a") as handle:
            handle.write(f"[{HOST}]:{port} {self.host_key}\n")

    def profile(
        self,
        name: str,
        *,
        cluster: str = "local",
        port: int | None = None,
        workdir: str | None = None,
        slurm: Mapping[str, object] | None = None,
        lines: Sequence[str] = (),
    ) -> Path:
        """Write ``clusters/<name>.toml`` reaching ``cluster`` (directly or via ``port``)."""
        if port is None:
            port = self.dev.ssh_port[cluster]
        elif port not in self.dev.ssh_port.values():
            self.trust(port)
        self.cluster_of[name] = cluster
        table = {"partition": "debug", "time": "00:10:00", **(slurm or {})}
        text = [
            f"host = {json.dumps(HOST)}",
            f"port = {port}",
            f"user = {json.dumps(self.dev.test_user)}",
            f"identity_file = {json.dumps(str(self.dev.identity_file))}",
            f"known_hosts = {json.dumps(str(self.known_hosts))}",
            f"workdir = {json.dumps(workdir or self.workdir)}",
            *lines,
            "[slurm]",
            *(f"{key} = {json.dumps(value)}" for key, value in table.items()),
        ]
        path = self.clusters / f"{name}.toml"
        path.write_text("\n".join(text) + "\n")
        return path

    def config(self, driver: Mapping[str, object], name: str = "submit.yaml") -> Path:
        """Write a submit config ``{driver: ...}`` next to the profiles."""
        path = self.root / name
        path.write_text(yaml.safe_dump({"driver": dict(driver)}, sort_keys=False))
        return path

    # clients ------------------------------------------------------------------------------------
    def settings(self, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "state_dir": self.state,
            "clusters_dir": None,
            "connect_timeout": CONNECT_TIMEOUT_S,
            **overrides,
        }
        return Settings(**values)

    def orchestrator(self, *, opener: Opener = open_remote, **settings: Any) -> Orchestrator:
        return Orchestrator(self.settings(**settings), clusters_dir=self.clusters, opener=opener)

    def cli_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("REMOTE_CHAIN_")}
        env.update(
            PYTHONPATH=str(REPO),
            HOME=str(self.home),
            XDG_STATE_HOME=str(self.state),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            REMOTE_CHAIN_CONNECT_TIMEOUT=f"{CONNECT_TIMEOUT_S:g}",
        )
        env.update(extra or {})
        return env

    def cli_argv(self, *args: str) -> list[str]:
        return [sys.executable, "-c", CLI_BOOT, "--clusters-dir", str(self.clusters), *args]

    async def acli(
        self, *args: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``cli`` from an async test, in a worker thread."""
        return await blocking(functools.partial(self.cli, *args, env=env))

    def cli(
        self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 180.0
    ) -> subprocess.CompletedProcess[str]:
        """``remote-chain --clusters-dir <lab> ARGS`` in a fresh process, from the lab folder."""
        return subprocess.run(
            self.cli_argv(*args),
            cwd=self.root,
            env=self.cli_env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    # remote state --------------------------------------------------------------------------------
    def run_dir(self, run_id: str, profile: str) -> Path:
        """``<workdir>/<run_id>/<profile>`` of this suite, on this machine's disk."""
        return Path(self.workdir) / run_id / profile

    def track(self, profile: str, run_id: str, benchmarks: Sequence[str]) -> list[str]:
        """Remember a run's job names for the final cleanup; return them."""
        names = [f"{run_id}:{bench}" for bench in benchmarks]
        self._tracked += [(self.cluster_of.get(profile, "local"), n) for n in names]
        return names

    def open_gate(self, run_id: str, profile: str, benchmark: str, attempt: int, code: int) -> None:
        """Let the gated runner of that job (see ``gate_runner``) exit with ``code``."""
        gate = self.gates / f"{run_id}.{profile}.{benchmark}.{attempt}"
        tmp = gate.with_suffix(".tmp")
        tmp.write_text(f"{code}\n")
        tmp.chmod(0o644)
        tmp.rename(gate)  # atomic: the runner never reads a half-written gate

    def cleanup(self) -> None:
        by_cluster: dict[str, list[str]] = {}
        for cluster, name in self._tracked:
            by_cluster.setdefault(cluster, []).append(name)
        for cluster, names in by_cluster.items():
            scancel_names(cluster, names)


@pytest.fixture
def lab(dev: devcluster.DevCluster, tmp_path: Path) -> Iterator[Lab]:
    """A client side for one test, on the shared (locked) dev cluster."""
    each = Lab(dev, tmp_path)
    try:
        yield each
    finally:
        each.cleanup()


@pytest.fixture
def outage_lab(outage_dev: devcluster.DevCluster, tmp_path: Path) -> Iterator[Lab]:
    """A client side for a test that stops slurmdbd or sshd (outage lock held exclusively)."""
    each = Lab(outage_dev, tmp_path)
    try:
        yield each
    finally:
        each.cleanup()


def listing(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``root`` (relative) -> (mode, size, mtime_ns): a before/after snapshot."""
    if not root.exists():
        return {}
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            out[str(path.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


# --- connections that count -----------------------------------------------------------------


class CountingOpener:
    """An ``Opener`` that counts connections; with ``refuse`` set, any attempt is an error."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.refuse = refuse
        self.opened: list[str] = []

    async def __call__(self, endpoint: Endpoint) -> Remote:
        self.opened.append(endpoint.name)
        if self.refuse:
            raise AssertionError(f"a connection to {endpoint.name} was attempted")
        return await open_remote(endpoint)


def _netproxy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("netproxy", REPO / "scripts" / "netproxy.py")
    if spec is None or spec.loader is None:
        raise RuntimeError("scripts/netproxy.py is missing")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("netproxy", module)
    spec.loader.exec_module(module)
    return module


_NETPROXY: ModuleType | None = None


class Proxy:
    """A typed handle on ``scripts/netproxy.py``'s ThreadedProxy in front of one sshd port."""

    def __init__(
        self,
        target_port: int,
        *,
        delay_ms: float = 0.0,
        listen_port: int = 0,
        cut_after_upstream_bytes: int | None = None,
    ) -> None:
        global _NETPROXY  # noqa: PLW0603 - load scripts/netproxy.py once per session
        if _NETPROXY is None:
            _NETPROXY = _netproxy()
        self._inner: Any = _NETPROXY.ThreadedProxy(
            HOST,
            target_port,
            delay_ms=delay_ms,
            listen_port=listen_port,
            cut_after_upstream_bytes=cut_after_upstream_bytes,
        )

        self._closed = False

    def __enter__(self) -> Proxy:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening and drop every connection (RST), as a dying sshd; idempotent."""
        if not self._closed:
            self._closed = True
            self._inner.__exit__(None, None, None)

    @property
    def port(self) -> int:
        return int(self._inner.port)

    @property
    def cuts(self) -> int:
        return int(self._inner.proxy.cuts)

    @property
    def accepted(self) -> int:
        return int(self._inner.proxy.accepted)

    def cut_all(self) -> None:
        self._inner.cut_all()

    def disarm(self) -> None:
        """No further byte-count cuts (read by the proxy at every chunk)."""
        self._inner.proxy.cut_after_upstream_bytes = None


class RecordingProxy:
    """A plain TCP forwarder on loopback that keeps every client->server byte it forwarded."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.upstream = bytearray()
        self.accepted = 0
        self._listener = socket.socket()
        self._listener.bind((HOST, 0))
        self._listener.listen(8)
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def __enter__(self) -> RecordingProxy:
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        self._listener.close()

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            server = socket.create_connection((HOST, self.target_port), timeout=5)
            self._spawn(self._pipe, client, server, True)
            self._spawn(self._pipe, server, client, False)

    def _pipe(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        src.settimeout(0.2)
        try:
            while not self._stop.is_set():
                try:
                    chunk = src.recv(65536)
                except TimeoutError:
                    continue
                if not chunk:
                    break
                if record:
                    with self._lock:
                        self.upstream += chunk
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            src.close()  # each socket is the source of exactly one pipe: closed once


# --- this process's sockets, fds and memory ---------------------------------------------------


@dataclass(frozen=True)
class InetSocket:
    proto: str
    local_port: int
    remote_port: int
    state: str  # hex, as in /proc/net/tcp: 0A listening, 01 established
    inode: int


def inet_sockets() -> list[InetSocket]:
    """Every TCP/UDP socket of this network namespace (all processes), from /proc/net."""
    out = []
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        try:
            lines = Path(f"/proc/net/{proto}").read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            f = line.split()
            out.append(
                InetSocket(
                    proto,
                    int(f[1].rsplit(":", 1)[1], 16),
                    int(f[2].rsplit(":", 1)[1], 16),
                    f[3],
                    int(f[9]),
                )
            )
    return out


def socket_inodes(pid: int | str = "self") -> set[int]:
    """Inodes of the sockets among a process's file descriptors."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def bound_ports(pid: int | str = "self") -> set[tuple[str, int]]:
    """Ports a process listens on (TCP LISTEN) or has bound (any UDP socket)."""
    mine = socket_inodes(pid)
    return {
        (s.proto, s.local_port)
        for s in inet_sockets()
        if s.inode in mine and (s.state == "0A" or s.proto.startswith("udp"))
    }


def connections_to(ports: Sequence[int], pid: int | str = "self") -> int:
    """Established TCP connections of a process to any of ``ports``."""
    mine = socket_inodes(pid)
    return sum(
        1
        for s in inet_sockets()
        if s.inode in mine
        and s.proto.startswith("tcp")
        and s.state == "01"
        and s.remote_port in ports
    )


def fd_count(pid: int | str = "self") -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def events_of(run_dir: Path, benchmark: str) -> list[list[str]]:
    """The benchmark's event log as word lists (``[time, job_id, kind, args...]``)."""
    path = run_dir / benchmark / ".remote_chain_events"
    try:
        return [line.split() for line in path.read_text().splitlines() if line.strip()]
    except (FileNotFoundError, PermissionError):
        return []


def event_jobs(events: Sequence[Sequence[str]], kind: str) -> list[str]:
    """Job ids of the events of one kind, in order (``successor`` gives the queued id)."""
    if kind == "successor":
        return [e[3] for e in events if len(e) > 3 and e[2] == kind]
    return [e[1] for e in events if len(e) > 2 and e[2] == kind]
