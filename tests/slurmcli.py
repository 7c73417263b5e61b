"""Slurm's command lines and answers as the end-to-end tests ask Slurm themselves (the product
asks through its execs, whose command lines are core.sacct's constants)."""

from __future__ import annotations

from collections.abc import Iterable

from remote_chain.core.models import JOB_ID_RE, JobId
from remote_chain.core.sacct import SACCT_FIELDS, SQUEUE_FORMAT


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


def parse_sbatch_parsable(text: str) -> JobId | None:
    """``sbatch --parsable`` prints ``jobid`` or ``jobid;cluster``; noise lines are skipped."""
    for line in reversed(text.strip().splitlines()):
        candidate = line.strip().split(";", 1)[0]
        if JOB_ID_RE.match(candidate):
            return JobId(candidate)
    return None
