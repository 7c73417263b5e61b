"""``cancel``, ``resume`` and ``logs``: act on the chains of a run."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import typer

from remote_chain.cli import render as views
from remote_chain.cli.frame import COMMAND_LINE, combine, report_failures
from remote_chain.cli.invocation import prepare
from remote_chain.core.durations import parse_duration
from remote_chain.errors import ConfigError
from remote_chain.execs.resume import ResumeCaps


def cancel(
    ctx: typer.Context,
    *,
    json_output: bool,
    run_id: str,
    clusters: Sequence[str],
    benchmarks: Sequence[str],
) -> int:
    inv = prepare(ctx, json_output=json_output)
    with inv.progress(f"cancelling {run_id}"):
        result = inv.run(lambda rc: rc.cancel(run_id, clusters=clusters, benchmarks=benchmarks))
    inv.emit(result.to_json(), lambda: views.cancel_view(result))
    codes = report_failures(result.failures)
    return combine(codes + [1 for e in result.cancelled if e.error is not None])


def resume(
    ctx: typer.Context,
    *,
    json_output: bool,
    run_id: str,
    clusters: Sequence[str],
    benchmarks: Sequence[str],
    max_walltime: str | None,
    max_retries: int | None,
    reset_retries: bool,
) -> int:
    inv = prepare(ctx, json_output=json_output)
    caps = _resume_caps(max_walltime, max_retries, reset_retries)
    with inv.progress(f"resuming {run_id}"):
        result = inv.run(
            lambda rc: rc.resume(run_id, clusters=clusters, benchmarks=benchmarks, caps=caps)
        )
    inv.emit(result.to_json(), lambda: views.resume_view(result))
    codes = report_failures(result.failures)
    return combine(codes + [1 for e in result.resumed if e.error is not None])


def _resume_caps(max_walltime: str | None, max_retries: int | None, reset: bool) -> ResumeCaps:
    seconds = None
    if max_walltime is not None:
        try:
            seconds = parse_duration(max_walltime)
        except ValueError as exc:
            raise ConfigError(str(exc), source=COMMAND_LINE, field="--max-walltime") from None
    return ResumeCaps(seconds, max_retries, reset)


def logs(
    ctx: typer.Context,
    *,
    run_id: str,
    benchmark: str,
    cluster: str | None,
    job: str | None,
    follow: bool,
) -> int:
    inv = prepare(ctx, json_output=False)
    inv.run(
        lambda rc: rc.logs(
            run_id, benchmark, cluster=cluster, job_id=job, follow=follow, write=_write
        )
    )
    return 0


def _write(data: str) -> None:
    sys.stdout.write(data)
    sys.stdout.flush()
