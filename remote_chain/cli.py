"""The command line (interface.md §4): argv -> config -> one ``anyio.run`` -> exit code.

Exit codes come from one table, the ``exit_code`` attribute of each class in ``errors.py``
(``ConfigError`` 2; ``RemoteError`` 3, except ``CommandFailedError`` 1; ``WaitTimeout`` 4;
any other of ours 1). Usage errors exit 2 (click's own), Ctrl-C 130, a bug 1. A result that
lists failures exits with their common code when they all share one (every cluster
unreachable: 3), else 1; exception groups are flattened so each failure is reported once.
Each error is one line on stderr, ``remote-chain: error: <message>``; ``-vv`` adds the
traceback. With ``--json`` stdout holds exactly one JSON document, also on error
(``{"errors": [...]}``); logs always go to stderr.

Start-up time matters (``remote-chain --help`` in well under 0.4 s): only typer and small
modules are imported here; the orchestrator (anyio, tenacity, pydantic), structlog and rich
are imported inside the commands. Help is plain click formatting for the same reason:
typer's rich help alone costs ~0.1 s of imports.

Test seam: ``_OPENER`` (below).
"""

from __future__ import annotations

import enum
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Protocol, TypeVar

import typer

from remote_chain import __version__
from remote_chain.agent_cli import agent_app
from remote_chain.errors import ConfigError, RemoteChainError, RemoteError
from remote_chain.jobscripts import RENDER_RUN_ID

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from remote_chain.cluster import Opener
    from remote_chain.orchestrator import Orchestrator
    from remote_chain.results import ClusterFailure, StatusResult
    from remote_chain.resumecaps import ResumeCaps
    from remote_chain.settings import Settings

# The Opener every command's Orchestrator connects with; None means the real transports
# (``remote_chain.remote.open_remote``). Tests replace it with ``FakeSlurm.open`` (tests/fakes.py)
# via ``monkeypatch.setattr(cli, "_OPENER", ...)``. Deliberately not settable from the
# environment or the command line: no production path can swap the transport.
_OPENER: Opener | None = None

PROG = "remote-chain"
COMMAND_LINE = "<command line>"
RECENT_LIMIT = 10
EXIT_INTERRUPTED = 130
PIPED_WIDTH = 160  # columns of tables written to a pipe or file (rich's default is 80)
T = TypeVar("T")


class LogFormat(enum.StrEnum):
    console = "console"
    json = "json"


@dataclass(frozen=True)
class Globals:
    clusters_dir: Path | None
    log_format: str | None
    verbosity: int


app = typer.Typer(
    name=PROG,
    help=(
        "Self-chaining Slurm jobs, submitted and followed over SSH.\n\n"
        "Global options go before the command: remote-chain -v status RUN_ID.\n\n"
        "Exit codes: 0 all done as asked; 1 some cluster or benchmark failed (for wait: some "
        "chain did not complete); 2 usage or config error; 3 a cluster could not be reached "
        "or authenticated; 4 wait ran past --timeout; 130 interrupted."
    ),
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=False,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"{PROG} {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _global_options(
    ctx: typer.Context,
    clusters_dir: Annotated[
        Path | None,
        typer.Option(
            "--clusters-dir",
            metavar="DIR",
            help="Look for cluster profiles (<name>.toml) here first.",
        ),
    ] = None,
    log_format: Annotated[
        LogFormat | None,
        typer.Option(
            "--log-format",
            case_sensitive=False,
            help="Logs on stderr: console (human text, the default) or json.",
        ),
    ] = None,
    verbose: Annotated[
        int,
        typer.Option(
            "-v",
            "--verbose",
            count=True,
            show_default=False,
            help="-v info logs, -vv debug logs and tracebacks.",
        ),
    ] = 0,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Self-chaining Slurm jobs, submitted and followed over SSH."""
    ctx.obj = Globals(clusters_dir, log_format.value if log_format else None, verbose)


# --- the frame every command runs in ----------------------------------------------------------


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
        from remote_chain.orchestrator import Orchestrator  # noqa: PLC0415 - start-up time

        if _OPENER is None:
            return Orchestrator(self.settings, clusters_dir=self.globals.clusters_dir)
        return Orchestrator(self.settings, clusters_dir=self.globals.clusters_dir, opener=_OPENER)

    def run(self, flow: Callable[[Orchestrator], Awaitable[T]]) -> T:
        """The command's one event loop: an Orchestrator used as ``async with``, then closed."""
        import anyio  # noqa: PLC0415 - start-up time

        async def main() -> T:
            async with self.orchestrator() as rc:
                return await flow(rc)

        return anyio.run(main, backend="asyncio")

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
    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
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


def _prepare(ctx: typer.Context, *, json_output: bool) -> Invocation:
    """Settings, then logging (once per invocation), for a command about to run."""
    from remote_chain.logconfig import configure_logging  # noqa: PLC0415 - start-up time
    from remote_chain.settings import load_settings  # noqa: PLC0415 - start-up time

    g = ctx.obj if isinstance(ctx.obj, Globals) else Globals(None, None, 0)
    settings = load_settings()
    # Human text unless asked for JSON, even with --json (stdout's format, not stderr's).
    fmt = g.log_format or settings.log_format
    configure_logging(fmt, g.verbosity)
    return Invocation(g, settings, json_output)


def _guard(ctx: typer.Context, json_output: bool, body: Callable[[], int]) -> NoReturn:
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


def _report_failures(failures: Sequence[ClusterFailure]) -> list[int]:
    """One stderr line per failed cluster (the result itself lists them too); their codes."""
    for failure in failures:
        text = str(failure.error)
        # RemoteErrors already start with the cluster's name: never print it twice.
        error_line(
            text if text.startswith(f"{failure.cluster}: ") else f"{failure.cluster}: {text}"
        )
    return [failure.error.exit_code for failure in failures]


def _names(values: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(values or ())


# --- shell completion (remote_chain/completion.py, imported only while completing) ----------


def _complete_cluster(ctx: typer.Context, incomplete: str) -> list[str]:
    from remote_chain.completion import cluster_names  # noqa: PLC0415 - start-up time

    folder = ctx.find_root().params.get("clusters_dir")
    return cluster_names(folder if isinstance(folder, Path) else None, incomplete)


def _complete_run_id(incomplete: str) -> list[str]:
    from remote_chain.completion import run_ids  # noqa: PLC0415 - start-up time

    return run_ids(incomplete)


# --- option types shared by the commands -----------------------------------------------------

ClustersOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--cluster",
        "-c",
        metavar="NAME",
        autocompletion=_complete_cluster,
        help="A cluster profile; repeatable.",
    ),
]
BenchmarksOpt = Annotated[
    list[str] | None,
    typer.Option("--benchmark", "-b", metavar="B", help="Only this benchmark; repeatable."),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout, nothing else.")
]
RunIdArg = Annotated[
    str,
    typer.Argument(
        metavar="RUN_ID", autocompletion=_complete_run_id, help="The run id submit printed."
    ),
]
ConfigArg = Annotated[
    Path, typer.Argument(metavar="CONFIG", help="The submit config (YAML).", dir_okay=False)
]


# --- commands ---------------------------------------------------------------------------------


@app.command()
def submit(
    ctx: typer.Context,
    *,
    config: ConfigArg,
    cluster: Annotated[
        list[str],
        typer.Option(
            "--cluster",
            "-c",
            metavar="NAME",
            autocompletion=_complete_cluster,
            help="A cluster profile; repeatable.",
        ),
    ],
    benchmark: BenchmarksOpt = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            metavar="ID",
            help="Use this run id (default: rc-<UTC time>-<hex>); submitting it again "
            "finds the run instead of starting a second one.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Build everything, send nothing.")
    ] = False,
    json_output: JsonOpt = False,
) -> None:
    """Submit a run on every named cluster."""

    def body() -> int:
        inv = _prepare(ctx, json_output=json_output)
        clusters = _names(cluster)
        with inv.progress(f"submitting to {', '.join(dict.fromkeys(clusters))}"):
            result = inv.run(
                lambda rc: rc.submit(
                    config,
                    clusters,
                    benchmarks=_names(benchmark),
                    run_id=run_id,
                    dry_run=dry_run,
                )
            )

        def view() -> RenderableType:
            # Imported only for the table: rich costs --json ~15 ms (issue 13, P9).
            from remote_chain import render as views  # noqa: PLC0415

            bundles = views.describe_bundles(result.bundles) if dry_run else []
            return views.submit_view(result, bundles)

        inv.emit(result.to_json(), view)
        codes = _report_failures(result.failures)
        codes += [1 for s in result.submissions if s.error is not None]
        return combine(codes)

    _guard(ctx, json_output, body)


@app.command()
def status(
    ctx: typer.Context,
    *,
    run_id: Annotated[
        str | None,
        typer.Argument(
            metavar="RUN_ID",
            autocompletion=_complete_run_id,
            help="A run id; without one, the recent runs.",
        ),
    ] = None,
    cluster: ClustersOpt = None,
    benchmark: BenchmarksOpt = None,
    json_output: JsonOpt = False,
    watch: Annotated[
        bool, typer.Option("--watch", help="Refresh in place until every chain has ended.")
    ] = False,
    limit: Annotated[
        int,
        typer.Option("--limit", min=1, metavar="N", help="Without RUN_ID: this many runs."),
    ] = RECENT_LIMIT,
    timeline: Annotated[
        bool,
        typer.Option(
            "--timeline", help="Each chain as a row of its links, coloured by how each ended."
        ),
    ] = False,
) -> None:
    """Show every chain of a run, or the recent runs.

    State, jobs, walltime and retries per chain; exit 0 if every cluster answered.

    Without RUN_ID: the recent runs of the local index ({"runs": [...]} with --json);
    --cluster and --benchmark then filter what is shown.
    """

    def body() -> int:
        inv = _prepare(ctx, json_output=json_output)
        clusters, benches = _names(cluster), _names(benchmark)
        if run_id is None:
            if watch:
                raise ConfigError("--watch needs a RUN_ID", source=COMMAND_LINE, field="--watch")
            return _status_recent(inv, clusters, benches, limit, timeline)
        if watch:
            return _status_watch(inv, run_id, clusters, benches, timeline)
        n = len(clusters)
        with inv.progress(f"reading {run_id}" + (f" on {n} clusters" if n > 1 else "")):
            result = inv.run(lambda rc: rc.status(run_id, clusters=clusters, benchmarks=benches))
        inv.emit(result.to_json(), lambda: _run_view(result, timeline))
        return combine(_report_failures(result.failures))

    _guard(ctx, json_output, body)


def _run_view(result: StatusResult, timeline: bool) -> RenderableType:
    """One run as the status table, or (``--timeline``) as rows of link bars."""
    if timeline:
        from remote_chain.timeline import timeline_view  # noqa: PLC0415 - start-up time

        return timeline_view(result)
    from remote_chain import render as views  # noqa: PLC0415 - start-up time

    return views.status_table(result)


def _only(result: StatusResult, clusters: Sequence[str], benches: Sequence[str]) -> StatusResult:
    from remote_chain.results import StatusResult  # noqa: PLC0415 - start-up time

    chains = tuple(
        c
        for c in result.chains
        if (not clusters or c.cluster in clusters) and (not benches or c.benchmark in benches)
    )
    failures = tuple(f for f in result.failures if not clusters or f.cluster in clusters)
    return StatusResult(result.run_id, chains, failures)


def _status_recent(
    inv: Invocation, clusters: Sequence[str], benches: Sequence[str], limit: int, timeline: bool
) -> int:
    with inv.progress("reading the recent runs"):
        results = inv.run(lambda rc: rc.status_recent(limit=limit, clusters=clusters))
    results = [_only(r, clusters, benches) for r in results]
    if clusters:
        results = [r for r in results if r.chains or r.failures]
    from remote_chain import render as views  # noqa: PLC0415 - start-up time

    inv.emit(
        {"runs": [r.to_json() for r in results]},
        lambda: views.status_view(results, view=lambda r: _run_view(r, timeline)),
    )
    # A cluster shared by several runs failed once: report it once.
    failures = {f.cluster: f for r in results for f in r.failures}
    return combine(_report_failures(list(failures.values())))


def _status_watch(
    inv: Invocation, run_id: str, clusters: Sequence[str], benches: Sequence[str], timeline: bool
) -> int:
    """Poll as ``wait`` does, redrawing the table in place, until every chain has ended."""

    if inv.json_output:  # one document: the final state
        result = inv.run(lambda rc: rc.wait(run_id, clusters=clusters, benchmarks=benches))
    else:
        from rich.live import Live  # noqa: PLC0415 - start-up time

        reading = f"reading {run_id} ..."
        with Live(reading, console=stdout_console(), auto_refresh=False) as live:

            def redraw(polled: StatusResult) -> None:  # wait calls it with the final state too
                live.update(_run_view(_only(polled, (), benches), timeline), refresh=True)

            result = inv.run(
                lambda rc: rc.wait(run_id, clusters=clusters, benchmarks=benches, on_poll=redraw)
            )
    result = _only(result, (), benches)
    if inv.json_output:
        write_json(result.to_json())
    return combine(_report_failures(result.failures))


@app.command()
def wait(
    ctx: typer.Context,
    *,
    run_id: RunIdArg,
    cluster: ClustersOpt = None,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            metavar="DURATION",
            help="Give up (exit 4) after this long: Slurm's forms (MM, MM:SS, HH:MM:SS, "
            "D-HH, D-HH:MM, D-HH:MM:SS; a bare number is minutes) or seconds as 90s.",
        ),
    ] = None,
    summary: Annotated[
        Path | None,
        typer.Option(
            "--summary",
            metavar="FILE",
            dir_okay=False,
            help="Append a Markdown summary (table and Mermaid gantt) to FILE; also done "
            "to $GITHUB_STEP_SUMMARY when set.",
        ),
    ] = None,
    json_output: JsonOpt = False,
) -> None:
    """Block until every chain has ended.

    Exit 0 only if every chain completed: what a CI job runs after submit.
    """

    def body() -> int:
        inv = _prepare(ctx, json_output=json_output)
        limit = parse_timeout(timeout) if timeout is not None else None
        clusters = _names(cluster)
        from remote_chain import render as views  # noqa: PLC0415 - start-up time
        from remote_chain.orchestrator import WaitTimeout  # noqa: PLC0415 - start-up time

        try:
            with inv.progress(f"waiting for {run_id}") as progress:

                def show(polled: StatusResult) -> None:
                    progress.update(f"waiting for {run_id}: {views.state_summary(polled)}")

                result = inv.run(
                    lambda rc: rc.wait(run_id, clusters=clusters, timeout=limit, on_poll=show)
                )
        except WaitTimeout as exc:
            late = exc.result
            _write_summaries(late, summary, timed_out=True)
            inv.emit({**late.to_json(), "timed_out": True}, lambda: views.status_table(late))
            _report_failures(late.failures)
            error_line(f"{run_id}: {exc} (--timeout {timeout})")
            return exc.exit_code
        _write_summaries(result, summary)
        inv.emit(result.to_json(), lambda: views.status_table(result))
        return 0 if result.all_completed else 1

    _guard(ctx, json_output, body)


GITHUB_STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


def _write_summaries(result: StatusResult, path: Path | None, *, timed_out: bool = False) -> None:
    """Append the run's Markdown summary to ``--summary`` and to ``$GITHUB_STEP_SUMMARY``.

    Appended, never overwritten: a CI step summary collects every step's part. A file that
    cannot be written is an error line, not a lost result (the exit code stays the run's).
    """
    import datetime as dt  # noqa: PLC0415 - start-up time

    from remote_chain.summary import markdown  # noqa: PLC0415 - start-up time

    targets = [path] if path is not None else []
    github = os.environ.get(GITHUB_STEP_SUMMARY, "")
    if github and all(Path(github).absolute() != t.absolute() for t in targets):
        targets.append(Path(github))
    if not targets:
        return
    # A running job's bar ends "now": local time, as sacct's Start/End are the cluster's.
    text = markdown(result, now=dt.datetime.now(), timed_out=timed_out)
    for target in targets:
        try:
            with target.open("a", encoding="utf-8") as handle:
                handle.write(text + "\n")
        except OSError as exc:
            error_line(f"{target}: cannot write the summary: {exc.strerror or exc}")


def parse_timeout(text: str) -> float:
    """Seconds in ``--timeout``: ``90s``, or a Slurm duration (a bare number is minutes)."""
    from remote_chain.durations import parse_duration  # noqa: PLC0415 - start-up time

    if text.endswith("s") and text[:-1].isascii() and text[:-1].isdigit():
        return float(text[:-1])
    try:
        return float(parse_duration(text))
    except ValueError as exc:
        raise ConfigError(str(exc), source=COMMAND_LINE, field="--timeout") from None


@app.command()
def cancel(
    ctx: typer.Context,
    run_id: RunIdArg,
    benchmark: BenchmarksOpt = None,
    cluster: ClustersOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Cancel chains, queued and running jobs.

    A marker first, so no job of the chain starts again, then every queued job.
    """

    def body() -> int:
        inv = _prepare(ctx, json_output=json_output)
        clusters, benches = _names(cluster), _names(benchmark)
        with inv.progress(f"cancelling {run_id}"):
            result = inv.run(lambda rc: rc.cancel(run_id, clusters=clusters, benchmarks=benches))
        from remote_chain import render as views  # noqa: PLC0415 - start-up time

        inv.emit(result.to_json(), lambda: views.cancel_view(result))
        codes = _report_failures(result.failures)
        return combine(codes + [1 for e in result.cancelled if e.error is not None])

    _guard(ctx, json_output, body)


@app.command()
def resume(
    ctx: typer.Context,
    *,
    run_id: RunIdArg,
    benchmark: BenchmarksOpt = None,
    cluster: ClustersOpt = None,
    max_walltime: Annotated[
        str | None,
        typer.Option(
            "--max-walltime",
            metavar="DURATION",
            help="Raise the chain's walltime cap to this (Slurm's forms, a bare number is "
            "minutes); needed to resume a stopped chain.",
        ),
    ] = None,
    max_retries: Annotated[
        int | None,
        typer.Option(
            "--max-retries",
            metavar="N",
            min=0,
            help="Set the chain's retry cap to N (above the retries used).",
        ),
    ] = None,
    reset_retries: Annotated[
        bool,
        typer.Option("--reset-retries", help="Start the chain's retry count again at 0."),
    ] = False,
    json_output: JsonOpt = False,
) -> None:
    """Requeue chains that ended failed or stopped.

    The next job runs in the same folder, keeping the chain's state files, and the caps:
    the walltime of every job is counted first; a stopped chain resumes only with a raised
    --max-walltime, a failed resumable one only with --max-retries N or --reset-retries.
    """

    def body() -> int:
        inv = _prepare(ctx, json_output=json_output)
        clusters, benches = _names(cluster), _names(benchmark)
        caps = _resume_caps(max_walltime, max_retries, reset_retries)
        with inv.progress(f"resuming {run_id}"):
            result = inv.run(
                lambda rc: rc.resume(run_id, clusters=clusters, benchmarks=benches, caps=caps)
            )
        from remote_chain import render as views  # noqa: PLC0415 - start-up time

        inv.emit(result.to_json(), lambda: views.resume_view(result))
        codes = _report_failures(result.failures)
        return combine(codes + [1 for e in result.resumed if e.error is not None])

    _guard(ctx, json_output, body)


def _resume_caps(max_walltime: str | None, max_retries: int | None, reset: bool) -> ResumeCaps:
    from remote_chain.durations import parse_duration  # noqa: PLC0415 - start-up time
    from remote_chain.resumecaps import ResumeCaps  # noqa: PLC0415 - start-up time

    seconds = None
    if max_walltime is not None:
        try:
            seconds = parse_duration(max_walltime)
        except ValueError as exc:
            raise ConfigError(str(exc), source=COMMAND_LINE, field="--max-walltime") from None
    return ResumeCaps(seconds, max_retries, reset)


@app.command()
def logs(
    ctx: typer.Context,
    *,
    run_id: RunIdArg,
    benchmark: Annotated[
        str, typer.Option("--benchmark", "-b", metavar="B", help="The benchmark (required).")
    ],
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            "-c",
            metavar="NAME",
            autocompletion=_complete_cluster,
            help="Needed if the run is on several.",
        ),
    ] = None,
    job: Annotated[
        str | None,
        typer.Option("--job", metavar="JOB_ID", help="This job's log (default: the newest)."),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing while the job runs.")
    ] = False,
) -> None:
    """Print a chain's job log.

    The newest job's log unless --job; --follow keeps printing while the job runs.
    """

    def body() -> int:
        inv = _prepare(ctx, json_output=False)
        inv.run(
            lambda rc: rc.logs(
                run_id, benchmark, cluster=cluster, job_id=job, follow=follow, write=_write
            )
        )
        return 0

    _guard(ctx, False, body)


def _write(data: str) -> None:
    sys.stdout.write(data)
    sys.stdout.flush()


@app.command()
def render(
    ctx: typer.Context,
    *,
    config: ConfigArg,
    cluster: Annotated[
        list[str],
        typer.Option(
            "--cluster",
            "-c",
            metavar="NAME",
            autocompletion=_complete_cluster,
            help="A cluster profile; repeatable.",
        ),
    ],
    benchmark: BenchmarksOpt = None,
    run_id: Annotated[
        str,
        typer.Option("--run-id", metavar="ID", help="The run id written into the scripts."),
    ] = RENDER_RUN_ID,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            file_okay=False,
            help="Write DIR/<cluster>/<benchmark>/job.sh instead of printing.",
        ),
    ] = None,
) -> None:
    """Print the job scripts, locally (no SSH).

    The exact job.sh that submit would send, one per benchmark and cluster.

    Several scripts are each preceded by a "==> <cluster>/<benchmark>/job.sh <==" line, outside
    the scripts. The run id is rc-RENDER unless --run-id. Secret env values never appear:
    job.sh sources them from a separate mode-600 file.
    """

    def body() -> int:
        from remote_chain import jobscripts  # noqa: PLC0415 - start-up time

        inv = _prepare(ctx, json_output=False)
        rc = inv.orchestrator()
        scripts = rc.render(config, _names(cluster), benchmarks=_names(benchmark), run_id=run_id)
        if out is None:
            sys.stdout.write(jobscripts.join_for_stdout(scripts))
        else:
            for path in jobscripts.write_scripts(scripts, out):
                sys.stdout.write(f"{path}\n")
        return 0

    _guard(ctx, False, body)


@app.command()
def doctor(
    ctx: typer.Context,
    cluster: Annotated[
        str,
        typer.Option(
            "--cluster",
            "-c",
            metavar="NAME",
            autocompletion=_complete_cluster,
            help="The cluster profile.",
        ),
    ],
    json_output: JsonOpt = False,
) -> None:
    """Check a cluster: ssh, Slurm, accounting.

    Also the partition and the workdir; each failed check says how to fix it.

    Exit 0 if every check passed, 3 if ssh failed, 1 otherwise.
    """

    def body() -> int:
        inv = _prepare(ctx, json_output=json_output)

        async def flow(rc: Orchestrator) -> Any:
            rc.profile(cluster)  # an unknown or invalid profile is a config error (2)
            (result,) = await rc.doctor([cluster])
            return result

        with inv.progress(f"checking {cluster}"):
            result = inv.run(flow)
        from remote_chain import render as views  # noqa: PLC0415 - start-up time

        inv.emit(result.to_json(), lambda: views.doctor_view(result))
        if result.ok:
            return 0
        ssh_failed = any(c.name == "ssh" and not c.ok for c in result.checks)
        return RemoteError.exit_code if ssh_failed else 1

    _guard(ctx, json_output, body)


@app.command()
def clusters(ctx: typer.Context, json_output: JsonOpt = False) -> None:
    """List the cluster profiles found.

    Each with the file it came from, and the folders searched, in order.
    """

    def body() -> int:
        inv = _prepare(ctx, json_output=json_output)
        from remote_chain.config import (  # noqa: PLC0415 - start-up time
            default_clusters_dirs,
            scan_profiles,
        )

        dirs = default_clusters_dirs(inv.globals.clusters_dir, inv.settings)
        # Every profile, the broken ones with their error, then exit 2 if any is broken.
        profiles, broken = scan_profiles(dirs)
        searched = [str(d) for d in dirs]
        document = {
            "clusters": [
                {
                    "name": p.name,
                    "host": p.host,
                    "port": p.port,
                    "user": p.user,
                    "workdir": p.workdir,
                    "executor": p.executor,
                    "transport": p.transport,
                    "source": str(p.source),
                }
                for p in profiles
            ],
            "broken": [
                {"name": name, "source": str(path), "error": str(error)}
                for name, path, error in broken
            ],
            "searched": searched,
        }
        from remote_chain import render as views  # noqa: PLC0415 - start-up time

        inv.emit(document, lambda: views.clusters_view(profiles, searched, broken))
        return ConfigError.exit_code if broken else 0

    _guard(ctx, json_output, body)


app.add_typer(agent_app, name="agent")  # the persistent connection (agent_cli.py)


runs_app = typer.Typer(
    name="runs",
    help="List the runs of the local index; forget or prune them.",
    rich_markup_mode=None,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(runs_app)


@runs_app.callback(invoke_without_command=True)
def runs(
    ctx: typer.Context,
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Read every listed run's state again (SSH).")
    ] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, metavar="N", help="Only the N newest runs.")
    ] = None,
    json_output: JsonOpt = False,
) -> None:
    """List the runs of the local index: id, when, clusters, benchmarks, last known state.

    From the index only, no SSH, unless --refresh. The state is what the last status or
    wait saw. Subcommands: forget RUN_ID..., prune --older-than DURATION.
    """
    if ctx.invoked_subcommand is not None:
        return

    def body() -> int:
        from remote_chain import runs as index_runs  # noqa: PLC0415 - start-up time

        inv = _prepare(ctx, json_output=json_output)
        rc = inv.orchestrator()
        listed = rc.index.recent(limit)
        codes: list[int] = []
        if refresh and listed:
            ids = [r.run_id for r in listed]
            with inv.progress(f"reading {len(ids)} runs"):
                results = inv.run(lambda o: o.status_recent(run_ids=ids))
            failures = {f.cluster: f for r in results for f in r.failures}
            codes = _report_failures(list(failures.values()))
            listed = [r for r in (rc.index.load(i) for i in ids) if r is not None]
        from remote_chain import render as views  # noqa: PLC0415 - start-up time

        rows = [index_runs.run_json(r) for r in listed]
        inv.emit({"runs": rows, "index": str(rc.index.folder)}, lambda: views.runs_view(rows))
        return combine(codes)

    _guard(ctx, json_output, body)


@runs_app.command("forget")
def runs_forget(
    ctx: typer.Context,
    run_ids: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN_ID...", autocompletion=_complete_run_id, help="The runs to remove."
        ),
    ],
    json_output: JsonOpt = False,
) -> None:
    """Remove runs from the local index; nothing on any cluster is touched.

    Exit 1 if some RUN_ID was not in the index (the others are still removed).
    """

    def body() -> int:
        from remote_chain import runs as index_runs  # noqa: PLC0415 - start-up time

        inv = _prepare(ctx, json_output=json_output)
        gone, unknown = index_runs.forget(inv.orchestrator().index, run_ids)
        for run_id in unknown:
            error_line(f"{run_id}: not in the local index")
        document = {"forgotten": gone, "not_found": unknown}
        inv.emit(document, lambda: _lines([f"forgot {r}" for r in gone]))
        return 1 if unknown else 0

    _guard(ctx, json_output, body)


@runs_app.command("prune")
def runs_prune(
    ctx: typer.Context,
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            help="Forget runs submitted longer ago than this: 30d, 12h, 90m, 2w, or a Slurm "
            "duration (D-HH:MM:SS, ...).",
        ),
    ],
    json_output: JsonOpt = False,
) -> None:
    """Forget runs older than a duration from the local index; clusters are not touched."""

    def body() -> int:
        from remote_chain import runs as index_runs  # noqa: PLC0415 - start-up time

        inv = _prepare(ctx, json_output=json_output)
        seconds = index_runs.parse_age(older_than)
        removed = index_runs.prune(inv.orchestrator().index, seconds)
        ids = [r.run_id for r in removed]
        inv.emit({"forgotten": ids}, lambda: _lines([f"forgot {r}" for r in ids] or ["none"]))
        return 0

    _guard(ctx, json_output, body)


def _lines(lines: Sequence[str]) -> RenderableType:
    from rich.text import Text  # noqa: PLC0415 - start-up time

    return Text("\n".join(lines))


class Shell(enum.StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


@app.command()
def completion(
    shell: Annotated[Shell, typer.Argument(metavar="SHELL", help="bash, zsh or fish.")],
) -> None:
    """Print the shell completion script.

    Completes commands, options, profile names and recent run ids. bash: add
    eval "$(remote-chain completion bash)" to ~/.bashrc; zsh: the same with zsh to ~/.zshrc;
    fish: remote-chain completion fish > ~/.config/fish/completions/remote-chain.fish
    """
    from remote_chain.completion import script  # noqa: PLC0415 - start-up time

    sys.stdout.write(script(shell.value))


def main() -> None:
    """The console script ``remote-chain``: ``run_cli``, then a fast exit (``_exit_now``)."""
    try:
        run_cli()
    except SystemExit as done:
        _exit_now(done)


def run_cli() -> None:
    """The command line; raises SystemExit with the exit code, like click's own ``main``.

    For callers that go on after it (tests inspecting the process): ``main`` never returns.
    """
    from remote_chain.completion import prepare  # noqa: PLC0415 - a small module

    prepare()
    app(prog_name=PROG)


def _exit_now(done: SystemExit) -> NoReturn:
    """Exit without the interpreter's teardown once everything is written.

    Tearing down ~700 imported modules (asyncssh, cryptography, pydantic, structlog) costs a
    cold command 60-80 ms after its work is done (issue 13, P9). By now the event loop is
    closed, files are closed by their ``with`` blocks and every log record was flushed by its
    handler; stdout and stderr are flushed here. Anything unusual takes the normal exit.
    """
    code = done.code
    if code is None:
        code = 0
    if not isinstance(code, int) or isinstance(code, bool):
        raise done
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        raise done from None
    os._exit(code)
