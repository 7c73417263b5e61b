"""P3 (status of 1, 50, 200 chains) and the status half of P5 (sacct/squeue calls per poll).

The chains are cheap: one run per size of ``command: "true"`` benchmarks submitted with
``--hold``, so nothing runs and nothing queues ahead of other people's jobs. Of the largest
run, some jobs are cancelled and some released (they complete in a second), so the
correctness check against ``sacct`` covers pending, cancelled and completed chains.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from benchlib.common import (
    DELAYS_MS,
    Ctx,
    Disturbed,
    retried,
    slurm_ids,
    status_now,
    submit_now,
    write_config,
)
from benchlib.probe import Probe
from benchlib.stats import Row, Summary, Verdict, paired_rtt_equivalents, seconds, times
from remote_chain.core.models import ChainStateName
from remote_chain.core.results import StatusResult
from tests import devcluster

SIZES = (1, 50, 200)
STABLE_TIMEOUT_S = 120.0
CLUSTER = "local"
PROFILE = "ps"


@dataclass(frozen=True)
class StatusRig:
    folders: dict[float, Path]
    runs: dict[int, str]  # size -> run id
    jobs: dict[int, list[str]]  # size -> job ids
    cancelled: frozenset[str]
    released: frozenset[str]


def _label(delay_ms: float) -> str:
    return f"{round(2 * delay_ms)} ms RTT"


def prepare(ctx: Ctx) -> StatusRig:
    rig = ctx.rig
    port = rig.dev.ssh_port[CLUSTER]
    folders = {}
    for d in DELAYS_MS:
        proxy = rig.start_proxy(port, d)
        folders[d] = ctx.tmp / f"status-{int(d)}"
        rig.write_profile(folders[d], PROFILE, proxy.port)
    runs, jobs = {}, {}
    for n in SIZES:
        ctx.progress(f"P3 status: creating {n} held chain(s)")
        config = write_config(
            ctx.tmp / f"p3-{n}.yaml", [f"c{i:03d}" for i in range(n)], extra_args=["--hold"]
        )
        _, result = retried(
            ctx,
            f"P3 create {n}",
            submit_now,
            ctx,
            folders[0.0],
            [PROFILE],
            config,
        )
        runs[n], jobs[n] = result.run_id, slurm_ids(result)
        rig.track(CLUSTER, jobs[n])
    big = jobs[max(SIZES)]
    cancelled = big[: len(big) // 10]
    released = big[len(big) // 10 : len(big) // 10 + len(big) // 20]
    rig.scancel(CLUSTER, cancelled)
    if released:
        devcluster.slurm(CLUSTER, "scontrol", "release", ",".join(released), timeout=60)
    _wait_stable(ctx, released)
    return StatusRig(folders, runs, jobs, frozenset(cancelled), frozenset(released))


def _wait_stable(ctx: Ctx, released: list[str]) -> None:
    """Wait (bounded) until the released jobs completed and accounting shows it."""
    deadline = time.monotonic() + STABLE_TIMEOUT_S
    while released and time.monotonic() < deadline:
        rows = ctx.rig.sacct(CLUSTER, released, "JobIDRaw,State")
        if len(rows) == len(released) and all(r[1] == "COMPLETED" for r in rows):
            return
        time.sleep(2)
    if released:
        ctx.note("P3: released jobs did not all complete in time; their chains may be running")


def _check(result: StatusResult, n: int) -> None:
    if result.failures:
        raise Disturbed(f"status failed: {[f.to_json() for f in result.failures]}")
    if len(result.chains) != n:
        raise Disturbed(f"status saw {len(result.chains)} chains of {n}")
    unknown = [c for c in result.chains if c.state is ChainStateName.UNKNOWN]
    if unknown:  # accounting down or lagging (someone stopped slurmdbd): not a fair sample
        raise Disturbed(
            f"{len(unknown)} chain(s) unknown: {unknown[0].error or unknown[0].warnings}"
        )


def p3_status(ctx: Ctx, srig: StatusRig) -> None:
    wall: dict[tuple[int, float], list[float]] = {}
    exec_s: dict[tuple[int, float], list[float]] = {}
    execs: list[int] = []
    received: dict[int, int] = {}
    for rnd in range(ctx.runs + 1):
        ctx.progress(f"P3 status: round {rnd}/{ctx.runs}" + (" (warm-up)" if rnd == 0 else ""))
        for n in SIZES:
            for d in DELAYS_MS:

                def sample(n: int = n, d: float = d) -> tuple[float, float, int, int]:
                    timed, result = status_now(ctx, srig.folders[d], PROFILE, srig.runs[n])
                    _check(result, n)
                    spans = timed.probe.of("exec")
                    return timed.wall, spans[0].seconds, len(spans), spans[0].received

                w, e, count, got = retried(ctx, f"P3 status {n}", sample)
                if rnd == 0:
                    continue
                wall.setdefault((n, d), []).append(w)
                exec_s.setdefault((n, d), []).append(e)
                execs.append(count)
                received[n] = got
    s = {k: Summary.of(v) for k, v in wall.items()}
    d0, d50 = DELAYS_MS
    for n in SIZES:
        for d in DELAYS_MS:
            ctx.rows.append(
                Row(
                    f"p3.{n}.{int(2 * d)}ms",
                    f"P3 status of {n} chain(s), {_label(d)}",
                    seconds(s[n, d]),
                    data=s[n, d].to_json(),
                )
            )
        e0 = Summary.of(exec_s[n, d0])
        rtt = paired_rtt_equivalents(exec_s[n, d50], exec_s[n, d0])
        ctx.rows.append(
            Row(
                f"p3.{n}.exec",
                f"P3 status of {n}: the exec alone at 0 ms / its RTT-equivalents",
                f"{seconds(e0)} / {rtt.median:.2f} RTT",
                baseline=f"{received[n]} bytes back",
                data={"exec_0ms": e0.to_json(), "rtt": rtt.to_json(), "bytes": received[n]},
            )
        )
    top = max(SIZES)
    one_exec = all(c == 1 for c in execs)
    ctx.rows.append(
        Row(
            "p3.execs",
            "P3 remote execs per status poll (every sample, every size)",
            str(sorted(set(execs))),
            target="1",
            met=one_exec,
        )
    )
    judged = 0.0
    for d in DELAYS_MS:
        ratio = s[top, d].median / s[1, d].median
        if d > 0:
            judged = ratio
        ctx.rows.append(
            Row(
                f"p3.ratio.{int(2 * d)}ms",
                f"P3 at {_label(d)}: status of {top} / status of 1",
                seconds(s[top, d]),
                baseline=f"{s[1, d].median:.3f} s",
                ratio=times(ratio),
                target="<= 1.3x" if d > 0 else "(information)",
                met=ratio <= 1.3 if d > 0 else None,
                data={"ratio": ratio},
            )
        )
    ctx.verdicts.append(
        Verdict(
            "P3 status: one remote exec whatever the number of chains",
            one_exec,
            f"execs per poll seen: {sorted(set(execs))} over {len(execs)} polls",
        )
    )
    ctx.verdicts.append(
        Verdict(
            f"P3 status: wall at {top} chains <= 1.3x wall at 1 (50 ms RTT)",
            judged <= 1.3,
            f"{judged:.2f}x ({s[top, d50].median:.3f} s vs {s[1, d50].median:.3f} s); at 0 ms "
            f"{s[top, d0].median / s[1, d0].median:.2f}x",
        )
    )
    ctx.raw["p3"] = {f"{n}@{int(2 * d)}ms": v for (n, d), v in wall.items()}


def p3_correct(ctx: Ctx, srig: StatusRig) -> None:
    """The JSON of the largest status against a direct sacct as root, job by job."""
    top = max(SIZES)

    def both() -> tuple[dict[str, object], dict[str, str]]:
        _, result = status_now(ctx, srig.folders[0.0], PROFILE, srig.runs[top])
        _check(result, top)
        doc = result.to_json()
        truth = {
            r[0]: r[1].split()[0]
            for r in ctx.rig.sacct(CLUSTER, srig.jobs[top], "JobIDRaw,State")
            if len(r) >= 2
        }
        if len(truth) != len(srig.jobs[top]):
            raise Disturbed(f"root sacct saw {len(truth)} of {len(srig.jobs[top])} jobs")
        return doc, truth

    doc, truth = retried(ctx, "P3 correctness", both)
    expected_chain = {}
    for job in srig.jobs[top]:
        if job in srig.cancelled:
            expected_chain[job] = "cancelled"
        elif job in srig.released:
            expected_chain[job] = "completed"
        else:
            expected_chain[job] = "pending"
    problems: list[str] = []
    chains = doc["chains"]
    assert isinstance(chains, list)
    seen: set[str] = set()
    for chain in chains:
        jobs = chain["jobs"]
        if len(jobs) != 1:
            problems.append(f"{chain['benchmark']}: {len(jobs)} jobs")
            continue
        job = jobs[0]
        jid, state = str(job["job_id"]), str(job["state"]).split()[0]
        seen.add(jid)
        if truth.get(jid) != state:
            problems.append(f"{chain['benchmark']} job {jid}: JSON {state}, sacct {truth.get(jid)}")
        if expected_chain.get(jid) != chain["state"]:
            problems.append(
                f"{chain['benchmark']}: chain {chain['state']}, expected {expected_chain.get(jid)}"
            )
    missing = set(srig.jobs[top]) - seen
    problems += [f"job {j} missing from the JSON" for j in sorted(missing)]
    states: dict[str, int] = {}
    for chain in chains:
        states[str(chain["state"])] = states.get(str(chain["state"]), 0) + 1
    ok = not problems
    ctx.rows.append(
        Row(
            "p3.correct",
            f"P3 status JSON of {top} chains vs sacct (as root), job by job",
            f"{top - len(problems) if problems else top}/{top} equal",
            baseline=", ".join(f"{v} {k}" for k, v in sorted(states.items())),
            target="all equal",
            met=ok,
            data={"problems": problems[:20], "chain_states": states},
        )
    )
    ctx.verdicts.append(
        Verdict(
            f"P3 status JSON for {top} chains correct against sacct",
            ok,
            "every job state and chain state as sacct says"
            if ok
            else f"{len(problems)} problem(s): {problems[:3]}",
        )
    )


def p5_status_calls(ctx: Ctx, srig: StatusRig, shims: Path) -> None:
    """sacct and squeue calls of one poll, counted by the shims on the remote PATH."""
    log = shims / "calls.log"
    counts: dict[int, tuple[int, int]] = {}
    for n in SIZES:

        def poll(n: int = n) -> str:
            # A fresh tag per attempt: an attempt that hit an outage is not counted.
            tag = f"status-{n}-{time.monotonic_ns()}"
            probe = Probe(path_prefix=str(shims), tag=tag)
            _, result = status_now(ctx, srig.folders[0.0], PROFILE, srig.runs[n], probe)
            _check(result, n)
            return tag

        tag = retried(ctx, f"P5 status {n}", poll)
        lines = [line.split() for line in log.read_text().splitlines()]
        mine = [w for w in lines if len(w) == 4 and w[2] == tag]
        counts[n] = (sum(w[3] == "sacct" for w in mine), sum(w[3] == "squeue" for w in mine))
    # Status asks sacct only of the jobs squeue no longer shows, so these polls of held (queued)
    # chains ask it nothing: the controller load stays bounded, and slurmdbd is spared. The
    # target: exactly 1 squeue and at most 1 sacct a poll.
    ok = all(sacct <= 1 and squeue == 1 for sacct, squeue in counts.values())
    for n, (sacct, squeue) in counts.items():
        ctx.rows.append(
            Row(
                f"p5.status.{n}",
                f"P5 status poll of {n} chain(s): calls seen by the shims",
                f"{sacct} sacct, {squeue} squeue",
                target="<= 1 and 1 (0 sacct: every job queued, or its end already read)",
                met=sacct <= 1 and squeue == 1,
            )
        )
    ctx.verdicts.append(
        Verdict(
            "P5 status: at most 1 sacct and exactly 1 squeue per cluster per poll",
            ok,
            "; ".join(f"{n} chains: {a} sacct, {b} squeue" for n, (a, b) in counts.items()),
        )
    )
