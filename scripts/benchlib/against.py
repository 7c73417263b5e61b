"""The before/after mode (``scripts/bench --against REV``): an older commit's code timed beside
this checkout's, in the same interleaved rounds, on the same rig.

REV is checked out in a git worktree under /tmp (removed at the end) and run as its own
console script does, with that worktree first on PYTHONPATH; this checkout's code runs the
same way with this checkout first. The bench's own process imports only this checkout. Each
round takes the old and the new command in turn (which goes first alternates), so a change of
the shared machine's load hits both alike, and the ratios are medians of per-round ratios.

Figures (``stats.Compared`` rows, and verdicts for the targets the new code must meet):

- round trips per operation at 50 ms RTT, counted at the delaying proxy: the connection (key
  exchange and authentication), then the submit, status and cancel after it, and the execs
  each ran (``sessionmark.py`` notes where each SSH session opens);
- P1 cold: ``submit --json`` of 4 benchmarks vs the careful by-hand OpenSSH at 50 ms;
- cold local time per command at 0 ms: client CPU beyond a bare ssh's, and wall time;
- P3 (status of 200 chains vs 1 at 50 ms) and P8 (polls through the agent, in one process),
  from ``polldriver.py`` run with each checkout (``againstpolls``);
- P7: ``status --json`` of a many-chain run over ten endpoints, wall and client CPU, a new
  process each (``againstpolls``).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.baselines import SshTarget, careful_openssh
from benchlib.cold import _bare_ssh, console_script, staged, timed_process
from benchlib.common import DELAYS_MS, Ctx, retried, write_config
from benchlib.rig import REPO, Proxy
from benchlib.stats import Compared, Summary, Verdict, client_flights

SESSIONMARK = Path(__file__).resolve().parent / "sessionmark.py"
PROFILE = "ab"
CLUSTER = "local"
BENCHMARKS = ("b0", "b1", "b2", "b3")
CAREFUL_TARGET = 5.0  # P1 cold: the new code's submit vs careful OpenSSH at 50 ms
OPS = ("submit", "status", "cancel")
SSH, CAREFUL = "bare ssh", "careful OpenSSH"


@dataclass(frozen=True)
class Side:
    """One checkout as its users run it: its console script, its own state folders."""

    name: str  # "old" or "new"
    root: Path
    state: Path

    def env(self, *, agent: bool = False) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(self.root)}
        for name in ("REMOTE_CHAIN_CLUSTERS_DIR", "REMOTE_CHAIN_PERSIST", "XDG_RUNTIME_DIR"):
            env.pop(name, None)
        env["REMOTE_CHAIN_STATE_DIR"] = str(self.state / ("agent" if agent else "direct"))
        if agent:
            env["REMOTE_CHAIN_PERSIST"] = "10m"
        return env

    def cli(self, folder: Path) -> list[str]:
        return [*console_script(self.root), "--clusters-dir", str(folder)]

    def marked(self, folder: Path) -> list[str]:
        """The same command with each SSH session's opening noted (``sessionmark.py``)."""
        entry = console_script(self.root)[-1].split(";")[0]  # "from M import F"
        module, function = entry.removeprefix("from ").split(" import ")
        return [
            sys.executable,
            str(SESSIONMARK),
            f"{module}:{function}",
            "--clusters-dir",
            str(folder),
        ]


@contextlib.contextmanager
def checkout(ctx: Ctx, rev: str) -> Iterator[tuple[Path, str]]:
    """A worktree of ``rev`` under /tmp with its bytecode compiled; removed at the end."""
    parent = Path(tempfile.mkdtemp(prefix="remote-chain-against-"))
    path = parent / "src"
    sha = subprocess.run(
        ["git", "rev-parse", "--short", f"{rev}^{{commit}}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run(
        ["git", "worktree", "add", "--detach", "--quiet", str(path), sha],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(path / "remote_chain")],
            capture_output=True,
            check=False,
        )
        ctx.progress(f"against: {rev} ({sha}) checked out at {path}")
        yield path, sha
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(path)],
            cwd=REPO,
            capture_output=True,
            check=False,
        )
        shutil.rmtree(parent, ignore_errors=True)


@dataclass
class _Samples:
    wall: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (side, what)
    cpu: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    flights: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    execs: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    def keep(self, side: str, what: str, wall: float, cpu: float) -> None:
        self.wall.setdefault((side, what), []).append(wall)
        self.cpu.setdefault((side, what), []).append(cpu)


@dataclass(frozen=True)
class AbRig:
    folders: dict[float, Path]
    proxies: dict[float, Proxy]
    targets: dict[float, SshTarget]
    config: Path
    agent_runs: dict[str, str]  # side -> a 1-chain run its agent rows read


def commands(ctx: Ctx, sides: list[Side]) -> AbRig:
    """The cold command rounds: round trips, P1 cold, local time. Returns the rig, whose
    agents (one per side and delay) the polls reuse; ``stop_agents`` ends them."""
    rig = ctx.rig
    port = rig.dev.ssh_port[CLUSTER]
    proxies = {d: rig.start_proxy(port, d) for d in DELAYS_MS}
    folders = {d: ctx.tmp / f"ab-{int(d)}" for d in DELAYS_MS}
    for d in DELAYS_MS:
        rig.write_profile(folders[d], PROFILE, proxies[d].port)
    targets = {
        d: SshTarget(
            rig.dev.host, proxies[d].port, rig.dev.test_user, rig.dev.identity_file, rig.known_hosts
        )
        for d in DELAYS_MS
    }
    upload = ctx.tmp / "ab-runner.sh"
    upload.write_text("#!/bin/bash\n" + "echo 'a stand-in for the runner'\n" * 40)
    config = write_config(ctx.tmp / "ab.yaml", BENCHMARKS, upload=upload, extra_args=["--hold"])
    one = write_config(ctx.tmp / "ab-one.yaml", ["c0"], extra_args=["--hold"])
    agent_runs = {s.name: _submit(ctx, s, folders[0.0], one, s.env(agent=True))[0] for s in sides}
    ab = AbRig(folders, proxies, targets, config, agent_runs)
    samples = _Samples()
    env = dict(os.environ)
    for rnd in range(ctx.runs + 1):
        warm_up = "" if rnd else " (warm-up)"
        ctx.progress(f"against: cold commands, round {rnd}/{ctx.runs}{warm_up}")
        order = sides if rnd % 2 else sides[::-1]
        got: list[tuple[str, str, float, float]] = []
        for d in DELAYS_MS:
            w, c, _ = retried(ctx, "ab ssh", timed_process, _bare_ssh(targets[d]), env, ctx.tmp)
            got.append(("", f"{SSH} {int(2 * d)}ms", w, c))
        got.append(("", CAREFUL, *_careful(ctx, ab)))
        for side in order:
            got += _side_round(ctx, side, ab, samples, keep=rnd > 0)
        if rnd:
            for side_name, what, w, c in got:
                samples.keep(side_name, what, w, c)
    _report(ctx, sides, samples)
    return ab


def _submit(
    ctx: Ctx,
    side: Side,
    folder: Path,
    config: Path,
    env: dict[str, str],
    *,
    argv: list[str] | None = None,
) -> tuple[str, list[str], float, float]:
    """A cold ``submit --json`` by ``side``: the run id, its job ids, wall and CPU seconds.
    Every job is tracked for the rig's cleanup."""
    cmd = [*(argv or side.cli(folder)), "submit", str(config), "-c", PROFILE, "--json"]
    wall, cpu, out = retried(ctx, f"ab {side.name} submit", timed_process, cmd, env, ctx.tmp)
    doc = json.loads(out)
    run_id = str(doc["run_id"])
    ctx.rig.run_ids.add(run_id)
    ids = [str(s["job_id"]) for s in doc["submissions"] if s["job_id"]]
    ctx.rig.track(CLUSTER, ids)
    return run_id, ids, wall, cpu


def _side_round(
    ctx: Ctx, side: Side, ab: AbRig, samples: _Samples, *, keep: bool
) -> list[tuple[str, str, float, float]]:
    """One side's commands of one round: (side, what, wall, cpu) each."""
    env, n = side.env(), side.name
    d0, d50 = DELAYS_MS
    got: list[tuple[str, str, float, float]] = []
    # At 0 ms, the local time of each command: submit, then status and cancel of that run.
    run_id, _, w, c = _submit(ctx, side, ab.folders[d0], ab.config, env)
    got.append((n, "submit 0ms", w, c))
    for op in ("status", "cancel"):
        cmd = [*side.cli(ab.folders[d0]), op, run_id, "-c", PROFILE, "--json"]
        w, c, _ = retried(ctx, f"ab {n} {op}", timed_process, cmd, env, ctx.tmp)
        got.append((n, f"{op} 0ms", w, c))
    # At 50 ms, P1 cold: the plain console script, as a user runs it.
    _, ids, w, c = _submit(ctx, side, ab.folders[d50], ab.config, env)
    ctx.rig.scancel(CLUSTER, ids)
    got.append((n, "submit 50ms", w, c))
    # The round trips: the same three commands with their sessions noted.
    _marked_ops(ctx, side, ab, samples if keep else _Samples())
    # With the agent (persist): a cold status through it (the old code's warm launcher too).
    agent_env = side.env(agent=True)
    for d in DELAYS_MS:
        cmd = [*side.cli(ab.folders[d]), "status", ab.agent_runs[n], "-c", PROFILE, "--json"]
        w, c, _ = retried(ctx, f"ab {n} agent status", timed_process, cmd, agent_env, ctx.tmp)
        got.append((n, f"status, agent {int(2 * d)}ms", w, c))
    return got


def _marked_ops(ctx: Ctx, side: Side, ab: AbRig, samples: _Samples) -> None:
    """submit, status and cancel of one run at 50 ms, each split at its first session into
    the connection's round trips and the operation's, counted at the proxy."""
    d50 = DELAYS_MS[1]
    proxy, env = ab.proxies[d50], side.env()
    run_id = ""
    for op in OPS:
        marks = ctx.tmp / f"marks-{side.name}-{op}-{time.monotonic_ns()}"
        env_m = {**env, "RC_BENCH_MARKS": str(marks)}
        t0 = time.monotonic()
        if op == "submit":
            marked = side.marked(ab.folders[d50])
            run_id, _, _, _ = _submit(ctx, side, ab.folders[d50], ab.config, env_m, argv=marked)
        else:
            cmd = [*side.marked(ab.folders[d50]), op, run_id, "-c", PROFILE, "--json"]
            retried(ctx, f"ab {side.name} {op} (marked)", timed_process, cmd, env_m, ctx.tmp)
        t1 = time.monotonic()
        opened = [float(x) for x in marks.read_text().split()] if marks.exists() else []
        if not opened:
            raise RuntimeError(f"{side.name} {op}: no SSH session noted")
        k = (side.name, op)
        samples.flights.setdefault((side.name, f"connect ({op})"), []).append(
            client_flights(ctx.rig.chunks(proxy, t0, opened[0]))
        )
        samples.flights.setdefault(k, []).append(
            client_flights(ctx.rig.chunks(proxy, opened[0], t1))
        )
        samples.execs.setdefault(k, []).append(len(opened))
        samples.flights.setdefault((side.name, f"whole {op}"), []).append(
            client_flights(ctx.rig.chunks(proxy, t0, t1))
        )


def _careful(ctx: Ctx, ab: AbRig) -> tuple[float, float]:
    """The careful by-hand OpenSSH submit at 50 ms: wall and CPU seconds."""
    d50 = DELAYS_MS[1]
    plan = staged(ctx, ab.config, ab.folders[d50] / f"{PROFILE}.toml")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    ids = retried(ctx, "ab careful OpenSSH", careful_openssh, ab.targets[d50], plan)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    ctx.rig.scancel(CLUSTER, ids)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def stop_agents(ctx: Ctx, sides: list[Side], ab: AbRig) -> None:
    """``agent stop`` by each side, for each delay (the old code's launcher goes with it)."""
    for side in sides:
        for d in DELAYS_MS:
            subprocess.run(
                [*side.cli(ab.folders[d]), "agent", "stop", "-c", PROFILE],
                env=side.env(agent=True),
                capture_output=True,
                timeout=60,
                check=False,
                cwd=ctx.tmp,
            )


def _med(values: list[float] | list[int]) -> float:
    return float(statistics.median(values))


def _report(ctx: Ctx, sides: list[Side], samples: _Samples) -> None:
    rows, old, new = ctx.comparison, sides[0].name, sides[1].name
    for op in OPS:
        whole = {s: samples.flights[s, f"whole {op}"] for s in (old, new)}
        rows.append(
            Compared(
                f"ab.flights.whole.{op}",
                f"round trips at 50 ms, counted at the proxy: the whole `{op}` command",
                f"{_med(whole[old]):g} [{min(whole[old])}-{max(whole[old])}]",
                f"{_med(whole[new]):g} [{min(whole[new])}-{max(whole[new])}]",
                ratio=f"{_med(whole[new]) - _med(whole[old]):+g}",
                target="reported",
                data={"flights": whole},
            )
        )
    for what in ("connect", *OPS):
        if what == "connect":
            counts = {
                s: [c for op in OPS for c in samples.flights[s, f"connect ({op})"]]
                for s in (old, new)
            }
            execs: dict[str, list[int]] = {}
        else:
            counts = {s: samples.flights[s, what] for s in (old, new)}
            execs = {s: samples.execs[s, what] for s in (old, new)}
        text = {
            s: f"{_med(counts[s]):g} [{min(counts[s])}-{max(counts[s])}]"
            + (f"; execs {sorted(set(execs[s]))}" if execs else "")
            for s in (old, new)
        }
        rows.append(
            Compared(
                f"ab.flights.{what}",
                f"round trips at 50 ms, counted at the proxy: {what}"
                + (" (key exchange, authentication)" if what == "connect" else " after connecting"),
                text[old],
                text[new],
                target="reported" if what == "connect" else "as old; 1 exec",
                met=None
                if what == "connect"
                else _med(counts[new]) <= _med(counts[old]) and set(execs[new]) == {1},
                data={"flights": counts, "execs": execs},
            )
        )
    same = all(
        _med(samples.flights[new, op]) <= _med(samples.flights[old, op])
        and set(samples.execs[new, op]) == {1}
        for op in OPS
    )
    ctx.verdicts.append(
        Verdict(
            "against: round trips of submit, status and cancel after connecting as before, "
            "one exec each",
            same,
            "; ".join(
                f"{op} {_med(samples.flights[old, op]):g} -> {_med(samples.flights[new, op]):g}"
                f" (execs {sorted(set(samples.execs[new, op]))})"
                for op in OPS
            )
            + "; the connection "
            + " -> ".join(
                f"{_med([c for op in OPS for c in samples.flights[s, f'connect ({op})']]):g}"
                for s in (old, new)
            ),
        )
    )
    careful = samples.wall["", CAREFUL]
    ratio = {
        s: Summary.of([c / w for c, w in zip(careful, samples.wall[s, "submit 50ms"], strict=True)])
        for s in (old, new)
    }
    rows.append(
        Compared(
            "ab.p1.cold",
            "P1 cold `submit --json` (4 benchmarks) at 50 ms: careful OpenSSH / it",
            f"{ratio[old].median:.2f}x ({_med(samples.wall[old, 'submit 50ms']):.3f} s)",
            f"{ratio[new].median:.2f}x ({_med(samples.wall[new, 'submit 50ms']):.3f} s)",
            ratio=f"{ratio[new].median / ratio[old].median:.2f}",
            target=f"new >= {CAREFUL_TARGET:g}x",
            met=ratio[new].median >= CAREFUL_TARGET,
            data={s: r.to_json() for s, r in ratio.items()} | {"careful_s": careful},
        )
    )
    ctx.verdicts.append(
        Verdict(
            f"against: P1 cold submit >= {CAREFUL_TARGET:g}x careful OpenSSH at 50 ms",
            ratio[new].median >= CAREFUL_TARGET,
            f"new {ratio[new].median:.2f}x, old {ratio[old].median:.2f}x (paired medians of "
            f"{ratio[new].n}; careful OpenSSH {_med(careful):.3f} s)",
        )
    )
    ssh_cpu, ssh_wall = samples.cpu["", f"{SSH} 0ms"], samples.wall["", f"{SSH} 0ms"]
    for what in ("submit 0ms", "status 0ms", "cancel 0ms", "status, agent 0ms"):
        local = {
            s: Summary.of([x - y for x, y in zip(samples.cpu[s, what], ssh_cpu, strict=True)])
            for s in (old, new)
        }
        wall = {
            s: Summary.of([x - y for x, y in zip(samples.wall[s, what], ssh_wall, strict=True)])
            for s in (old, new)
        }
        name = what.removesuffix(" 0ms")
        rows.append(
            Compared(
                f"ab.local.{name}",
                f"cold `{name}` at 0 ms: client CPU beyond ssh's (wall beyond ssh's)",
                f"{local[old].median:.3f} s ({wall[old].median:.3f} s)",
                f"{local[new].median:.3f} s ({wall[new].median:.3f} s)",
                ratio=f"{local[new].median - local[old].median:+.3f} s CPU, "
                f"{wall[new].median - wall[old].median:+.3f} s wall",
                target="reported"
                + (" (old: the launcher's forked child's CPU is not counted)" * ("agent" in what)),
                data={
                    "cpu_beyond_ssh": {s: v.to_json() for s, v in local.items()},
                    "wall_beyond_ssh": {s: v.to_json() for s, v in wall.items()},
                },
            )
        )
    agent = {
        s: Summary.of(
            [
                (x - y) / 0.05
                for x, y in zip(
                    samples.wall[s, "status, agent 50ms"],
                    samples.wall[s, "status, agent 0ms"],
                    strict=True,
                )
            ]
        )
        for s in (old, new)
    }
    rows.append(
        Compared(
            "ab.agent.cold",
            "cold `status` through the agent at 50 ms: wall (RTT-equivalents beyond 0 ms)",
            f"{_med(samples.wall[old, 'status, agent 50ms']):.3f} s ({agent[old].median:.2f})",
            f"{_med(samples.wall[new, 'status, agent 50ms']):.3f} s ({agent[new].median:.2f})",
            target="retired: <= 2 RTT + 0.15 s (reported)",
            data={s: v.to_json() for s, v in agent.items()},
        )
    )
    ctx.raw["against_commands"] = {f"{s}|{what}": v for (s, what), v in samples.wall.items()}
