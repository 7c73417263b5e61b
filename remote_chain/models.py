"""Frozen values shared by the pure core: job ids, Slurm states, chain state, policy."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Literal, NewType

# A Slurm job id stays a string: array tasks are "123_4", het jobs "123+0".
JobId = NewType("JobId", str)

JOB_ID_RE = re.compile(r"^[0-9]+(?:[_+][0-9]+)?\Z")
NAME_RE = re.compile(r"^[A-Za-z0-9._-]+\Z")


class SlurmState(enum.StrEnum):
    """Job states as sacct/squeue print them (the first word; ``CANCELLED by N`` keeps N aside)."""

    BOOT_FAIL = "BOOT_FAIL"
    CANCELLED = "CANCELLED"
    COMPLETED = "COMPLETED"
    COMPLETING = "COMPLETING"
    CONFIGURING = "CONFIGURING"
    DEADLINE = "DEADLINE"
    FAILED = "FAILED"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    PENDING = "PENDING"
    PREEMPTED = "PREEMPTED"
    REQUEUED = "REQUEUED"
    REQUEUE_FED = "REQUEUE_FED"
    REQUEUE_HOLD = "REQUEUE_HOLD"
    RESIZING = "RESIZING"
    RESV_DEL_HOLD = "RESV_DEL_HOLD"
    REVOKED = "REVOKED"
    RUNNING = "RUNNING"
    SIGNALING = "SIGNALING"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    STAGE_OUT = "STAGE_OUT"
    STOPPED = "STOPPED"
    SUSPENDED = "SUSPENDED"
    TIMEOUT = "TIMEOUT"
    UNKNOWN = "UNKNOWN"

    @classmethod
    def parse(cls, text: str) -> SlurmState:
        """First word of a state column; anything unrecognised is UNKNOWN, never an error."""
        word = text.strip().split(" ", 1)[0].rstrip("+").upper() if text.strip() else ""
        try:
            return cls(word)
        except ValueError:
            return cls.UNKNOWN


# States in which a job has not finished. Seen in sacct for a job that must have ended (our
# dependency fired), they mean accounting has not caught up: never a failure (refinement 1).
NON_TERMINAL_STATES: frozenset[SlurmState] = frozenset(
    {
        SlurmState.PENDING,
        SlurmState.RUNNING,
        SlurmState.REQUEUED,
        SlurmState.REQUEUE_FED,
        SlurmState.REQUEUE_HOLD,
        SlurmState.COMPLETING,
        SlurmState.CONFIGURING,
        SlurmState.SUSPENDED,
        SlurmState.RESIZING,
        SlurmState.SIGNALING,
        SlurmState.STAGE_OUT,
        SlurmState.STOPPED,
        SlurmState.RESV_DEL_HOLD,
        SlurmState.SPECIAL_EXIT,
    }
)

# Spec row "TIMEOUT, PREEMPTED, NODE_FAIL": the scheduler took the allocation away.
INFRA_STATES: frozenset[SlurmState] = frozenset(
    {SlurmState.TIMEOUT, SlurmState.PREEMPTED, SlurmState.NODE_FAIL}
)


@dataclass(frozen=True)
class SacctRecord:
    """One allocation line of ``sacct -X --parsable2 --noheader``."""

    job_id: JobId
    state: SlurmState
    cancelled_by: int | None = None
    elapsed_s: int | None = None
    exit_code: str = ""
    reason: str = ""
    start: str = ""
    end: str = ""


@dataclass(frozen=True)
class Predecessor:
    """What the prologue learned about the job before it.

    ``state`` is None when sacct never showed the job within the lookup window.
    ``in_queue`` is True when squeue still lists it pending or running (it was requeued).
    """

    job_id: JobId
    state: SlurmState | None
    cancelled_by: int | None = None
    elapsed_s: int | None = None
    in_queue: bool = False


@dataclass(frozen=True)
class ChainState:
    """The chain as the three dot-files (and the cancel marker) describe it."""

    job_ids: tuple[JobId, ...] = ()
    accumulated_walltime_s: int = 0
    infra_retries: int = 0
    cancel_requested: bool = False
    self_job_id: JobId | None = None
    uid: int | None = None  # the user the chain runs as; a cancel by this uid is the user's


CancelByOther = Literal["stop", "preempt"]


@dataclass(frozen=True)
class ResumePolicy:
    """The benchmark's ``resumable`` setting, plus how to read a cancel by another uid."""

    max_retries: int = 3
    max_walltime_s: int | None = None
    cancel_by_other: CancelByOther = "stop"


class Outcome(enum.StrEnum):
    """The rows of the spec's table: what the predecessor's state means for the chain."""

    FIRST = "first"  # no predecessor
    NOT_VISIBLE = "not_visible"  # not in sacct in time, or only a stale non-terminal state
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    INFRA = "infra"  # TIMEOUT / PREEMPTED / NODE_FAIL
    FAILED = "failed"  # anything else


class Action(enum.StrEnum):
    """What a job does after its prologue decided."""

    START = "start"  # run the runner, first job
    RESUME = "resume"  # run the runner with the predecessor's artifacts
    RESTART = "restart"  # this very job was requeued: bookkeeping already done, run again
    YIELD = "yield"  # the predecessor is alive again (requeued): leave the chain to it
    EXIT_SUCCESS = "exit_success"  # the run already finished
    STOP_CANCELLED = "stop_cancelled"
    STOP_WALLTIME = "stop_walltime"
    EXIT_ERROR = "exit_error"  # max_retries exceeded

    @property
    def runs(self) -> bool:
        """Whether the job queues a successor and starts the runner."""
        return self in (Action.START, Action.RESUME, Action.RESTART)

    @property
    def exit_status(self) -> int:
        """The job's own exit status when it does not run the runner."""
        return 1 if self is Action.EXIT_ERROR else 0


@dataclass(frozen=True)
class Decision:
    action: Action
    outcome: Outcome | None
    accumulated_walltime_s: int
    infra_retries: int
    # Seconds this job may still run before the walltime cap; None when there is no cap.
    time_budget_s: int | None = None
    message: str = ""
    notes: tuple[str, ...] = field(default=())
