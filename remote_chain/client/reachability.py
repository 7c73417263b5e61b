"""Which cluster failures ``wait`` keeps polling through, and for how long.

- A config error (exit 2) or an authentication / host-key error (exit 3) ends ``wait`` at
  once: polling again cannot fix it, and polling forever would hide it.
- An unreachable cluster (refused, no answer, name not resolving: DNS may come back) is
  polled again with ``wait``'s back-off, until it has been unreachable ``give_up`` seconds
  without a break; then ``wait`` exits 3 naming it.

PURE: time is passed in, so tests drive it without sleeping.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from remote_chain.errors import (
    ConfigError,
    ConnectError,
    HostNotFoundError,
    RemoteChainError,
    RemoteError,
    RemoteTimeout,
    StateError,
)

UNREACHABLE = (ConnectError, RemoteTimeout, HostNotFoundError)


class Failure(Protocol):
    """A cluster and its error, as ``orchestrator.ClusterFailure`` holds them."""

    @property
    def cluster(self) -> str: ...

    @property
    def error(self) -> RemoteChainError: ...


def is_unreachable(error: BaseException) -> bool:
    return isinstance(error, UNREACHABLE)


def is_fatal(error: BaseException) -> bool:
    """True if polling again cannot fix ``error``: config, authentication, host key, ..."""
    if isinstance(error, ConfigError | StateError):  # an unsafe run folder stays unsafe (14.1)
        return True
    return isinstance(error, RemoteError) and not error.transient and not is_unreachable(error)


class UnreachableFor(ConnectError):
    """A cluster stayed unreachable past ``wait``'s limit; exit 3 like every transport error."""

    def __init__(self, cause: RemoteError, seconds: float):
        self.cause = cause
        self.seconds = seconds
        super().__init__(
            f"unreachable for {seconds / 60:g} min, giving up "
            f"(REMOTE_CHAIN_WAIT_UNREACHABLE): {cause.message}",
            host=cause.host,
        )


class Outages:
    """Since when each cluster has been unreachable, without a successful poll between."""

    def __init__(self, give_up: float) -> None:
        self.give_up = give_up
        self.since: dict[str, float] = {}

    def check(self, clusters: Iterable[str], failures: Iterable[Failure], now: float) -> None:
        """Record one poll of ``clusters``; raise what ends the wait, else return.

        Raises the first fatal error, else an ``UnreachableFor`` for a cluster unreachable
        ``give_up`` seconds or longer.
        """
        failing: dict[str, RemoteChainError] = {f.cluster: f.error for f in failures}
        for error in failing.values():
            if is_fatal(error):
                raise error
        for cluster in clusters:
            down = failing.get(cluster)
            if not isinstance(down, RemoteError) or not is_unreachable(down):
                self.since.pop(cluster, None)
                continue
            since = self.since.setdefault(cluster, now)
            if now - since >= self.give_up:
                raise UnreachableFor(down, now - since) from down
