"""``runs``: the local index of runs; ``forget`` and ``prune`` entries of it."""

from __future__ import annotations

from typing import Annotated

import typer

from remote_chain.cli.app import JsonOpt, app, complete_run_id
from remote_chain.cli.frame import guard

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
        from remote_chain.cli.commands import runs as command  # noqa: PLC0415 - dispatch

        return command.runs(ctx, json_output=json_output, refresh=refresh, limit=limit)

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
        from remote_chain.cli.commands import runs as command  # noqa: PLC0415 - dispatch

        return command.forget(ctx, json_output=json_output, run_ids=run_ids)

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
        from remote_chain.cli.commands import runs as command  # noqa: PLC0415 - dispatch

        return command.prune(ctx, json_output=json_output, older_than=older_than)

    guard(ctx, json_output, body)
