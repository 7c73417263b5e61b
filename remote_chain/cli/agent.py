"""``remote-chain agent start|status|stop``: the persistent connection by hand (issue 13, P8).

``start`` keeps a cluster's connection open in an agent for the profile's ``persist`` (or
``REMOTE_CHAIN_PERSIST``; 10 minutes if neither says); later commands find it by its socket
(``remote/agent.py``). ``status`` says which agents answer; ``stop`` ends them. Exit codes as
everywhere: 2 for a config error, 3 when the cluster cannot be reached.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any

import typer

from remote_chain.cli.app import app
from remote_chain.cli.frame import Globals, guard, prepare, write_json

if TYPE_CHECKING:
    from remote_chain.remote import Endpoint

DEFAULT_PERSIST_S = 600

agent_app = typer.Typer(
    help="The optional persistent connection: an agent keeps each cluster's SSH connection.",
    rich_markup_mode=None,
    no_args_is_help=True,
)

ClusterArg = Annotated[
    list[str],
    typer.Option("--cluster", "-c", metavar="NAME", help="A cluster profile; repeatable."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


def _endpoints(ctx: typer.Context, names: list[str]) -> list[Endpoint]:
    from remote_chain.cluster import endpoint_for  # noqa: PLC0415 - start-up time
    from remote_chain.config import default_clusters_dirs, find_profile  # noqa: PLC0415
    from remote_chain.settings import load_settings  # noqa: PLC0415

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


def _each(ctx: typer.Context, names: list[str], json_output: bool, op: str) -> None:
    def body() -> int:
        inv = prepare(ctx, json_output=json_output)
        del inv
        import anyio  # noqa: PLC0415 - start-up time

        from remote_chain.errors import RemoteError  # noqa: PLC0415
        from remote_chain.remote import agent  # noqa: PLC0415

        endpoints = _endpoints(ctx, names)

        async def flow() -> list[dict[str, Any]]:
            rows = []
            for endpoint in endpoints:
                path = agent.socket_path(endpoint)
                answer = await agent.request(path, {"op": "ping"})
                row: dict[str, Any] = {"cluster": endpoint.name, "socket": str(path)}
                if op == "start" and answer is None:
                    if not await agent.start_agent(endpoint, path):
                        from remote_chain.remote.ssh import SshRemote  # noqa: PLC0415

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

    guard(ctx, json_output, body)


@agent_app.command()
def start(ctx: typer.Context, cluster: ClusterArg, json_output: JsonOpt = False) -> None:
    """Start the agent of each cluster (connect now), unless it runs already."""
    _each(ctx, cluster, json_output, "start")


@agent_app.command()
def status(ctx: typer.Context, cluster: ClusterArg, json_output: JsonOpt = False) -> None:
    """Say whether each cluster's agent runs."""
    _each(ctx, cluster, json_output, "status")


@agent_app.command()
def stop(ctx: typer.Context, cluster: ClusterArg, json_output: JsonOpt = False) -> None:
    """Stop each cluster's agent; later commands connect directly again."""
    _each(ctx, cluster, json_output, "stop")


app.add_typer(agent_app, name="agent")
