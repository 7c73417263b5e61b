"""``status`` and ``wait``: read a run's chains, once, in place, or until they end."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from pathlib import Path

import typer
from rich.console import RenderableType
from rich.live import Live

from remote_chain.cli import render as views
from remote_chain.cli.frame import COMMAND_LINE, combine, error_line, report_failures, write_json
from remote_chain.cli.invocation import Invocation, prepare, stdout_console
from remote_chain.cli.summary import markdown
from remote_chain.cli.timeline import timeline_view
from remote_chain.core.durations import parse_duration
from remote_chain.core.results import StatusResult
from remote_chain.errors import ConfigError, WaitTimeout


def status(
    ctx: typer.Context,
    *,
    json_output: bool,
    run_id: str | None,
    clusters: Sequence[str],
    benchmarks: Sequence[str],
    watch: bool,
    limit: int,
    timeline: bool,
) -> int:
    inv = prepare(ctx, json_output=json_output)
    if run_id is None:
        if watch:
            raise ConfigError("--watch needs a RUN_ID", source=COMMAND_LINE, field="--watch")
        return _status_recent(inv, clusters, benchmarks, limit, timeline)
    if watch:
        return _status_watch(inv, run_id, clusters, benchmarks, timeline)
    n = len(clusters)
    with inv.progress(f"reading {run_id}" + (f" on {n} clusters" if n > 1 else "")):
        result = inv.run(lambda rc: rc.status(run_id, clusters=clusters, benchmarks=benchmarks))
    inv.emit(result.to_json(), lambda: _run_view(result, timeline))
    return combine(report_failures(result.failures))


def _run_view(result: StatusResult, timeline: bool) -> RenderableType:
    """One run as the status table, or (``--timeline``) as rows of link bars."""
    if timeline:
        return timeline_view(result)

    return views.status_table(result)


def _only(result: StatusResult, clusters: Sequence[str], benches: Sequence[str]) -> StatusResult:

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


def wait(
    ctx: typer.Context,
    *,
    json_output: bool,
    run_id: str,
    clusters: Sequence[str],
    timeout: str | None,
    summary: Path | None,
) -> int:
    inv = prepare(ctx, json_output=json_output)
    limit = parse_timeout(timeout) if timeout is not None else None
    try:
        with inv.progress(f"waiting for {run_id}") as progress:

            def show(polled: StatusResult) -> None:
                progress.update(f"waiting for {run_id}: {views.state_summary(polled)}")

            result = inv.run(
                lambda rc: rc.wait(run_id, clusters=clusters, timeout=limit, on_poll=show)
            )
    except WaitTimeout as exc:
        late: StatusResult = exc.result
        _write_summaries(late, summary, timed_out=True)
        inv.emit({**late.to_json(), "timed_out": True}, lambda: views.status_table(late))
        report_failures(late.failures)
        error_line(f"{run_id}: {exc} (--timeout {timeout})")
        return exc.exit_code
    _write_summaries(result, summary)
    inv.emit(result.to_json(), lambda: views.status_table(result))
    return 0 if result.all_completed else 1


GITHUB_STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


def _write_summaries(result: StatusResult, path: Path | None, *, timed_out: bool = False) -> None:
    """Append the run's Markdown summary to ``--summary`` and to ``$GITHUB_STEP_SUMMARY``.

    Appended, never overwritten: a CI step summary collects every step's part. A file that
    cannot be written is an error line, not a lost result (the exit code stays the run's).
    """

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

    if text.endswith("s") and text[:-1].isascii() and text[:-1].isdigit():
        return float(text[:-1])
    try:
        return float(parse_duration(text))
    except ValueError as exc:
        raise ConfigError(str(exc), source=COMMAND_LINE, field="--timeout") from None
