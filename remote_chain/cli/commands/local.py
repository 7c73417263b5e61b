"""``render``, ``doctor`` and ``clusters``: a config's scripts, a cluster's health, the profiles."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import typer

from remote_chain.cli import jobscripts
from remote_chain.cli import render as views
from remote_chain.cli.invocation import prepare
from remote_chain.client.orchestrator import Orchestrator
from remote_chain.config import default_clusters_dirs, scan_profiles
from remote_chain.core.results import DoctorResult
from remote_chain.errors import ConfigError, RemoteError


def render(
    ctx: typer.Context,
    *,
    config: Path,
    clusters: Sequence[str],
    benchmarks: Sequence[str],
    run_id: str,
    out: Path | None,
) -> int:
    inv = prepare(ctx, json_output=False)
    rc = inv.orchestrator()
    scripts = rc.render(config, clusters, benchmarks=benchmarks, run_id=run_id)
    if out is None:
        sys.stdout.write(jobscripts.join_for_stdout(scripts))
    else:
        for path in jobscripts.write_scripts(scripts, out):
            sys.stdout.write(f"{path}\n")
    return 0


def doctor(ctx: typer.Context, *, json_output: bool, cluster: str) -> int:
    inv = prepare(ctx, json_output=json_output)

    async def flow(rc: Orchestrator) -> DoctorResult:
        rc.profile(cluster)  # an unknown or invalid profile is a config error (2)
        (result,) = await rc.doctor([cluster])
        return result

    with inv.progress(f"checking {cluster}"):
        result = inv.run(flow)
    inv.emit(result.to_json(), lambda: views.doctor_view(result))
    if result.ok:
        return 0
    ssh_failed = any(c.name == "ssh" and not c.ok for c in result.checks)
    return RemoteError.exit_code if ssh_failed else 1


def clusters(ctx: typer.Context, *, json_output: bool) -> int:
    inv = prepare(ctx, json_output=json_output)
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
            {"name": name, "source": str(path), "error": str(error)} for name, path, error in broken
        ],
        "searched": searched,
    }
    inv.emit(document, lambda: views.clusters_view(profiles, searched, broken))
    return ConfigError.exit_code if broken else 0
