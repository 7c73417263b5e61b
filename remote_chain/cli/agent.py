"""``remote-chain agent start|status|stop``: the persistent connection by hand.

``start`` keeps a cluster's connection open in an agent for the profile's ``persist`` (or
``REMOTE_CHAIN_PERSIST``; 10 minutes if neither says); later commands find it by its socket
(``transport/agent.py``). ``status`` says which agents answer; ``stop`` ends them. Exit codes as
everywhere: 2 for a config error, 3 when the cluster cannot be reached.
"""

from __future__ import annotations

from typing import Annotated

import typer

from remote_chain.cli.app import app
from remote_chain.cli.frame import guard

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


def _each(ctx: typer.Context, names: list[str], json_output: bool, op: str) -> None:
    def body() -> int:
        from remote_chain.cli.commands import agent as command  # noqa: PLC0415 - dispatch

        return command.each(ctx, json_output=json_output, clusters=names, op=op)

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
