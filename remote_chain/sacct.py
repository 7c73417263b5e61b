"""PURE: argv builders and parsers for sacct, squeue and sbatch output.

Every parser is noise-tolerant: a line that is not of the expected shape (a login banner, a
warning from a Slurm plugin) is skipped, never raised on, and an unknown state parses to
``SlurmState.UNKNOWN``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from remote_chain._template import render_template
from remote_chain.limits import ACCOUNTING_POLICY, LIMIT_REASONS
from remote_chain.models import JOB_ID_RE, JobId, SacctRecord, SlurmState

# Fields asked of sacct, in order. JobIDRaw, not JobID: array tasks print "123_4" in JobID
# but we key everything by the raw allocation id we were given by sbatch --parsable.
SACCT_FIELDS = ("JobIDRaw", "State", "ElapsedRaw", "ExitCode", "Reason", "Start", "End")
# %Z, the working directory (our --chdir, <workdir>/<run_id>/<cluster>/<benchmark>), tells apart
# the chains of one run on two profiles of one Slurm cluster, which share a job name.
SQUEUE_FORMAT = "%i|%T|%r|%Z|%j"
# Bytes of one comma-joined job-id or job-name list in a remote command line. Linux caps one
# argument at MAX_ARG_STRLEN, 128 KiB; half of it leaves room for the rest of the line under
# ARG_MAX (2 MiB or more on Linux) however many chunks a poll needs (issue 13, P7).
MAX_LIST_ARG_BYTES = 64 * 1024

# --- The prologue's command lines (substituted into prologue.bash; nowhere else spelled) ----
# The predecessor lookup: every run of a requeued job (--duplicates: each run's walltime is
# counted, so a requeue never grants a fresh budget), with the job's name and folder so that a
# recycled job id belonging to an older or another chain is never taken for ours (issue 9).
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


def sacct_argv(job_ids: Iterable[str], *, starttime: str | None = None) -> list[str]:
    """``sacct`` for allocations only (-X), machine-readable, no header."""
    argv = ["sacct", "-X", "--parsable2", "--noheader", "--format=" + ",".join(SACCT_FIELDS)]
    if starttime:
        # A start-time window: a recycled job id cannot match a job from before the run.
        argv += ["--starttime", starttime, "--endtime", "now"]
    argv += ["--jobs", ",".join(job_ids)]
    return argv


def squeue_argv(*, names: Iterable[str] = (), user: str | None = None) -> list[str]:
    argv = ["squeue", "--noheader", "--me", "--format", SQUEUE_FORMAT]
    if names:
        argv += ["--name", ",".join(names)]
    if user:
        argv += ["--user", user]
    return argv


def parse_state(text: str) -> tuple[SlurmState, int | None]:
    """``"CANCELLED by 1234"`` -> (CANCELLED, 1234); the uid is kept, never parsed as a state."""
    match = _CANCELLED_BY.match(text.strip())
    if match:
        return SlurmState.CANCELLED, int(match.group(1))
    return SlurmState.parse(text), None


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
        if len(parts) != len(SACCT_FIELDS) or not JOB_ID_RE.match(parts[0]):
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


def parse_squeue(text: str) -> dict[JobId, QueuedJob]:
    """Parse ``squeue --format SQUEUE_FORMAT`` into job id -> what squeue said of it."""
    jobs: dict[JobId, QueuedJob] = {}
    for line in text.splitlines():
        parts = line.rstrip("\r").split("|", 4)
        if len(parts) != 5 or not JOB_ID_RE.match(parts[0]):
            continue
        jobs[JobId(parts[0])] = QueuedJob(SlurmState.parse(parts[1]), parts[2], parts[3], parts[4])
    return jobs


def parse_sbatch_parsable(text: str) -> JobId | None:
    """``sbatch --parsable`` prints ``jobid`` or ``jobid;cluster``; noise lines are skipped."""
    for line in reversed(text.strip().splitlines()):
        candidate = line.strip().split(";", 1)[0]
        if JOB_ID_RE.match(candidate):
            return JobId(candidate)
    return None


def render_chunks_function() -> str:
    """The bash function ``rc_chunks`` that cuts a list into MAX_LIST_ARG_BYTES arguments."""
    return render_template("chunks.bash")
