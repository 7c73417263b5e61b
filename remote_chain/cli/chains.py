"""``cancel``, ``resume`` and ``logs``: act on the chains of a run."""

from __future__ import annotations

from typing import Annotated

import typer

from remote_chain.cli.app import (
    BenchmarksOpt,
    ClustersOpt,
    JsonOpt,
    RunIdArg,
    app,
    complete_cluster,
)
from remote_chain.cli.frame import guard, names


@app.command()
def cancel(
    ctx: typer.Context,
    run_id: RunIdArg,
    benchmark: BenchmarksOpt = None,
    cluster: ClustersOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Cancel chains, queued and running jobs.

    A marker first, so no job of the chain starts again, then every queued job.
    """

    def body() -> int:
        from remote_chain.cli.commands import chains as command  # noqa: PLC0415 - dispatch

        return command.cancel(
            ctx,
            json_output=json_output,
            run_id=run_id,
            clusters=names(cluster),
            benchmarks=names(benchmark),
        )

    guard(ctx, json_output, body)


@app.command()
def resume(
    ctx: typer.Context,
    *,
    run_id: RunIdArg,
    benchmark: BenchmarksOpt = None,
    cluster: ClustersOpt = None,
    max_walltime: Annotated[
        str | None,
        typer.Option(
            "--max-walltime",
            metavar="DURATION",
            help="Raise the chain's walltime cap to this (Slurm's forms, a bare number is "
            "minutes); needed to resume a stopped chain.",
        ),
    ] = None,
    max_retries: Annotated[
        int | None,
        typer.Option(
            "--max-retries",
            metavar="N",
            min=0,
            help="Set the chain's retry cap to N (above the retries used).",
        ),
    ] = None,
    reset_retries: Annotated[
        bool,
        typer.Option("--reset-retries", help="Start the chain's retry count again at 0."),
    ] = False,
    json_output: JsonOpt = False,
) -> None:
    """Requeue chains that ended failed or stopped.

    The next job runs in the same folder, keeping the chain's state files, and the caps:
    the walltime of every job is counted first; a stopped chain resumes only with a raised
    --max-walltime, a failed resumable one only with --max-retries N or --reset-retries.
    """

    def body() -> int:
        from remote_chain.cli.commands import chains as command  # noqa: PLC0415 - dispatch

        return command.resume(
            ctx,
            json_output=json_output,
            run_id=run_id,
            clusters=names(cluster),
            benchmarks=names(benchmark),
            max_walltime=max_walltime,
            max_retries=max_retries,
            reset_retries=reset_retries,
        )

    guard(ctx, json_output, body)


@app.command()
def logs(
    ctx: typer.Context,
    *,
    run_id: RunIdArg,
    benchmark: Annotated[
        str, typer.Option("--benchmark", "-b", metavar="B", help="The benchmark (required).")
    ],
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            "-c",
            metavar="NAME",
            autocompletion=complete_cluster,
            help="Needed if the run is on several.",
        ),
    ] = None,
    job: Annotated[
        str | None,
        typer.Option("--job", metavar="JOB_ID", help="This job's log (default: the newest)."),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing while the job runs.")
    ] = False,
) -> None:
    """Print a chain's job log.

    The newest job's log unless --job; --follow keeps printing while the job runs.
    """

    def body() -> int:
        from remote_chain.cli.commands import chains as command  # noqa: PLC0415 - dispatch

        return command.logs(
            ctx, run_id=run_id, benchmark=benchmark, cluster=cluster, job=job, follow=follow
        )

    guard(ctx, False, body)
