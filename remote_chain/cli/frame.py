"""The one invocation frame every command runs in: settings, logging, output, exit code.

A command's body runs inside ``guard``, the one place where an exception becomes an exit
code and a line on stderr. The exit codes come from one table, the ``exit_code`` attribute
of each class in ``errors.py`` (``ConfigError`` 2; ``RemoteError`` 3, except
``CommandFailedError`` 1; ``WaitTimeout`` 4; any other of ours 1). Usage errors exit 2
(click's own), Ctrl-C 130, a bug 1. A result that lists failures exits with their common
code when they all share one (every cluster unreachable: 3), else 1; exception groups are
flattened so each failure is reported once. Each error is one line on stderr,
``remote-chain: error: <message>``; ``-vv`` adds the traceback. With ``--json`` stdout
holds exactly one JSON document, also on error (``{"errors": [...]}``); logs always go to
stderr.

Only typer and small modules are imported at the top (start-up time, see ``cli/__init__``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Protocol, TypeVar

import typer

from remote_chain.errors import RemoteChainError, RemoteError
from remote_chain.records import indented_json

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from remote_chain.orchestrator import Orchestrator
    from remote_chain.results import ClusterFailure
    from remote_chain.settings import Settings


PROG = "remote-chain"
COMMAND_LINE = "<command line>"
EXIT_INTERRUPTED = 130
PIPED_WIDTH = 160  # columns of tables written to a pipe or file (rich's default is 80)
T = TypeVar("T")


@dataclass(frozen=True)
class Globals:
    clusters_dir: Path | None
    log_format: str | None
    verbosity: int


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
        from remote_chain import cli  # noqa: PLC0415 - the test seam lives on the package
        from remote_chain.orchestrator import Orchestrator  # noqa: PLC0415 - start-up time

        opener = cli._OPENER
        if opener is None:
            return Orchestrator(self.settings, clusters_dir=self.globals.clusters_dir)
        return Orchestrator(self.settings, clusters_dir=self.globals.clusters_dir, opener=opener)

    def run(self, flow: Callable[[Orchestrator], Awaitable[T]]) -> T:
        """The command's one event loop: an Orchestrator used as ``async with``, then closed."""
        import anyio  # noqa: PLC0415 - start-up time

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
        from rich.console import Console  # noqa: PLC0415 - start-up time

        with Console(stderr=True).status(status) as spinner:
            yield spinner

    def emit(self, document: object, view: Callable[[], RenderableType]) -> None:
        """Exactly one JSON document with ``--json``, else the human view, on stdout."""
        if self.json_output:
            write_json(document)
        else:
            stdout_console().print(view())


def write_json(document: object) -> None:
    sys.stdout.write(indented_json(document) + "\n")
    sys.stdout.flush()


def stdout_console() -> Console:
    """Rich on stdout; piped (a file, CI logs) it is wide, so that no job id is folded."""
    from rich.console import Console  # noqa: PLC0415 - start-up time

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
    from remote_chain.logconfig import configure_logging  # noqa: PLC0415 - start-up time
    from remote_chain.settings import load_settings  # noqa: PLC0415 - start-up time

    g = ctx.obj if isinstance(ctx.obj, Globals) else Globals(None, None, 0)
    settings = load_settings()
    # Human text unless asked for JSON, even with --json (stdout's format, not stderr's).
    fmt = g.log_format or settings.log_format
    configure_logging(fmt, g.verbosity)
    return Invocation(g, settings, json_output)


def guard(ctx: typer.Context, json_output: bool, body: Callable[[], int]) -> NoReturn:
    """Run a command body and exit with its code; every exception becomes a code and a line."""
    verbosity = ctx.obj.verbosity if isinstance(ctx.obj, Globals) else 0
    try:
        code = body()
    except (typer.Exit, typer.Abort):
        raise
    except BaseException as exc:  # the one place where errors become exit codes
        code = report(exc, json_output=json_output, verbosity=verbosity)
    raise typer.Exit(code)


def exit_code(exc: BaseException) -> int:
    """The exit code of one (non-group) exception: the table is errors.py's ``exit_code``."""
    if isinstance(exc, RemoteChainError):
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return 1


def combine(codes: Sequence[int]) -> int:
    """0 without failures; their code if they all share one (all unreachable: 3); else 1."""
    if not codes:
        return 0
    return codes[0] if all(c == codes[0] for c in codes) else 1


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, each once."""
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for sub in exc.exceptions:
            out += [leaf for leaf in leaves(sub) if all(leaf is not seen for seen in out)]
        return out
    return [exc]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RemoteChainError):
        return str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return f"internal error: {type(exc).__name__}: {exc} (run with -vv for the traceback)"


def error_line(message: str) -> None:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    sys.stderr.flush()


def report(exc: BaseException, *, json_output: bool, verbosity: int) -> int:
    """Print each failure once (one line, stderr) and return the command's exit code."""
    failures = leaves(exc)
    for failure in failures:
        error_line(_describe(failure))
        if verbosity >= 2 and not isinstance(failure, KeyboardInterrupt):
            import traceback  # noqa: PLC0415 - only with -vv

            traceback.print_exception(failure, file=sys.stderr)
    if json_output:
        write_json({"errors": [_error_json(f) for f in failures]})
    return combine([exit_code(f) for f in failures])


def _error_json(exc: BaseException) -> dict[str, object]:
    cluster = exc.host if isinstance(exc, RemoteError) else None
    return {"cluster": cluster, "error": _describe(exc), "kind": type(exc).__name__}


def report_failures(failures: Sequence[ClusterFailure]) -> list[int]:
    """One stderr line per failed cluster (the result itself lists them too); their codes."""
    for failure in failures:
        text = str(failure.error)
        # RemoteErrors already start with the cluster's name: never print it twice.
        error_line(
            text if text.startswith(f"{failure.cluster}: ") else f"{failure.cluster}: {text}"
        )
    return [failure.error.exit_code for failure in failures]


def names(values: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(values or ())


# --- shell completion (remote_chain/completion.py, imported only while completing) ----------
