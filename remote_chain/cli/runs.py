"""``runs``: the local index of runs; ``forget`` and ``prune`` entries of it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from remote_chain.cli.app import (
    JsonOpt,
    app,
    complete_run_id,
)
from remote_chain.cli.frame import (
    combine,
    error_line,
    guard,
    prepare,
    report_failures,
)

if TYPE_CHECKING:
    from rich.console import RenderableType


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
        from remote_chain import render as views  # noqa: PLC0415 - start-up time

        rows = [index_runs.run_json(r) for r in listed]
        inv.emit({"runs": rows, "index": str(rc.index.folder)}, lambda: views.runs_view(rows))
        return combine(codes)

    guard(ctx, json_output, body)


@runs_app.command("forget")
def runs_forget(
    ctx: typer.Context,
    run_ids: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN_ID...", autocompletion=complete_run_id, help="The runs to remove."
        ),
    ],
    json_output: JsonOpt = False,
) -> None:
    """Remove runs from the local index; nothing on any cluster is touched.

    Exit 1 if some RUN_ID was not in the index (the others are still removed).
    """

    def body() -> int:
        from remote_chain import runs as index_runs  # noqa: PLC0415 - start-up time

        inv = prepare(ctx, json_output=json_output)
        gone, unknown = index_runs.forget(inv.orchestrator().index, run_ids)
        for run_id in unknown:
            error_line(f"{run_id}: not in the local index")
        document = {"forgotten": gone, "not_found": unknown}
        inv.emit(document, lambda: _lines([f"forgot {r}" for r in gone]))
        return 1 if unknown else 0

    guard(ctx, json_output, body)


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

        inv = prepare(ctx, json_output=json_output)
        seconds = index_runs.parse_age(older_than)
        removed = index_runs.prune(inv.orchestrator().index, seconds)
        ids = [r.run_id for r in removed]
        inv.emit({"forgotten": ids}, lambda: _lines([f"forgot {r}" for r in ids] or ["none"]))
        return 0

    guard(ctx, json_output, body)


def _lines(lines: Sequence[str]) -> RenderableType:
    from rich.text import Text  # noqa: PLC0415 - start-up time

    return Text("\n".join(lines))
