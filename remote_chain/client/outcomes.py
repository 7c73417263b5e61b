"""PURE: a cluster's answers read into result records (``results.py``).

The flows in ``orchestrator.py`` fan out, collect what each cluster's scripts answered
(``submit.SubmitAnswer``, ``cancel.CancelAnswer``, ``resume.ResumeAnswer`` and the resume
``Plan``), and hand them here: one function per flow, no I/O, so each rule (a submit that
found the run already there reports that run's jobs, a cancel that gave up says so, ...) is
tested without a cluster.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from remote_chain.client.index import IndexedRun
from remote_chain.core.models import ChainStateName
from remote_chain.core.results import (
    CancelEntry,
    ClusterFailure,
    ResumeEntry,
    StatusResult,
    Submission,
)
from remote_chain.core.snapshot import Target
from remote_chain.protocol.layout import parse_record

if TYPE_CHECKING:  # each flow's own answers: a status command imports none of the others',
    # and a submit none of status's (chainstatus, snapshot)
    from remote_chain.core.bundle import ClusterBundle
    from remote_chain.core.chainstatus import ChainStatus
    from remote_chain.core.snapshot import Target
    from remote_chain.execs.cancel import CancelAnswer
    from remote_chain.execs.resume import Plan, ResumeAnswer
    from remote_chain.execs.submit import SubmitAnswer

RESUMABLE_STATES = frozenset({ChainStateName.FAILED, ChainStateName.STOPPED})


def planned(cluster: str, bundle: ClusterBundle) -> list[Submission]:
    """A dry run: each chain where it would be, nothing queued."""
    return [Submission(cluster, c.benchmark, None, c.remote_dir, None) for c in bundle.chains]


def submissions(cluster: str, bundle: ClusterBundle, answer: SubmitAnswer) -> list[Submission]:
    """One submission per chain of the bundle, from what the cluster answered."""
    if answer.existed:
        return _existing(cluster, bundle, answer.record)
    by_bench = {s.benchmark: s for s in answer.submitted}
    out = []
    for chain in bundle.chains:
        s = by_bench.get(chain.benchmark)
        out.append(
            Submission(
                cluster,
                chain.benchmark,
                s.job_id if s else None,
                chain.remote_dir,
                (s.error if s else "no answer for this benchmark"),
            )
        )
    return out


def _existing(
    cluster: str, bundle: ClusterBundle, record: dict[str, object] | None
) -> list[Submission]:
    """A submit that found the run already there reports that run's jobs, never a second."""
    run = parse_record(record)
    if run is None:
        return [
            Submission(
                cluster,
                c.benchmark,
                None,
                c.remote_dir,
                "run already exists here but its record is incomplete (submit in progress?)",
                existing=True,
            )
            for c in bundle.chains
        ]
    return [
        Submission(cluster, c.benchmark, c.first_job_id, c.remote_dir, c.error, existing=True)
        for c in run.chains
    ]


def cancel_entries(cluster: str, answer: CancelAnswer) -> list[CancelEntry]:
    """One entry per chain cancelled or missing; an error of the whole cluster on each."""
    err = "; ".join(answer.errors) or None
    if answer.left:
        err = (err + "; " if err else "") + "jobs were still queued when cancel gave up"
    entries = []
    if not answer.cancelled and err:
        entries.append(CancelEntry(cluster, "", (), err))
    entries += [
        CancelEntry(cluster, bench, tuple(ids), err) for bench, ids in answer.cancelled.items()
    ]
    entries += [
        CancelEntry(cluster, bench, (), "no such benchmark in this run") for bench in answer.missing
    ]
    return entries


def resumable(
    chains: Iterable[ChainStatus],
) -> tuple[dict[str, dict[str, ChainStateName]], list[ResumeEntry]]:
    """The chains resume may requeue, per cluster; an entry refusing each of the others."""
    wanted: dict[str, dict[str, ChainStateName]] = {}
    refused: list[ResumeEntry] = []
    for chain in chains:
        if chain.state in RESUMABLE_STATES:
            wanted.setdefault(chain.cluster, {})[chain.benchmark] = chain.state
        else:
            why = f"chain is {chain.state.value}; only failed or stopped chains resume"
            refused.append(ResumeEntry(chain.cluster, chain.benchmark, None, why))
    return wanted, refused


def resume_entries(cluster: str, answer: ResumeAnswer, plan: Plan) -> list[ResumeEntry]:
    """One entry per chain requeued (with the caps it counted and wrote) or refused."""
    steps = plan.steps
    entries = [
        ResumeEntry(cluster, b, j, None, steps[b].to_json() if b in steps else None)
        for b, j in answer.submitted.items()
    ]
    refused = {**plan.refused, **answer.refused}
    entries += [ResumeEntry(cluster, b, None, why) for b, why in refused.items()]
    return entries


def recent_targets(
    runs: Iterable[IndexedRun], clusters: Sequence[str], now: dt.datetime
) -> dict[str, list[Target]]:
    """The run folders to read per cluster for ``status`` of recent runs (all, or ``clusters``),
    with the final sacct lines the index holds that are fresh at ``now``."""

    per_cluster: dict[str, list[Target]] = {}
    for run in runs:
        for name, c in run.clusters.items():
            if not clusters or name in clusters:
                per_cluster.setdefault(name, []).append(
                    Target(run.run_id, c.run_dir, final=run.final_of(name, (), now))
                )
    return per_cluster


def per_run(
    runs: Iterable[IndexedRun],
    chains: Mapping[str, Sequence[ChainStatus]],
    failures: Sequence[ClusterFailure],
) -> list[StatusResult]:
    """Each run's status from the chains read per cluster; a cluster's failure in each run."""
    out = []
    for run in runs:
        found = tuple(
            c for name in run.clusters for c in chains.get(name, []) if c.run_id == run.run_id
        )
        fails = tuple(f for f in failures if f.cluster in run.clusters)
        out.append(StatusResult(run.run_id, found, fails))
    return out
