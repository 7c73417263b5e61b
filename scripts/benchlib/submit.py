"""P1 (submit vs the usual ways) and P2 (fan-out to 1, 2, 4, 8 clusters).

Samples are interleaved (every method and every delay once per round, round 0 a discarded
warm-up), so a load change on the shared machine hits all of them alike. Jobs are cancelled
as root right after each sample, outside the timed part.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.baselines import Plan, SshTarget, naive_asyncssh, naive_openssh
from benchlib.common import (
    DELAYS_MS,
    Ctx,
    Disturbed,
    Timed,
    retried,
    run_id_for_baseline,
    runner_file,
    slurm_ids,
    submit_now,
    write_config,
)
from benchlib.rig import Proxy, Rig, busy_fraction, cpu_jiffies
from benchlib.stats import (
    Row,
    Summary,
    Verdict,
    client_flights,
    paired_rtt_equivalents,
    plain,
    seconds,
    times,
)
from remote_chain.client.plan import build_bundle, read_uploads, select_benchmarks
from remote_chain.config import load_profile, load_submit_config
from remote_chain.core.results import SubmitResult

P1_BENCHMARKS = ("b0", "b1", "b2", "b3")
FANOUT = (1, 2, 4, 8)
RC, ASYNCSSH, OPENSSH = "remote-chain", "naive asyncssh", "OpenSSH commands"
# What the warm submit must beat each baseline by at 50 ms (P1's targets).
P1_WANT = {ASYNCSSH: 5.0, OPENSSH: 15.0}
RCM = "remote-chain over an open ControlMaster"


def _label(delay_ms: float) -> str:
    return f"{round(2 * delay_ms)} ms RTT"


def _plan(ctx: Ctx, config: Path, profile_path: Path) -> Plan:
    """The same files remote-chain would send, on local disk, for a baseline's own run id."""
    cfg = load_submit_config(config)
    profile = load_profile(profile_path)
    names = select_benchmarks(cfg, [])
    run_id = run_id_for_baseline()
    ctx.rig.run_ids.add(run_id)
    bundle = build_bundle(
        cfg,
        profile,
        names,
        read_uploads(cfg, max_bytes=1 << 20),
        run_id=run_id,
        created=dt.datetime.now(dt.UTC),
    )
    local = ctx.tmp / "plans" / run_id
    for f in bundle.files:
        path = local / f.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f.data)
        path.chmod(f.mode)
    return Plan(bundle.run_dir, local, tuple(f.path for f in bundle.files), tuple(names))


@dataclass
class _P1Samples:
    rig: Rig
    wall: dict[tuple[str, float], list[float]] = field(default_factory=dict)
    post: dict[float, list[float]] = field(default_factory=dict)  # wall - connect
    connect: dict[float, list[float]] = field(default_factory=dict)
    execs: list[int] = field(default_factory=list)
    flights: dict[str, list[int]] = field(default_factory=dict)  # at 50 ms only
    # remote-chain's phases: local work before connecting, connect, exec, close and the rest
    phases: dict[tuple[str, float], list[float]] = field(default_factory=dict)

    def keep(self, method: str, d: float, timing: tuple[float, float, float], proxy: Proxy) -> None:
        seconds_, t0, t1 = timing
        self.wall.setdefault((method, d), []).append(seconds_)
        if d > 0:
            self.count(method, proxy, t0, t1)

    def count(self, name: str, proxy: Proxy, t0: float, t1: float) -> None:
        self.flights.setdefault(name, []).append(client_flights(self.rig.chunks(proxy, t0, t1)))

    def keep_rc(self, d: float, timed: Timed, proxy: Proxy) -> None:
        (conn,) = timed.probe.of("connect")
        self.keep(RC, d, (timed.wall, timed.t0, timed.t1), proxy)
        self.post.setdefault(d, []).append(timed.wall - conn.seconds)
        self.connect.setdefault(d, []).append(conn.seconds)
        self.execs.append(len(timed.probe.of("exec")))
        (ex,) = timed.probe.of("exec")
        for name, seconds_ in (
            ("local work before connecting", conn.t0 - timed.t0),
            ("connect", conn.seconds),
            ("the submit exec", ex.seconds),
            ("close and the rest", timed.t1 - ex.t1),
        ):
            self.phases.setdefault((name, d), []).append(seconds_)
        if d > 0:
            self.count("rc connect", proxy, conn.t0, conn.t1)
            self.count("rc after connect", proxy, conn.t1, timed.t1)


def p1_submit(ctx: Ctx) -> None:
    rig = ctx.rig
    port = rig.dev.ssh_port["local"]
    proxies = {d: rig.start_proxy(port, d) for d in DELAYS_MS}
    folders = {d: ctx.tmp / f"p1-{int(d)}" for d in DELAYS_MS}
    profiles = {d: rig.write_profile(folders[d], "p1", proxies[d].port) for d in DELAYS_MS}
    # Informational: the openssh transport over a ControlMaster the user already has open
    # (connection reuse across invocations), through the same proxies.
    folders_cm = {d: ctx.tmp / f"p1cm-{int(d)}" for d in DELAYS_MS}
    for d in DELAYS_MS:
        master = rig.start_master(proxies[d].port)
        rig.write_profile(folders_cm[d], "p1", proxies[d].port, control_path=master)
    config = write_config(ctx.tmp / "p1.yaml", P1_BENCHMARKS, upload=runner_file(ctx.tmp))
    targets = {
        d: SshTarget(
            rig.dev.host, proxies[d].port, rig.dev.test_user, rig.dev.identity_file, rig.known_hosts
        )
        for d in DELAYS_MS
    }
    samples = _P1Samples(rig)
    skipped: set[str] = set()
    for rnd in range(ctx.runs + 1):
        ctx.progress(f"P1 submit: round {rnd}/{ctx.runs}" + (" (warm-up)" if rnd == 0 else ""))
        for d in DELAYS_MS:
            timed, result = retried(
                ctx,
                "P1 remote-chain",
                submit_now,
                ctx,
                folders[d],
                ["p1"],
                config,
            )
            rig.scancel("local", slurm_ids(result))
            a = retried(
                ctx,
                "P1 naive asyncssh",
                _time_asyncssh,
                ctx,
                targets[d],
                profiles[d],
                config,
            )
            b = retried(ctx, "P1 OpenSSH", _time_openssh, ctx, targets[d], profiles[d], config)
            cm: Timed | None = None
            if RCM not in skipped:
                try:
                    cm, cm_result = retried(
                        ctx,
                        "P1 remote-chain (ControlMaster)",
                        _submit_cm,
                        ctx,
                        proxies[d],
                        folders_cm[d],
                        config,
                    )
                    rig.scancel("local", slurm_ids(cm_result))
                except Exception as exc:  # an extra row: never worth losing the section for
                    skipped.add(RCM)
                    ctx.note(f"P1: the ControlMaster row is left out: {exc!r:.300}")
            if rnd == 0:
                continue
            if cm is not None:
                samples.keep(RCM, d, (cm.wall, cm.t0, cm.t1), proxies[d])
            samples.keep_rc(d, timed, proxies[d])
            samples.keep(ASYNCSSH, d, a, proxies[d])
            samples.keep(OPENSSH, d, b, proxies[d])
    _p1_report(ctx, samples)


def _p1_report(ctx: Ctx, samples: _P1Samples) -> None:
    wall, post, connect, execs, flights = (
        samples.wall,
        samples.post,
        samples.connect,
        samples.execs,
        samples.flights,
    )
    s = {k: Summary.of(v) for k, v in wall.items()}
    d0, d50 = DELAYS_MS
    methods = [m for m in (RC, ASYNCSSH, OPENSSH, RCM) if all((m, d) in wall for d in DELAYS_MS)]
    for method in methods:
        for d in DELAYS_MS:
            ctx.rows.append(
                Row(
                    f"p1.{method}.{int(2 * d)}ms",
                    f"P1 submit 4 benchmarks, {method}, {_label(d)}",
                    seconds(s[method, d]),
                    data=s[method, d].to_json(),
                )
            )
    rtt_post = paired_rtt_equivalents(post[d50], post[d0])
    rtt_connect = paired_rtt_equivalents(connect[d50], connect[d0])
    ctx.rows.append(
        Row(
            "p1.rc.connect_rtt",
            "P1 remote-chain: connecting (TCP, kex, auth), RTT-equivalents",
            plain(rtt_connect),
            data=rtt_connect.to_json(),
        )
    )
    one_exec = all(n == 1 for n in execs)
    # Met only if the time says so and the protocol does too: the round trips counted at the
    # proxy are exact, where RTT-equivalents hide a round trip the server spends working.
    counted_post = statistics.median(flights["rc after connect"])
    met_post = one_exec and rtt_post.median <= 2.0 and counted_post <= 2
    for (name, d), values in samples.phases.items():
        ph = Summary.of(values)
        ctx.rows.append(
            Row(
                f"p1.rc.phase.{name}.{int(2 * d)}ms",
                f"P1 remote-chain phase at {_label(d)}: {name}",
                seconds(ph),
                data=ph.to_json(),
            )
        )
    ctx.rows.append(
        Row(
            "p1.rc.after_connect_rtt",
            "P1 remote-chain: after connecting, RTT-equivalents ((t50-t0)/50 ms)",
            plain(rtt_post),
            baseline=f"execs per submit: {sorted(set(execs))}",
            target="1 exec, <= 2 RTT",
            met=met_post,
            data={**rtt_post.to_json(), "execs": execs},
        )
    )
    for method in methods:
        r = paired_rtt_equivalents(wall[method, d50], wall[method, d0])
        ctx.rows.append(
            Row(
                f"p1.{method}.rtt",
                f"P1 {method}: whole submit, RTT-equivalents",
                plain(r, digits=1),
                data=r.to_json(),
            )
        )
    for name, counts in flights.items():
        ctx.rows.append(
            Row(
                f"p1.flights.{name}",
                f"P1 round trips counted at the proxy (50 ms): {name}",
                f"{statistics.median(counts):g} [{min(counts)}-{max(counts)}]",
                data={"counts": counts},
            )
        )
    ratios = {}
    for method, want in ((ASYNCSSH, P1_WANT[ASYNCSSH]), (OPENSSH, P1_WANT[OPENSSH])):
        ratio = s[method, d50].median / s[RC, d50].median
        ratios[method] = ratio
        ctx.rows.append(
            Row(
                f"p1.ratio.{method}",
                f"P1 at 50 ms RTT: {method} / remote-chain",
                seconds(s[RC, d50]),
                baseline=f"{s[method, d50].median:.3f} s",
                ratio=times(ratio),
                target=f">= {want:g}x",
                met=ratio >= want,
                data={"ratio": ratio, "at_0ms": s[method, d0].median / s[RC, d0].median},
            )
        )
    if RCM in methods:
        cm_ratio = s[ASYNCSSH, d50].median / s[RCM, d50].median
        ctx.rows.append(
            Row(
                "p1.ratio.controlmaster",
                f"P1 at 50 ms RTT: {ASYNCSSH} / {RCM}",
                seconds(s[RCM, d50]),
                baseline=f"{s[ASYNCSSH, d50].median:.3f} s",
                ratio=times(cm_ratio),
                target="(information)",
                data={"ratio": cm_ratio},
            )
        )
    ctx.verdicts.append(
        Verdict(
            "P1 one remote exec after connecting, <= 2 RTT beyond the connection",
            met_post,
            f"{sorted(set(execs))} exec(s) per submit; {rtt_post.median:.2f} RTT-equivalents after "
            f"connecting (paired median of {rtt_post.n}; "
            f"{counted_post:g} round trips counted at the proxy (client flights the server "
            "answered))",
        )
    )
    for method, want in ((ASYNCSSH, P1_WANT[ASYNCSSH]), (OPENSSH, P1_WANT[OPENSSH])):
        ctx.verdicts.append(
            Verdict(
                f"P1 >= {want:g}x faster than {method} at 50 ms RTT",
                ratios[method] >= want,
                f"{ratios[method]:.2f}x ({s[method, d50].median:.3f} s vs "
                f"{s[RC, d50].median:.3f} s)",
            )
        )
    ctx.raw["p1"] = {f"{m}@{int(2 * d)}ms": v for (m, d), v in wall.items()}


def _submit_cm(ctx: Ctx, proxy: Proxy, folder: Path, config: Path) -> tuple[Timed, SubmitResult]:
    """remote-chain over the ControlMaster, which is started again after any failure."""
    control_path = ctx.tmp / f"cm-{proxy.port}"
    if not ctx.rig.master_alive(proxy.port, control_path):
        ctx.rig.restart_master(proxy.port, control_path)
    try:
        return submit_now(ctx, folder, ["p1"], config)
    except Disturbed:
        ctx.rig.restart_master(proxy.port, control_path)
        raise


def _time_asyncssh(
    ctx: Ctx, target: SshTarget, profile: Path, config: Path
) -> tuple[float, float, float]:
    plan = _plan(ctx, config, profile)
    t0 = time.monotonic()
    ids = asyncio.run(naive_asyncssh(target, plan))
    t1 = time.monotonic()
    ctx.rig.scancel("local", ids)
    return t1 - t0, t0, t1


def _time_openssh(
    ctx: Ctx, target: SshTarget, profile: Path, config: Path
) -> tuple[float, float, float]:
    plan = _plan(ctx, config, profile)
    t0 = time.monotonic()
    ids = naive_openssh(target, plan)
    t1 = time.monotonic()
    ctx.rig.scancel("local", ids)
    return t1 - t0, t0, t1


def fanout_rig(ctx: Ctx, n: int = max(FANOUT)) -> dict[float, Path]:
    """``n`` profiles ``b1..bn`` per delay, each behind its own proxy process, alternating
    between the two dev clusters' sshd ports."""
    rig = ctx.rig
    ports = [rig.dev.ssh_port["local"], rig.dev.ssh_port["local2"]]
    folders = {}
    for d in DELAYS_MS:
        folder = ctx.tmp / f"fanout-{int(d)}"
        for i in range(1, n + 1):
            proxy = rig.start_proxy(ports[(i - 1) % 2], d)
            rig.write_profile(folder, f"b{i}", proxy.port)
        folders[d] = folder
    return folders


def slurm_cluster_of(ctx: Ctx, profile_name: str) -> str:
    i = int(profile_name[1:])
    return "local" if i % 2 == 1 else "local2"


def cancel_submitted(ctx: Ctx, result_json: list[tuple[str, str]]) -> None:
    by_cluster: dict[str, list[str]] = {}
    for cluster, job in result_json:
        by_cluster.setdefault(slurm_cluster_of(ctx, cluster), []).append(job)
    for cluster, ids in by_cluster.items():
        ctx.rig.scancel(cluster, ids)


def p2_fanout(ctx: Ctx, folders: dict[float, Path]) -> None:
    config = write_config(ctx.tmp / "p2.yaml", P1_BENCHMARKS, upload=runner_file(ctx.tmp))
    wall: dict[tuple[int, float], list[float]] = {}
    busy: dict[tuple[int, float], list[float]] = {}
    # For 1 and for the most clusters: where the extra time goes.
    diag: dict[tuple[int, str], list[float]] = {}
    for rnd in range(ctx.runs + 1):
        ctx.progress(f"P2 fan-out: round {rnd}/{ctx.runs}" + (" (warm-up)" if rnd == 0 else ""))
        for k in FANOUT:
            names = [f"b{i}" for i in range(1, k + 1)]
            for d in DELAYS_MS:
                before, cpu0, w0 = cpu_jiffies(), time.process_time(), time.monotonic()
                timed, result = retried(
                    ctx,
                    f"P2 fan-out {k}",
                    submit_now,
                    ctx,
                    folders[d],
                    names,
                    config,
                )
                after, cpu1, w1 = cpu_jiffies(), time.process_time(), time.monotonic()
                cancel_submitted(
                    ctx, [(s.cluster, s.job_id) for s in result.submissions if s.job_id]
                )
                if rnd == 0:
                    continue
                wall.setdefault((k, d), []).append(timed.wall)
                busy.setdefault((k, d), []).append(busy_fraction(before, after))
                if k == 1 and d == 0:
                    # Everything this submit cost the machine (client, proxy, sshd, login
                    # shell, sbatch, slurmctld; and whatever else ran meanwhile).
                    cores = os.cpu_count() or 1
                    busy_s = busy_fraction(before, after) * cores * (w1 - w0)
                    diag.setdefault((1, "host CPU-seconds per submit (0 ms RTT)"), []).append(
                        busy_s
                    )
                if k in (1, max(FANOUT)) and d > 0:
                    for name, value in (
                        (
                            "slowest connect (50 ms RTT)",
                            max(x.seconds for x in timed.probe.of("connect")),
                        ),
                        (
                            "slowest submit exec (50 ms RTT)",
                            max(x.seconds for x in timed.probe.of("exec")),
                        ),
                        ("client CPU, the bench process (50 ms RTT)", cpu1 - cpu0),
                    ):
                        diag.setdefault((k, name), []).append(value)
    s = {key: Summary.of(v) for key, v in wall.items()}
    for k in FANOUT:
        for d in DELAYS_MS:
            cpu = Summary.of(busy[k, d])
            ctx.rows.append(
                Row(
                    f"p2.{k}.{int(2 * d)}ms",
                    f"P2 fan-out submit to {k} cluster(s), {_label(d)}",
                    seconds(s[k, d]),
                    baseline=f"machine CPU busy {cpu.median:.0%} of {os.cpu_count()} cores",
                    data={**s[k, d].to_json(), "cpu_busy": cpu.to_json()},
                )
            )
    top = max(FANOUT)
    verdict_ratio = 0.0
    for d in DELAYS_MS:
        ratio = s[top, d].median / s[1, d].median
        judged = d > 0
        if judged:
            verdict_ratio = ratio
        ctx.rows.append(
            Row(
                f"p2.ratio.{int(2 * d)}ms",
                f"P2 at {_label(d)}: wall at {top} / wall at 1",
                seconds(s[top, d]),
                baseline=f"{s[1, d].median:.3f} s",
                ratio=times(ratio),
                target="<= 1.15x" if judged else "(information)",
                met=ratio <= 1.15 if judged else None,
                data={"ratio": ratio},
            )
        )
    for (k, name), values in sorted(diag.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        summary = Summary.of(values)
        ctx.rows.append(
            Row(
                f"p2.diag.{k}.{name}",
                f"P2 {k} cluster(s): {name}",
                seconds(summary),
                data=summary.to_json(),
            )
        )
    ctx.verdicts.append(
        Verdict(
            f"P2 fan-out: wall at {top} clusters <= 1.15x wall at 1 (50 ms RTT)",
            verdict_ratio <= 1.15,
            f"{verdict_ratio:.2f}x ({s[top, DELAYS_MS[1]].median:.3f} s vs "
            f"{s[1, DELAYS_MS[1]].median:.3f} s); at 0 ms "
            f"{s[top, DELAYS_MS[0]].median / s[1, DELAYS_MS[0]].median:.2f}x, the machine's "
            f"{os.cpu_count()} cores {Summary.of(busy[top, DELAYS_MS[0]]).median:.0%} busy",
        )
    )
    ctx.raw["p2"] = {f"{k}@{int(2 * d)}ms": v for (k, d), v in wall.items()}
