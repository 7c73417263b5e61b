"""``submit``: send a run to every named cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from remote_chain.cli.app import (
    BenchmarksOpt,
    ConfigArg,
    JsonOpt,
    RequiredClustersOpt,
    app,
)
from remote_chain.cli.frame import (
    combine,
    guard,
    names,
    prepare,
    report_failures,
)

if TYPE_CHECKING:
    from rich.console import RenderableType


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
        inv = prepare(ctx, json_output=json_output)
        clusters = names(cluster)
        with inv.progress(f"submitting to {', '.join(dict.fromkeys(clusters))}"):
            result = inv.run(
                lambda rc: rc.submit(
                    config,
                    clusters,
                    benchmarks=names(benchmark),
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
        codes = report_failures(result.failures)
        codes += [1 for s in result.submissions if s.error is not None]
        return combine(codes)

    guard(ctx, json_output, body)
