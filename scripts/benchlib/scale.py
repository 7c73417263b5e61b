"""P7: one run of many chains over 10 cluster endpoints (10,000; 200 with ``--quick``).

Ten profiles ``s1``...``s10``, each behind its own delaying proxy at 50 ms RTT, alternate
between the dev cluster's two sshd ports (two Slurm controllers). Every benchmark is
submitted held (``--hold``): nothing runs, nothing queues ahead of anyone, and every job is
cancelled as root at the end. Measured:

- the submit: one invocation, one exec per cluster; each cluster's exec time divided by its
  benchmarks is the remote time per benchmark;
- status of the whole run vs status of a 1-chain run on one of the same endpoints,
  interleaved, as a user runs it (``remote-chain status RUN --json``, a new process each: the
  measure the targets are judged by) and warm, inside this process; execs per cluster per poll,
  and the largest exec request sent;
- the fan-out's own cost here: status of a 10-chain run, one held chain on each of the same
  ten endpoints, vs the 1-chain run, in the same rounds. Ten connections, ten login shells,
  ten ``squeue`` and ten sshd sessions on this machine's two cores before a single chain more
  is read: what of the ratio is the rig's ten endpoints, and what the 10,000 chains add;
- what bounds the ten-endpoint poll on this rig: the whole machine's CPU use during it
  (``/proc/stat``: the ten "login nodes", both controllers and the client share its cores),
  the client's own CPU, and status of one endpoint's share of the same run (1,000 chains on
  ``s1``, what each login node does when the ten are ten machines) vs the 1-chain run; from
  those, the figure ten separate login nodes would give: the slowest endpoint's share plus the
  client CPU the other nine add (one Python process parses every reply);
- the client's peak RSS for one status poll over every cluster (a child process);
- ``wait`` on the whole run for a bounded time: its polls back off (2, 4, 8 ... s) and the
  client CPU of each poll (``time.process_time`` between polls: sleeping costs none).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchlib.cold import CLI, timed_process
from benchlib.common import Ctx, Disturbed, retried, slurm_ids, status_now, submit_now, write_config
from benchlib.probe import Probe
from benchlib.rig import REPO
from benchlib.stats import Row, Summary, Verdict, seconds
from remote_chain.client.orchestrator import Orchestrator
from remote_chain.core.results import StatusResult
from remote_chain.errors import WaitTimeout

ENDPOINTS = 10
CHAINS, QUICK_CHAINS = 10_000, 200
DELAY_MS = 25.0  # one way: 50 ms RTT
STATUS_RATIO = 3.0
RSS_TARGET_MIB = 200.0
WAIT_S, QUICK_WAIT_S = 16.0, 7.0
SETTLE_BUSY = 0.15  # the whole machine's share of busy CPU that counts as settled
SETTLE_MAX_S, QUICK_SETTLE_MAX_S = 180.0, 30.0


def profiles(ctx: Ctx, name: str = "p7") -> tuple[Path, list[str]]:
    """Ten profiles ``s1``...``s10`` over the two 22.05 controllers, each as its own login user.

    Ten endpoints stand for ten clusters, where ``squeue --me`` lists the user's 1,000 jobs of
    that cluster. As one user, each endpoint's listed the 5,000 of the five endpoints on its
    controller: wall time of each exec and CPU of every poll that are the rig's and not a
    site's (docs/performance.md, P7).
    """
    rig = ctx.rig
    ports = [rig.dev.ssh_port["local"], rig.dev.ssh_port["local2"]]
    users = rig.dev.bench_users
    if len(users) < ENDPOINTS:
        raise RuntimeError(
            f"the dev cluster has {len(users)} bench users, P7 needs {ENDPOINTS}: "
            "scripts/dev-cluster down, then up"
        )
    folder = ctx.tmp / name
    names = []
    for i in range(1, ENDPOINTS + 1):
        proxy = rig.start_proxy(ports[(i - 1) % 2], DELAY_MS)
        rig.write_profile(folder, f"s{i}", proxy.port, user=users[i - 1])
        names.append(f"s{i}")
    return folder, names


def slurm_cluster(ctx: Ctx, name: str) -> str:
    """The Slurm cluster behind profile ``s<i>`` (odd: local, even: local2)."""
    return "local" if int(name[1:]) % 2 else "local2"


def chain_count(ctx: Ctx) -> int:
    """P7's run size: ``--p7-chains``, else 10,000 (200 with ``--quick``); whole endpoints."""
    chains = ctx.p7_chains or (QUICK_CHAINS if ctx.quick else CHAINS)
    return max(ENDPOINTS, chains - chains % ENDPOINTS)


def p7_scale(ctx: Ctx, child: Callable[[list[str]], dict[str, object]]) -> None:
    chains = chain_count(ctx)
    per = chains // ENDPOINTS
    folder, names = profiles(ctx)
    config = write_config(
        ctx.tmp / "p7.yaml", [f"c{i:05d}" for i in range(per)], extra_args=["--hold"]
    )
    one = write_config(ctx.tmp / "p7-one.yaml", ["c0"], extra_args=["--hold"])
    ten = write_config(ctx.tmp / "p7-ten.yaml", ["t0"], extra_args=["--hold"])
    ctx.progress(f"P7: submitting {chains} held chains ({per} per cluster, {ENDPOINTS} clusters)")
    probe = Probe()
    timed, big = retried(ctx, "P7 submit", submit_now, ctx, folder, names, config, probe)
    by_cluster: dict[str, list[str]] = {}
    for s in big.submissions:
        if s.job_id:
            by_cluster.setdefault(slurm_cluster(ctx, s.cluster), []).append(s.job_id)
    for cluster, ids in by_cluster.items():
        ctx.rig.track(cluster, ids)
    try:
        _measure(ctx, child, _Run(folder, names, per, timed.wall, probe, big.run_id, one, ten))
    finally:
        for cluster, ids in by_cluster.items():  # free the shared controllers at once
            ctx.rig.scancel(cluster, ids)


@dataclass(frozen=True)
class _Run:
    folder: Path
    names: list[str]
    per: int
    submit_wall: float
    probe: Probe
    run_id: str
    one: Path
    ten: Path  # one benchmark, submitted to every endpoint


def _submit_row(ctx: Ctx, run: _Run) -> None:
    names, per, probe = run.names, run.per, run.probe
    chains = per * len(names)
    execs = probe.of("exec")
    per_cluster = {n: sum(1 for e in execs if e.cluster == n) for n in names}
    per_bench = Summary.of([e.seconds / per for e in execs])
    ctx.rows.append(
        Row(
            "p7.submit",
            f"P7 submit {chains} held chains, {per} per cluster over {len(names)} (50 ms RTT)",
            f"{run.submit_wall:.1f} s; remote time per benchmark {per_bench.median * 1000:.1f} ms "
            f"[{per_bench.min * 1000:.1f}-{per_bench.max * 1000:.1f}]",
            baseline=f"execs per cluster: {sorted(set(per_cluster.values()))}",
            target="1 exec per cluster",
            met=all(v == 1 for v in per_cluster.values()),
            data={
                "wall": run.submit_wall,
                "per_benchmark": per_bench.to_json(),
                "execs": per_cluster,
            },
        )
    )


def _small_runs(ctx: Ctx, run: _Run) -> tuple[str, str]:
    """The 1-chain run (on ``s1``) and the 10-chain run (one on each endpoint): their ids."""
    folder, names = run.folder, run.names
    _, small = retried(ctx, "P7 submit one", submit_now, ctx, folder, [names[0]], run.one)
    ctx.rig.track(slurm_cluster(ctx, names[0]), slurm_ids(small))
    _, tens = retried(ctx, "P7 submit ten", submit_now, ctx, folder, names, run.ten)
    for s in tens.submissions:
        if s.job_id:
            ctx.rig.track(slurm_cluster(ctx, s.cluster), [s.job_id])
    return small.run_id, tens.run_id


def _measure(ctx: Ctx, child: Callable[[list[str]], dict[str, object]], run: _Run) -> None:
    folder, names, per, run_id = run.folder, run.names, run.per, run.run_id
    chains = per * len(names)
    _submit_row(ctx, run)
    small_id, ten_id = _small_runs(ctx, run)
    settle(ctx)

    big_t, one_t, polls, sent, slowest, busy, ten_t = [], [], [], [], [], [], []
    share_t, client_cpu, share_cpu, machine = [], [], [], []
    for rnd in range(ctx.runs + 1):
        ctx.progress(f"P7 status: round {rnd}/{ctx.runs}" + (" (warm-up)" if rnd == 0 else ""))
        # No cluster named: the run's own index names all ten.
        p_all = Probe()
        cpu0, stat0 = time.process_time(), _cpu_jiffies()
        t_all, result = retried(ctx, "P7 status all", _status_all, ctx, folder, run_id, p_all)
        cpu1, stat1 = time.process_time(), _cpu_jiffies()
        if len(result.chains) != chains or result.failures:
            raise Disturbed(f"status saw {len(result.chains)} chains, {result.failures}")
        t_one, _ = retried(
            ctx, "P7 status one", status_now, ctx, folder, names[0], small_id, Probe()
        )
        cpu2 = time.process_time()
        t_share, shared = retried(
            ctx, "P7 status share", status_now, ctx, folder, names[0], run_id, Probe()
        )
        cpu3 = time.process_time()
        if len(shared.chains) != per or shared.failures:
            raise Disturbed(f"status of {names[0]} saw {len(shared.chains)} chains")
        t_ten, spread = retried(ctx, "P7 status ten", _status_all, ctx, folder, ten_id, Probe())
        if len(spread.chains) != len(names) or spread.failures:
            raise Disturbed(f"status of the 10-chain run saw {len(spread.chains)} chains")
        if rnd:
            ten_t.append(t_ten.wall)
            share_t.append(t_share.wall)
            client_cpu.append(cpu1 - cpu0)
            share_cpu.append(cpu3 - cpu2)
            machine.append(_busy(stat0, stat1))
            big_t.append(t_all.wall)
            one_t.append(t_one.wall)
            by: dict[str, int] = {}
            for e in p_all.of("exec"):
                by[e.cluster] = by.get(e.cluster, 0) + 1
            polls.append(max(by.values()))
            sent.append(max(e.sent for e in p_all.of("exec")))
            # The login nodes' side: the slowest cluster's exec, and all ten execs' time
            # together (here the ten "login nodes" share this machine's cores).
            slowest.append(max(e.seconds for e in p_all.of("exec")))
            busy.append(sum(e.seconds for e in p_all.of("exec")))
    ratio = Summary.of([b / o for b, o in zip(big_t, one_t, strict=True)])
    b, o = Summary.of(big_t), Summary.of(one_t)
    ctx.rows.append(
        Row(
            "p7.status",
            f"P7 warm status (in one process) of {chains} chains over {len(names)} clusters "
            "vs 1 chain (50 ms RTT)",
            f"{seconds(b)} vs {seconds(o)}",
            ratio=f"{ratio.median:.2f}x",
            baseline=f"execs per cluster per poll: {sorted(set(polls))}; "
            f"largest exec request {max(sent)} bytes; slowest exec "
            f"{Summary.of(slowest).median:.3f} s, all execs {Summary.of(busy).median:.2f} s",
            target=f"<= {STATUS_RATIO:g}x; 1 exec",
            met=ratio.median <= STATUS_RATIO and set(polls) == {1},
            data={
                "big": b.to_json(),
                "one": o.to_json(),
                "ratio": ratio.to_json(),
                "slowest_exec": Summary.of(slowest).to_json(),
                "exec_seconds_summed": Summary.of(busy).to_json(),
            },
        )
    )
    ctx.verdicts.append(
        Verdict(
            f"P7 warm status (in one process) of {chains} chains <= {STATUS_RATIO:g}x a "
            "1-chain run, 1 exec per cluster",
            ratio.median <= STATUS_RATIO and set(polls) == {1},
            f"{ratio.median:.2f}x ({b.median:.3f} s vs {o.median:.3f} s, paired median of "
            f"{ratio.n}); execs per cluster per poll {sorted(set(polls))}",
        )
    )
    _limit(ctx, _Limit(chains, per, one_t, share_t, client_cpu, share_cpu, machine, big_t))
    _floor(ctx, chains, len(names), _Paired(big_t, ten_t, one_t))
    _cold(ctx, folder, (run_id, chains), small_id)
    doc = child(["status", str(folder), ",".join(names), run_id, str(ctx.tmp / "state")])
    kib = doc["peak_rss_kib"]
    assert isinstance(kib, int)
    ctx.rows.append(
        Row(
            "p7.rss",
            f"P7 client peak RSS, one status poll over {chains} chains (child process)",
            f"{kib / 1024:.1f} MiB",
            target=f"<= {RSS_TARGET_MIB:g} MiB",
            met=kib / 1024 <= RSS_TARGET_MIB,
            data=doc,
        )
    )
    ctx.verdicts.append(
        Verdict(
            f"P7 client peak RSS <= {RSS_TARGET_MIB:g} MiB",
            kib / 1024 <= RSS_TARGET_MIB,
            f"{kib / 1024:.1f} MiB for one status poll over {chains} chains",
        )
    )
    _wait(ctx, folder, run_id, chains)


def _cold(ctx: Ctx, folder: Path, big: tuple[str, int], one_run: str) -> None:
    """As a user runs it: ``remote-chain status RUN --json``, a new process each, of the whole
    run and of the 1-chain run in turn, both found in the bench's index (its state folder)."""
    run_id, chains = big
    env = {**os.environ, "PYTHONPATH": str(REPO), "REMOTE_CHAIN_STATE_DIR": str(ctx.tmp / "state")}
    env.pop("REMOTE_CHAIN_CLUSTERS_DIR", None)
    env.pop("REMOTE_CHAIN_PERSIST", None)
    cli = [*CLI, "--clusters-dir", str(folder), "status"]
    cold_big, cold_one = [], []
    for rnd in range(ctx.runs + 1):
        ctx.progress(f"P7 cold status: round {rnd}/{ctx.runs}" + (" (warm-up)" if rnd == 0 else ""))
        wall, _, out = retried(
            ctx, "P7 cold all", timed_process, [*cli, run_id, "--json"], env, ctx.tmp
        )
        if len(json.loads(out)["chains"]) != chains:
            raise Disturbed("the cold status did not see every chain")
        wall_one, _, _ = retried(
            ctx, "P7 cold one", timed_process, [*cli, one_run, "--json"], env, ctx.tmp
        )
        if rnd:
            cold_big.append(wall)
            cold_one.append(wall_one)
    cold = Summary.of([b / o for b, o in zip(cold_big, cold_one, strict=True)])
    cb, co = Summary.of(cold_big), Summary.of(cold_one)
    ctx.rows.append(
        Row(
            "p7.status.cold",
            f"P7 cold `status RUN --json` of {chains} chains vs 1 chain, a new process each",
            f"{seconds(cb)} vs {seconds(co)}",
            ratio=f"{cold.median:.2f}x",
            baseline="the CLI as a user runs it (the in-process row above: warm)",
            target=f"<= {STATUS_RATIO:g}x",
            met=cold.median <= STATUS_RATIO,
            data={"big": cb.to_json(), "one": co.to_json(), "ratio": cold.to_json()},
        )
    )
    ctx.verdicts.append(
        Verdict(
            f"P7 status of {chains} chains <= {STATUS_RATIO:g}x a 1-chain run, as a user runs "
            "it (a new process each)",
            cold.median <= STATUS_RATIO,
            f"{cold.median:.2f}x ({cb.median:.3f} s vs {co.median:.3f} s, paired median of "
            f"{cold.n})",
        )
    )


@dataclass(frozen=True)
class _Limit:
    chains: int
    per: int
    one: list[float]  # status of the 1-chain run, wall s
    share: list[float]  # status of one endpoint's share of the big run, wall s
    client_cpu: list[float]  # client CPU s of the whole poll
    share_cpu: list[float]  # client CPU s of the one-endpoint poll
    machine: list[tuple[float, float]]  # (CPU s used by every process, CPU s available)
    big: list[float]  # status of the whole run, wall s


def _limit(ctx: Ctx, m: _Limit) -> None:
    """The rows that say what bounds the ten-endpoint poll here (a miss that hits a physical
    limit is explained by the measurement that shows it)."""
    share = Summary.of([s / o for s, o in zip(m.share, m.one, strict=True)])
    # Ten real login nodes work side by side; the client still parses every reply in one
    # process. So: the one endpoint's share, plus the client CPU the other nine add.
    projected = [
        s + max(0.0, c - sc) for s, c, sc in zip(m.share, m.client_cpu, m.share_cpu, strict=True)
    ]
    proj = Summary.of([p / o for p, o in zip(projected, m.one, strict=True)])
    used = Summary.of([u for u, _ in m.machine])
    busy = Summary.of([u / a for u, a in m.machine])
    wall = Summary.of(m.big)
    ctx.rows.append(
        Row(
            "p7.share",
            f"P7 status of one endpoint's share ({m.per} chains on s1) vs 1 chain (50 ms RTT)",
            f"{seconds(Summary.of(m.share))} vs {seconds(Summary.of(m.one))}",
            ratio=f"{share.median:.2f}x",
            baseline=f"client CPU: whole run {seconds(Summary.of(m.client_cpu))}, "
            f"one share {seconds(Summary.of(m.share_cpu))}",
            target=f"reported (what each of ten login nodes does; <= {STATUS_RATIO:g}x)",
            data={"ratio": share.to_json(), "share": Summary.of(m.share).to_json()},
        )
    )
    ctx.rows.append(
        Row(
            "p7.limit",
            f"P7 what bounds the {m.chains}-chain poll here: the whole machine's CPU during it",
            f"{used.median:.2f} CPU s in {wall.median:.2f} s of wall: {busy.median:.0%} of "
            f"{os.cpu_count()} cores busy [{busy.min:.0%}-{busy.max:.0%}]",
            ratio=f"{proj.median:.2f}x",
            baseline="ten separate login nodes (one share + the client CPU of the other "
            f"nine): {seconds(Summary.of(projected))} vs 1 chain",
            target=f"<= {STATUS_RATIO:g}x on ten machines",
            data={
                "cpu_used": used.to_json(),
                "busy": busy.to_json(),
                "projected": Summary.of(projected).to_json(),
                "projected_ratio": proj.to_json(),
            },
        )
    )


@dataclass(frozen=True)
class _Paired:
    big: list[float]  # status of the whole run, wall s
    ten: list[float]  # status of one chain on each endpoint, wall s
    one: list[float]  # status of the 1-chain run, wall s


def _floor(ctx: Ctx, chains: int, endpoints: int, m: _Paired) -> None:
    """The fan-out's own cost on this rig (what bounds the ratio before any chain is read),
    and what the chains add to it, each in units of the 1-chain poll of the same round."""
    floor = Summary.of([t / o for t, o in zip(m.ten, m.one, strict=True)])
    added = Summary.of([(b - t) / o for b, t, o in zip(m.big, m.ten, m.one, strict=True)])
    ctx.rows.append(
        Row(
            "p7.floor",
            f"P7 the fan-out alone: status of {endpoints} chains, one on each of the same "
            f"{endpoints} endpoints, vs 1 chain (50 ms RTT)",
            f"{seconds(Summary.of(m.ten))} vs {seconds(Summary.of(m.one))}",
            ratio=f"{floor.median:.2f}x",
            baseline=f"what the {chains} chains add to it: {added.median:.2f}x of the 1-chain poll",
            target=f"reported (of the {STATUS_RATIO:g}x: the rig's {endpoints} endpoints on "
            f"{os.cpu_count()} cores, before a chain is read)",
            data={
                "ratio": floor.to_json(),
                "ten": Summary.of(m.ten).to_json(),
                "added": added.to_json(),
            },
        )
    )


def settle(ctx: Ctx) -> None:
    """Wait (bounded) until the rig's own Slurm has digested the submit before timing polls.

    This machine is the ten login nodes and also both controllers, slurmdbd and MariaDB. On
    2026-12-03 the same 10,000 held chains polled at 2.49 CPU-s a poll (4.48x) while the
    machine was still busy with the accounting of earlier submits and cancels (30,000 jobs in
    its first hour), and at 2.03 (3.70x) once it was not. A site's accounting database is on
    neither its login nodes nor the laptop: the status rounds start once the whole machine is
    below SETTLE_BUSY for two seconds in a row, or after SETTLE_MAX_S (30 s with --quick);
    the wait and the load it ended at are noted (in the run that followed: 2 s, 3 % busy).
    """
    t0, quiet, busy = time.monotonic(), 0, 1.0
    bound = QUICK_SETTLE_MAX_S if ctx.quick else SETTLE_MAX_S
    while quiet < 2 and time.monotonic() - t0 < bound:
        before = _cpu_jiffies()
        time.sleep(1.0)
        used, had = _busy(before, _cpu_jiffies())
        busy = used / had if had else 0.0
        quiet = quiet + 1 if busy < SETTLE_BUSY else 0
    ctx.note(
        f"P7: the rig settled after the submit in {time.monotonic() - t0:.0f} s "
        f"(machine {busy:.0%} busy{'' if quiet >= 2 else ', not settled: timed out'})"
    )


def _cpu_jiffies() -> tuple[int, int]:
    """(busy, total) clock ticks of every CPU since boot, from /proc/stat's first line."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already in user/nice
    return total - idle, total


def _busy(before: tuple[int, int], after: tuple[int, int]) -> tuple[float, float]:
    """(CPU s used by every process, CPU s the machine had) between two ``_cpu_jiffies``."""
    hz = os.sysconf("SC_CLK_TCK")
    return (after[0] - before[0]) / hz, (after[1] - before[1]) / hz


async def _status_all_async(ctx: Ctx, folder: Path, run_id: str, probe: Probe) -> StatusResult:
    async with Orchestrator(ctx.settings(), clusters_dir=folder, opener=probe.open) as rc:
        return await rc.status(run_id, retry_lag=False)


class _Timed:
    def __init__(self, wall: float) -> None:
        self.wall = wall


def _status_all(ctx: Ctx, folder: Path, run_id: str, probe: Probe) -> tuple[_Timed, StatusResult]:
    # The result leaves through a box, as the CLI's does (cli/frame.py Invocation.run): as the
    # main task's result, asyncio.run's SIGINT restore would format its whole repr.
    box: list[StatusResult] = []

    async def poll() -> None:
        box.append(await _status_all_async(ctx, folder, run_id, probe))

    t0 = time.monotonic()
    asyncio.run(poll())
    return _Timed(time.monotonic() - t0), box[0]


def _wait(ctx: Ctx, folder: Path, run_id: str, chains: int) -> None:
    limit = QUICK_WAIT_S if ctx.quick else WAIT_S
    ctx.progress(f"P7 wait: polling {chains} held chains for {limit:g} s")
    stamps: list[tuple[float, float]] = []  # (monotonic, process CPU) at each poll's end
    probe = Probe()

    async def run() -> None:
        async with Orchestrator(ctx.settings(), clusters_dir=folder, opener=probe.open) as rc:
            start = (time.monotonic(), time.process_time())
            stamps.append(start)
            with contextlib.suppress(WaitTimeout):
                await rc.wait(
                    run_id,
                    timeout=limit,
                    on_poll=lambda _r: stamps.append((time.monotonic(), time.process_time())),
                )

    asyncio.run(run())
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(stamps)]
    cpu = Summary.of([b[1] - a[1] for a, b in itertools.pairwise(stamps)])
    execs = len(probe.of("exec"))
    ctx.rows.append(
        Row(
            "p7.wait",
            f"P7 wait on {chains} chains: client CPU per poll; poll starts (s from the first)",
            seconds(cpu),
            baseline="polls ended at (s) "
            + ", ".join(f"{sum(gaps[:i]):.1f}" for i in range(len(gaps))),
            data={"cpu": cpu.to_json(), "gaps": gaps, "execs": execs, "polls": len(gaps)},
        )
    )
