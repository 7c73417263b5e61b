"""``render``, ``doctor`` and ``clusters``: a config's scripts, a cluster's health, the profiles."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from remote_chain.cli.app import (
    BenchmarksOpt,
    ConfigArg,
    JsonOpt,
    RequiredClustersOpt,
    app,
    complete_cluster,
)
from remote_chain.cli.frame import (
    guard,
    names,
    prepare,
)
from remote_chain.errors import ConfigError, RemoteError
from remote_chain.jobscripts import RENDER_RUN_ID
from remote_chain.layout import JOB_SCRIPT

if TYPE_CHECKING:
    from remote_chain.orchestrator import Orchestrator


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
        from remote_chain import jobscripts  # noqa: PLC0415 - start-up time

        inv = prepare(ctx, json_output=False)
        rc = inv.orchestrator()
        scripts = rc.render(config, names(cluster), benchmarks=names(benchmark), run_id=run_id)
        if out is None:
            sys.stdout.write(jobscripts.join_for_stdout(scripts))
        else:
            for path in jobscripts.write_scripts(scripts, out):
                sys.stdout.write(f"{path}\n")
        return 0

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
        inv = prepare(ctx, json_output=json_output)

        async def flow(rc: Orchestrator) -> Any:
            rc.profile(cluster)  # an unknown or invalid profile is a config error (2)
            (result,) = await rc.doctor([cluster])
            return result

        with inv.progress(f"checking {cluster}"):
            result = inv.run(flow)
        from remote_chain import render as views  # noqa: PLC0415 - start-up time

        inv.emit(result.to_json(), lambda: views.doctor_view(result))
        if result.ok:
            return 0
        ssh_failed = any(c.name == "ssh" and not c.ok for c in result.checks)
        return RemoteError.exit_code if ssh_failed else 1

    guard(ctx, json_output, body)


@app.command()
def clusters(ctx: typer.Context, json_output: JsonOpt = False) -> None:
    """List the cluster profiles found.

    Each with the file it came from, and the folders searched, in order.
    """

    def body() -> int:
        inv = prepare(ctx, json_output=json_output)
        from remote_chain.config import (  # noqa: PLC0415 - start-up time
            default_clusters_dirs,
            scan_profiles,
        )

        dirs = default_clusters_dirs(inv.globals.clusters_dir, inv.settings)
        # Every profile, the broken ones with their error, then exit 2 if any is broken.
        profiles, broken = scan_profiles(dirs)
        searched = [str(d) for d in dirs]
        document = {
            "clusters": [
                {
                    "name": p.name,
                    "host": p.host,
                    "port": p.port,
                    "user": p.user,
                    "workdir": p.workdir,
                    "executor": p.executor,
                    "transport": p.transport,
                    "source": str(p.source),
                }
                for p in profiles
            ],
            "broken": [
                {"name": name, "source": str(path), "error": str(error)}
                for name, path, error in broken
            ],
            "searched": searched,
        }
        from remote_chain import render as views  # noqa: PLC0415 - start-up time

        inv.emit(document, lambda: views.clusters_view(profiles, searched, broken))
        return ConfigError.exit_code if broken else 0

    guard(ctx, json_output, body)
