"""A timing ``Opener`` for the Orchestrator: when each connection and each exec began and ended.

It wraps the real ``open_remote`` (the product's own transport, nothing replaced), so what is
timed is what a user gets; on top it can put a folder first on the remote PATH (the logging
shims of the controller-load measurement) and tag the calls made by one measurement.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, Self

from remote_chain.transport.base import CommandResult, Remote
from remote_chain.transport.connect import open_remote
from remote_chain.transport.endpoint import Endpoint

SpanKind = Literal["connect", "exec", "close"]


@dataclass(frozen=True)
class Span:
    cluster: str
    kind: SpanKind
    t0: float  # CLOCK_MONOTONIC, the clock the proxies log with
    t1: float
    sent: int = 0
    received: int = 0

    @property
    def seconds(self) -> float:
        return self.t1 - self.t0


@dataclass
class Probe:
    """Records spans; ``path_prefix``/``tag`` are exported before every script it sends."""

    path_prefix: str | None = None
    tag: str | None = None
    spans: list[Span] = field(default_factory=list)

    async def open(self, endpoint: Endpoint) -> Remote:
        t0 = time.monotonic()
        remote = await open_remote(endpoint)
        self.spans.append(Span(endpoint.name, "connect", t0, time.monotonic()))
        return _TimedRemote(remote, self)

    def prelude(self) -> str:
        lines = []
        if self.path_prefix:
            lines.append(f"export PATH={shlex.quote(self.path_prefix)}:$PATH")
        if self.tag:
            lines.append(f"export RC_BENCH_TAG={shlex.quote(self.tag)}")
        return "".join(line + "\n" for line in lines)

    def of(self, kind: SpanKind) -> list[Span]:
        return [s for s in self.spans if s.kind == kind]


class _TimedRemote:
    def __init__(self, remote: Remote, probe: Probe) -> None:
        self._remote = remote
        self._probe = probe

    @property
    def name(self) -> str:
        return self._remote.name

    async def run(
        self, script: str, *, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        script = self._probe.prelude() + script
        t0 = time.monotonic()
        result = await self._remote.run(script, timeout=timeout, sensitive=sensitive)
        self._probe.spans.append(
            Span(
                self.name,
                "exec",
                t0,
                time.monotonic(),
                len(script.encode()),
                len(result.stdout.encode()) + len(result.stderr.encode()),
            )
        )
        return result

    async def aclose(self) -> None:
        t0 = time.monotonic()
        await self._remote.aclose()
        self._probe.spans.append(Span(self.name, "close", t0, time.monotonic()))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()
