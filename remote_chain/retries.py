"""Every retry policy of remote-chain, each a named tenacity value (STYLE §5).

Each name says why it retries:

- ``connect``: the first connection to a cluster. Refused (nothing listens) is tried again
  for ``connect_retry`` seconds from the first refusal, so an sshd restarting for a second is
  survived and a dead host fails at once, as with ``ssh``; reset or lost mid-handshake (a
  server that is there) for one connect timeout from the start.
- ``channel_refused``: a server refused a channel while still tearing down one we closed
  (OpenSSH counts it until the close is fully processed, even under our channel cap).
- ``transient_read``: an idempotent exec (status, logs, doctor, cancel, a submit's lookup)
  after a transient transport error, once we were connected. Never sbatch (STYLE §5).
- ``accounting_lag``: a status poll again while sacct has not caught up with a chain; the
  last snapshot is kept (lag and all) when the attempts run out.
- ``poll_backoff``: ``wait``'s polls, quick first, then settling at the poll interval (a
  cluster unreachable for too long ends it: ``reachability.Outages``, checked by each poll).
- ``lost_submit``: a submit whose connection was lost *and* whose lookup found no run folder
  (so the script never ran) is sent again, three times in all. sbatch is never retried on
  any other ground: a lost reply after a submit would start a second chain (STYLE §5).

Every policy sleeps with ``anyio.sleep`` unless told otherwise (tests inject a zero-wait
``sleep``) and re-raises our own errors (``reraise=True``), never a ``RetryError``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from tenacity import (
    AsyncRetrying,
    Future,
    RetryCallState,
    retry_if_exception,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    stop_never,
    wait_exponential,
    wait_fixed,
)

from remote_chain.errors import ConnectError, RefusedError, RemoteChainError

Sleep = Callable[[float], Awaitable[None]]


def _sleep(seconds: float) -> Awaitable[None]:
    return anyio.sleep(seconds)  # looked up at each call, so a patched anyio.sleep counts


def is_transient(exc: BaseException) -> bool:
    """Transient is a property of the error's class (errors.py), never of bare Exception."""
    return isinstance(exc, RemoteChainError) and exc.transient


def _outcome(state: RetryCallState) -> Future:
    if state.outcome is None:  # tenacity sets it before any stop, wait or callback
        raise RuntimeError("tenacity called a policy before an attempt ended")
    return state.outcome


@dataclass(frozen=True)
class RetryPolicy:
    """The knobs of the retried reads and the accounting lag (``Settings.sacct_*``)."""

    attempts: int = 5
    wait_max: float = 8.0
    wait_min: float = 0.5
    sleep: Sleep = field(default=_sleep, compare=False)

    def transient_read(self, connected: Callable[[], bool]) -> AsyncRetrying:
        return AsyncRetrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=self.wait_min, max=self.wait_max),
            retry=retry_if_exception(lambda e: is_transient(e) and connected()),
            sleep=self.sleep,
            reraise=True,
        )

    def accounting_lag(
        self,
        lagging: Callable[[Any], bool],
        *,
        on_retry: Callable[[int], None],
        on_give_up: Callable[[], None],
    ) -> AsyncRetrying:
        """Call with the poll: ``await policy.accounting_lag(...)(poll)``; its last result
        comes back when the attempts run out."""

        def give_up(state: RetryCallState) -> object:
            on_give_up()
            return _outcome(state).result()

        return AsyncRetrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=self.wait_min, max=self.wait_max),
            retry=retry_if_result(lagging),
            before_sleep=lambda state: on_retry(state.attempt_number),
            retry_error_callback=give_up,
            sleep=self.sleep,
            reraise=True,
        )


@dataclass
class _ConnectBudget:
    refused_s: float
    patience_s: float
    clock: Callable[[], float]
    started: float = 0.0
    deadline: float | None = None
    left: float = 0.0

    def _left(self, state: RetryCallState) -> float:
        # Called by both stop and wait (tenacity's order between them varies by release);
        # the same outcome gives the same deadline, so calling it twice is harmless.
        now = self.clock()
        if isinstance(_outcome(state).exception(), RefusedError):
            self.deadline = self.deadline or now + self.refused_s
        else:
            self.deadline = max(self.deadline or 0.0, self.started + self.patience_s)
        self.left = self.deadline - now
        return self.left

    def stop(self, state: RetryCallState) -> bool:
        return self._left(state) <= 0

    def wait(self, state: RetryCallState) -> float:
        return max(0.0, min(0.25 * 2.0 ** (state.attempt_number - 1), 1.0, self._left(state)))


def connect(
    *,
    refused_s: float,
    patience_s: float,
    on_retry: Callable[[BaseException, float], None],
    sleep: Sleep = _sleep,
    clock: Callable[[], float] = anyio.current_time,
) -> AsyncRetrying:
    """Retry ``ConnectError`` within the budgets above (a host that does not resolve or does
    not answer within the connect timeout is not a ConnectError: each try would cost the same).
    ``on_retry(error, seconds_left)`` is told before each pause."""
    budget = _ConnectBudget(refused_s, patience_s, clock, started=clock())

    def before_sleep(state: RetryCallState) -> None:
        error = _outcome(state).exception()
        if error is not None:
            on_retry(error, budget.left)

    return AsyncRetrying(
        stop=budget.stop,
        wait=budget.wait,
        retry=retry_if_exception_type(ConnectError),
        before_sleep=before_sleep,
        sleep=sleep,
        reraise=True,
    )


CHANNEL_OPEN_TRIES = 3
CHANNEL_OPEN_PAUSE = 0.2


def channel_refused(error: type[BaseException], *, sleep: Sleep = _sleep) -> AsyncRetrying:
    """``error``: the transport's channel-refused exception (only transport/ssh.py knows it)."""
    return AsyncRetrying(
        stop=stop_after_attempt(CHANNEL_OPEN_TRIES),
        wait=wait_fixed(CHANNEL_OPEN_PAUSE),
        retry=retry_if_exception_type(error),
        sleep=sleep,
        reraise=True,
    )


def lost_submit(give_up: Callable[[], BaseException]) -> AsyncRetrying:
    """Call with an attempt that returns None for "lost, and the lookup found nothing";
    ``give_up()`` is raised after the third such attempt. Errors are never retried here."""

    def fail(state: RetryCallState) -> object:
        raise give_up()

    return AsyncRetrying(
        stop=stop_after_attempt(3),
        retry=retry_if_result(lambda answer: answer is None),
        retry_error_callback=fail,
        reraise=True,
    )


def poll_backoff(
    *,
    first_s: float,
    cap_s: float,
    deadline: float | None,
    ended: Callable[[Any], bool],
    sleep: Sleep = _sleep,
    clock: Callable[[], float] = anyio.current_time,
) -> AsyncRetrying:
    """Poll until ``ended(result)``: ``first_s``, then doubling up to ``cap_s``, never past
    ``deadline`` (the poll itself raises at the deadline). Errors of a poll end it at once."""

    def wait(state: RetryCallState) -> float:
        n = state.attempt_number
        pause = first_s if n == 1 else min(first_s * 2.0 ** (n - 1), cap_s)
        return pause if deadline is None else min(pause, max(0.0, deadline - clock()))

    return AsyncRetrying(
        stop=stop_never,
        wait=wait,
        retry=retry_if_result(lambda result: not ended(result)),
        sleep=sleep,
        reraise=True,
    )
