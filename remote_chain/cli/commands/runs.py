"""``runs``: the local index of runs; ``forget`` and ``prune`` entries of it."""

from __future__ import annotations

from collections.abc import Sequence

import typer
from rich.console import RenderableType
from rich.text import Text

from remote_chain.cli import render as views
from remote_chain.cli.frame import combine, error_line, report_failures
from remote_chain.cli.invocation import prepare
from remote_chain.client import runs as index_runs


def runs(ctx: typer.Context, *, json_output: bool, refresh: bool, limit: int | None) -> int:
    inv = prepare(ctx, json_output=json_output)
    rc = inv.orchestrator()
    listed = rc.index.recent(limit)
    codes: list[int] = []
    if refresh and listed:
        ids = [r.run_id for r in listed]
        with inv.progress(f"reading {len(ids)} runs"):
            results = inv.run(lambda o: o.status_recent(run_ids=ids))
        failures = {f.cluster: f for r in results for f in r.failures}
        codes = report_failures(list(failures.values()))
        listed = [r for r in (rc.index.load(i) for i in ids) if r is not None]
    rows = [index_runs.run_json(r) for r in listed]
    inv.emit({"runs": rows, "index": str(rc.index.folder)}, lambda: views.runs_view(rows))
    return combine(codes)


def forget(ctx: typer.Context, *, json_output: bool, run_ids: Sequence[str]) -> int:
    inv = prepare(ctx, json_output=json_output)
    gone, unknown = index_runs.forget(inv.orchestrator().index, run_ids)
    for run_id in unknown:
        error_line(f"{run_id}: not in the local index")
    document = {"forgotten": gone, "not_found": unknown}
    inv.emit(document, lambda: _lines([f"forgot {r}" for r in gone]))
    return 1 if unknown else 0


def prune(ctx: typer.Context, *, json_output: bool, older_than: str) -> int:
    inv = prepare(ctx, json_output=json_output)
    seconds = index_runs.parse_age(older_than)
    removed = index_runs.prune(inv.orchestrator().index, seconds)
    ids = [r.run_id for r in removed]
    inv.emit({"forgotten": ids}, lambda: _lines([f"forgot {r}" for r in ids] or ["none"]))
    return 0


def _lines(lines: Sequence[str]) -> RenderableType:
    return Text("\n".join(lines))
