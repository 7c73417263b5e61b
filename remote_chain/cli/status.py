"""``status`` and ``wait``: read a run's chains, once, in place, or until they end."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from remote_chain.cli.app import BenchmarksOpt, ClustersOpt, JsonOpt, RunIdArg, app, complete_run_id
from remote_chain.cli.frame import guard, names

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
        from remote_chain.cli.commands import status as command  # noqa: PLC0415 - dispatch

        return command.status(
            ctx,
            json_output=json_output,
            run_id=run_id,
            clusters=names(cluster),
            benchmarks=names(benchmark),
            watch=watch,
            limit=limit,
            timeline=timeline,
        )

    guard(ctx, json_output, body)


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
        from remote_chain.cli.commands import status as command  # noqa: PLC0415 - dispatch

        return command.wait(
            ctx,
            json_output=json_output,
            run_id=run_id,
            clusters=names(cluster),
            timeout=timeout,
            summary=summary,
        )

    guard(ctx, json_output, body)
