"""PURE: what one status poll asks of a cluster (``Target``) and what it saw there
(``Snapshot``: every chain's files, squeue's and sacct's records), the status exec's
(``execs/status``) input and answer, and what ``chainstatus.derive`` reads."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from remote_chain.core.models import JobId, SacctRecord
from remote_chain.core.sacct import QueuedJob


@dataclass(frozen=True)
class Target:
    """One run on one cluster, optionally narrowed to some benchmarks."""

    run_id: str
    run_dir: str
    benchmarks: tuple[str, ...] = ()
    # sacct's final lines (chainstatus.final_lines) of the run's jobs, from the local index:
    # not asked again unless squeue shows the job (parse_status_output puts them back).
    final: str = ""
    # Each link's walltime by benchmark (layout.compact_limits), from the local index: the
    # exec then does not send the run record, which status reads for nothing else. None: it
    # does, and they are read from it (layout.time_limits).
    time_limits: Mapping[str, int] | None = None


@dataclass(frozen=True)
class FileRead:
    status: str  # "ok" | "missing" | "unreadable" | "toolarge"
    content: str = ""


MISSING = FileRead("missing")


@dataclass(frozen=True)
class ChainFiles:
    run_id: str
    benchmark: str
    remote_dir: str
    # The chain's files that exist, by kind (layout.CHAIN_FILES): the exec sends no others.
    files: dict[str, FileRead]
    cancel_marker: bool

    def file(self, kind: str) -> FileRead:
        """What the exec read of one file; ``MISSING`` when it does not exist."""
        return self.files.get(kind, MISSING)


@dataclass(frozen=True)
class RunFiles:
    run_id: str
    run_dir: str
    exists: bool
    record: str | None
    created: str | None
    chains: tuple[ChainFiles, ...]
    missing: tuple[str, ...] = ()  # benchmarks asked for that the run does not have
    unreadable: tuple[str, ...] = ()  # benchmark folders we may not read (permissions)
    time_limits: Mapping[str, int] | None = None  # Target.time_limits: the record not sent


@dataclass(frozen=True)
class Snapshot:
    """What one status exec saw on one cluster."""

    runs: tuple[RunFiles, ...]
    sacct: dict[JobId, SacctRecord] = field(default_factory=dict)
    sacct_ok: bool = True
    sacct_error: str = ""
    squeue: dict[JobId, QueuedJob] = field(default_factory=dict)
    squeue_ok: bool = True
    live_pids: frozenset[str] = frozenset()
    # The final records of sacct read by earlier polls (Target.final) that this one used:
    # also in ``sacct``; what is still known when this poll's sacct failed.
    kept: dict[JobId, SacctRecord] = field(default_factory=dict)

    @functools.cached_property
    def queued_by_dir(self) -> dict[str, list[JobId]]:
        """squeue's jobs by working directory, in squeue's order: each chain looks its own up
        at once, not by a scan of every job per chain."""
        out: dict[str, list[JobId]] = {}
        for job_id, queued in self.squeue.items():
            out.setdefault(queued.workdir, []).append(job_id)
        return out
