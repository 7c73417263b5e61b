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

Only typer and small modules are imported here: every command's declaration imports it,
``--help`` included (see ``cli/__init__``). What a running command needs (settings, logging,
the orchestrator, rich) is ``invocation``'s.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from remote_chain.core.records import indented_json
from remote_chain.errors import RemoteChainError, RemoteError

if TYPE_CHECKING:
    from remote_chain.core.results import ClusterFailure


PROG = "remote-chain"
COMMAND_LINE = "<command line>"
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Globals:
    clusters_dir: Path | None
    log_format: str | None
    verbosity: int


def write_json(document: object) -> None:
    sys.stdout.write(indented_json(document) + "\n")
    sys.stdout.flush()


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
