"""``render``, ``doctor`` and ``clusters``: a config's scripts, a cluster's health, the profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from remote_chain.cli.app import (
    BenchmarksOpt,
    ConfigArg,
    JsonOpt,
    RequiredClustersOpt,
    app,
    complete_cluster,
)
from remote_chain.cli.frame import guard, names
from remote_chain.protocol.layout import JOB_SCRIPT, RENDER_RUN_ID


@app.command()
def render(
    ctx: typer.Context,
    *,
    config: ConfigArg,
    cluster: RequiredClustersOpt,
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
            help=f"Write DIR/<cluster>/<benchmark>/{JOB_SCRIPT} instead of printing.",
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
        from remote_chain.cli.commands import local as command  # noqa: PLC0415 - dispatch

        return command.render(
            ctx,
            config=config,
            clusters=names(cluster),
            benchmarks=names(benchmark),
            run_id=run_id,
            out=out,
        )

    guard(ctx, False, body)


@app.command()
def doctor(
    ctx: typer.Context,
    cluster: Annotated[
        str,
        typer.Option(
            "--cluster",
            "-c",
            metavar="NAME",
            autocompletion=complete_cluster,
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
        from remote_chain.cli.commands import local as command  # noqa: PLC0415 - dispatch

        return command.doctor(ctx, json_output=json_output, cluster=cluster)

    guard(ctx, json_output, body)


@app.command()
def clusters(ctx: typer.Context, json_output: JsonOpt = False) -> None:
    """List the cluster profiles found.

    Each with the file it came from, and the folders searched, in order.
    """

    def body() -> int:
        from remote_chain.cli.commands import local as command  # noqa: PLC0415 - dispatch

        return command.clusters(ctx, json_output=json_output)

    guard(ctx, json_output, body)
