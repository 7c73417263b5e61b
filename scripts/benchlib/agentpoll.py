"""P8 inside one process: what a `wait`/`--watch` poll costs through the agent, and what the
cold `status` through it is made of.

A poll is what ``Orchestrator.wait`` repeats: ``status`` of the run in an open session. With
the agent running its requests go over the persistent shell channel (``remote/shell.py``):
one write and one read, 1 RTT. The same polls in a direct session (one asyncssh connection
kept open, a channel and an exec per poll) are measured next to them.
Polls at 0 and 50 ms RTT alternate, and the RTT-equivalents are the median of per-pair
differences / 50 ms (``stats.paired_rtt_equivalents``); the round trips each poll at 50 ms
waited for are also counted at the delaying proxy (``stats.client_flights``).

The parts of the cold status through the agent at 0 ms are measured one by one: a bare
``python -c pass``, the imports of the CLI and the orchestrator in a new process, an
in-process poll through the agent at 0 ms (the agent, the shell channel and the login node's
work), and the login node's ``sacct`` + ``squeue`` timed on the login node itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

from benchlib.common import DELAYS_MS, Ctx
from benchlib.rig import REPO, Proxy
from benchlib.stats import (
    Row,
    Summary,
    Verdict,
    client_flights,
    paired_rtt_equivalents,
    seconds,
)
from remote_chain.client.orchestrator import Orchestrator
from remote_chain.config.settings import Settings

POLL_RTT_TARGET = 1.1  # RTT-equivalents of a poll through the agent: one round trip
# The login node's share of a status poll, timed there: sacct and squeue side by side, as the
# status script runs them (benchlib cannot see inside the script's own timing).
_LOGIN_NODE_WORK = (
    's=$(date +%s%N); sacct -X -n -u "$USER" -S now-1hours -o JobID,State >/dev/null & '
    "squeue --me -h -o %i >/dev/null; wait; echo $(( $(date +%s%N) - s ))"
)


@contextlib.contextmanager
def _no_runtime_dir() -> Iterator[None]:
    """The agents' sockets are under each row's state folder: no $XDG_RUNTIME_DIR here."""
    saved = os.environ.pop("XDG_RUNTIME_DIR", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["XDG_RUNTIME_DIR"] = saved


async def _polls(
    folders: dict[float, Path], state: Path, run_id: str, profile: str, n: int
) -> dict[float, list[tuple[float, float]]]:
    """``n`` status polls per delay in open sessions, alternating delays; the first discarded.
    Each poll as its (start, end) on CLOCK_MONOTONIC, the clock the proxies log with."""
    out: dict[float, list[tuple[float, float]]] = {d: [] for d in DELAYS_MS}
    async with AsyncExitStack() as stack:
        sessions = {
            d: await stack.enter_async_context(
                Orchestrator(Settings(state_dir=state), clusters_dir=folders[d])
            )
            for d in DELAYS_MS
        }
        for i in range(n + 1):
            for d in DELAYS_MS:
                t0 = time.monotonic()
                result = await sessions[d].status(run_id, clusters=[profile], retry_lag=False)
                t1 = time.monotonic()
                if result.failures:
                    raise RuntimeError(f"poll failed: {result.to_json()}")
                if i:
                    out[d].append((t0, t1))
    return out


def p8_polls(
    ctx: Ctx,
    folders: dict[float, Path],
    proxies: dict[float, Proxy],
    *,
    agent_state: Path,
    direct_state: Path,
    run_id: str,
    profile: str,
) -> float:
    """Rows p8.poll.*: per-poll cost through the agent and in a direct session.

    Returns the median poll through the agent at 0 ms, for ``p8_breakdown``.
    """
    n = 5 if ctx.quick else 15
    d0, d50 = DELAYS_MS
    with _no_runtime_dir():
        ctx.progress(f"P8 polls: {n} through the agent, {n} direct, at 0 and 50 ms")
        kept_at = asyncio.run(_polls(folders, agent_state, run_id, profile, n))
        direct_at = asyncio.run(_polls(folders, direct_state, run_id, profile, n))
    kept = {d: [t1 - t0 for t0, t1 in v] for d, v in kept_at.items()}
    direct = {d: [t1 - t0 for t0, t1 in v] for d, v in direct_at.items()}
    flights = {
        name: [client_flights(ctx.rig.chunks(proxies[d50], t0, t1)) for t0, t1 in at[d50]]
        for name, at in (("agent", kept_at), ("direct", direct_at))
    }
    ctx.raw["p8_polls"] = {"agent": kept, "direct": direct, "flights_50ms": flights}
    for name, samples in (("agent", kept), ("direct", direct)):
        how = "through the agent" if name == "agent" else "direct session"
        for d in DELAYS_MS:
            ctx.rows.append(
                Row(
                    f"p8.poll.{name}.{round(2 * d)}ms",
                    f"P8 `wait` poll ({how}), {round(2 * d)} ms RTT",
                    seconds(Summary.of(samples[d])),
                    data=Summary.of(samples[d]).to_json(),
                )
            )
    rtts = paired_rtt_equivalents(kept[d50], kept[d0])
    direct_rtts = paired_rtt_equivalents(direct[d50], direct[d0])
    ctx.rows.append(
        Row(
            "p8.poll.rtt",
            "P8 `wait`/`--watch` poll through the agent: RTT-equivalents (paired)",
            f"{rtts.median:.2f} [{rtts.min:.2f}-{rtts.max:.2f}]",
            baseline=f"direct session {direct_rtts.median:.2f} RTT; round trips counted at "
            f"the proxy: agent {statistics.median(flights['agent']):g}, direct "
            f"{statistics.median(flights['direct']):g}",
            target=f"<= {POLL_RTT_TARGET} RTT",
            met=rtts.median <= POLL_RTT_TARGET,
            data={**rtts.to_json(), "direct": direct_rtts.to_json(), "flights": flights},
        )
    )
    ctx.verdicts.append(
        Verdict(
            f"P8 `wait`/`--watch` polls through the agent <= {POLL_RTT_TARGET} RTT each",
            rtts.median <= POLL_RTT_TARGET,
            f"{rtts.median:.2f} RTT-equivalents per poll (paired median of {rtts.n}; a poll "
            f"{statistics.median(kept[d0]):.3f} s at 0 ms, {statistics.median(kept[d50]):.3f} s "
            f"at 50 ms; {statistics.median(flights['agent']):g} round trip(s) counted at the "
            f"proxy); a direct session's poll: {direct_rtts.median:.2f} RTT",
        )
    )
    return statistics.median(kept[d0])


def _wall(argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one new process."""
    t0 = time.monotonic()
    subprocess.run(argv, env=env, capture_output=True, timeout=60, check=True)
    return time.monotonic() - t0


def p8_breakdown(ctx: Ctx, status: list[str], env: dict[str, str], poll_0ms: float) -> None:
    """Row p8.status.parts: what the cold status through the agent at 0 ms is made of.

    ``status``: the cold command (CLI argv) at 0 ms, ``env`` with the agent running. Its
    imports are measured in the command itself (``-X importtime``: the modules it really
    loads, rich hidden as the CLI hides it), their sum of top-level cumulative times.
    """
    n = 3 if ctx.quick else 7
    start = Summary.of(_wall([sys.executable, "-c", "pass"], env) for _ in range(n))
    walls, imports, tops = [], [], {}
    for _ in range(n):
        t0 = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-X", "importtime", *status[1:]],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        walls.append(time.monotonic() - t0)
        top = _top_level_imports(done.stderr)
        imports.append(sum(top.values()) / 1e6)
        tops = top
    if any("asyncssh" in name for name in tops):  # pragma: no cover - a regression
        ctx.note("P8: a command through the agent imported asyncssh")
    wall, imported = Summary.of(walls), Summary.of(imports)
    login = _login_node_seconds(ctx, n)
    rest = wall.median - start.median - imported.median - poll_0ms
    heaviest = ", ".join(
        f"{name} {us / 1e3:.0f} ms" for name, us in sorted(tops.items(), key=lambda x: -x[1])[:5]
    )
    parts: dict[str, object] = {
        "wall_s": wall.median,
        "python_start_s": start.median,
        "imports_s": imported.median,
        "poll_in_process_0ms_s": poll_0ms,
        "login_node_sacct_squeue_s": login.median,
        "rest_s": rest,
        "top_imports": heaviest,
    }
    ctx.rows.append(
        Row(
            "p8.status.parts",
            "P8 cold status through the agent at 0 ms, in its own process (under -X "
            "importtime), its parts",
            f"{wall.median:.3f} s = python {start.median:.3f} + imports {imported.median:.3f}"
            f" + poll {poll_0ms:.3f} (login node's sacct+squeue {login.median:.3f})"
            f" + rest {rest:.3f}",
            baseline=f"top imports: {heaviest}",
            data=parts,
        )
    )


def _top_level_imports(stderr: str) -> dict[str, int]:
    """Module -> cumulative microseconds, for the imports at the top of the tree."""
    top: dict[str, int] = {}
    for line in stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            name = parts[2][1:].rstrip()  # "| name": a top-level import is not indented
            if name and not name.startswith(" "):
                top[name] = int(parts[1])
    return top


def _login_node_seconds(ctx: Ctx, n: int) -> Summary:
    dev = ctx.rig.dev
    values = []
    for _ in range(n):
        done = subprocess.run(
            dev.ssh_argv("local", _LOGIN_NODE_WORK),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            cwd=REPO,
        )
        values.append(int(done.stdout.strip().splitlines()[-1]) / 1e9)
    return Summary.of(values)
