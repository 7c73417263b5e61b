"""PURE: the spec's decision table (resumable-runs.md, "What the next job does") as data.

``decide()`` is the only place the chaining rules live. The bash prologue that runs on the
cluster is *generated* from ``STATE_OUTCOMES`` and ``RULES`` (see ``script.py``), and the
prologue is run under stub Slurm commands against ``decide()`` for every state, so the two
cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass

from remote_chain.models import (
    INFRA_STATES,
    NON_TERMINAL_STATES,
    Action,
    ChainState,
    Decision,
    Outcome,
    Predecessor,
    ResumePolicy,
    SlurmState,
)


@dataclass(frozen=True)
class Rule:
    """One row of the table: the action, and whether the row spends a retry or checks the cap."""

    action: Action
    counts_retry: bool = False
    checks_walltime: bool = False


# Spec table, one entry per row. Only rows that start a runner check the walltime cap: the
# spec checks it on TIMEOUT/PREEMPTED/NODE_FAIL, and we extend it to every start (refinement
# "walltime cap never overrun"), so accumulated >= cap always stops.
RULES: dict[Outcome, Rule] = {
    Outcome.FIRST: Rule(Action.START, checks_walltime=True),
    Outcome.NOT_VISIBLE: Rule(Action.RESUME, checks_walltime=True),
    Outcome.COMPLETED: Rule(Action.EXIT_SUCCESS),
    Outcome.CANCELLED: Rule(Action.STOP_CANCELLED),
    Outcome.INFRA: Rule(Action.RESUME, checks_walltime=True),
    Outcome.FAILED: Rule(Action.RESUME, counts_retry=True, checks_walltime=True),
}


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


def classify(predecessor: Predecessor | None, chain: ChainState, policy: ResumePolicy) -> Outcome:
    """Which row of the table applies."""
    if predecessor is None:
        return Outcome.FIRST
    if predecessor.state is None:
        return Outcome.NOT_VISIBLE
    outcome = STATE_OUTCOMES[predecessor.state]
    if outcome is Outcome.CANCELLED and not _cancel_stops(predecessor, chain, policy):
        return Outcome.INFRA  # an admin's cancel used as preemption, by policy
    return outcome


def _cancel_stops(predecessor: Predecessor, chain: ChainState, policy: ResumePolicy) -> bool:
    # A cancel by the submitting user (or by remote-chain, which leaves a marker) always
    # stops; a cancel by another uid (admin tooling) follows the policy, default stop.
    if policy.cancel_by_other == "stop" or chain.cancel_requested:
        return True
    by = predecessor.cancelled_by
    return by is None or chain.uid is None or by == chain.uid


def decide(predecessor: Predecessor | None, chain: ChainState, policy: ResumePolicy) -> Decision:
    """Decide what this job does, from its predecessor's final state and the chain's files."""
    walltime, retries = chain.accumulated_walltime_s, chain.infra_retries

    # A cancel marker written by `remote-chain cancel` wins over everything (refinement).
    if chain.cancel_requested:
        return Decision(Action.STOP_CANCELLED, None, walltime, retries, message="cancel marker")
    # Requeued (same job id already recorded): the bookkeeping was done by the first run.
    if chain.self_job_id is not None and chain.self_job_id in chain.job_ids:
        return Decision(Action.RESTART, None, walltime, retries, _budget(walltime, policy))
    # Started although the predecessor is back in the queue (its requeue fired our
    # afternotok dependency): the predecessor still owns the chain.
    if (
        predecessor is not None
        and predecessor.in_queue
        and (predecessor.state is None or predecessor.state in NON_TERMINAL_STATES)
    ):
        return Decision(Action.YIELD, None, walltime, retries, message="predecessor requeued")

    outcome = classify(predecessor, chain, policy)
    rule = RULES[outcome]
    # A final elapsed counts toward max_walltime; a stale record's (state non-terminal) does
    # not. ``state is None`` with an elapsed means slurmctld knew the run time (accounting
    # never showed the job): counted, although the row stays "not visible".
    if (
        predecessor is not None
        and predecessor.elapsed_s
        and (predecessor.state is None or outcome is not Outcome.NOT_VISIBLE)
    ):
        walltime += max(0, predecessor.elapsed_s)
    if rule.counts_retry:
        retries += 1
        if retries > policy.max_retries:
            return Decision(
                Action.EXIT_ERROR,
                outcome,
                walltime,
                retries,
                message=f"max_retries ({policy.max_retries}) exceeded",
            )
    cap = policy.max_walltime_s
    if rule.checks_walltime and cap is not None and walltime >= cap:
        return Decision(
            Action.STOP_WALLTIME,
            outcome,
            walltime,
            retries,
            message=f"max_walltime reached ({walltime}s >= {cap}s)",
        )
    return Decision(rule.action, outcome, walltime, retries, _budget(walltime, policy))


def _budget(walltime: int, policy: ResumePolicy) -> int | None:
    if policy.max_walltime_s is None:
        return None
    return max(0, policy.max_walltime_s - walltime)
