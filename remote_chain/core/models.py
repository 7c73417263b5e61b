"""Frozen values shared by the pure core: job ids, Slurm states, chain state, policy."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Literal, NewType

# A Slurm job id stays a string: array tasks are "123_4", het jobs "123+0".
JobId = NewType("JobId", str)

# One pattern for Python and for the bash templates (an ERE both engines read alike).
JOB_ID_ERE = "[0-9]+([_+][0-9]+)?"
JOB_ID_RE = re.compile(rf"^{JOB_ID_ERE}\Z")
NAME_RE = re.compile(r"^[A-Za-z0-9._-]+\Z")
# What runs a profile's jobs (interface.md section 2): sbatch, or a plain shell (no chaining).
Executor = Literal["slurm", "shell"]
# How the client reaches the login node (transport/connect.py opens one or the other).
Transport = Literal["asyncssh", "openssh"]


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
        # A dict lookup, not cls(word): a status parses a few states per chain.
        return _STATE_BY_VALUE.get(word, cls.UNKNOWN)


_STATE_BY_VALUE: dict[str, SlurmState] = {state.value: state for state in SlurmState}

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

# States in which sacct's record of a job is its last word: a status poll keeps such records
# (with their End) in the local index and asks slurmdbd of them no more (else a poll of a run
# whose chains ended would ask sacct of every job it ever ran, every time). Not NODE_FAIL or
# PREEMPTED, after which Slurm may requeue the job under its id; a job requeued from one of
# these by hand shows up in squeue again, and squeue speaks for a job it shows.
FINAL_STATES: frozenset[SlurmState] = frozenset(
    {
        SlurmState.BOOT_FAIL,
        SlurmState.CANCELLED,
        SlurmState.COMPLETED,
        SlurmState.DEADLINE,
        SlurmState.FAILED,
        SlurmState.OUT_OF_MEMORY,
        SlurmState.TIMEOUT,
    }
)

# Seen in squeue for the predecessor, these mean it is still (or again) in the queue: requeued,
# held, suspended or stopped. COMPLETING, SIGNALING and STAGE_OUT are a job on its way out (our
# afternotok dependency fires while it completes), so they are not "queued".
QUEUED_STATES: frozenset[SlurmState] = NON_TERMINAL_STATES - {
    SlurmState.COMPLETING,
    SlurmState.SIGNALING,
    SlurmState.STAGE_OUT,
}

# States in which the owner of the runner lease may still be running its runner: a lease is
# broken only when squeue shows the owner in none of these (or not at all). PENDING/REQUEUED
# owners run nothing now; a COMPLETING one may still be killing its runner (KillWait).
LEASE_LIVE_STATES: frozenset[SlurmState] = frozenset(
    {
        SlurmState.RUNNING,
        SlurmState.COMPLETING,
        SlurmState.CONFIGURING,
        SlurmState.RESIZING,
        SlurmState.SIGNALING,
        SlurmState.STAGE_OUT,
        SlurmState.STOPPED,
        SlurmState.SUSPENDED,
    }
)

# Spec row "TIMEOUT, PREEMPTED, NODE_FAIL": the scheduler took the allocation away.
INFRA_STATES: frozenset[SlurmState] = frozenset(
    {SlurmState.TIMEOUT, SlurmState.PREEMPTED, SlurmState.NODE_FAIL}
)


class ChainStateName(enum.StrEnum):
    """A chain's state as ``status`` reports it (interface.md), derived in chainstatus.py."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"
    UNKNOWN = "unknown"

    @property
    def ended(self) -> bool:
        return self not in (ChainStateName.PENDING, ChainStateName.RUNNING, ChainStateName.UNKNOWN)


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
    ``state`` comes from sacct, else from slurmctld (``scontrol show job``); ``end`` is the
    predecessor's own end record in the events file (written on exit and on a signal).
    """

    job_id: JobId
    state: SlurmState | None
    cancelled_by: int | None = None
    elapsed_s: int | None = None
    in_queue: bool = False
    end: EndRecord | None = None


@dataclass(frozen=True)
class ChainState:
    """The chain as the three dot-files (and the cancel marker) describe it."""

    job_ids: tuple[JobId, ...] = ()
    accumulated_walltime_s: int = 0
    infra_retries: int = 0
    cancel_requested: bool = False
    self_job_id: JobId | None = None
    uid: int | None = None  # the user the chain runs as; a cancel by this uid is the user's
    # Another link of this chain holds the runner lease and Slurm says it still runs.
    lease_held: bool = False
    # Links in a row whose predecessor no source knew (sacct, slurmctld, its end record).
    unknown_links: int = 0


AdminCancel = Literal["stop", "preempt"]


@dataclass(frozen=True)
class ResumePolicy:
    """The benchmark's ``resumable`` setting, plus how to read a cancel by another uid."""

    max_retries: int = 3
    max_walltime_s: int | None = None
    admin_cancel: AdminCancel = "stop"
    # Cap on consecutive links whose predecessor was unknown to every source.
    max_unknown_links: int = 3


class Outcome(enum.StrEnum):
    """The rows of the spec's table: what the predecessor's state means for the chain."""

    FIRST = "first"  # no predecessor
    NOT_VISIBLE = "not_visible"  # not in sacct in time, or only a stale non-terminal state
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    INFRA = "infra"  # TIMEOUT / PREEMPTED / NODE_FAIL
    FAILED = "failed"  # anything else


class EndRecord(enum.StrEnum):
    """A link's own record of how it ended, in the events file (``end <kind> ...``)."""

    OK = "ok"  # the runner exited 0: the run is complete
    ERROR = "error"  # the link exited non-zero without a signal
    SIGNALLED = "signalled"  # a warning signal, the time limit or preemption ended it


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
    unknown_links: int = 0
