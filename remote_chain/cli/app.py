"""The typer app: global options, completion callbacks and the option types commands share.

The commands themselves are declared in the modules beside this one (``submit``,
``status``, ``chains``, ``local``, ``agent``, ``runs``), each registering on
``app`` as ``cli/__init__`` imports it; what each does is in ``cli/commands/``.
"""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import typer

from remote_chain.cli.frame import PROG, Globals
from remote_chain.version import __version__


class LogFormat(enum.StrEnum):
    console = "console"
    json = "json"


app = typer.Typer(
    name=PROG,
    help=(
        "Self-chaining Slurm jobs, submitted and followed over SSH.\n\n"
        "Global options go before the command: remote-chain -v status RUN_ID.\n\n"
        "Exit codes: 0 all done as asked; 1 some cluster or benchmark failed (for wait: some "
        "chain did not complete); 2 usage or config error; 3 a cluster could not be reached "
        "or authenticated; 4 wait ran past --timeout; 130 interrupted."
    ),
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=True,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"{PROG} {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _global_options(
    ctx: typer.Context,
    clusters_dir: Annotated[
        Path | None,
        typer.Option(
            "--clusters-dir",
            metavar="DIR",
            help="Look for cluster profiles (<name>.toml) here first.",
        ),
    ] = None,
    log_format: Annotated[
        LogFormat | None,
        typer.Option(
            "--log-format",
            case_sensitive=False,
            help="Logs on stderr: console (human text, the default) or json.",
        ),
    ] = None,
    verbose: Annotated[
        int,
        typer.Option(
            "-v",
            "--verbose",
            count=True,
            show_default=False,
            help="-v info logs, -vv debug logs and tracebacks.",
        ),
    ] = 0,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Self-chaining Slurm jobs, submitted and followed over SSH."""
    ctx.obj = Globals(clusters_dir, log_format.value if log_format else None, verbose)


# --- shell completion (cli/commands/completion.py, imported only while completing) ---------


def complete_cluster(ctx: typer.Context, incomplete: str) -> list[str]:
    from remote_chain.cli.commands import completion  # noqa: PLC0415 - dispatch

    folder = ctx.find_root().params.get("clusters_dir")
    return completion.cluster_names(folder if isinstance(folder, Path) else None, incomplete)


def complete_run_id(incomplete: str) -> list[str]:
    from remote_chain.cli.commands import completion  # noqa: PLC0415 - dispatch

    return completion.run_ids(incomplete)


# --- option types shared by the commands -----------------------------------------------------

ClustersOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--cluster",
        "-c",
        metavar="NAME",
        autocompletion=complete_cluster,
        help="A cluster profile; repeatable.",
    ),
]
# The same option where at least one cluster is required (submit, render).
RequiredClustersOpt = Annotated[
    list[str],
    typer.Option(
        "--cluster",
        "-c",
        metavar="NAME",
        autocompletion=complete_cluster,
        help="A cluster profile; repeatable.",
    ),
]
BenchmarksOpt = Annotated[
    list[str] | None,
    typer.Option("--benchmark", "-b", metavar="B", help="Only this benchmark; repeatable."),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout, nothing else.")
]
RunIdArg = Annotated[
    str,
    typer.Argument(
        metavar="RUN_ID", autocompletion=complete_run_id, help="The run id submit printed."
    ),
]
ConfigArg = Annotated[
    Path, typer.Argument(metavar="CONFIG", help="The submit config (YAML).", dir_okay=False)
]
