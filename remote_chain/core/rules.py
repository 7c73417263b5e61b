"""PURE: the spec's decision table (resumable-runs.md, "What the next job does") as data.

``decide()`` is the only place the chaining rules live. It interprets four tables, and the
prologue's ``rc_decide`` that runs on the cluster is *generated* from the same four (see
``script.render_decide``), so bash holds only the I/O around them:

1. ``GUARDS``: facts checked before the table, in order (cancel marker, lease, requeue).
2. ``STATE_OUTCOMES`` / ``END_OUTCOMES``: which row a predecessor falls in, from its Slurm
   state, else from its own end record (``SIGNALLED_OVERRIDES``: a signalled end turns a
   FAILED row into the TIMEOUT row).
3. ``RULES``: per row, the action and which counters it moves.
4. ``LIMITS``: the caps checked after the counters moved, in order.

The prologue is run under stub Slurm commands against ``decide()`` for every state
(tests/test_prologue.py): the proof that the generated bash and this module agree.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from remote_chain.core.models import (
    INFRA_STATES,
    NON_TERMINAL_STATES,
    Action,
    ChainState,
    Decision,
    EndRecord,
    Outcome,
    Predecessor,
    ResumePolicy,
    SlurmState,
)


class Fact(enum.StrEnum):
    """What the prologue knows before it reads the table; each one a 0/1 in bash."""

    CANCEL_REQUESTED = "cancel_requested"  # the marker `remote-chain cancel` leaves
    LEASE_HELD = "lease_held"  # another live link holds the runner lease
    RESTARTED = "restarted"  # this very job id is already in the chain: Slurm requeued it
    PREDECESSOR_QUEUED = "predecessor_queued"  # squeue holds the predecessor again


@dataclass(frozen=True)
class Guard:
    fact: Fact
    action: Action
    message: str


# Checked in this order; the first that holds decides, and nothing is counted. The lease comes
# before the restart: a requeued link whose successor already carries the chain must yield
# (refinement "one runner at a time").
GUARDS: tuple[Guard, ...] = (
    Guard(Fact.CANCEL_REQUESTED, Action.STOP_CANCELLED, "cancel marker"),
    Guard(Fact.LEASE_HELD, Action.YIELD, "another link of the chain holds the runner lease"),
    Guard(Fact.RESTARTED, Action.RESTART, "requeued: bookkeeping done by the first run"),
    Guard(Fact.PREDECESSOR_QUEUED, Action.YIELD, "predecessor requeued"),
)


@dataclass(frozen=True)
class Rule:
    """One row of the table: the action, and which counters the row moves or checks."""

    action: Action
    counts_retry: bool = False
    checks_walltime: bool = False
    counts_unknown: bool = False  # a row no source could tell: one more unknown link in a row


# Spec table, one entry per row. Only rows that start a runner check the walltime cap: the
# spec checks it on TIMEOUT/PREEMPTED/NODE_FAIL, and we extend it to every start (refinement
# "walltime cap never overrun"), so accumulated >= cap always stops.
RULES: dict[Outcome, Rule] = {
    Outcome.FIRST: Rule(Action.START, checks_walltime=True),
    Outcome.NOT_VISIBLE: Rule(Action.RESUME, checks_walltime=True, counts_unknown=True),
    Outcome.COMPLETED: Rule(Action.EXIT_SUCCESS),
    Outcome.CANCELLED: Rule(Action.STOP_CANCELLED),
    Outcome.INFRA: Rule(Action.RESUME, checks_walltime=True),
    Outcome.FAILED: Rule(Action.RESUME, counts_retry=True, checks_walltime=True),
}


class Counter(enum.StrEnum):
    RETRIES = "retries"
    UNKNOWN_LINKS = "unknown_links"
    WALLTIME = "walltime"


@dataclass(frozen=True)
class Limit:
    """A cap checked after the counters moved: ``counter > bound`` (``>=`` when ``at``)."""

    counter: Counter
    when: str  # the Rule flag that makes the row subject to this cap
    bound: str  # the ResumePolicy field (None: no cap)
    action: Action
    message: str  # {value} and {bound} are filled in
    at: bool = False


LIMITS: tuple[Limit, ...] = (
    Limit(
        Counter.RETRIES, "counts_retry", "max_retries", Action.EXIT_ERROR,
        "max_retries ({bound}) exceeded",
    ),
    # Accounting off or down for long, a runner failing at once would loop
    # with no retry spent; only links whose predecessor NO source knew count, in a row.
    Limit(
        Counter.UNKNOWN_LINKS, "counts_unknown", "max_unknown_links", Action.EXIT_ERROR,
        "predecessor state unknown to sacct, slurmctld and its end record "
        "{value} links in a row (cap {bound})",
    ),
    Limit(
        Counter.WALLTIME, "checks_walltime", "max_walltime_s", Action.STOP_WALLTIME,
        "max_walltime reached ({value}s >= {bound}s)", at=True,
    ),
)  # fmt: skip


def _state_outcome(state: SlurmState) -> Outcome:
    if state is SlurmState.COMPLETED:
        return Outcome.COMPLETED
    if state is SlurmState.CANCELLED:
        return Outcome.CANCELLED
    if state in INFRA_STATES:
        return Outcome.INFRA
    if state in NON_TERMINAL_STATES:
        return Outcome.NOT_VISIBLE  # refinement: stale non-terminal = accounting lag
    return Outcome.FAILED  # "anything else": FAILED, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE, UNKNOWN…


# Every state's row, for the bash generator (a `case` over sacct's first word).
STATE_OUTCOMES: dict[SlurmState, Outcome] = {s: _state_outcome(s) for s in SlurmState}

# When neither sacct nor slurmctld knows the predecessor, its own end record tells the row.
END_OUTCOMES: dict[EndRecord, Outcome] = {
    EndRecord.OK: Outcome.COMPLETED,
    EndRecord.ERROR: Outcome.FAILED,
    EndRecord.SIGNALLED: Outcome.INFRA,
}
# Refinement "checkpoint signals": a link that ended on a warning signal, the time limit or
# preemption exits non-zero (sacct: FAILED) but its own record says signalled: the TIMEOUT row.
SIGNALLED_OVERRIDES: frozenset[Outcome] = frozenset({Outcome.FAILED})


def facts(predecessor: Predecessor | None, chain: ChainState) -> dict[Fact, bool]:
    """The guards' inputs, as the prologue computes them from files and squeue."""
    return {
        Fact.CANCEL_REQUESTED: chain.cancel_requested,
        Fact.LEASE_HELD: chain.lease_held,
        Fact.RESTARTED: chain.self_job_id is not None and chain.self_job_id in chain.job_ids,
        Fact.PREDECESSOR_QUEUED: predecessor is not None
        and predecessor.in_queue
        and (predecessor.state is None or predecessor.state in NON_TERMINAL_STATES),
    }


def classify(predecessor: Predecessor | None, chain: ChainState, policy: ResumePolicy) -> Outcome:
    """Which row of the table applies."""
    if predecessor is None:
        return Outcome.FIRST
    outcome = (
        Outcome.NOT_VISIBLE if predecessor.state is None else STATE_OUTCOMES[predecessor.state]
    )
    if outcome is Outcome.NOT_VISIBLE and predecessor.end is not None:
        outcome = END_OUTCOMES[predecessor.end]
    if predecessor.end is EndRecord.SIGNALLED and outcome in SIGNALLED_OVERRIDES:
        outcome = Outcome.INFRA
    if outcome is Outcome.CANCELLED and not _cancel_stops(predecessor, chain, policy):
        return Outcome.INFRA  # an admin's cancel used as preemption, by policy
    return outcome


def _cancel_stops(predecessor: Predecessor, chain: ChainState, policy: ResumePolicy) -> bool:
    # A cancel by the submitting user (or by remote-chain, which leaves a marker) always
    # stops; a cancel by another uid (admin tooling) follows the policy, default stop.
    if policy.admin_cancel == "stop" or chain.cancel_requested:
        return True
    by = predecessor.cancelled_by
    return by is None or chain.uid is None or by == chain.uid


def decide(predecessor: Predecessor | None, chain: ChainState, policy: ResumePolicy) -> Decision:
    """Decide what this job does, from its predecessor's final state and the chain's files."""
    walltime, retries = chain.accumulated_walltime_s, chain.infra_retries
    unknown = chain.unknown_links

    known = facts(predecessor, chain)
    for guard in GUARDS:
        if known[guard.fact]:
            budget = _budget(walltime, policy) if guard.action.runs else None
            return Decision(guard.action, None, walltime, retries, budget, guard.message,
                            unknown_links=unknown)  # fmt: skip

    outcome = classify(predecessor, chain, policy)
    rule = RULES[outcome]
    # A final elapsed counts toward max_walltime; a stale record's (state non-terminal) does
    # not. ``state is None`` with an elapsed means slurmctld or the end record knew the run
    # time (accounting never showed the job): counted, although the row may stay "not visible".
    if (
        predecessor is not None
        and predecessor.elapsed_s
        and (predecessor.state is None or outcome is not Outcome.NOT_VISIBLE)
    ):
        walltime += max(0, predecessor.elapsed_s)
    retries += rule.counts_retry
    unknown = unknown + 1 if rule.counts_unknown else 0
    values = {Counter.RETRIES: retries, Counter.UNKNOWN_LINKS: unknown, Counter.WALLTIME: walltime}
    for limit in LIMITS:
        bound: int | None = getattr(policy, limit.bound)
        value = values[limit.counter]
        if not getattr(rule, limit.when) or bound is None:
            continue
        if value >= bound if limit.at else value > bound:
            message = limit.message.format(value=value, bound=bound)
            return Decision(limit.action, outcome, walltime, retries, None, message,
                            unknown_links=unknown)  # fmt: skip
    return Decision(rule.action, outcome, walltime, retries, _budget(walltime, policy),
                    unknown_links=unknown)  # fmt: skip


def _budget(walltime: int, policy: ResumePolicy) -> int | None:
    if policy.max_walltime_s is None:
        return None
    return max(0, policy.max_walltime_s - walltime)
