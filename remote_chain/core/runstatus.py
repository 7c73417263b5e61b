"""PURE: the status core's last step, one cluster's Snapshot -> every chain's ChainStatus.

``cluster.py`` (I/O) runs the status exec and hands its parsed Snapshot here; whether the
poll should be repeated because accounting lags is decided here too, and retried by
``retries.accounting_lag``.
"""

from __future__ import annotations

from dataclasses import dataclass

from remote_chain.core.chainstatus import ChainStatus, derive
from remote_chain.core.models import ChainStateName, Executor
from remote_chain.core.snapshot import Snapshot
from remote_chain.protocol.layout import limit_of, time_limits


def statuses(cluster: str, snap: Snapshot, executor: Executor) -> list[ChainStatus]:
    """Every chain of one status exec, as derived from what it read (chainstatus.derive)."""
    out = []
    for run in snap.runs:
        limits = time_limits(run.record) if run.time_limits is None else run.time_limits
        out += [
            derive(
                cluster,
                files,
                snap,
                executor=executor,
                time_limit_s=limit_of(limits, files.benchmark),
            )
            for files in run.chains
        ]
        out += [
            ChainStatus(
                cluster,
                run.run_id,
                bench,
                ChainStateName.UNKNOWN,
                remote_dir=f"{run.run_dir}/{bench}",
                error="no such benchmark in this run",
            )
            for bench in run.missing
        ]
        out += [
            ChainStatus(
                cluster,
                run.run_id,
                bench,
                ChainStateName.FAILED,
                remote_dir=f"{run.run_dir}/{bench}",
                error=f"{run.run_dir}/{bench}: folder unreadable (permission denied)",
            )
            for bench in run.unreadable
        ]
    return out


@dataclass(frozen=True)
class Polled:
    """One status poll of one cluster: what the exec saw, and every chain derived from it."""

    snap: Snapshot
    chains: list[ChainStatus]


def lagging(polled: Polled, executor: Executor) -> bool:
    """Whether accounting has not caught up: sacct failed, or a chain it should know is
    unknown without an error (retries.accounting_lag polls again). Judged on the chains the
    poll already derived, not derived again."""
    if executor != "slurm":
        return False
    if not polled.snap.sacct_ok:
        return True
    return any(s.state is ChainStateName.UNKNOWN and s.error is None for s in polled.chains)
