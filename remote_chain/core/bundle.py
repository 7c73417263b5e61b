"""PURE: what a submit sends to one cluster: the run's folder, its chains, its files
(``client/plan`` builds it, ``execs/submit`` renders it into the one exec)."""

from __future__ import annotations

from dataclasses import dataclass

from remote_chain.core.models import Executor


@dataclass(frozen=True)
class BundleFile:
    path: str  # relative to the run folder, e.g. "files/rollouts.py", "gpqa/job.sh"
    data: bytes
    mode: int = 0o600


@dataclass(frozen=True)
class ChainPlan:
    benchmark: str
    remote_dir: str
    job_name: str
    resumable: bool
    time_limit_s: int | None = None  # each link's --time; in the record for status --timeline


@dataclass(frozen=True)
class ClusterBundle:
    """Everything one cluster receives for one run."""

    run_id: str
    cluster: str
    run_dir: str  # <workdir>/<run_id>/<cluster>
    created: str  # ISO 8601 UTC, kept in the run record
    executor: Executor
    chains: tuple[ChainPlan, ...]
    files: tuple[BundleFile, ...]
