"""``submit``: send a run to every named cluster."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import typer
from rich.console import RenderableType

from remote_chain.cli import render as views
from remote_chain.cli.frame import combine, report_failures
from remote_chain.cli.invocation import prepare


def submit(
    ctx: typer.Context,
    *,
    json_output: bool,
    config: Path,
    clusters: Sequence[str],
    benchmarks: Sequence[str],
    run_id: str | None,
    dry_run: bool,
) -> int:
    inv = prepare(ctx, json_output=json_output)
    with inv.progress(f"submitting to {', '.join(dict.fromkeys(clusters))}"):
        result = inv.run(
            lambda rc: rc.submit(
                config, clusters, benchmarks=benchmarks, run_id=run_id, dry_run=dry_run
            )
        )

    def view() -> RenderableType:
        bundles = views.describe_bundles(result.bundles) if dry_run else []
        return views.submit_view(result, bundles)

    inv.emit(result.to_json(), view)
    codes = report_failures(result.failures)
    codes += [1 for s in result.submissions if s.error is not None]
    return combine(codes)
