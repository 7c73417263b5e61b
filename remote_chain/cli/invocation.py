"""What a running command has: its settings, logging, one event loop, progress and output.

Imported by the commands' implementations (``cli/commands/``), never by ``--help``: settings
(pydantic), logging (structlog), the orchestrator (anyio, asyncssh) and rich are here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, TypeVar

import anyio
import typer
from rich.console import Console, RenderableType

from remote_chain.cli.frame import Globals, write_json
from remote_chain.client.cluster import Opener
from remote_chain.client.orchestrator import Orchestrator
from remote_chain.config.settings import Settings, load_settings
from remote_chain.logconfig import configure_logging

PIPED_WIDTH = 160  # columns of tables written to a pipe or file (rich's default is 80)
T = TypeVar("T")

# The Opener every command's Orchestrator connects with; None means the real transports
# (``transport.connect.open_remote``). Tests replace it with ``FakeSlurm.open``
# (tests/fakes.py) via ``monkeypatch.setattr(invocation, "OPENER", ...)``. Deliberately not
# settable from the environment or the command line: no production path can swap the
# transport.
OPENER: Opener | None = None


class _Progress(Protocol):
    def update(self, status: str) -> None: ...


class _NoProgress:
    def update(self, status: str) -> None:
        pass


@dataclass
class Invocation:
    """One command's settings, logging, output mode and its single ``anyio.run``."""

    globals: Globals
    settings: Settings
    json_output: bool

    def orchestrator(self) -> Orchestrator:
        opener = OPENER
        if opener is None:
            return Orchestrator(self.settings, clusters_dir=self.globals.clusters_dir)
        return Orchestrator(self.settings, clusters_dir=self.globals.clusters_dir, opener=opener)

    def run(self, flow: Callable[[Orchestrator], Awaitable[T]]) -> T:
        """The command's one event loop: an Orchestrator used as ``async with``, then closed."""
        # The result leaves through a box, not as the main task's result: asyncio's Runner
        # puts the task in its SIGINT handler, and restoring that handler makes the signal
        # module build repr(handler), the task's result included, in full.
        box: list[T] = []

        async def main() -> None:
            async with self.orchestrator() as rc:
                box.append(await flow(rc))

        anyio.run(main, backend="asyncio")
        return box[0]

    @contextmanager
    def progress(self, status: str) -> Iterator[_Progress]:
        """A spinner on stderr, only for people: stderr a terminal and no ``--json``."""
        if self.json_output or not _isatty(sys.stderr):
            yield _NoProgress()
            return
        with Console(stderr=True).status(status) as spinner:
            yield spinner

    def emit(self, document: object, view: Callable[[], RenderableType]) -> None:
        """Exactly one JSON document with ``--json``, else the human view, on stdout."""
        if self.json_output:
            write_json(document)
        else:
            stdout_console().print(view())


def stdout_console() -> Console:
    """Rich on stdout; piped (a file, CI logs) it is wide, so that no job id is folded."""
    wide = not _isatty(sys.stdout) and "COLUMNS" not in os.environ
    return Console(highlight=False, width=PIPED_WIDTH if wide else None)


def _isatty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:
        return False


def prepare(ctx: typer.Context, *, json_output: bool) -> Invocation:
    """Settings, then logging (once per invocation), for a command about to run."""
    g = ctx.obj if isinstance(ctx.obj, Globals) else Globals(None, None, 0)
    settings = load_settings()
    # Human text unless asked for JSON, even with --json (stdout's format, not stderr's).
    fmt = g.log_format or settings.log_format
    configure_logging(fmt, g.verbosity)
    return Invocation(g, settings, json_output)
