"""What every measurement shares: the context (rig, counts, results), retries around outages,
submit configs, and remote-chain's own submit/status timed through the probe."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ParamSpec, TypeVar

from benchlib.probe import Probe
from benchlib.rig import Rig
from benchlib.stats import Compared, Row, Verdict
from remote_chain.client.orchestrator import Orchestrator
from remote_chain.config.settings import Settings
from remote_chain.core.results import StatusResult, SubmitResult

T = TypeVar("T")
P = ParamSpec("P")

DELAYS_MS = (0.0, 25.0)  # one way: 0 and 50 ms RTT
OUTAGE_BUDGET_S = 150.0  # a sample keeps being retried this long (slurmdbd stopped ~1 min)
OUTAGE_PAUSE_S = 5.0


class Disturbed(Exception):
    """A sample was hit by something outside the client (an outage); it is taken again."""


@dataclass
class Ctx:
    rig: Rig
    runs: int
    quick: bool
    rows: list[Row] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    raw: dict[str, object] = field(default_factory=dict)
    retried: int = 0
    comparison: list[Compared] = field(default_factory=list)  # --against: old beside new
    p7_chains: int | None = None  # --p7-chains: P7's run size, else the default for the mode

    @property
    def tmp(self) -> Path:
        return self.rig.tmp

    def settings(self) -> Settings:
        return Settings(state_dir=self.tmp / "state")

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  note: {text}", file=sys.stderr, flush=True)

    def progress(self, text: str) -> None:
        print(f"bench: {text}", file=sys.stderr, flush=True)


def retried(ctx: Ctx, what: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(...)``, taken again after an outage (any exception) until the budget runs out."""
    deadline = time.monotonic() + OUTAGE_BUDGET_S
    while True:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if time.monotonic() >= deadline:
                raise
            ctx.retried += 1
            ctx.note(f"{what}: sample retried after {type(exc).__name__}: {str(exc)[:200]}")
            time.sleep(OUTAGE_PAUSE_S)


def write_config(
    path: Path,
    benchmarks: Sequence[str],
    *,
    upload: Path | None = None,
    extra_args: Sequence[str] = (),
) -> Path:
    """A submit config of ``command: "true"`` benchmarks (cheap jobs, nothing resumable)."""
    lines = ["driver:"]
    if upload is not None:
        lines += ["  upload:", f"    - {upload}"]
    lines.append("  benchmarks:")
    slurm = ""
    if extra_args:
        slurm = ", slurm: {extra_args: [" + ", ".join(f"'{a}'" for a in extra_args) + "]}"
    lines += [f"    {b}: {{command: 'true'{slurm}}}" for b in benchmarks]
    path.write_text("\n".join(lines) + "\n")
    return path


def runner_file(folder: Path) -> Path:
    """A small upload, so every way of submitting carries a file besides the job scripts."""
    path = folder / "runner.sh"
    path.write_text(
        "#!/bin/bash\n# A stand-in for the user's runner, uploaded with the run.\n"
        + "".join(f"echo 'line {i} of a small script the run carries'\n" for i in range(40))
    )
    path.chmod(0o755)
    return path


@dataclass(frozen=True)
class Timed:
    wall: float
    t0: float
    t1: float
    probe: Probe


def slurm_ids(result: SubmitResult) -> list[str]:
    return [s.job_id for s in result.submissions if s.job_id]


async def rc_submit(
    ctx: Ctx, clusters_dir: Path, clusters: Sequence[str], config: Path, probe: Probe | None = None
) -> tuple[Timed, SubmitResult]:
    """remote-chain's submit, timed from the call to the closed connections."""
    probe = probe or Probe()
    t0 = time.monotonic()
    async with Orchestrator(ctx.settings(), clusters_dir=clusters_dir, opener=probe.open) as rc:
        result = await rc.submit(config, list(clusters))
    t1 = time.monotonic()
    ctx.rig.run_ids.add(result.run_id)
    if not result.ok:
        raise Disturbed(f"submit failed: {result.to_json()}")
    if len(probe.of("exec")) != len(clusters) or len(probe.of("connect")) != len(clusters):
        # A lookup after a lost connection (an sshd restart by someone else): not comparable.
        raise Disturbed(f"submit took {len(probe.of('exec'))} execs: connection lost?")
    return Timed(t1 - t0, t0, t1, probe), result


def submit_now(
    ctx: Ctx, clusters_dir: Path, clusters: Sequence[str], config: Path, probe: Probe | None = None
) -> tuple[Timed, SubmitResult]:
    """``rc_submit`` on an event loop of its own (a fresh one per sample)."""
    return asyncio.run(rc_submit(ctx, clusters_dir, clusters, config, probe))


async def rc_status(
    ctx: Ctx, clusters_dir: Path, cluster: str, run_id: str, probe: Probe | None = None
) -> tuple[Timed, StatusResult]:
    """One status poll (what ``wait`` does each time), timed including connect and close."""
    probe = probe or Probe()
    t0 = time.monotonic()
    async with Orchestrator(ctx.settings(), clusters_dir=clusters_dir, opener=probe.open) as rc:
        result = await rc.status(run_id, clusters=[cluster], retry_lag=False)
    t1 = time.monotonic()
    return Timed(t1 - t0, t0, t1, probe), result


def status_now(
    ctx: Ctx, clusters_dir: Path, cluster: str, run_id: str, probe: Probe | None = None
) -> tuple[Timed, StatusResult]:
    """``rc_status`` on an event loop of its own."""
    return asyncio.run(rc_status(ctx, clusters_dir, cluster, run_id, probe))


def run_id_for_baseline() -> str:
    """A run id in remote-chain's form, for the baselines' own run folders."""
    from remote_chain.client.plan import new_run_id  # noqa: PLC0415

    return new_run_id(dt.datetime.now(dt.UTC))
