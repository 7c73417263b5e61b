"""``cancel``, ``resume`` and ``logs``: act on the chains of a run."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from remote_chain.cli.app import (
    BenchmarksOpt,
    ClustersOpt,
    JsonOpt,
    RunIdArg,
    app,
    complete_cluster,
)
from remote_chain.cli.frame import (
    COMMAND_LINE,
    combine,
    guard,
    names,
    prepare,
    report_failures,
)
from remote_chain.errors import ConfigError

if TYPE_CHECKING:
    from remote_chain.resumecaps import ResumeCaps


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
        inv = prepare(ctx, json_output=json_output)
        clusters, benches = names(cluster), names(benchmark)
        with inv.progress(f"cancelling {run_id}"):
            result = inv.run(lambda rc: rc.cancel(run_id, clusters=clusters, benchmarks=benches))
        from remote_chain import render as views  # noqa: PLC0415 - start-up time

        inv.emit(result.to_json(), lambda: views.cancel_view(result))
        codes = report_failures(result.failures)
        return combine(codes + [1 for e in result.cancelled if e.error is not None])

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
        inv = prepare(ctx, json_output=json_output)
        clusters, benches = names(cluster), names(benchmark)
        caps = _resume_caps(max_walltime, max_retries, reset_retries)
        with inv.progress(f"resuming {run_id}"):
            result = inv.run(
                lambda rc: rc.resume(run_id, clusters=clusters, benchmarks=benches, caps=caps)
            )
        from remote_chain import render as views  # noqa: PLC0415 - start-up time

        inv.emit(result.to_json(), lambda: views.resume_view(result))
        codes = report_failures(result.failures)
        return combine(codes + [1 for e in result.resumed if e.error is not None])

    guard(ctx, json_output, body)


def _resume_caps(max_walltime: str | None, max_retries: int | None, reset: bool) -> ResumeCaps:
    from remote_chain.durations import parse_duration  # noqa: PLC0415 - start-up time
    from remote_chain.resumecaps import ResumeCaps  # noqa: PLC0415 - start-up time

    seconds = None
    if max_walltime is not None:
        try:
            seconds = parse_duration(max_walltime)
        except ValueError as exc:
            raise ConfigError(str(exc), source=COMMAND_LINE, field="--max-walltime") from None
    return ResumeCaps(seconds, max_retries, reset)


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
        inv = prepare(ctx, json_output=False)
        inv.run(
            lambda rc: rc.logs(
                run_id, benchmark, cluster=cluster, job_id=job, follow=follow, write=_write
            )
        )
        return 0

    guard(ctx, False, body)


def _write(data: str) -> None:
    sys.stdout.write(data)
    sys.stdout.flush()
