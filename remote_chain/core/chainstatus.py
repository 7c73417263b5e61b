"""PURE: a chain's state, derived from its files, sacct and squeue. Never guesses "done".

States (interface.md): ``pending`` a job is queued and none runs, ``running``, ``completed``
(the run finished), ``failed`` (retries exhausted, or the chain broke: its successor died
before its prologue or could not be queued), ``cancelled``, ``stopped`` (walltime cap), and
``unknown`` whenever the evidence is missing (accounting lag or outage): a missing record is
never read as success or failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from remote_chain.core.limits import refusal_limit
from remote_chain.core.models import (
    FINAL_STATES,
    JOB_ID_RE,
    NON_TERMINAL_STATES,
    Action,
    ChainStateName,
    Executor,
    JobId,
    SlurmState,
)
from remote_chain.core.records import Record, json_meta
from remote_chain.protocol.layout import CHAIN_FILE, RETRIES_FILE, WALLTIME_FILE, EventKind

if TYPE_CHECKING:  # read, never made here: a submit imports none of the status exec's modules
    from remote_chain.core.snapshot import ChainFiles, Snapshot


@dataclass(frozen=True)
class JobView(Record):
    job_id: JobId
    state: str
    elapsed_s: int | None = None
    exit_code: str = ""
    reason: str = ""
    # sacct's Start/End (ISO 8601, cluster local time, no zone), "" when Slurm has none yet
    # (null in JSON).
    start: str = field(default="", metadata=json_meta(empty_null=True))
    end: str = field(default="", metadata=json_meta(empty_null=True))


@dataclass(frozen=True)
class ChainStatus(Record):
    cluster: str
    # In JSON once, on the StatusResult around the chains.
    run_id: str = field(metadata=json_meta(skip=True))
    benchmark: str
    state: ChainStateName
    jobs: tuple[JobView, ...] = ()
    accumulated_walltime_s: int | None = None
    infra_retries: int | None = None
    remote_dir: str = ""
    error: str | None = None
    warnings: tuple[str, ...] = field(default=())
    # Each link's walltime (--time), from the run record; None for runs recorded before it
    # was kept, or without a time limit.
    time_limit_s: int | None = None


@dataclass(frozen=True)
class Event:
    time: int
    job_id: str
    kind: str
    args: tuple[str, ...]


_EVENT = re.compile(r"^(\d+) (\S+) (\S+)(?: (.*))?$")


def parse_events(text: str) -> list[Event]:
    events = []
    for line in text.splitlines():
        m = _EVENT.match(line)
        if m:
            args = tuple((m.group(4) or "").split(" ")) if m.group(4) else ()
            events.append(Event(int(m.group(1)), m.group(2), m.group(3), args))
    return events


_INT_FILES = {"walltime": WALLTIME_FILE, "retries": RETRIES_FILE}


def _int_file(files: ChainFiles, kind: str, problems: list[str]) -> int | None:
    read = files.file(kind)
    name = _INT_FILES[kind]
    if read.status == "missing":
        return 0
    if read.status != "ok":
        problems.append(f"{name}: {read.status}")
        return None
    value = read.content.strip()
    if not value.isdigit():
        problems.append(f"{name}: not a whole number: {value[:40]!r}")
        return None
    return int(value)


def _chain_ids(files: ChainFiles, problems: list[str]) -> list[JobId]:
    read = files.file("chain")
    if read.status == "missing":
        return []
    if read.status != "ok":
        problems.append(f"{CHAIN_FILE}: {read.status}")
        return []
    ids: list[JobId] = []
    content = read.content
    if content and not content.endswith("\n"):
        problems.append(f"{CHAIN_FILE}: truncated (no final newline)")
    for line in content.splitlines():
        if JOB_ID_RE.match(line.strip()):
            ids.append(JobId(line.strip()))
        else:
            problems.append(f"{CHAIN_FILE}: bad line {line[:40]!r}")
    return ids


def derive(
    cluster: str,
    files: ChainFiles,
    snap: Snapshot,
    *,
    executor: Executor = "slurm",
    time_limit_s: int | None = None,
) -> ChainStatus:
    """The chain's state and jobs, from what one status exec saw; ``time_limit_s`` (each
    link's walltime, from the run record) is carried into the status as it is."""
    problems: list[str] = []
    got = files.files
    # A file the exec did not send does not exist (status.parse_status_output): a held or
    # queued first link sends its first-job file alone, so most chains of a big poll skip
    # each reader here at one dict test.
    chain_ids = _chain_ids(files, problems) if "chain" in got else []
    walltime = _int_file(files, "walltime", problems) if "walltime" in got else 0
    retries = _int_file(files, "retries", problems) if "retries" in got else 0
    events_read = files.file("events")
    events = parse_events(events_read.content) if events_read.content else []
    first = files.file("first")
    first_id = first.content.strip() if first.status == "ok" else ""
    for ev in events:
        if ev.kind == EventKind.CORRUPT_STATE:
            problems.append(f"{' '.join(ev.args)} (job {ev.job_id} stopped on it)")
    if executor == "shell":
        state = _shell_state(first_id, files, snap)
        shell_jobs = (JobView(JobId(first_id), state.value.upper()),) if first_id else ()
        return _status(
            cluster, files, state, shell_jobs, walltime, retries, problems, [], time_limit_s
        )

    ids: list[JobId] = list(chain_ids)
    if JOB_ID_RE.match(first_id) and first_id not in ids:
        ids.insert(0, JobId(first_id))
    for ev in events:
        if ev.kind == EventKind.SUCCESSOR and ev.args and ev.args[0] not in ids:
            ids.append(JobId(ev.args[0]))
    # squeue was asked by job name; a run on two profiles of one Slurm cluster has twin chains
    # of that name, told apart by their working directory (the benchmark folder).
    for job_id in snap.queued_by_dir.get(files.remote_dir, ()):
        if job_id not in ids:
            ids.append(job_id)
    warnings: list[str] = []
    if events:  # a held or queued first link has none: it skips this work
        # A successor the chain withdrew itself (the run finished or stopped) and that never
        # ran is bookkeeping, not history: leave it out of the jobs list.
        withdrawn = {
            ev.args[0] for ev in events if ev.kind == EventKind.SUCCESSOR_CANCELLED and ev.args
        }
        ids = [j for j in ids if j not in withdrawn or j in chain_ids or j in snap.squeue]
        warnings += [
            successor_warning(ev) for ev in events if ev.kind == EventKind.SUCCESSOR_FAILED
        ]
        warnings += [
            f"job {ev.job_id}: ran without the runner lease (no hard links in the benchmark folder)"
            for ev in events
            if ev.kind == EventKind.LEASE_UNSUPPORTED
        ]
    jobs = tuple([_job_view(j, snap) for j in ids])
    state = _chain_state(files, snap, ids, chain_ids, events, problems)
    return _status(cluster, files, state, jobs, walltime, retries, problems, warnings, time_limit_s)


def final_lines(chain: ChainStatus) -> str:
    """The chain's jobs whose sacct record is final (``FINAL_STATES``, with an End), as the
    sacct lines they were read from: what the local index keeps so that later polls need not
    ask slurmdbd of them again (status.Target.final). A job squeue showed has no End here,
    so a job requeued after its end drops out of the lines the poll that sees it queued."""
    lines = []
    for job in chain.jobs:
        if not job.end or SlurmState.parse(job.state) not in FINAL_STATES:
            continue
        elapsed = "" if job.elapsed_s is None else str(job.elapsed_s)
        fields = (job.job_id, job.state, elapsed, job.exit_code, job.reason, job.start, job.end)
        if not any("|" in f or "\n" in f for f in fields):
            lines.append("|".join(fields))
    return "\n".join(lines)


def successor_warning(event: Event) -> str:
    """A link's failed successor submission, naming the Slurm limit that refused it, if any."""
    text = " ".join(event.args)
    limit = refusal_limit(text)
    by = f" (refused by {limit})" if limit else ""
    return f"job {event.job_id}: could not queue a successor{by}: {text}"


def _status(  # noqa: PLR0917 - a private constructor helper, every field positional
    cluster: str,
    files: ChainFiles,
    state: ChainStateName,
    jobs: tuple[JobView, ...],
    walltime: int | None,
    retries: int | None,
    problems: list[str],
    warnings: list[str],
    time_limit_s: int | None,
) -> ChainStatus:
    # Positional, in the field order: keywords cost more per chain.
    return ChainStatus(
        cluster,
        files.run_id,
        files.benchmark,
        state,
        jobs,
        walltime,
        retries,
        files.remote_dir,
        "; ".join(problems) or None,
        tuple(warnings),
        time_limit_s,
    )


def _job_view(job_id: JobId, snap: Snapshot) -> JobView:
    rec = snap.sacct.get(job_id)
    start, end = (_when(rec.start), _when(rec.end)) if rec else ("", "")
    queued = snap.squeue.get(job_id)
    if queued is not None:
        # squeue speaks for a job it shows (slurmctld is ahead of accounting), and status asks
        # sacct only of the jobs it does not show (status.bash): its start and time used here.
        elapsed = queued.elapsed_s
        if elapsed is None and rec is not None:
            elapsed = rec.elapsed_s
        return JobView(
            job_id,
            queued.state.value,
            elapsed,
            "",
            queued.reason,
            _when(queued.start) or start,
            "",
        )
    if rec is None:
        return JobView(job_id, "UNKNOWN")
    state = rec.state.value
    if rec.cancelled_by is not None:
        state = f"CANCELLED by {rec.cancelled_by}"
    return JobView(job_id, state, rec.elapsed_s, rec.exit_code, rec.reason, start, end)


def _when(text: str) -> str:
    """sacct's Start/End as given (``2026-11-29T20:01:02``); "" for Unknown/None/garbage."""
    if not text:  # a queued job's start (squeue's %S before it starts): no regex
        return ""
    text = text.strip()
    return text if _SACCT_TIME.fullmatch(text) else ""


_SACCT_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")


def _decided(events: list[Event], job_id: str) -> str | None:
    acts = [
        ev.args[0]
        for ev in events
        if ev.job_id == job_id and ev.kind == EventKind.DECIDED and ev.args
    ]
    return acts[-1] if acts else None


def _runner_exit(events: list[Event], job_id: str) -> int | None:
    codes = [
        ev.args[0] for ev in events if ev.job_id == job_id and ev.kind == EventKind.RUNNER_EXIT
    ]
    return int(codes[-1]) if codes and codes[-1].isdigit() else None


_ACTION_STATE = {
    Action.EXIT_SUCCESS.value: ChainStateName.COMPLETED,
    Action.STOP_CANCELLED.value: ChainStateName.CANCELLED,
    Action.STOP_WALLTIME.value: ChainStateName.STOPPED,
    Action.EXIT_ERROR.value: ChainStateName.FAILED,
}


def _chain_state(  # noqa: PLR0917 - private, called once
    files: ChainFiles,
    snap: Snapshot,
    ids: list[JobId],
    chain_ids: list[JobId],
    events: list[Event],
    problems: list[str],
) -> ChainStateName:
    squeue = snap.squeue
    live = [queued.state for j in ids if (queued := squeue.get(j)) is not None]
    if live:
        if SlurmState.RUNNING in live or SlurmState.COMPLETING in live:
            return ChainStateName.RUNNING
        if not NON_TERMINAL_STATES.isdisjoint(live):
            return ChainStateName.PENDING
    # Nothing of the chain is queued any more: read the last job that ran its prologue.
    for job_id in reversed(chain_ids):
        decided = _decided(events, job_id)
        if decided in _ACTION_STATE:
            return _ACTION_STATE[decided]
        if decided == Action.YIELD.value:
            continue
        if decided is not None:
            if _runner_exit(events, job_id) == 0:
                return ChainStateName.COMPLETED
            break
    if any(ev.kind == EventKind.CORRUPT_STATE for ev in events) or problems:
        return ChainStateName.FAILED
    if files.cancel_marker:
        return ChainStateName.CANCELLED
    last = ids[-1] if ids else None
    if last is None:
        return ChainStateName.UNKNOWN
    # Accounting down: never guess. Only a record read before (a final one the local index
    # kept, status.Target.final) is still known, whichever other chains this poll asked of.
    known = snap.sacct if snap.sacct_ok else snap.kept
    rec = known.get(last)
    if rec is None or rec.state in NON_TERMINAL_STATES or rec.state is SlurmState.UNKNOWN:
        return ChainStateName.UNKNOWN  # accounting has not caught up
    if last not in chain_ids:
        # The last job never ran its prologue: the successor of a finished link.
        if rec.state is SlurmState.CANCELLED:
            prev = chain_ids[-1] if chain_ids else None
            prev_rec = known.get(prev) if prev else None
            if prev is not None and prev_rec is None and not snap.sacct_ok:
                return ChainStateName.UNKNOWN
            if prev_rec is not None and prev_rec.state is SlurmState.COMPLETED:
                return ChainStateName.COMPLETED  # Slurm removed the successor of a success
            if prev_rec is not None and prev_rec.state in NON_TERMINAL_STATES:
                # The link that withdrew it is not final in accounting yet (it was ending
                # while this status read its files): never guess.
                return ChainStateName.UNKNOWN
            return ChainStateName.CANCELLED  # someone cancelled the waiting successor
        return ChainStateName.FAILED
    if rec.state is SlurmState.COMPLETED:
        return ChainStateName.COMPLETED
    if rec.state is SlurmState.CANCELLED:
        return ChainStateName.CANCELLED
    # The last link ended not-ok and nothing follows it: the chain broke.
    return ChainStateName.FAILED


def _shell_state(first_id: str, files: ChainFiles, snap: Snapshot) -> ChainStateName:
    if first_id and first_id in snap.live_pids:
        return ChainStateName.RUNNING
    exit_read = files.file("exit")
    if exit_read.status != "ok":
        return ChainStateName.CANCELLED if files.cancel_marker else ChainStateName.UNKNOWN
    code = exit_read.content.strip()
    return ChainStateName.COMPLETED if code == "0" else ChainStateName.FAILED
