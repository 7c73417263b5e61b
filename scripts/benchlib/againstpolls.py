"""The before/after mode's status polls: P3 and P8 inside one process, P7 a new process each.

P3 and P8 run ``polldriver.py`` with each checkout first on PYTHONPATH, in blocks that
alternate which side goes first: P3 polls a 1-chain and a 200-chain run at 50 ms, each poll
opening its own connection (as the in-process P3 rows do); P8 polls a 1-chain run through
the side's agent (started by the cold command rounds) at 0 and 50 ms in one open session.
Both runs of P3 are submitted once by this checkout and read by both sides (``-c``).

P7 submits one held run over ten endpoints at 50 ms (``scale.profiles``), then times each
side's ``status RUN -c s1 ... -c s10 --json`` as a user runs it, a new process each, in
alternating order: wall time and the process's CPU time (its rusage), side by side.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

from benchlib.against import CLUSTER, PROFILE, AbRig, Side
from benchlib.cold import timed_process
from benchlib.common import DELAYS_MS, Ctx, Disturbed, retried, slurm_ids, submit_now, write_config
from benchlib.scale import ENDPOINTS, chain_count, profiles, settle, slurm_cluster
from benchlib.stats import Compared, Summary, Verdict, client_flights

POLLDRIVER = Path(__file__).resolve().parent / "polldriver.py"
P3_CHAINS = 200
P3_RATIO = 1.3  # the new code: status of 200 chains <= 1.3x status of 1 at 50 ms
P8_RTT = 1.1  # the new code: a poll through the agent, RTT-equivalents
P7_RATIO = 1.25  # the new code's wall time and client CPU vs the old's, 10,000 chains


def _drive(
    ctx: Ctx, side: Side, spec: dict[str, object], *, agent: bool
) -> dict[str, list[list[float]]]:
    """One ``polldriver.py`` run by ``side``; its polls without the first round."""
    path = ctx.tmp / f"spec-{side.name}.json"
    path.write_text(json.dumps(spec))
    done = subprocess.run(
        [sys.executable, str(POLLDRIVER), str(path)],
        env=side.env(agent=agent),
        cwd=ctx.tmp,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{side.name} polls failed: {done.stderr[-500:]}")
    polls: dict[str, list[list[float]]] = json.loads(done.stdout.splitlines()[-1])["polls"]
    return {tag: v[1:] for tag, v in polls.items()}


def polls(ctx: Ctx, sides: list[Side], ab: AbRig) -> None:
    d0, d50 = DELAYS_MS
    one = write_config(ctx.tmp / "ab-p3-one.yaml", ["c0"], extra_args=["--hold"])
    many = write_config(
        ctx.tmp / "ab-p3.yaml", [f"c{i:03d}" for i in range(P3_CHAINS)], extra_args=["--hold"]
    )
    runs = {}
    for tag, config in (("1", one), (str(P3_CHAINS), many)):
        ctx.progress(f"against: P3 run of {tag} held chain(s)")
        _, result = retried(ctx, "ab P3 submit", submit_now, ctx, ab.folders[d0], [PROFILE], config)
        ctx.rig.track(CLUSTER, slurm_ids(result))
        runs[tag] = result.run_id
    n = 4 if ctx.quick else 8
    blocks = 2 if ctx.quick else 3
    p3: dict[str, dict[str, list[list[float]]]] = {s.name: {} for s in sides}
    p8: dict[str, dict[str, list[list[float]]]] = {s.name: {} for s in sides}
    for block in range(blocks):
        ctx.progress(f"against: P3 and P8 polls, block {block + 1}/{blocks}")
        for side in sides if block % 2 else sides[::-1]:
            got = _drive(
                ctx,
                side,
                {
                    "state": str(side.state / "direct"),
                    "rounds": n + 1,
                    "keep_open": False,
                    "polls": [
                        {"tag": t, "folder": str(ab.folders[d50]), "cluster": PROFILE, "run": r}
                        for t, r in runs.items()
                    ],
                },
                agent=False,
            )
            for tag, v in got.items():
                p3[side.name].setdefault(tag, []).extend(v)
            got = _drive(
                ctx,
                side,
                {
                    "state": str(side.state / "agent"),
                    "rounds": n + 1,
                    "keep_open": True,
                    "polls": [
                        {
                            "tag": str(int(2 * d)),
                            "folder": str(ab.folders[d]),
                            "cluster": PROFILE,
                            "run": ab.agent_runs[side.name],
                        }
                        for d in DELAYS_MS
                    ],
                },
                agent=True,
            )
            for tag, v in got.items():
                p8[side.name].setdefault(tag, []).extend(v)
    _report_polls(ctx, sides, ab, p3, p8)


def _walls(polls: list[list[float]]) -> list[float]:
    return [t1 - t0 for t0, t1, _ in polls]


def _report_polls(
    ctx: Ctx,
    sides: list[Side],
    ab: AbRig,
    p3: dict[str, dict[str, list[list[float]]]],
    p8: dict[str, dict[str, list[list[float]]]],
) -> None:
    old, new = sides[0].name, sides[1].name
    top = str(P3_CHAINS)
    ratio = {
        s: Summary.of([a / b for a, b in zip(_walls(p3[s][top]), _walls(p3[s]["1"]), strict=True)])
        for s in (old, new)
    }
    ctx.comparison.append(
        Compared(
            "ab.p3",
            f"P3 status of {P3_CHAINS} chains / of 1 at 50 ms (in one process, connect included)",
            f"{ratio[old].median:.2f}x ({statistics.median(_walls(p3[old][top])):.3f} s)",
            f"{ratio[new].median:.2f}x ({statistics.median(_walls(p3[new][top])):.3f} s)",
            ratio=f"{ratio[new].median / ratio[old].median:.2f}",
            target=f"new <= {P3_RATIO}x",
            met=ratio[new].median <= P3_RATIO,
            data={s: r.to_json() for s, r in ratio.items()},
        )
    )
    ctx.verdicts.append(
        Verdict(
            f"against: P3 status of {P3_CHAINS} chains <= {P3_RATIO}x of 1 (50 ms RTT)",
            ratio[new].median <= P3_RATIO,
            f"new {ratio[new].median:.2f}x, old {ratio[old].median:.2f}x "
            f"(paired medians of {ratio[new].n})",
        )
    )
    proxy = ab.proxies[DELAYS_MS[1]]
    rtts, flights = {}, {}
    for s in (old, new):
        rtts[s] = Summary.of(
            [(a - b) / 0.05 for a, b in zip(_walls(p8[s]["50"]), _walls(p8[s]["0"]), strict=True)]
        )
        flights[s] = [client_flights(ctx.rig.chunks(proxy, t0, t1)) for t0, t1, _ in p8[s]["50"]]
    ctx.comparison.append(
        Compared(
            "ab.p8",
            "P8 poll through the agent (one open session): RTT-equivalents (round trips "
            "counted at the proxy)",
            f"{rtts[old].median:.2f} ({statistics.median(flights[old]):g})",
            f"{rtts[new].median:.2f} ({statistics.median(flights[new]):g})",
            target=f"new <= {P8_RTT} RTT",
            met=rtts[new].median <= P8_RTT,
            data={s: {"rtt": rtts[s].to_json(), "flights": flights[s]} for s in (old, new)},
        )
    )
    ctx.verdicts.append(
        Verdict(
            f"against: P8 polls through the agent <= {P8_RTT} RTT",
            rtts[new].median <= P8_RTT,
            f"new {rtts[new].median:.2f} RTT ({statistics.median(flights[new]):g} round trip(s) "
            f"counted), old {rtts[old].median:.2f} (paired medians of {rtts[new].n})",
        )
    )


def p7(ctx: Ctx, sides: list[Side]) -> None:
    """P7 side by side: one many-chain run, each side's cold ``status --json`` of it."""
    chains = chain_count(ctx)
    per = chains // ENDPOINTS
    folder, names = profiles(ctx, "ab-p7")
    config = write_config(
        ctx.tmp / "ab-p7.yaml", [f"c{i:05d}" for i in range(per)], extra_args=["--hold"]
    )
    ctx.progress(f"against: P7 submitting {chains} held chains over {ENDPOINTS} clusters")
    _, big = retried(ctx, "ab P7 submit", submit_now, ctx, folder, names, config)
    by_cluster: dict[str, list[str]] = {}
    for s in big.submissions:
        if s.job_id:
            by_cluster.setdefault(slurm_cluster(ctx, s.cluster), []).append(s.job_id)
    for cluster, ids in by_cluster.items():
        ctx.rig.track(cluster, ids)
    wall: dict[str, list[float]] = {s.name: [] for s in sides}
    cpu: dict[str, list[float]] = {s.name: [] for s in sides}
    try:
        settle(ctx)
        clusters = [a for n in names for a in ("-c", n)]
        for rnd in range(ctx.runs + 1):
            warm_up = "" if rnd else " (warm-up)"
            ctx.progress(f"against: P7 cold status, round {rnd}/{ctx.runs}{warm_up}")
            for side in sides if rnd % 2 else sides[::-1]:
                cmd = [*side.cli(folder), "status", big.run_id, *clusters, "--json"]
                w, c, out = retried(
                    ctx, f"ab P7 {side.name}", timed_process, cmd, side.env(), ctx.tmp
                )
                if len(json.loads(out)["chains"]) != chains:
                    raise Disturbed(f"{side.name}: the status did not see every chain")
                if rnd:
                    wall[side.name].append(w)
                    cpu[side.name].append(c)
    finally:
        for cluster, ids in by_cluster.items():
            ctx.rig.scancel(cluster, ids)
    _report_p7(ctx, sides, chains, wall, cpu)


def _report_p7(
    ctx: Ctx,
    sides: list[Side],
    chains: int,
    wall: dict[str, list[float]],
    cpu: dict[str, list[float]],
) -> None:
    old, new = sides[0].name, sides[1].name
    for what, values in (("wall time", wall), ("client CPU", cpu)):
        r = Summary.of([n / o for n, o in zip(values[new], values[old], strict=True)])
        ctx.comparison.append(
            Compared(
                f"ab.p7.{what.split()[-1].lower()}",
                f"P7 cold `status --json` of {chains} chains over {ENDPOINTS} clusters at 50 ms: "
                f"{what}",
                f"{statistics.median(values[old]):.3f} s",
                f"{statistics.median(values[new]):.3f} s",
                ratio=f"{r.median:.2f} [{r.min:.2f}-{r.max:.2f}]",
                target=f"new <= {P7_RATIO}x old",
                met=r.median <= P7_RATIO,
                data={"old": values[old], "new": values[new], "ratio": r.to_json()},
            )
        )
        ctx.verdicts.append(
            Verdict(
                f"against: P7 status of {chains} chains: {what} <= {P7_RATIO}x the old code's",
                r.median <= P7_RATIO,
                f"{r.median:.2f}x ({statistics.median(values[new]):.3f} s vs "
                f"{statistics.median(values[old]):.3f} s, paired median of {r.n})",
            )
        )
