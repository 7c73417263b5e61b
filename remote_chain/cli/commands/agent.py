"""``remote-chain agent start|status|stop``: the persistent connection by hand."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import anyio
import typer

from remote_chain.cli.frame import Globals, write_json
from remote_chain.cli.invocation import prepare
from remote_chain.client.cluster import endpoint_for
from remote_chain.config import default_clusters_dirs, find_profile
from remote_chain.config.settings import load_settings
from remote_chain.errors import RemoteError
from remote_chain.transport import agent
from remote_chain.transport.endpoint import Endpoint
from remote_chain.transport.ssh import SshRemote

DEFAULT_PERSIST_S = 600


def _endpoints(ctx: typer.Context, names: Sequence[str]) -> list[Endpoint]:
    g = ctx.obj if isinstance(ctx.obj, Globals) else Globals(None, None, 0)
    settings = load_settings()
    dirs = default_clusters_dirs(g.clusters_dir, settings)
    out = []
    for name in dict.fromkeys(names):
        profile = find_profile(name, clusters_dirs=dirs)
        profile.check_local_files()
        endpoint = endpoint_for(profile, settings)
        if endpoint.persist <= 0:
            endpoint = dataclasses.replace(endpoint, persist=DEFAULT_PERSIST_S)
        out.append(endpoint)
    return out


def each(ctx: typer.Context, *, json_output: bool, clusters: Sequence[str], op: str) -> int:
    """``op`` (start, status or stop) for the agent of each cluster."""
    prepare(ctx, json_output=json_output)
    endpoints = _endpoints(ctx, clusters)

    async def flow() -> list[dict[str, Any]]:
        rows = []
        for endpoint in endpoints:
            path = agent.socket_path(endpoint)
            answer = await agent.request(path, {"op": "ping"})
            row: dict[str, Any] = {"cluster": endpoint.name, "socket": str(path)}
            if op == "start" and answer is None:
                if not await agent.start_agent(endpoint, path):
                    # The agent could not connect: the direct path says why, exactly.
                    await (await SshRemote.open(endpoint)).aclose()
                    raise RemoteError("the agent did not start", host=endpoint.name)
                answer = await agent.request(path, {"op": "ping"})
            if op == "stop" and answer is not None:
                await agent.request(path, {"op": "stop"})
                row["stopped"] = True
            row["running"] = answer is not None and op != "stop"
            if answer is not None:
                row["pid"] = answer.get("pid")
                row["idle_left_s"] = round(float(answer.get("idle_left", 0)), 1)
            rows.append(row)
        return rows

    rows = anyio.run(flow, backend="asyncio")
    if json_output:
        write_json({"agents": rows})
    else:
        for r in rows:
            state = "running" if r["running"] else ("stopped" if r.get("stopped") else "off")
            pid = f" pid {r['pid']}" if r.get("pid") and r["running"] else ""
            typer.echo(f"{r['cluster']}: {state}{pid} ({r['socket']})")
    return 0
