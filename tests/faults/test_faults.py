"""Faults injected into real runs on the dev cluster: each one survived.

Dropped connections come from ``scripts/netproxy.py`` in front of the real sshd; outages from
``scripts/dev-cluster dbd-stop|sshd-stop`` (under the exclusive outage lock, see conftest);
Slurm events from root's ``scancel``/``scontrol requeue``. Runners are gated (``gate_runner``):
a job's runner waits until the test opens its gate and exits with the code in it, so each
fault lands exactly where the test wants it.

Jobs that only have to exist (submits, load) are queued with ``--hold``: real Slurm jobs that
never take an allocation from the suites sharing the cluster.
"""

from __future__ import annotations

import calendar
import functools
import json
import math
import re
import secrets
import socket
import subprocess
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import devcluster
import pytest
from structlog.testing import capture_logs

from remote_chain.client.orchestrator import Orchestrator
from remote_chain.core.chainstatus import ChainStatus
from remote_chain.core.models import ChainStateName
from remote_chain.core.results import StatusResult, SubmitResult
from remote_chain.errors import RemoteError
from remote_chain.execs.submit import FIRST_JOB_FILE, RECORD_FILE
from remote_chain.job.script import CHAIN_FILE, RETRIES_FILE, WALLTIME_FILE

from .conftest import (
    HOST,
    JobRow,
    Lab,
    Proxy,
    Tally,
    await_until,
    blocking,
    connections_to,
    event_jobs,
    events_of,
    fd_count,
    gate_runner,
    listing,
    reps,
    rss_bytes,
    sacct_final,
    slurm,
    squeue_jobs,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

HOLD = {"extra_args": ["--hold"]}  # real jobs that never take an allocation
TWO_COMMANDS = {"a": {"command": "true"}, "b": {"command": "true"}}
PROXY_DELAY_MS = 40  # one way: time to cut between "script done" and "reply read"
CLI_SLACK_S = 3.0  # interpreter start and imports of a CLI process, on top of a timeout
DEAD_CONNECT_TIMEOUT_S = 5
SCHEDULER_PASSES_S = 6  # three of the dev cluster's sched_interval=2 passes
# How long a queued job may wait to start: the two 8-CPU nodes are shared with other suites,
# whose jobs may hold every CPU for a while.
START_WAIT_S = 180


def new_run_id(kind: str) -> str:
    return f"rc-faults-{kind}-{secrets.token_hex(4)}"


def chain_of(result: StatusResult, benchmark: str, cluster: str | None = None) -> ChainStatus:
    found = [
        c
        for c in result.chains
        if c.benchmark == benchmark and (cluster is None or c.cluster == cluster)
    ]
    assert len(found) == 1, result.to_json()
    return found[0]


def queued_by_name(cluster: str, names: Sequence[str]) -> dict[str, list[str]]:
    """Name -> ids of the jobs queued under it (squeue, as root)."""
    out: dict[str, list[str]] = {name: [] for name in names}
    for job_id, (_, name) in squeue_jobs(cluster, names).items():
        out.setdefault(name, []).append(job_id)
    return out


def assert_one_job_each(cluster: str, names: Sequence[str], expected: dict[str, str]) -> None:
    """Exactly one queued job per chain name, the one the client reported."""
    queued = queued_by_name(cluster, names)
    for name in names:
        assert queued[name] == [expected[name]], f"{name}: queued {queued[name]}, want one"


# --- dropped connection during submit ------------------------------------------------------


def _run_made(run_dir: Path) -> bool:
    return run_dir.is_dir()  # mkdir of the run folder: the submit script is running


def _first_sbatch_done(run_dir: Path) -> bool:
    return (run_dir / "a" / FIRST_JOB_FILE).exists()


def _record_written(run_dir: Path) -> bool:
    return (run_dir / RECORD_FILE).exists()  # all done on the cluster; the reply is in flight


CUT_POINTS: dict[str, Callable[[Path], bool]] = {
    "after mkdir": _run_made,
    "after first sbatch": _first_sbatch_done,
    "after the record": _record_written,
}


async def submit_and_cut(
    rc: Orchestrator,
    config: Path,
    *,
    cluster: str,
    run_id: str,
    proxy: Proxy,
    cut_when: Callable[[], bool],
) -> SubmitResult:
    """Submit, and cut the proxied connection the moment ``cut_when()`` holds on the cluster."""
    box: list[SubmitResult] = []

    async def submit() -> None:
        box.append(await rc.submit(config, [cluster], run_id=run_id))

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit)
        with anyio.fail_after(60):
            while True:  # a local stat every 2 ms; the proxy delays the reply by 40 ms
                if cut_when():
                    break
                assert not box, "the submit finished before the cut point was reached"
                await anyio.sleep(0.002)
        proxy.cut_all()
    return box[0]


@pytest.mark.anyio
@pytest.mark.parametrize("rep", range(reps(20, 3)))
async def test_connection_cut_after_submit_reached_the_server_leaves_one_chain(
    lab: Lab, tally: Tally, rep: int
) -> None:
    """A connection cut after the submit script ran: one chain, and a retried submit finds it."""
    point = list(CUT_POINTS)[rep % len(CUT_POINTS)]
    fault = "connection cut after submit reached the server"
    with Proxy(lab.dev.ssh_port["local"], delay_ms=PROXY_DELAY_MS) as proxy:
        lab.profile("cut", port=proxy.port, slurm=HOLD)
        config = lab.config({"benchmarks": TWO_COMMANDS})
        run_id = new_run_id("cut")
        names = lab.track("cut", run_id, ["a", "b"])
        run_dir = lab.run_dir(run_id, "cut")
        tally.injected(fault)
        async with lab.orchestrator() as rc:
            with capture_logs() as logs:
                result = await submit_and_cut(
                    rc,
                    config,
                    cluster="cut",
                    run_id=run_id,
                    proxy=proxy,
                    cut_when=functools.partial(CUT_POINTS[point], run_dir),
                )
        lost = [e for e in logs if e["event"] == "submit_connection_lost"]
        assert len(lost) == 1, f"cut {point}: the cut did not hit the submit exec: {logs}"
        assert result.ok, result.to_json()
        # The answer came from the lookup after the reconnect: the run the cut one made.
        assert all(s.existing for s in result.submissions), result.to_json()
        jobs = {f"{run_id}:{s.benchmark}": s.job_id or "" for s in result.submissions}
        assert set(jobs) == set(names)
        await blocking(assert_one_job_each, "local", names, jobs)
        record = json.loads((run_dir / RECORD_FILE).read_text())
        assert {f"{run_id}:{c['benchmark']}": c["first_job_id"] for c in record["chains"]} == jobs

        # `submit --run-id` again, from another process: told about the run, nothing new queued.
        again = await lab.acli(
            "submit", str(config), "--cluster", "cut", "--run-id", run_id, "--json"
        )
        assert again.returncode == 0, again.stderr
        document = json.loads(again.stdout)
        assert all(s["existing"] for s in document["submissions"]), document
        assert {f"{run_id}:{s['benchmark']}": s["job_id"] for s in document["submissions"]} == jobs
        await blocking(assert_one_job_each, "local", names, jobs)
    tally.survived(fault)


@pytest.mark.anyio
@pytest.mark.parametrize("rep", range(reps(5, 2)))
async def test_connection_cut_while_the_script_is_in_transit_sends_it_once_more(
    lab: Lab, tally: Tally, rep: int
) -> None:
    """A submit cut mid-upload runs nothing (half a script never runs); the resend makes one."""
    fault = "connection cut while the submit script was in transit"
    blob = lab.root / "blob.bin"
    blob.write_bytes(secrets.token_bytes(256 * 1024))  # incompressible: a long upload
    # Kex and auth take a few KiB; 128 KiB in, the script is mid-way through its upload.
    with Proxy(lab.dev.ssh_port["local"], cut_after_upstream_bytes=128 * 1024) as proxy:
        lab.profile("transit", port=proxy.port, slurm=HOLD)
        config = lab.config({"upload": ["blob.bin"], "benchmarks": TWO_COMMANDS})
        run_id = new_run_id("transit")
        names = lab.track("transit", run_id, ["a", "b"])
        tally.injected(fault)

        async def disarm_after_first_cut() -> None:
            while True:
                if proxy.cuts:
                    proxy.disarm()  # the lookup and the resend go through
                    return
                await anyio.sleep(0.001)

        async with lab.orchestrator() as rc:
            with capture_logs() as logs:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(disarm_after_first_cut)
                    result = await rc.submit(config, ["transit"], run_id=run_id)
        assert proxy.cuts == 1
        assert [e["event"] for e in logs].count("submit_connection_lost") == 1, logs
        assert result.ok, result.to_json()
        # The lookup found no run folder, so this answer is the resend's own.
        assert not any(s.existing for s in result.submissions), result.to_json()
        jobs = {f"{run_id}:{s.benchmark}": s.job_id or "" for s in result.submissions}
        await blocking(assert_one_job_each, "local", names, jobs)
        uploaded = lab.run_dir(run_id, "transit") / "files" / "blob.bin"
        assert uploaded.read_bytes() == blob.read_bytes()
    tally.survived(fault)


# --- cluster unreachable ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.timeout(900)  # the exclusive outage lock may wait for other suites' tests
@pytest.mark.parametrize("kind", ["sshd stopped", "port refused", "host silent"])
def test_unreachable_cluster_exits_3_naming_the_host_within_the_connect_timeout(
    request: pytest.FixtureRequest, tally: Tally, kind: str
) -> None:
    """submit and status against a dead cluster: exit 3, the host named, within connect_timeout."""
    lab: Lab = request.getfixturevalue("outage_lab" if kind == "sshd stopped" else "lab")
    fault = f"cluster unreachable ({kind})"
    silent: socket.socket | None = None
    if kind == "sshd stopped":
        port = lab.dev.ssh_port["local"]
    elif kind == "port refused":
        port = free_port()
    else:  # accepts TCP (the kernel does, from the backlog) but never says a word
        silent = socket.socket()
        silent.bind((HOST, 0))
        silent.listen(16)
        port = silent.getsockname()[1]
    # A workdir of its own: other runs of this suite may share the cluster at the same time.
    workdir = Path(lab.workdir) / f"gone-{secrets.token_hex(4)}"
    lab.profile("gone", port=port, workdir=str(workdir))
    config = lab.config({"benchmarks": {"a": {"command": "true"}}})
    env = {"REMOTE_CHAIN_CONNECT_TIMEOUT": str(DEAD_CONNECT_TIMEOUT_S)}
    tally.injected(fault)
    answers: dict[str, tuple[subprocess.CompletedProcess[str], float]] = {}
    try:
        if kind == "sshd stopped":
            stopped = devcluster.dev_cluster("sshd-stop")
            assert stopped.returncode == 0, stopped.stderr
        for argv in (
            ("submit", str(config), "--cluster", "gone"),
            ("status", "rc-faults-nothing-here", "--cluster", "gone"),
        ):
            started = time.monotonic()
            done = lab.cli(*argv, env=env)
            answers[argv[0]] = (done, time.monotonic() - started)
    finally:
        if kind == "sshd stopped":
            devcluster.dev_cluster("sshd-start")
        if silent is not None:
            silent.close()
    print(f"\n{fault}: " + ", ".join(f"{c} {s:.1f} s" for c, (_, s) in answers.items()))
    for command, (done, _) in answers.items():
        assert done.returncode == 3, f"{command}: exit {done.returncode}: {done.stderr}"
        assert f"{HOST}:{port}" in done.stderr, done.stderr
        assert "gone" in done.stderr, done.stderr
    for command, (done, elapsed) in answers.items():
        assert elapsed <= DEAD_CONNECT_TIMEOUT_S + CLI_SLACK_S, (
            f"{command} took {elapsed:.1f} s to report an unreachable cluster; "
            f"connect_timeout is {DEAD_CONNECT_TIMEOUT_S} s: {done.stderr}"
        )
    assert not workdir.exists(), listing(workdir)
    tally.survived(fault)


# --- sshd restarted during a multi-cluster status -------------------------------------------


def restarted_proxy(target_port: int, listen_port: int) -> Proxy:
    """A proxy listening again on the port of one that was closed (sshd back after a restart)."""
    proxy = Proxy(target_port, listen_port=listen_port)
    proxy.__enter__()
    return proxy


@pytest.mark.anyio
@pytest.mark.parametrize("comes_back", [True, False], ids=["restarted", "stays-down"])
async def test_status_over_two_clusters_survives_one_sshd_restart(
    lab: Lab, tally: Tally, comes_back: bool
) -> None:
    """One cluster's sshd goes away mid-status: the other's chains come back regardless.

    The dev cluster runs one sshd for both ports, so a real restart would take both clusters
    down; a proxy plays cluster "flaky"'s sshd: it drops every connection (RST), refuses new
    ones, and (``restarted``) listens again on the same port 1.5 s later.
    """
    fault = "sshd restarted during a two-cluster status" + ("" if comes_back else " (stays down)")
    config = lab.config({"benchmarks": TWO_COMMANDS})
    run_id = new_run_id("restart")
    second: Proxy | None = None
    with Proxy(lab.dev.ssh_port["local"], delay_ms=100) as first:
        port = first.port
        lab.profile("flaky", cluster="local", port=port, slurm=HOLD)
        lab.profile("steady", cluster="local2", slurm=HOLD)
        lab.track("flaky", run_id, ["a", "b"])
        lab.track("steady", run_id, ["a", "b"])
        async with lab.orchestrator() as rc:
            submitted = await rc.submit(config, ["flaky", "steady"], run_id=run_id)
            assert submitted.ok, submitted.to_json()
        tally.injected(fault)
        async with lab.orchestrator() as rc:  # fresh connections, opened during the status
            box: list[StatusResult] = []

            async def status() -> None:
                box.append(await rc.status(run_id, clusters=["flaky", "steady"]))

            started = time.monotonic()
            with capture_logs() as logs:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(status)
                    await anyio.sleep(0.8)  # flaky's connection is being set up or used
                    assert not box, "the status ended before the restart"
                    # Stopping and starting a proxy blocks (its own loop, in a thread): keep
                    # the client's event loop running meanwhile, as a real sshd restart would.
                    await blocking(first.close)  # sshd gone: RST, then refused
                    if comes_back:
                        await anyio.sleep(1.5)
                        second = await blocking(restarted_proxy, lab.dev.ssh_port["local"], port)
            elapsed = time.monotonic() - started
            if second is not None:
                await blocking(second.close)
    result = box[0]
    steady = [c for c in result.chains if c.cluster == "steady"]
    assert sorted(c.benchmark for c in steady) == ["a", "b"], result.to_json()
    assert all(c.state is ChainStateName.PENDING for c in steady)
    if comes_back:
        assert not result.failures, (result.to_json(), logs)
        flaky = sorted(c.benchmark for c in result.chains if c.cluster == "flaky")
        assert flaky == ["a", "b"], result.to_json()
        assert second is not None
        assert second.accepted >= 1
    else:
        assert [f.cluster for f in result.failures] == ["flaky"], result.to_json()
        error = result.failures[0].error
        assert isinstance(error, RemoteError)
        assert error.exit_code == 3
        assert f"{HOST}:{port}" in str(error)
        assert elapsed < 30, f"status took {elapsed:.1f} s with one cluster down"
    assert first.accepted >= 1
    flaky_failed = any(e["event"] == "cluster_failed" for e in logs)
    assert flaky_failed is not comes_back, logs
    tally.survived(fault)


# --- accounting down --------------------------------------------------------------------------


def log_times(text: str) -> list[float]:
    """The times of the prologue's ``[remote-chain <UTC time>]`` log lines, as epoch seconds."""
    times = []
    for line in text.splitlines():
        if line.startswith("[remote-chain "):
            stamp = line[len("[remote-chain ") :].split("]", 1)[0]
            times.append(float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))))
    return times


def later_decision(run_dir: Path, benchmark: str) -> list[str] | None:
    """The first ``decided`` event of a job other than the chain's first (its link 2)."""
    events = events_of(run_dir, benchmark)
    decided = [e for e in events if e[2] == "decided" and e[1] != events[0][1]]
    return decided[0] if decided else None


@pytest.mark.anyio
@pytest.mark.timeout(900)  # the exclusive outage lock may wait for other suites' tests
async def test_accounting_outage_status_unknown_prologue_waits_then_all_right(
    outage_lab: Lab, tally: Tally
) -> None:
    """slurmdbd down: status says unknown (bounded, logged retries), a link's prologue waits
    about a minute, then decides from slurmctld's final state (a failure spends its retry);
    with slurmdbd back, status is right again."""
    lab = outage_lab
    lab.profile("acct")
    lookup_s = lab.settings().lookup_timeout  # the default: "about a minute"
    config = lab.config(
        {
            "runner": gate_runner(lab.gates),
            "benchmarks": {
                "killed": {"command": "sleep 300"},  # its end is known only to accounting
                "lagged": {"resumable": {"max_retries": 3}},
            },
        }
    )
    run_id = new_run_id("acct")
    names = lab.track("acct", run_id, ["killed", "lagged"])
    run_dir = lab.run_dir(run_id, "acct")
    async with lab.orchestrator() as rc:
        submitted = await rc.submit(config, ["acct"], run_id=run_id)
        assert submitted.ok, submitted.to_json()
        killed_id = next(s.job_id for s in submitted.submissions if s.benchmark == "killed")
        assert killed_id is not None

        def running() -> bool | None:
            states = {job: state for job, (state, _) in squeue_jobs("local", names).items()}
            lagged = event_jobs(events_of(run_dir, "lagged"), "runner_start")
            return True if states.get(killed_id) == "RUNNING" and lagged else None

        await await_until(running, timeout=START_WAIT_S, what="both chains running")
        # An admin (uid 0) kills the job: only sacct can tell what became of it.
        await blocking(slurm, "local", "scancel", killed_id)
        await blocking(sacct_final, "local", [killed_id])
        baseline = await rc.status(run_id, clusters=["acct"])
        assert chain_of(baseline, "killed").state is ChainStateName.CANCELLED

    tally.injected("accounting down during status")
    tally.injected("accounting down during a link's prologue")
    stopped = await blocking(devcluster.dev_cluster, "dbd-stop")
    assert stopped.returncode == 0, stopped.stderr
    try:
        outage_started = time.time()
        lab.open_gate(run_id, "acct", "lagged", 1, 1)  # link 1 fails now; link 2 starts blind
        settings = lab.settings()
        # The baseline status read killed's end: this machine's index keeps it, and status
        # shows it again however accounting is (an end read, not guessed), whether or not the
        # poll had to ask sacct of lagged's jobs. A client whose index never held it (its own
        # state folder) cannot see that end now: unknown.
        async with lab.orchestrator() as rc:
            seen_before = await rc.status(run_id, clusters=["acct"], retry_lag=False)
            assert chain_of(seen_before, "killed").state is ChainStateName.CANCELLED
        async with lab.orchestrator(state_dir=lab.state / "never-saw-it") as rc:
            with capture_logs() as logs:
                started = time.monotonic()
                during = await rc.status(run_id, clusters=["acct"])
                elapsed = time.monotonic() - started
            retries = [e for e in logs if e["event"] == "sacct_retrying"]
            assert chain_of(during, "killed").state is ChainStateName.UNKNOWN, during.to_json()
            for chain in during.chains:
                assert chain.state not in (ChainStateName.COMPLETED, ChainStateName.FAILED)
            assert 1 <= len(retries) <= settings.sacct_attempts, logs
            assert any(e["event"] == "sacct_lagging" for e in logs), logs
            assert elapsed < 60, f"status took {elapsed:.1f} s while accounting was down"
            print(
                f"\naccounting down: status {elapsed:.1f} s, {len(retries)} sacct attempts logged"
            )
            quick = await rc.status(run_id, clusters=["acct"], retry_lag=False)  # what wait does
            assert chain_of(quick, "killed").state is ChainStateName.UNKNOWN
            decision = await await_until(
                functools.partial(later_decision, run_dir, "lagged"),
                timeout=lookup_s + 90,
                what="link 2's prologue to decide",
            )
        link1 = event_jobs(events_of(run_dir, "lagged"), "runner_start")[0]
        link2 = decision[1]
        assert decision[3:5] == ["resume", link1], decision
        # Accounting is down, but slurmctld still knows link 1 FAILED (and link 1's own end
        # record says so): the prologue decides from those before "not visible", so the
        # failure spends its retry like any failure (never a free resume, which would run away).
        assert decision[5] == "FAILED", f"slurmctld knew link 1 failed, yet link 2 saw {decision}"
        log = (run_dir / "lagged" / "logs" / f"{link2}.log").read_text()
        assert "not final in accounting yet" in log, log
        waited = float(decision[0]) - log_times(log)[0]
        assert lookup_s - 10 <= waited <= lookup_s + 30, f"link 2 waited {waited:.0f} s: {log}"
        print(f"accounting down: link 2's prologue waited {waited:.0f} s (lookup {lookup_s} s)")
        assert (run_dir / "lagged" / RETRIES_FILE).read_text().strip() == "1"  # the failure's
        assert float(decision[0]) > outage_started
        lab.open_gate(run_id, "acct", "lagged", 2, 0)
        tally.survived("accounting down during a link's prologue")
    finally:
        started_again = await blocking(devcluster.dev_cluster, "dbd-start")
    assert started_again.returncode == 0, started_again.stderr

    async with lab.orchestrator() as rc:
        seen: list[dict[str, ChainStateName]] = []
        with anyio.fail_after(150):
            while True:
                after = await rc.status(run_id, clusters=["acct"], retry_lag=False)
                states = {c.benchmark: c.state for c in after.chains}
                seen.append(states)
                assert states["killed"] not in (ChainStateName.COMPLETED, ChainStateName.FAILED)
                if states == {
                    "killed": ChainStateName.CANCELLED,
                    "lagged": ChainStateName.COMPLETED,
                }:
                    break
                await anyio.sleep(2)
    tally.survived("accounting down during status")


# --- cancel races -----------------------------------------------------------------------------

SITUATIONS = ("successor pending", "link in its prologue", "right after a link ended")
INVISIBLE_JOB = "9999999"  # far beyond the dev cluster's job ids: never in sacct or squeue
CANCEL_PLACES = {"ca": "local", "cb": "local2"}


def chain_job_ids(run_dir: Path, benchmark: str, extra: Sequence[str] = ()) -> list[str]:
    """Every job id the chain's files name: first job, chain file, successors, ``extra``."""
    ids: list[str] = []
    first = run_dir / benchmark / FIRST_JOB_FILE
    if first.exists():
        ids.append(first.read_text().strip())
    chain = run_dir / benchmark / CHAIN_FILE
    if chain.exists():
        ids += chain.read_text().split()
    ids += event_jobs(events_of(run_dir, benchmark), "successor")
    ids += list(extra)
    return list(dict.fromkeys(i for i in ids if i and i != INVISIBLE_JOB))


def check_nothing_started_after(
    rows: Sequence[JobRow], events: Sequence[Sequence[str]], began: float, returned: float
) -> None:
    """No job started after cancel returned; none got an allocation after cancel began."""
    for row in rows:
        if not row.allocated:
            continue
        assert row.start is not None, row
        # sacct times are whole seconds (floored): a start recorded after the second in which
        # cancel began/returned happened after it.
        assert row.start <= returned, f"job {row.job_id} started after cancel returned: {row}"
        assert row.start <= math.floor(began), (
            f"job {row.job_id} got an allocation after cancel began ({began:.2f}): {row}"
        )
    late = [e for e in events if e[2] == "runner_start" and float(e[0]) > returned]
    assert not late, f"a runner started after cancel returned: {late}"


def _both_queued(cluster: str, name: str) -> bool | None:
    states = sorted(state for state, _ in squeue_jobs(cluster, [name]).values())
    return True if states == ["PENDING", "RUNNING"] else None


def _link1_done(cluster: str, name: str, run_dir: Path, bench: str) -> bool | None:
    ended = event_jobs(events_of(run_dir, bench), "runner_exit")
    return True if ended and not squeue_jobs(cluster, [name]) else None


def _runner_started(run_dir: Path, bench: str) -> bool | None:
    return True if event_jobs(events_of(run_dir, bench), "runner_start") else None


def _runner_exited(run_dir: Path, bench: str) -> bool | None:
    return True if event_jobs(events_of(run_dir, bench), "runner_exit") else None


def _in_lookup_loop(log: Path) -> bool | None:
    found = log.exists() and "not final in accounting yet" in log.read_text()
    return True if found else None


def _sbatch_as_user(lab: Lab, cluster: str, command: str) -> str:
    """``sbatch`` as the test user over OpenSSH; the job id it printed."""
    for _ in range(5):
        out = subprocess.run(
            lab.dev.ssh_argv(cluster, command), capture_output=True, text=True, timeout=60
        )
        # 255: ssh itself failed. sshd drops connections beyond MaxStartups (10 unauthenticated
        # at once, shared with the other suites): try again.
        if out.returncode != 255:
            break
        time.sleep(1)
    job_id = out.stdout.strip().splitlines()[-1].split(";")[0] if out.stdout.strip() else ""
    assert job_id.isdigit(), out
    return job_id


@pytest.mark.anyio
@pytest.mark.timeout(600)
@pytest.mark.parametrize("situation", SITUATIONS)
async def test_cancel_races_start_nothing_after_cancel(
    lab: Lab, tally: Tally, situation: str
) -> None:
    """Cancel mid-chain (x10 per situation, over both clusters): nothing starts after it."""
    fault = f"cancel race: {situation}"
    per_cluster = math.ceil(reps(10, 3) / 2)
    benches = [f"c{i}" for i in range(per_cluster)]
    for profile, cluster in CANCEL_PLACES.items():
        lab.profile(profile, cluster=cluster)
    config = lab.config(
        {
            "runner": gate_runner(lab.gates),
            "benchmarks": {b: {"resumable": {"max_retries": 50}} for b in benches},
        }
    )
    run_id = new_run_id("cancel")
    names = {p: lab.track(p, run_id, benches) for p in CANCEL_PLACES}
    if situation == "link in its prologue":
        for profile in CANCEL_PLACES:  # link 1 completes at once; the injected link is the one
            for bench in benches:
                lab.open_gate(run_id, profile, bench, 1, 0)
    injected: dict[tuple[str, str], str] = {}
    one_ssh_at_a_time = anyio.Lock()

    async def ready(profile: str, bench: str) -> None:
        cluster, run_dir = CANCEL_PLACES[profile], lab.run_dir(run_id, profile)
        name = f"{run_id}:{bench}"
        if situation == "successor pending":
            check = functools.partial(_both_queued, cluster, name)
            await await_until(check, timeout=START_WAIT_S, what=f"{name}: running + pending")
        elif situation == "link in its prologue":
            check = functools.partial(_link1_done, cluster, name, run_dir, bench)
            await await_until(check, timeout=START_WAIT_S, what=f"{name}: link 1 done")
            # A link whose predecessor accounting never shows: its prologue keeps looking.
            job = run_dir / bench / "job.sh"
            command = f"sbatch --parsable {job} {INVISIBLE_JOB}"
            async with one_ssh_at_a_time:
                job_id = await blocking(_sbatch_as_user, lab, cluster, command)
            injected[(profile, bench)] = job_id
            check = functools.partial(_in_lookup_loop, run_dir / bench / "logs" / f"{job_id}.log")
            await await_until(check, timeout=START_WAIT_S, what=f"{name}: link in its lookup loop")
        else:
            check = functools.partial(_runner_started, run_dir, bench)
            await await_until(check, timeout=START_WAIT_S, what=f"{name}: link 1 running")

    # The lookup window of the injected links is far longer than the test.
    async with lab.orchestrator(lookup_timeout=600) as rc:
        submitted = await rc.submit(config, list(CANCEL_PLACES), run_id=run_id)
        assert submitted.ok, submitted.to_json()
        async with anyio.create_task_group() as tg:
            for profile in CANCEL_PLACES:
                for bench in benches:
                    tg.start_soon(ready, profile, bench)

        windows: dict[tuple[str, str], tuple[float, float]] = {}
        pairs = [(p, b) for b in benches for p in CANCEL_PLACES]
        for index, (profile, bench) in enumerate(pairs):
            run_dir = lab.run_dir(run_id, profile)
            if situation == "right after a link ended":
                lab.open_gate(run_id, profile, bench, 1, 1)
                await await_until(
                    functools.partial(_runner_exited, run_dir, bench),
                    timeout=60,
                    what="link 1's runner to exit",
                    interval=0.005,
                )
                await anyio.sleep(0.05 * index)  # sweep the moments Slurm may start link 2
            tally.injected(fault)
            began = time.time()
            answer = await rc.cancel(run_id, clusters=[profile], benchmarks=[bench])
            returned = time.time()
            windows[(profile, bench)] = (began, returned)
            assert answer.ok, answer.to_json()
            left = await blocking(squeue_jobs, CANCEL_PLACES[profile], [f"{run_id}:{bench}"])
            assert left == {}, f"still queued when cancel returned: {left}"

    await anyio.sleep(SCHEDULER_PASSES_S)  # anything left would start now
    for profile, cluster in CANCEL_PLACES.items():
        assert await blocking(squeue_jobs, cluster, names[profile]) == {}
        run_dir = lab.run_dir(run_id, profile)
        for bench in benches:
            extra = [injected[(profile, bench)]] if (profile, bench) in injected else []
            rows = await blocking(sacct_final, cluster, chain_job_ids(run_dir, bench, extra))
            began, returned = windows[(profile, bench)]
            check_nothing_started_after(rows, events_of(run_dir, bench), began, returned)
            if extra:
                # Killed in its lookup loop: it never decided nor ran; the successor it queued
                # first (the prologue does, before the lookup) was cancelled before it ran,
                # as check_nothing_started_after saw in sacct.
                events = events_of(run_dir, bench)
                # (Its `end signalled` record, written on the cancel's TERM, is no decision.)
                ran = [e for e in events if e[1] == extra[0] and e[2] not in ("successor", "end")]
                assert not ran, events
            tally.survived(fault)


# --- requeue of a running link -----------------------------------------------------------------


def _running_twice(run_dir: Path) -> list[str] | None:
    starts = event_jobs(events_of(run_dir, "rq"), "runner_start")
    return starts if len(starts) == 2 else None


def _restarted(run_dir: Path, link2: str) -> bool | None:
    events = events_of(run_dir, "rq")
    decided = [e for e in events if e[1] == link2 and e[2] == "decided"]
    return True if len(decided) == 2 and len(event_jobs(events, "runner_start")) == 3 else None


@pytest.mark.anyio
@pytest.mark.timeout(600)
async def test_requeue_of_a_running_link_keeps_one_successor_and_the_counts(
    lab: Lab, tally: Tally
) -> None:
    """``scontrol requeue`` of a running link 2: it runs again, one successor, counts unchanged.

    Jobs are submitted ``--requeue``: with the dev cluster's ``JobRequeue=0``, Slurm refuses to
    requeue any other (``Requested operation is presently disabled``).
    """
    places = {"rqa": "local", "rqb": "local2"}
    for profile, cluster in places.items():
        lab.profile(profile, cluster=cluster, slurm={"requeue": True, "extra_args": ["--requeue"]})
    runner = gate_runner(lab.gates)
    config = lab.config({"runner": runner, "benchmarks": {"rq": {"resumable": {"max_retries": 5}}}})
    run_id = new_run_id("requeue")
    for profile in places:
        lab.track(profile, run_id, ["rq"])
        lab.open_gate(run_id, profile, "rq", 1, 1)  # link 1 fails: one retry, before the requeue
    async with lab.orchestrator() as rc:
        submitted = await rc.submit(config, list(places), run_id=run_id)
        assert submitted.ok, submitted.to_json()
        for profile, cluster in places.items():
            fault = "requeue of a running link"
            run_dir = lab.run_dir(run_id, profile)
            running = functools.partial(_running_twice, run_dir)
            link1, link2 = await await_until(running, timeout=START_WAIT_S, what="link 2 running")
            counts = {f: (run_dir / "rq" / f).read_text() for f in (RETRIES_FILE, WALLTIME_FILE)}
            assert counts[RETRIES_FILE].strip() == "1"
            tally.injected(fault)
            requeued = await blocking(slurm, cluster, "scontrol", "requeue", link2)
            assert requeued.returncode == 0, requeued.stderr
            again = functools.partial(_restarted, run_dir, link2)
            await await_until(again, timeout=START_WAIT_S, what="link 2 to run again")
            lab.open_gate(run_id, profile, "rq", 2, 0)
            with anyio.fail_after(120):
                while True:
                    chain = chain_of(await rc.status(run_id, clusters=[profile]), "rq")
                    if chain.state is ChainStateName.COMPLETED:
                        break
                    assert chain.state in (ChainStateName.RUNNING, ChainStateName.PENDING)
                    await anyio.sleep(1)
            events = events_of(run_dir, "rq")
            decided = [e[3] for e in events if e[1] == link2 and e[2] == "decided"]
            assert decided == ["resume", "restart"], events
            successors = [e[3] for e in events if e[1] == link2 and e[2] == "successor"]
            assert len(successors) == 1, f"link 2 queued {successors}: {events}"
            assert (run_dir / "rq" / CHAIN_FILE).read_text().split() == [link1, link2]
            for name, text in counts.items():
                assert (run_dir / "rq" / name).read_text() == text, name
            assert chain.infra_retries == 1
            rows = {
                r.job_id: r
                for r in await blocking(sacct_final, cluster, [link1, link2, *successors])
            }
            assert rows[link1].state == "FAILED"
            assert rows[link2].state == "COMPLETED"
            assert rows[successors[0]].state.startswith("CANCELLED")
            assert not rows[successors[0]].allocated, "the successor of a success ran"
            tally.survived(fault)


# --- corrupt state files ----------------------------------------------------------------------

CORRUPTIONS = (
    "walltime not a number",
    "chain file truncated",
    "chain file unreadable",
    "folder unreadable",
)


def corrupt(bench_dir: Path, kind: str) -> tuple[str, Sequence[str]]:
    """Damage the chain's state as ``kind`` says; return (the file named, words of the problem)."""
    if kind == "walltime not a number":
        (bench_dir / WALLTIME_FILE).write_text("12abc\n")
        return WALLTIME_FILE, ("not a whole number", "12abc")
    if kind == "chain file truncated":
        path = bench_dir / CHAIN_FILE
        path.write_text(path.read_text()[:-2])  # cut mid-line: no final newline
        return CHAIN_FILE, ("truncated",)
    if kind == "chain file unreadable":
        (bench_dir / CHAIN_FILE).chmod(0)
        return CHAIN_FILE, ("unreadable",)
    bench_dir.chmod(0)
    return str(bench_dir), ("unreadable",)


def _link1_running(run_dir: Path) -> list[str] | None:
    return event_jobs(events_of(run_dir, "x"), "runner_start") or None


def slurmd_lines(lab: Lab, cluster: str, job_id: str) -> list[str]:
    """The lines of a cluster's slurmd log that name one job."""
    log = Path(lab.dev.state_dir) / "log" / f"slurmd-{cluster}.log"
    mine = re.compile(rf"\b{job_id}\b")
    return [line for line in log.read_text().splitlines() if mine.search(line)]


@pytest.mark.anyio
@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", CORRUPTIONS)
async def test_corrupt_state_stops_the_chain_safely_and_status_names_it(
    lab: Lab, tally: Tally, kind: str
) -> None:
    """Corrupt state under a running chain: the next link fails safe, status names the file."""
    fault = f"corrupt state: {kind}"
    lab.profile("bad")
    runner = gate_runner(lab.gates)
    config = lab.config({"runner": runner, "benchmarks": {"x": {"resumable": {"max_retries": 5}}}})
    run_id = new_run_id("corrupt")
    (name,) = lab.track("bad", run_id, ["x"])
    run_dir = lab.run_dir(run_id, "bad")
    bench_dir = run_dir / "x"
    state_files = (CHAIN_FILE, WALLTIME_FILE, RETRIES_FILE)
    async with lab.orchestrator() as rc:
        submitted = await rc.submit(config, ["bad"], run_id=run_id)
        assert submitted.ok, submitted.to_json()
        running = functools.partial(_link1_running, run_dir)
        (link1,) = await await_until(running, timeout=START_WAIT_S, what="link 1 running")
        (link2,) = event_jobs(events_of(run_dir, "x"), "successor")
        tally.injected(fault)
        try:
            named, problem = corrupt(bench_dir, kind)
            damaged = {f: (bench_dir / f).read_bytes() for f in state_files}
        finally:
            lab.open_gate(run_id, "bad", "x", 1, 1)  # link 1 fails: link 2 must read the state
        try:
            rows = await blocking(sacct_final, "local", [link1, link2])
            await anyio.sleep(SCHEDULER_PASSES_S)  # a runaway successor would be queued by now
            assert await blocking(squeue_jobs, "local", [name]) == {}, "the chain is still queued"
            by_id = {r.job_id: r for r in rows}
            assert by_id[link2].state == "FAILED", rows
            status = await rc.status(run_id, clusters=["bad"], benchmarks=["x"])
            if kind == "folder unreadable":
                # Slurm cannot open the job's log in an unreadable folder: its own log says so.
                lines = await blocking(slurmd_lines, lab, "local", link2)
                assert any("Permission denied" in line for line in lines), lines
            else:
                log = (bench_dir / "logs" / f"{link2}.log").read_text()
                assert f"corrupt state file {named}" in log, log
                assert all(word in log for word in problem), log
                assert "the chain stops here" in log, log
                assert by_id[link2].exit_code == "65:0", rows
            # No silent reset: the damaged files are as the fault left them.
            assert {f: (bench_dir / f).read_bytes() for f in state_files} == damaged
        finally:
            bench_dir.chmod(0o700)
            (bench_dir / CHAIN_FILE).chmod(0o600)
    events = events_of(run_dir, "x")
    assert not [e for e in events if e[1] == link2 and e[2] in ("successor", "runner_start")]
    chain = chain_of(status, "x")
    assert chain.state is ChainStateName.FAILED, status.to_json()
    assert chain.error is not None, status.to_json()
    assert Path(named).name in chain.error, chain.error
    assert all(word in chain.error for word in problem), chain.error
    tally.survived(fault)


# --- concurrent submits of one run id -----------------------------------------------------------


@pytest.mark.parametrize("rep", range(reps(5, 2)))
def test_concurrent_submits_of_one_run_id_make_one_chain(lab: Lab, tally: Tally, rep: int) -> None:
    """Two processes submit the same --run-id at once: one chain; the other is told it exists."""
    fault = "concurrent submits of one run id"
    lab.profile("twice", cluster=("local", "local2")[rep % 2], slurm=HOLD)
    config = lab.config({"benchmarks": TWO_COMMANDS})
    run_id = new_run_id("twice")
    names = lab.track("twice", run_id, ["a", "b"])
    argv = lab.cli_argv("submit", str(config), "--cluster", "twice", "--run-id", run_id, "--json")
    tally.injected(fault)
    procs = [
        subprocess.Popen(
            argv,
            cwd=lab.root,
            env=lab.cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=180) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    documents = [json.loads(out) for out, _ in outputs]
    existing = [all(s["existing"] for s in d["submissions"]) for d in documents]
    assert sorted(existing) == [False, True], documents
    jobs = [{s["benchmark"]: s["job_id"] for s in d["submissions"]} for d in documents]
    assert jobs[0] == jobs[1], documents
    assert all(jobs[0].values()), documents
    queued = queued_by_name(lab.cluster_of["twice"], names)
    assert queued == {f"{run_id}:{b}": [j] for b, j in jobs[0].items()}
    tally.survived(fault)


# --- two profiles of one cluster ----------------------------------------------------------------


@pytest.mark.anyio
async def test_two_profiles_of_one_cluster_keep_their_chains_apart(lab: Lab, tally: Tally) -> None:
    """One run on two profiles of the same Slurm cluster (the load test's aliases; or two
    login nodes, two partitions): status and cancel of one never touch the other's chain."""
    fault = "one run on two profiles of one cluster"
    for twin in ("twin1", "twin2"):
        lab.profile(twin, cluster="local", slurm=HOLD)
    config = lab.config({"benchmarks": {"a": {"command": "true"}}})
    run_id = new_run_id("twins")
    lab.track("twin1", run_id, ["a"])
    tally.injected(fault)
    async with lab.orchestrator() as rc:
        submitted = await rc.submit(config, ["twin1", "twin2"], run_id=run_id)
        assert submitted.ok, submitted.to_json()
        jobs = {s.cluster: s.job_id for s in submitted.submissions}
        status = await rc.status(run_id, clusters=["twin1"])
        seen = [j.job_id for j in chain_of(status, "a").jobs]
        cancelled = await rc.cancel(run_id, clusters=["twin1"])
        assert cancelled.ok, cancelled.to_json()
    still = await blocking(squeue_jobs, "local", [f"{run_id}:a"])
    assert seen == [jobs["twin1"]], f"twin1's chain shows {seen}; twin2's job is {jobs['twin2']}"
    assert [c.job_ids for c in cancelled.cancelled] == [(jobs["twin1"],)], cancelled.to_json()
    assert list(still) == [jobs["twin2"]], f"cancel of twin1 left {still}"
    tally.survived(fault)


# --- load ---------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.timeout(300)
async def test_fifty_submits_back_to_back_leak_nothing(lab: Lab, tally: Tally) -> None:
    """50 runs submitted one after another (one client each, as 50 CLI calls): no leaks."""
    count = reps(50, 10)
    fault = "load: runs submitted back to back"
    lab.profile("load", slurm=HOLD)
    config = lab.config({"benchmarks": {"one": {"command": "true"}}})
    ports = list(lab.dev.ssh_port.values())
    fds_before, rss_before = fd_count(), rss_bytes()
    assert connections_to(ports) == 0
    seconds = []
    for i in range(count):
        run_id = new_run_id(f"load{i}")
        lab.track("load", run_id, ["one"])
        tally.injected(fault)
        started = time.monotonic()
        async with lab.orchestrator() as rc:
            result = await rc.submit(config, ["load"], run_id=run_id)
            assert connections_to(ports) == 1, "one connection per cluster per invocation"
        seconds.append(time.monotonic() - started)
        assert result.ok, result.to_json()
        assert connections_to(ports) == 0, f"submit {i} left a connection open"
        tally.survived(fault)
    fds_after, rss_after = fd_count(), rss_bytes()
    assert fds_after == fds_before, f"file descriptors {fds_before} -> {fds_after}"
    assert rss_after - rss_before < 64 << 20, f"RSS grew {(rss_after - rss_before) >> 20} MiB"
    print(  # the figures for docs/reliability.md (pytest -s)
        f"\nload: {count} submits, median {sorted(seconds)[count // 2]:.2f} s, "
        f"max {max(seconds):.2f} s, fds {fds_before}->{fds_after}, "
        f"RSS +{(rss_after - rss_before) >> 20} MiB"
    )


@pytest.mark.anyio
@pytest.mark.timeout(600)
async def test_status_over_eight_clusters_of_two_hundred_chains_is_bounded(
    lab: Lab, tally: Tally
) -> None:
    """Status over 8 clusters x 200 chains: 8 connections, one exec each, nothing leaked."""
    chains = reps(200, 20)
    fault = "load: status over 8 clusters x 200 chains"
    aliases = {f"alias{i}": ("local", "local2")[i % 2] for i in range(8)}
    for alias, cluster in aliases.items():
        lab.profile(alias, cluster=cluster, slurm=HOLD)
    benches = [f"b{i:03d}" for i in range(chains)]
    config = lab.config({"benchmarks": {b: {"command": "true"} for b in benches}})
    run_id = new_run_id("wide")
    for alias in aliases:
        lab.track(alias, run_id, benches)
    ports = list(lab.dev.ssh_port.values())
    try:
        started = time.monotonic()
        async with lab.orchestrator(command_timeout=600) as rc:
            submitted = await rc.submit(config, list(aliases), run_id=run_id)
        submit_s = time.monotonic() - started
        assert submitted.ok, submitted.to_json()["errors"]
        assert len(submitted.submissions) == 8 * chains

        fds_before = fd_count()
        tally.injected(fault)
        rounds: list[float] = []
        rss: list[int] = []
        peak = 0
        async with lab.orchestrator() as rc:
            # Round 2 runs under tracemalloc for the peak (it slows Python several times over,
            # so rounds 1 and 3 are the ones timed).
            for traced in (False, True, False):
                if traced:
                    tracemalloc.start()
                began = time.monotonic()
                result = await rc.status(run_id, clusters=list(aliases))
                rounds.append(time.monotonic() - began)
                if traced:
                    peak = tracemalloc.get_traced_memory()[1]
                    tracemalloc.stop()
                assert not result.failures, result.to_json()["errors"]
                assert len(result.chains) == 8 * chains
                assert {c.state for c in result.chains} == {ChainStateName.PENDING}
                assert connections_to(ports) == 8, "one connection per cluster"
                rss.append(rss_bytes())
        assert connections_to(ports) == 0
        assert fd_count() == fds_before, "status left file descriptors open"
        assert peak < 256 << 20, f"peak traced memory {peak >> 20} MiB"
        assert rss[-1] - rss[0] < 16 << 20, f"RSS grew {(rss[-1] - rss[0]) >> 20} MiB over rounds"
        assert max(rounds[0], rounds[2]) < 60, f"status rounds took {rounds} s"
        tally.survived(fault)
        print(  # the figures for docs/reliability.md (pytest -s)
            f"\nwide: submit 8x{chains} in {submit_s:.1f} s; status {rounds[0]:.2f} s and "
            f"{rounds[2]:.2f} s ({rounds[1]:.1f} s traced); peak traced {peak >> 20} MiB; "
            f"RSS {rss[0] >> 20}->{rss[-1] >> 20} MiB; fds {fds_before}->{fd_count()}"
        )
        async with lab.orchestrator(command_timeout=600) as rc:
            cancelled = await rc.cancel(run_id, clusters=list(aliases))
            assert cancelled.ok, cancelled.to_json()
    finally:
        for alias in aliases:  # 1600 folders: not worth keeping
            await blocking(subprocess.run, ["rm", "-rf", str(lab.run_dir(run_id, alias).parent)])
