"""``submit``: send a run to every named cluster."""

from __future__ import annotations

from typing import Annotated

import typer

from remote_chain.cli.app import BenchmarksOpt, ConfigArg, JsonOpt, RequiredClustersOpt, app
from remote_chain.cli.frame import guard, names


@app.command()
def submit(
    ctx: typer.Context,
    *,
    config: ConfigArg,
    cluster: RequiredClustersOpt,
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
        from remote_chain.cli.commands import submit as command  # noqa: PLC0415 - dispatch

        return command.submit(
            ctx,
            json_output=json_output,
            config=config,
            clusters=names(cluster),
            benchmarks=names(benchmark),
            run_id=run_id,
            dry_run=dry_run,
        )

    guard(ctx, json_output, body)
