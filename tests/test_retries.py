"""The named retry policies (retries.py), run with zero waits and a fake clock."""

from __future__ import annotations

import anyio
import pytest

from remote_chain import retries
from remote_chain.errors import (
    AuthenticationError,
    CommandFailedError,
    ConnectError,
    HostKeyError,
    RefusedError,
    RemoteChainError,
    RemoteTimeout,
)


class Clock:
    """A clock the policy's sleep advances, so budgets are tested without waiting."""

    def __init__(self) -> None:
        self.now = 100.0
        self.pauses: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def _failing(errors: list[BaseException], clock: Clock, cost: float = 0.0):  # type: ignore[no-untyped-def]
    calls: list[float] = []

    async def attempt() -> str:
        calls.append(clock.now)
        clock.now += cost
        if errors:
            raise errors.pop(0)
        return "ok"

    return attempt, calls


def test_connect_refused_is_tried_for_connect_retry_seconds_from_the_first_refusal() -> None:
    """Nothing listening: 0.25, 0.5, 1 s pauses until connect_retry (2 s) is spent, then raised."""
    clock = Clock()
    told: list[float] = []
    attempt, calls = _failing([RefusedError("refused", host="h") for _ in range(20)], clock)
    policy = retries.connect(
        refused_s=2.0,
        patience_s=10.0,
        on_retry=lambda exc, left: told.append(left),
        sleep=clock.sleep,
        clock=clock,
    )
    with pytest.raises(RefusedError):
        anyio.run(policy, attempt)
    assert clock.pauses == [0.25, 0.5, 1.0, 0.25]  # the last pause only what the budget left
    assert told == [2.0, 1.75, 1.25, 0.25]
    assert len(calls) == 5


def test_connect_reset_is_tried_for_one_connect_timeout_and_then_succeeds() -> None:
    """A reset mid-handshake is tried again within the connect timeout; success returns."""
    clock = Clock()
    attempt, _ = _failing([ConnectError("reset", host="h")] * 2, clock)
    policy = retries.connect(
        refused_s=0.0, patience_s=5.0, on_retry=lambda *_: None, sleep=clock.sleep, clock=clock
    )
    assert anyio.run(policy, attempt) == "ok"
    assert clock.pauses == [0.25, 0.5]


@pytest.mark.parametrize(
    "error", [AuthenticationError("no", host="h"), RemoteTimeout("slow", host="h")]
)
def test_connect_never_retries_what_is_not_a_connect_error(error: RemoteChainError) -> None:
    """Authentication and a connect timeout fail at once: each try would cost the same."""
    clock = Clock()
    attempt, calls = _failing([error], clock)
    policy = retries.connect(
        refused_s=5, patience_s=5, on_retry=lambda *_: None, sleep=clock.sleep, clock=clock
    )
    with pytest.raises(type(error)):
        anyio.run(policy, attempt)
    assert len(calls) == 1


def test_channel_refused_is_tried_three_times() -> None:
    """A refused channel is tried three times in all, 0.2 s apart; then the error is raised."""
    clock = Clock()
    attempt, calls = _failing([LookupError("refused")] * 5, clock)
    with pytest.raises(LookupError):
        anyio.run(retries.channel_refused(LookupError, sleep=clock.sleep), attempt)
    assert len(calls) == 3
    assert clock.pauses == [0.2, 0.2]


def test_transient_read_retries_transient_errors_only_once_connected() -> None:
    """A lost connection is retried; a failed command and a never-connected session are not."""
    clock = Clock()
    policy = retries.RetryPolicy(attempts=4, sleep=clock.sleep)
    attempt, calls = _failing([ConnectError("lost", host="h")] * 2, clock)
    assert anyio.run(policy.transient_read(lambda: True), attempt) == "ok"
    assert len(calls) == 3
    failed = CommandFailedError("x", host="h", command="c", exit_status=1, stderr="")
    for error, connected in ((failed, True), (ConnectError("lost", host="h"), False)):
        attempt, calls = _failing([error], clock)
        with pytest.raises(type(error)):
            anyio.run(policy.transient_read(lambda c=connected: c), attempt)  # type: ignore[misc]
        assert len(calls) == 1


def test_accounting_lag_polls_again_and_keeps_the_last_result_when_attempts_run_out() -> None:
    """While the result lags it is polled again; at the last attempt that result is kept."""
    clock = Clock()
    results = iter([1, 2, 3, 4])
    seen: list[int] = []
    gave_up: list[bool] = []

    async def poll() -> int:
        return next(results)

    policy = retries.RetryPolicy(attempts=3, sleep=clock.sleep).accounting_lag(
        lambda r: r < 10, on_retry=seen.append, on_give_up=lambda: gave_up.append(True)
    )
    assert anyio.run(policy, poll) == 3
    assert seen == [1, 2]
    assert gave_up == [True]


def test_poll_backoff_doubles_to_the_cap_and_never_sleeps_past_the_deadline() -> None:
    """wait's polls: the first interval, doubling to poll_interval, cut at the deadline."""
    clock = Clock()
    results = iter(range(10))

    async def poll() -> int:
        return next(results)

    policy = retries.poll_backoff(
        first_s=2,
        cap_s=10,
        deadline=clock.now + 25,
        ended=lambda r: r == 5,
        sleep=clock.sleep,
        clock=clock,
    )
    assert anyio.run(policy, poll) == 5
    assert clock.pauses == [2, 4, 8, 10, 1]


def test_hints_are_attached_to_the_error_classes() -> None:
    """Each transport failure says what to check; a failed command is not the network's fault."""
    assert "known_hosts" in HostKeyError("x", host="h").hint
    assert "host and port" in RefusedError("x", host="h").hint
    assert "reachable" in ConnectError("x", host="h").hint
    assert CommandFailedError("x", host="h", command="c", exit_status=1, stderr="").hint == ""


def test_lost_submit_resends_only_while_the_lookup_finds_nothing() -> None:
    """None (lost, no run folder) is sent again; after three the give-up error is raised."""
    sent: list[int] = []

    async def lost() -> None:
        sent.append(1)

    policy = retries.lost_submit(lambda: RemoteChainError("three times"))
    with pytest.raises(RemoteChainError, match="three times"):
        anyio.run(policy, lost)
    assert len(sent) == 3
    answers = iter([None, "submitted"])

    async def then_answered() -> str | None:
        return next(answers)

    assert anyio.run(retries.lost_submit(lambda: RemoteChainError("no")), then_answered) == (
        "submitted"
    )


def test_lost_submit_never_retries_an_error() -> None:
    """An error of the attempt (sbatch refused, auth) is raised at once, never sent again."""
    clock = Clock()
    attempt, calls = _failing([ConnectError("lost", host="h")], clock)
    with pytest.raises(ConnectError):
        anyio.run(retries.lost_submit(lambda: RemoteChainError("no")), attempt)
    assert len(calls) == 1
