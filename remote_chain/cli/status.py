"""``status`` and ``wait``: read a run's chains, once, in place, or until they end."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from remote_chain.cli.app import (
    BenchmarksOpt,
    ClustersOpt,
    JsonOpt,
    RunIdArg,
    app,
    complete_run_id,
)
from remote_chain.cli.frame import (
    COMMAND_LINE,
    Invocation,
    combine,
    error_line,
    guard,
    names,
    prepare,
    report_failures,
    stdout_console,
    write_json,
)
from remote_chain.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import RenderableType

    from remote_chain.results import StatusResult


RECENT_LIMIT = 10


@app.command()
def status(
    ctx: typer.Context,
    *,
    run_id: Annotated[
        str | None,
        typer.Argument(
            metavar="RUN_ID",
            autocompletion=complete_run_id,
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
        inv = prepare(ctx, json_output=json_output)
        clusters, benches = names(cluster), names(benchmark)
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
        return combine(report_failures(result.failures))

    guard(ctx, json_output, body)


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
    return combine(report_failures(list(failures.values())))


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
    return combine(report_failures(result.failures))


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
        inv = prepare(ctx, json_output=json_output)
        limit = parse_timeout(timeout) if timeout is not None else None
        clusters = names(cluster)
        from remote_chain import render as views  # noqa: PLC0415 - start-up time
        from remote_chain.errors import WaitTimeout  # noqa: PLC0415 - start-up time

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
            report_failures(late.failures)
            error_line(f"{run_id}: {exc} (--timeout {timeout})")
            return exc.exit_code
        _write_summaries(result, summary)
        inv.emit(result.to_json(), lambda: views.status_table(result))
        return 0 if result.all_completed else 1

    guard(ctx, json_output, body)


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
