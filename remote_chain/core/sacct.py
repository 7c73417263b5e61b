"""PURE: argv builders and parsers for sacct, squeue and sbatch output.

Every parser is noise-tolerant: a line that is not of the expected shape (a login banner, a
warning from a Slurm plugin) is skipped, never raised on, and an unknown state parses to
``SlurmState.UNKNOWN``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from remote_chain.core.limits import ACCOUNTING_POLICY, LIMIT_REASONS
from remote_chain.core.models import JOB_ID_RE, JobId, SacctRecord, SlurmState

# Fields asked of sacct, in order. JobIDRaw, not JobID: array tasks print "123_4" in JobID
# but we key everything by the raw allocation id we were given by sbatch --parsable.
SACCT_FIELDS = ("JobIDRaw", "State", "ElapsedRaw", "ExitCode", "Reason", "Start", "End")
# %Z, the working directory (our --chdir, <workdir>/<run_id>/<cluster>/<benchmark>), tells apart
# the chains of one run on two profiles of one Slurm cluster, which share a job name. %S and %M
# (start, time used) are what sacct's Start and ElapsedRaw say of a queued or running job, so
# status asks slurmdbd only of the jobs squeue no longer shows. The job name
# stays last: the parser and status.bash's awk read it as everything after the sixth "|".
SQUEUE_FORMAT = "%i|%T|%r|%S|%M|%Z|%j"
# squeue's and sacct's environment variables that filter or reshape what they print: a login
# shell's rc file may export them (SQUEUE_STATES=RUNNING, a partition, SLURM_TIME_FORMAT=
# relative), and every query of ours runs without them, in the job (prologue.bash, where
# sbatch --export=ALL handed them over) and in every client exec (wire.bash's rc_query): a
# pending successor or a running lease owner hidden from squeue reads as gone.
SLURM_QUERY_ENV_DROP = (
    "SQUEUE_ACCOUNT",
    "SQUEUE_LICENSES",
    "SQUEUE_NAMES",
    "SQUEUE_PARTITION",
    "SQUEUE_QOS",
    "SQUEUE_STATES",
    "SQUEUE_USERS",
    "SLURM_TIME_FORMAT",
)
# Bytes of one comma-joined job-id or job-name list in a remote command line. Linux caps one
# argument at MAX_ARG_STRLEN, 128 KiB; half of it leaves room for the rest of the line under
# ARG_MAX (2 MiB or more on Linux) however many chunks a poll needs.
MAX_LIST_ARG_BYTES = 64 * 1024

# --- The prologue's command lines (substituted into prologue.bash; nowhere else spelled) ----
# The predecessor lookup: every run of a requeued job (--duplicates: each run's walltime is
# counted, so a requeue never grants a fresh budget), with the job's name and folder so that a
# recycled job id belonging to an older or another chain is never taken for ours.
PROLOGUE_SACCT_FIELDS = ("JobIDRaw", "State", "ElapsedRaw", "JobName", "WorkDir")
PROLOGUE_SACCT_ARGS = "-X --duplicates --parsable2 --noheader --format=" + ",".join(
    PROLOGUE_SACCT_FIELDS
)
# A job's state alone (the predecessor, a lease owner, this job at a signal).
SQUEUE_STATE_ARGS = "--noheader --format=%T"
# The successor of a timed-out sbatch: found by name, dependency on this job and folder.
SQUEUE_SUCCESSOR_FORMAT = "%i|%E|%Z"
# Every Slurm query inside the job is bounded (a wedged slurmdbd must not hold the allocation).
PROLOGUE_QUERY_TIMEOUT_S = 10
PROLOGUE_SBATCH_TIMEOUT_S = 30
# sbatch's words for a per-user or QOS limit (limits.py owns them), as an ERE for the prologue:
# the link's warning names the limit, and status reads it back with limits.refusal_limit().
SBATCH_LIMIT_ERE = "|".join((*LIMIT_REASONS, ACCOUNTING_POLICY))

_CANCELLED_BY = re.compile(r"^CANCELLED\s+by\s+(\d+)")


def parse_state(text: str) -> tuple[SlurmState, int | None]:
    """``"CANCELLED by 1234"`` -> (CANCELLED, 1234); the uid is kept, never parsed as a state."""
    match = _CANCELLED_BY.match(text.strip())
    if match:
        return SlurmState.CANCELLED, int(match.group(1))
    return SlurmState.parse(text), None


def _is_job_id(text: str) -> bool:
    """``JOB_ID_RE.match(text)``: plain ASCII digits, its commonest match, without the regex
    (a poll parses a line per job); anything else is its to judge."""
    return (text.isdigit() and text.isascii()) or JOB_ID_RE.match(text) is not None


def _int_or_none(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def parse_sacct(text: str) -> dict[JobId, SacctRecord]:
    """Parse ``sacct -X --parsable2 --noheader --format=SACCT_FIELDS`` output.

    A job requeued by Slurm appears once per run when ``--duplicates`` is given; the last
    line wins, which is the newest run.
    """
    records: dict[JobId, SacctRecord] = {}
    for line in text.splitlines():
        parts = line.rstrip("\r").split("|")
        if len(parts) != len(SACCT_FIELDS) or not _is_job_id(parts[0]):
            continue
        state, by = parse_state(parts[1])
        job_id = JobId(parts[0])
        records[job_id] = SacctRecord(
            job_id=job_id,
            state=state,
            cancelled_by=by,
            elapsed_s=_int_or_none(parts[2]),
            exit_code=parts[3],
            reason=parts[4],
            start=parts[5],
            end=parts[6],
        )
    return records


@dataclass(frozen=True)
class QueuedJob:
    state: SlurmState
    reason: str
    workdir: str
    name: str
    start: str = ""  # squeue's %S once the job started, else "" (as sacct's "Unknown")
    elapsed_s: int | None = None  # squeue's %M in seconds; None when it is not a duration


# States of a job that has not started: squeue's %S is then a forecast (or N/A), never a start.
_NOT_STARTED = frozenset(
    {
        SlurmState.PENDING,
        SlurmState.REQUEUED,
        SlurmState.REQUEUE_FED,
        SlurmState.REQUEUE_HOLD,
        SlurmState.RESV_DEL_HOLD,
    }
)
_SQUEUE_FIELDS = SQUEUE_FORMAT.count("|") + 1
# squeue's %M: [days-][hours:]minutes:seconds.
_TIME_USED = re.compile(r"(?:(?:(\d+)-)?(\d+):)?(\d+):(\d\d)")


@functools.lru_cache(maxsize=4096)  # the same few values over and over: "0:00" for every held job
def parse_time_used(text: str) -> int | None:
    """squeue's %M (``0:00``, ``1:02:03``, ``2-03:04:05``) in seconds; None for anything else."""
    match = _TIME_USED.fullmatch(text.strip())
    if match is None:
        return None
    days, hours, minutes, secs = (int(g) if g else 0 for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + secs


@functools.lru_cache(maxsize=256)  # a handful of states, a line per job a poll
def _queued_state(text: str) -> tuple[SlurmState, bool]:
    """squeue's %T parsed, and whether the job has not started (its %S is then no start)."""
    state = SlurmState.parse(text)
    return state, state in _NOT_STARTED


def parse_squeue(text: str) -> dict[JobId, QueuedJob]:
    """Parse ``squeue --format SQUEUE_FORMAT`` into job id -> what squeue said of it."""
    jobs: dict[JobId, QueuedJob] = {}
    for line in text.splitlines():
        parts = line.rstrip("\r").split("|", _SQUEUE_FIELDS - 1)
        if len(parts) != _SQUEUE_FIELDS:
            continue
        job_id, state_text, reason, start, used, workdir, name = parts
        if not _is_job_id(job_id):
            continue
        state, not_started = _queued_state(state_text)
        jobs[JobId(job_id)] = QueuedJob(
            state,
            reason,
            workdir,
            name,
            "" if not_started else start,
            parse_time_used(used),
        )
    return jobs
