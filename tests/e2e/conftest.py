"""Fixtures and helpers of the end-to-end suite: the dev cluster, a client, a chain's evidence.

These tests drive the real client over the dev cluster's real sshd into real Slurm
(``scripts/dev-cluster up``). A missing or unreachable cluster FAILS the suite, never skips
it: the suite is the proof that every chain rule holds under a real Slurm event.

Evidence is read three ways, each where the spec puts it: the chain state and jobs through the
client's ``status`` (interface.md), the dot-files and the event log straight from the run folder
(the dev cluster's workdir is on this machine and readable by root), and Slurm's own view with
``sacct``/``squeue`` run as root.

Helpers live here (and are imported by the test modules with ``from .conftest import ...``)
because the suite owns only these files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import tomllib
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import anyio
import devcluster  # tests/ is on sys.path: pytest's rootdir-relative import of this package
import pytest
import yaml

from remote_chain.client.orchestrator import Orchestrator
from remote_chain.config.settings import Settings
from remote_chain.core.chainstatus import ChainStatus
from remote_chain.core.results import StatusResult, SubmitResult

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "examples" / "rollouts.py"


@dataclass(frozen=True)
class Version:
    """One Slurm release of the dev cluster: the cluster the decision rows and client flows
    run on, and a second cluster of the same release for the events that hit a whole node
    (preemption, node failure), so those never touch the chains running on the first."""

    slurm: str
    cluster: str
    node_cluster: str

    def __str__(self) -> str:
        return f"slurm-{self.slurm}"


VERSIONS = (Version("22.05", "local", "local2"), Version("24.11", "local24", "local24b"))
CLUSTERS = tuple(c for v in VERSIONS for c in (v.cluster, v.node_cluster))
# What the prologue writes (resumable-runs.md "What gets resumed", plus our event log).
CHAIN_FILE = ".gym_job_chain"
WALLTIME_FILE = ".gym_accumulated_walltime"
RETRIES_FILE = ".gym_infra_retries"
EVENTS_FILE = ".remote_chain_events"
CHAIN_WARNING = "Chain will NOT continue on failure"
# Lookup window for scenarios that are not about accounting lag: a predecessor's final state
# is in sacct at once when slurmdbd runs, so this only bounds a failure's cost.
SHORT_LOOKUP_S = 20

# How long a sacct query waits for slurmdbd to answer (the dev cluster is shared; another
# suite may stop slurmdbd for its own outage test).
SACCT_PATIENCE_S = 60
# sacct's state codes, all of them (see sacct_jobs).
ALL_STATES = "BF,CA,CD,DL,F,NF,OOM,PD,PR,R,RQ,RS,RV,S,TO"

# Every chain a test submitted, so the session can scancel whatever a failed test left queued.
_SUBMITTED: list[tuple[str, str]] = []


# --- the cluster ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def dev() -> devcluster.DevCluster:
    """The running dev cluster; fails (never skips) the suite when it is not fully up."""
    try:
        cluster = devcluster.load()
    except RuntimeError as exc:
        pytest.fail(f"the e2e suite needs the dev cluster: {exc}", pytrace=False)
    missing = [name for name in CLUSTERS if name not in cluster.clusters]
    if missing:
        pytest.fail(f"dev cluster lacks Slurm cluster(s) {missing}", pytrace=False)
    wrong = {
        v.slurm: [c for c in (v.cluster, v.node_cluster) if cluster.slurm_version[c] != v.slurm]
        for v in VERSIONS
    }
    if any(wrong.values()):
        pytest.fail(f"dev cluster runs another Slurm than expected: {wrong}", pytrace=False)
    for name in CLUSTERS:
        done = subprocess.run(
            cluster.ssh_argv(name, "sinfo --noheader --format=%T"), capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.fail(
                f"cannot reach cluster {name} over ssh as {cluster.test_user}: "
                f"{done.stderr.strip()}",
                pytrace=False,
            )
    return cluster


def active_versions(config: pytest.Config) -> tuple[Version, ...]:
    """The releases whose per-release tests this process runs (``--suite-part``,
    tests/conftest.py): a module fixture submitting for every release submits for these only,
    so that the other part's process does not find this part's chains on its node."""
    part = config.getoption("--suite-part")
    return VERSIONS if part == "all" else tuple(v for v in VERSIONS if v.slurm == part)


@pytest.fixture(params=VERSIONS, ids=str)
def version(request: pytest.FixtureRequest) -> Version:
    """Each Slurm release of the dev cluster in turn (tests that use it run once per release)."""
    value: Version = request.param
    return value


@pytest.fixture(scope="session", autouse=True)
def _scancel_leftovers() -> Iterator[None]:
    """After the suite, cancel (as root) any job of a chain a failed test left in the queue."""
    yield
    for cluster, name in _SUBMITTED:
        ids = squeue_ids(cluster, name)
        if ids:
            devcluster.slurm(cluster, "scancel", *ids)


@pytest.fixture
def anyio_backend() -> str:
    """asyncssh runs on asyncio only."""
    return "asyncio"


def slurm_ok(cluster: str, *argv: str) -> str:
    """Run an admin Slurm command as root; its stdout, or an assertion naming the failure."""
    done = devcluster.slurm(cluster, *argv)
    assert done.returncode == 0, f"{' '.join(argv)} on {cluster}: {done.stderr.strip()}"
    return done.stdout


def as_user(
    dev: devcluster.DevCluster, cluster: str, command: str
) -> subprocess.CompletedProcess[str]:
    """Run a shell command as the test user over the dev cluster's sshd (the dev key)."""
    return subprocess.run(
        dev.ssh_argv(cluster, command), capture_output=True, text=True, timeout=60
    )


def node_of(cluster: str) -> tuple[str, int]:
    """The cluster's one node and its CPU count, from ``scontrol show node``."""
    text = slurm_ok(cluster, "scontrol", "show", "node", "--oneliner")
    fields = dict(word.split("=", 1) for word in text.split() if "=" in word)
    return fields["NodeName"], int(fields["CPUTot"])


def node_state(cluster: str, node: str) -> str:
    """The node's state as sinfo prints it (``idle``, ``down*``, ``mixed``, ...)."""
    return slurm_ok(cluster, "sinfo", "--noheader", "--nodes", node, "--format=%T").strip()


# --- Slurm's view, as root --------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """One line of ``sacct -X``: the job's final (or current) state in accounting."""

    job_id: str
    state: str  # as sacct prints it: "CANCELLED by 1001", "TIMEOUT", ...
    elapsed_s: int
    exit_code: str
    partition: str

    @property
    def word(self) -> str:
        """The state's first word: ``CANCELLED by 0`` -> ``CANCELLED``."""
        return self.state.split(" ", 1)[0]


def sacct_jobs(cluster: str, name: str, *, duplicates: bool = False) -> list[Job]:
    """Every job of a chain (found by its job name) in accounting, oldest first."""
    # Slurm fact: without --state, a --name query selects jobs by their *eligible* time, so a
    # successor cancelled while it waited on its dependency (never eligible) is left out.
    # Naming every state lists it too.
    argv = [
        "sacct", "-X", "--parsable2", "--noheader", f"--name={name}", "--starttime=now-1days",
        "--endtime=now", f"--state={ALL_STATES}",
        "--format=JobID,State,ElapsedRaw,ExitCode,Partition",
    ]  # fmt: skip
    if duplicates:
        argv.append("--duplicates")  # a requeued job: one line per run
    jobs = []
    for line in _sacct(cluster, argv).splitlines():
        job_id, state, elapsed, exit_code, partition = line.split("|")
        jobs.append(Job(job_id, state, int(elapsed or 0), exit_code, partition))
    return jobs


def _sacct(cluster: str, argv: list[str]) -> str:
    """sacct's output; waits (bounded) through a short slurmdbd outage, e.g. another suite's."""
    deadline = time.monotonic() + SACCT_PATIENCE_S
    while True:
        done = devcluster.slurm(cluster, *argv)
        if done.returncode == 0:
            return done.stdout
        if time.monotonic() >= deadline:
            raise AssertionError(f"{' '.join(argv)} on {cluster}: {done.stderr.strip()}")
        time.sleep(2)


def squeue_ids(cluster: str, name: str) -> list[str]:
    """Ids of the chain's jobs still in the queue (pending, running, completing)."""
    out = devcluster.slurm(cluster, "squeue", "--noheader", "--format=%i", f"--name={name}")
    return out.stdout.split()


def squeue_state(cluster: str, job_id: str) -> str:
    """A job's state in squeue (``RUNNING``, ``PENDING``...), or ``""`` once it left the queue."""
    out = devcluster.slurm(cluster, "squeue", "--noheader", "--format=%T", f"--jobs={job_id}")
    return out.stdout.strip() if out.returncode == 0 else ""


# --- polling ----------------------------------------------------------------------------------
def wait_for(
    what: str, probe: Callable[[], T | None], *, timeout: float, interval: float = 2.0
) -> T:
    """Poll ``probe`` until it returns something truthy; bounded, failing with ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


# --- the client -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Client:
    """The real ``Orchestrator``, one ``anyio.run`` (so one fresh SSH connection) per call."""

    clusters_dir: Path
    state_dir: Path
    lookup_timeout: int = SHORT_LOOKUP_S

    def settings(self) -> Settings:
        return Settings(
            clusters_dir=str(self.clusters_dir),
            state_dir=self.state_dir,
            lookup_timeout=self.lookup_timeout,
        )

    def call(self, flow: Callable[[Orchestrator], Awaitable[T]]) -> T:
        async def main() -> T:
            async with Orchestrator(self.settings(), clusters_dir=self.clusters_dir) as rc:
                return await flow(rc)

        return anyio.run(main, backend="asyncio")

    def submit(self, config: Path, clusters: Sequence[str]) -> SubmitResult:
        result = self.call(lambda rc: rc.submit(config, list(clusters)))
        assert result.ok, f"submit failed: {json.dumps(result.to_json(), indent=1)}"
        return result

    def status(self, run_id: str, cluster: str, benchmark: str) -> ChainStatus:
        result: StatusResult = self.call(
            lambda rc: rc.status(run_id, clusters=[cluster], benchmarks=[benchmark])
        )
        assert not result.failures, f"status failed: {json.dumps(result.to_json(), indent=1)}"
        (chain,) = result.chains
        return chain

    def chains(self, result: SubmitResult) -> dict[str, Chain]:
        """A handle per submitted benchmark (one cluster per submit in the rule scenarios)."""
        clusters = {sub.cluster for sub in result.submissions}
        assert len(clusters) == 1, f"one cluster per submit here, not {clusters}"
        return self.chains_by_cluster(result)[clusters.pop()]

    def chains_by_cluster(self, result: SubmitResult) -> dict[str, dict[str, Chain]]:
        """A handle per submitted benchmark, per cluster: cluster -> benchmark -> chain."""
        out: dict[str, dict[str, Chain]] = {}
        for sub in result.submissions:
            assert sub.job_id is not None, f"{sub.benchmark}: no job id ({sub.error})"
            chain = Chain(
                self, result.run_id, sub.cluster, sub.benchmark, sub.job_id, Path(sub.remote_dir)
            )
            _SUBMITTED.append((chain.cluster, chain.name))
            out.setdefault(sub.cluster, {})[sub.benchmark] = chain
        return out


def write_config(folder: Path, benchmarks: Mapping[str, object]) -> Path:
    """A submit config running ``examples/rollouts.py`` (uploaded beside it) per benchmark."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(RUNNER, folder / RUNNER.name)
    config = {
        "driver": {
            "runner": f"python3 ../files/{RUNNER.name}",
            "upload": [RUNNER.name],
            # A deep copy: PyYAML writes a shared object as an anchor, which configs refuse.
            "benchmarks": json.loads(json.dumps(benchmarks)),
        }
    }
    path = folder / "submit.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def submit_one(
    dev: devcluster.DevCluster,
    folder: Path,
    cluster: str,
    benchmark: str,
    spec: dict[str, object],
    *,
    clusters_dir: Path | None = None,
) -> Chain:
    """Submit one benchmark as its own run; its chain."""
    client = Client(clusters_dir or dev.clusters_dir, folder / "state")
    result = client.submit(write_config(folder / "run", {benchmark: spec}), [cluster])
    return client.chains(result)[benchmark]


def write_profile(
    dev: devcluster.DevCluster,
    cluster: str,
    folder: Path,
    *,
    top: Mapping[str, object] | None = None,
    slurm: Mapping[str, object] | None = None,
) -> Path:
    """A copy of a dev cluster profile (same host, port, key) with some keys overridden."""
    profile = tomllib.loads(dev.profile(cluster).read_text(encoding="utf-8"))
    profile.update(top or {})
    profile["slurm"] = {**profile.get("slurm", {}), **(slurm or {})}
    lines = [f"{k} = {_toml(v)}" for k, v in profile.items() if not isinstance(v, dict)]
    lines.append("[slurm]")
    lines += [f"{k} = {_toml(v)}" for k, v in profile["slurm"].items()]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{cluster}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _toml(value: object) -> str:
    # JSON strings, ints and lists of strings are valid TOML for the simple values we write.
    return json.dumps(value)


# --- one chain and its evidence ---------------------------------------------------------------
@dataclass(frozen=True)
class Event:
    """One line of ``.remote_chain_events``: ``<epoch> <job_id> <kind> <args...>``."""

    time: int
    job_id: str
    kind: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Chain:
    """One submitted benchmark: how to ask the client about it and where its files are."""

    client: Client
    run_id: str
    cluster: str
    benchmark: str
    first_job: str
    remote_dir: Path
    started: float = field(default_factory=time.monotonic)

    @property
    def name(self) -> str:
        """The Slurm job name of every job of the chain (``<run_id>:<benchmark>``)."""
        return f"{self.run_id}:{self.benchmark}"

    def status(self) -> ChainStatus:
        return self.client.status(self.run_id, self.cluster, self.benchmark)

    def _read(self, name: str) -> str:
        path = self.remote_dir / name
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def chain_ids(self) -> list[str]:
        return self._read(CHAIN_FILE).split()

    def walltime(self) -> int:
        return int(self._read(WALLTIME_FILE).strip() or 0)

    def retries(self) -> int:
        return int(self._read(RETRIES_FILE).strip() or 0)

    def events(self, kind: str | None = None, job_id: str | None = None) -> list[Event]:
        out = []
        for line in self._read(EVENTS_FILE).splitlines():
            stamp, job, what, *args = line.split(" ")
            if (kind is None or what == kind) and (job_id is None or job == job_id):
                out.append(Event(int(stamp), job, what, tuple(args)))
        return out

    def decisions(self) -> list[tuple[str, tuple[str, ...]]]:
        """``(job_id, (action, pred, pred_state, walltime, retries))`` per prologue decision."""
        return [(e.job_id, e.args) for e in self.events("decided")]

    def rollouts(self) -> list[dict[str, int]]:
        text = self._read("artifacts/rollouts.jsonl")
        return [json.loads(line) for line in text.splitlines()]

    def log(self, job_id: str) -> str:
        return self._read(f"logs/{job_id}.log")

    def sacct(self, *, duplicates: bool = False) -> list[Job]:
        return sacct_jobs(self.cluster, self.name, duplicates=duplicates)

    def queued(self) -> list[str]:
        return squeue_ids(self.cluster, self.name)

    def describe(self) -> str:
        """Everything a failing assertion should show: events, sacct, queue, logs' tails."""
        logs = "\n".join(
            f"--- logs/{p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
            for p in sorted((self.remote_dir / "logs").glob("*.log"))
        )
        return (
            f"\nchain {self.name} on {self.cluster} ({self.remote_dir})\n"
            f"events:\n{self._read(EVENTS_FILE)}"
            f"sacct: {self.sacct(duplicates=True)}\nsqueue: {self.queued()}\n"
            f"dot-files: chain={self.chain_ids()} walltime={self._read(WALLTIME_FILE).strip()} "
            f"retries={self._read(RETRIES_FILE).strip()}\n{logs}"
        )

    def wait_running(self, *, items: int = 0, timeout: float = 120) -> str:
        """Wait until a job of the chain runs its runner and wrote ``items`` rollouts; its id."""

        def probe() -> str | None:
            started = self.events("runner_start")
            if not started or len(self.rollouts()) < items:
                return None
            job_id = started[-1].job_id
            return job_id if squeue_state(self.cluster, job_id) == "RUNNING" else None

        try:
            return wait_for(f"{self.name} running", probe, timeout=timeout, interval=1.0)
        except AssertionError as exc:
            raise AssertionError(f"{exc}{self.describe()}") from None

    def wait_ended(self, *, timeout: float) -> ChainStatus:
        """Poll the client's status until the chain ended and none of its jobs is queued."""
        last: list[ChainStatus] = []

        def probe() -> ChainStatus | None:
            status = self.status()
            last[:] = [status]
            if not status.state.ended or self.queued():
                return None
            # The chain's files can tell it ended before accounting has every job's final
            # record (e.g. while slurmdbd is down or catching up): wait for those too, in
            # Slurm's view and in the client's.
            # Both views, because the status was read before this sacct: a job that ended in
            # between is final in Slurm's view but still RUNNING in the status returned (the
            # CI failure of test_node_failure_resumes on 2026-12-01).
            final = {j.job_id for j in self.sacct() if j.word not in {"PENDING", "RUNNING"}}
            live = {"PENDING", "RUNNING", "REQUEUED", "SUSPENDED", "UNKNOWN"}
            if any(j.state.split(" ")[0] in live for j in status.jobs):
                return None
            return status if {j.job_id for j in status.jobs} <= final else None

        try:
            status = wait_for(f"{self.name} to end", probe, timeout=timeout, interval=3.0)
        except AssertionError as exc:
            seen = json.dumps(last[0].to_json(), indent=1) if last else "no status"
            raise AssertionError(f"{exc}; last status {seen}{self.describe()}") from None
        print(f"{self.benchmark}: ended {status.state.value} after {self.age():.0f} s")
        return status

    def age(self) -> float:
        return time.monotonic() - self.started


def job_states(status: ChainStatus) -> list[tuple[str, str]]:
    """``(job_id, state)`` per job of the client's status, in its order."""
    return [(j.job_id, j.state) for j in status.jobs]


def assert_items_once(chain: Chain, items: int) -> list[dict[str, int]]:
    """The runner's output holds every item exactly once (resumed, never redone)."""
    rows = chain.rollouts()
    assert sorted(r["item"] for r in rows) == list(range(items)), (
        f"rollouts.jsonl items {[r['item'] for r in rows]}{chain.describe()}"
    )
    return rows
