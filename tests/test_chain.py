"""The spec's decision table (resumable-runs.md), one row per test case, plus the refinements."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remote_chain.core.models import (
    INFRA_STATES,
    NON_TERMINAL_STATES,
    Action,
    ChainState,
    EndRecord,
    JobId,
    Outcome,
    Predecessor,
    ResumePolicy,
    SlurmState,
)
from remote_chain.core.rules import RULES, STATE_OUTCOMES, classify, decide

J = JobId
POLICY = ResumePolicy(max_retries=3, max_walltime_s=None)


def pred(state: SlurmState | None, elapsed: int | None = 100, by: int | None = None) -> Predecessor:
    return Predecessor(J("41"), state, cancelled_by=by, elapsed_s=elapsed)


CHAIN = ChainState(job_ids=(J("41"),), self_job_id=J("42"), uid=1000)


# --- Table 1: "What the next job does with the previous job's state" -------------------------
@pytest.mark.parametrize(
    ("predecessor", "chain", "policy", "action"),
    [
        pytest.param(None, ChainState(), POLICY, Action.START, id="none-first-job-starts"),
        pytest.param(pred(None), CHAIN, POLICY, Action.RESUME, id="not-visible-resumes"),
        pytest.param(pred(SlurmState.COMPLETED), CHAIN, POLICY, Action.EXIT_SUCCESS, id="done"),
        pytest.param(pred(SlurmState.CANCELLED), CHAIN, POLICY, Action.STOP_CANCELLED, id="cancel"),
        pytest.param(pred(SlurmState.TIMEOUT), CHAIN, POLICY, Action.RESUME, id="timeout"),
        pytest.param(pred(SlurmState.PREEMPTED), CHAIN, POLICY, Action.RESUME, id="preempted"),
        pytest.param(pred(SlurmState.NODE_FAIL), CHAIN, POLICY, Action.RESUME, id="node-fail"),
        pytest.param(
            pred(SlurmState.TIMEOUT, elapsed=600),
            ChainState(accumulated_walltime_s=3000, self_job_id=J("42")),
            ResumePolicy(max_walltime_s=3600),
            Action.STOP_WALLTIME,
            id="timeout-cap-reached-stops",
        ),
        pytest.param(pred(SlurmState.FAILED), CHAIN, POLICY, Action.RESUME, id="failed-retries"),
        pytest.param(pred(SlurmState.OUT_OF_MEMORY), CHAIN, POLICY, Action.RESUME, id="oom"),
        pytest.param(
            pred(SlurmState.FAILED),
            ChainState(infra_retries=3, self_job_id=J("42")),
            POLICY,
            Action.EXIT_ERROR,
            id="failed-retries-exceeded-errors",
        ),
    ],
)
def test_spec_table_row(
    predecessor: Predecessor | None, chain: ChainState, policy: ResumePolicy, action: Action
) -> None:
    """Each row of the spec's table yields the action the spec names."""
    assert decide(predecessor, chain, policy).action is action


def test_run_time_known_only_to_slurmctld_counts_as_walltime() -> None:
    """Not visible to sacct but with slurmctld's run time: resumes, no retry, time counted."""
    p = Predecessor(JobId("41"), None, elapsed_s=90)
    d = decide(p, ChainState(accumulated_walltime_s=10), POLICY)
    assert (d.action, d.infra_retries, d.accumulated_walltime_s) == (Action.RESUME, 0, 100)


def test_not_visible_does_not_count_a_retry() -> None:
    """State not yet visible resumes without counting a retry or adding walltime."""
    d = decide(
        pred(None, elapsed=None), ChainState(infra_retries=2, accumulated_walltime_s=10), POLICY
    )
    assert (d.action, d.infra_retries, d.accumulated_walltime_s) == (Action.RESUME, 2, 10)


@pytest.mark.parametrize("state", sorted(INFRA_STATES))
def test_infra_states_never_spend_a_retry(state: SlurmState) -> None:
    """Time limits, preemption and node failure are not counted against max_retries."""
    d = decide(pred(state, elapsed=50), ChainState(infra_retries=3), POLICY)
    assert d.action is Action.RESUME
    assert d.infra_retries == 3
    assert d.accumulated_walltime_s == 50


def test_failed_counts_one_retry_and_exits_with_error_when_exceeded() -> None:
    """max_retries=3: failures 1..3 resume, the 4th exits with an error (status 1)."""
    retries = 0
    actions = []
    for _ in range(4):
        d = decide(pred(SlurmState.FAILED), ChainState(infra_retries=retries), POLICY)
        actions.append(d.action)
        retries = d.infra_retries
    assert actions == [Action.RESUME] * 3 + [Action.EXIT_ERROR]
    assert Action.EXIT_ERROR.exit_status == 1
    assert retries == 4


def test_walltime_stop_is_not_an_error() -> None:
    """Spec caveat: when max_walltime is reached the chain exits with status 0."""
    d = decide(pred(SlurmState.TIMEOUT, 3600), ChainState(), ResumePolicy(max_walltime_s=3600))
    assert d.action is Action.STOP_WALLTIME
    assert d.action.exit_status == 0


# --- Table 2: the state files -----------------------------------------------------------------
def test_walltime_accumulates_the_predecessors_elapsed_seconds() -> None:
    """.gym_accumulated_walltime: seconds of walltime consumed by finished jobs."""
    d = decide(pred(SlurmState.TIMEOUT, 120), ChainState(accumulated_walltime_s=60), POLICY)
    assert d.accumulated_walltime_s == 180


def test_retries_file_counts_only_non_timeout_retries() -> None:
    """.gym_infra_retries: count of non-timeout retries so far."""
    d = decide(pred(SlurmState.FAILED), ChainState(infra_retries=1), POLICY)
    assert d.infra_retries == 2


# --- Refinements ---------------------------------------------------------------------------------
@pytest.mark.parametrize("state", sorted(NON_TERMINAL_STATES))
def test_stale_non_terminal_state_is_accounting_lag(state: SlurmState) -> None:
    """A stale PENDING/RUNNING/REQUEUED... behaves like 'not yet visible': no retry spent."""
    d = decide(pred(state), ChainState(infra_retries=3), POLICY)
    assert classify(pred(state), ChainState(), POLICY) is Outcome.NOT_VISIBLE
    assert (d.action, d.infra_retries) == (Action.RESUME, 3)


def test_cancel_by_the_user_stops_even_with_preempt_policy() -> None:
    """CANCELLED by the submitting user's uid stops the chain whatever the policy."""
    policy = ResumePolicy(admin_cancel="preempt")
    d = decide(pred(SlurmState.CANCELLED, by=1000), CHAIN, policy)
    assert d.action is Action.STOP_CANCELLED


def test_cancel_by_another_uid_follows_policy() -> None:
    """A cancel by another uid (admin tooling) stops by default, resumes as preemption by option."""
    admin = pred(SlurmState.CANCELLED, by=0)
    assert decide(admin, CHAIN, ResumePolicy()).action is Action.STOP_CANCELLED
    d = decide(admin, CHAIN, ResumePolicy(admin_cancel="preempt"))
    assert (d.action, d.infra_retries) == (Action.RESUME, 0)


def test_cancel_marker_is_checked_first() -> None:
    """The marker left by `remote-chain cancel` stops before anything else, even a first job."""
    for predecessor in (None, pred(SlurmState.TIMEOUT), pred(SlurmState.FAILED)):
        d = decide(predecessor, ChainState(cancel_requested=True), POLICY)
        assert d.action is Action.STOP_CANCELLED
        assert not d.action.runs


def test_requeued_job_counts_nothing_twice() -> None:
    """A requeued job (its id already in the chain) restarts without new bookkeeping."""
    chain = ChainState(
        job_ids=(J("41"), J("42")), accumulated_walltime_s=70, infra_retries=1, self_job_id=J("42")
    )
    d = decide(pred(SlurmState.FAILED, 500), chain, POLICY)
    assert (d.action, d.accumulated_walltime_s, d.infra_retries) == (Action.RESTART, 70, 1)


def test_successor_started_by_a_requeued_predecessor_yields() -> None:
    """If the predecessor is back in the queue (requeued), this job leaves the chain to it."""
    p = Predecessor(J("41"), SlurmState.PENDING, in_queue=True)
    d = decide(p, CHAIN, POLICY)
    assert d.action is Action.YIELD
    assert not d.action.runs


def test_time_budget_is_what_is_left_of_the_cap() -> None:
    """After deciding to resume, the job may run only the budget left (it clips its limit)."""
    d = decide(pred(SlurmState.TIMEOUT, 1000), ChainState(), ResumePolicy(max_walltime_s=3600))
    assert (d.action, d.time_budget_s) == (Action.RESUME, 2600)
    assert decide(None, ChainState(), ResumePolicy(max_walltime_s=60)).time_budget_s == 60
    assert decide(None, ChainState(), POLICY).time_budget_s is None


def test_every_state_has_a_row() -> None:
    """The table covers every Slurm state and every outcome has a rule."""
    assert set(STATE_OUTCOMES) == set(SlurmState)
    assert set(RULES) == set(Outcome)


# --- Properties --------------------------------------------------------------------------------
states = st.one_of(st.none(), st.sampled_from(list(SlurmState)))
predecessors = st.one_of(
    st.none(),
    st.builds(
        Predecessor,
        job_id=st.just(J("41")),
        state=states,
        cancelled_by=st.one_of(st.none(), st.integers(0, 70000)),
        elapsed_s=st.one_of(st.none(), st.integers(0, 10**7)),
        in_queue=st.booleans(),
    ),
)
chains = st.builds(
    ChainState,
    job_ids=st.lists(st.sampled_from([J("40"), J("41"), J("42")]), max_size=3).map(tuple),
    accumulated_walltime_s=st.integers(0, 10**8),
    infra_retries=st.integers(0, 50),
    cancel_requested=st.booleans(),
    self_job_id=st.sampled_from([J("42"), J("43"), None]),
    uid=st.one_of(st.none(), st.integers(0, 70000)),
)
policies = st.builds(
    ResumePolicy,
    max_retries=st.integers(0, 20),
    max_walltime_s=st.one_of(st.none(), st.integers(1, 10**8)),
    admin_cancel=st.sampled_from(["stop", "preempt"]),
)


@given(predecessors, chains, policies)
def test_decide_is_total(p: Predecessor | None, c: ChainState, pol: ResumePolicy) -> None:
    """decide() returns a Decision for every input, with non-negative counters."""
    d = decide(p, c, pol)
    assert d.action in set(Action)
    assert d.accumulated_walltime_s >= c.accumulated_walltime_s
    assert d.infra_retries >= c.infra_retries


@given(st.sampled_from(sorted(INFRA_STATES)), chains, policies)
def test_infra_never_spends_a_retry(s: SlurmState, c: ChainState, pol: ResumePolicy) -> None:
    """TIMEOUT/PREEMPTED/NODE_FAIL never increase the retry count."""
    assert decide(pred(s), c, pol).infra_retries == c.infra_retries


@given(predecessors, chains, policies)
def test_retries_never_exceed_the_bound_while_running(
    p: Predecessor | None, c: ChainState, pol: ResumePolicy
) -> None:
    """Whenever a job goes on to run after counting a retry, the count is within max_retries."""
    d = decide(p, c, pol)
    if d.action.runs and d.infra_retries > c.infra_retries:
        assert d.infra_retries <= pol.max_retries


@given(predecessors, chains, policies)
def test_walltime_at_cap_always_stops(
    p: Predecessor | None, c: ChainState, pol: ResumePolicy
) -> None:
    """Accumulated walltime at or above the cap never starts another runner (but a restart)."""
    d = decide(p, c, pol)
    cap = pol.max_walltime_s
    if cap is not None and d.accumulated_walltime_s >= cap and d.action is not Action.RESTART:
        assert not d.action.runs
    if d.action.runs and cap is not None:
        assert d.time_budget_s is not None


@given(chains, policies)
def test_completed_always_ends(c: ChainState, pol: ResumePolicy) -> None:
    """A COMPLETED predecessor never starts a runner."""
    assert not decide(pred(SlurmState.COMPLETED), c, pol).action.runs or (
        c.self_job_id in c.job_ids
    )


# --- The edges -----------------------------------------------------------------------------------
def test_signalled_end_record_turns_failed_into_the_timeout_row() -> None:
    """Exited non-zero after a checkpoint signal: resumes, walltime counted, no retry."""
    p = Predecessor(J("41"), SlurmState.FAILED, elapsed_s=70, end=EndRecord.SIGNALLED)
    d = decide(p, ChainState(infra_retries=3), POLICY)
    assert (d.action, d.outcome, d.infra_retries, d.accumulated_walltime_s) == (
        Action.RESUME, Outcome.INFRA, 3, 70,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("end", "action"),
    [
        (EndRecord.OK, Action.EXIT_SUCCESS),
        (EndRecord.ERROR, Action.RESUME),
        (EndRecord.SIGNALLED, Action.RESUME),
        (None, Action.RESUME),
    ],
)
def test_end_record_decides_when_no_slurm_source_knows(
    end: EndRecord | None, action: Action
) -> None:
    """Neither sacct nor slurmctld knows the predecessor: its own end record tells the row."""
    d = decide(Predecessor(J("41"), None, elapsed_s=30, end=end), CHAIN, POLICY)
    assert d.action is action
    assert d.unknown_links == (1 if end is None else 0)


def test_consecutive_unknown_links_are_capped() -> None:
    """The fourth link in a row whose predecessor nobody knew ends the chain with an error."""
    unknown = 0
    actions = []
    for _ in range(4):
        d = decide(pred(None, elapsed=None), ChainState(unknown_links=unknown), POLICY)
        actions.append(d.action)
        unknown = d.unknown_links
    assert actions == [Action.RESUME] * 3 + [Action.EXIT_ERROR]
    # A known predecessor ends the streak.
    assert decide(pred(SlurmState.TIMEOUT), ChainState(unknown_links=3), POLICY).unknown_links == 0


def test_a_held_lease_yields_before_anything_is_counted() -> None:
    """Another live link holds the runner lease: this one yields, even when requeued itself."""
    chain = ChainState(job_ids=(J("41"), J("42")), self_job_id=J("42"), lease_held=True)
    d = decide(pred(SlurmState.FAILED), chain, POLICY)
    assert (d.action, d.outcome, d.infra_retries) == (Action.YIELD, None, 0)


@given(predecessors, chains, policies)
def test_signalled_never_spends_a_retry(
    p: Predecessor | None, c: ChainState, pol: ResumePolicy
) -> None:
    """A predecessor whose own record says signalled never costs a retry."""
    if p is not None:
        p = Predecessor(p.job_id, p.state, p.cancelled_by, p.elapsed_s, p.in_queue,
                        EndRecord.SIGNALLED)  # fmt: skip
    assert decide(p, c, pol).infra_retries == c.infra_retries


# Every string job_state_string() (src/common/slurm_protocol_defs.c) returns, the same at tags
# slurm-22-05-11-1, slurm-23-02-7-1, slurm-23-11-11-1, slurm-24-05-8-1 and slurm-24-11-7-1 (read
# from SchedMD/slurm); sacct's State and squeue's %T print these. Its default "?" parses as
# UNKNOWN, which is "anything else".
SLURM_22_05_TO_24_11_STATES = {
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "COMPLETING", "CONFIGURING", "DEADLINE", "FAILED",
    "NODE_FAIL", "OUT_OF_MEMORY", "PENDING", "PREEMPTED", "REQUEUED", "REQUEUE_FED",
    "REQUEUE_HOLD", "RESIZING", "RESV_DEL_HOLD", "REVOKED", "RUNNING", "SIGNALING",
    "SPECIAL_EXIT", "STAGE_OUT", "STOPPED", "SUSPENDED", "TIMEOUT",
}  # fmt: skip


def test_every_state_slurm_can_print_has_a_row() -> None:
    """Each state Slurm 22.05-24.11 prints is a SlurmState with a row; '?' is anything else."""
    assert {s.value for s in SlurmState} - {"UNKNOWN"} == SLURM_22_05_TO_24_11_STATES
    assert all(SlurmState.parse(s) in STATE_OUTCOMES for s in SLURM_22_05_TO_24_11_STATES)
    assert STATE_OUTCOMES[SlurmState.parse("?")] is Outcome.FAILED
