"""The command line (interface.md §4): argv -> config -> one ``anyio.run`` -> exit code.

``main`` is the console script ``remote-chain``. The folder:

- ``app``       the typer app, global options, completion callbacks, shared option types
- ``frame``     the one place errors become exit codes and lines on stderr (``guard``)
- ``submit``, ``status`` (and ``wait``), ``chains`` (``cancel``, ``resume``, ``logs``),
  ``local`` (``render``, ``doctor``, ``clusters``), ``agent``, ``runs``: what the user types,
  each command's arguments, options and help, registered on ``app`` as imported below
- ``commands/`` what each command does; ``invocation``, what a running command has
  (settings, logging, the orchestrator, progress and output); ``render``, ``timeline``,
  ``summary``, ``jobscripts``: the views

The CLI's dispatch is the package's one lazy import: a command's declaration imports its
``commands/`` module when it runs. ``remote-chain --help`` then reads typer and the
declarations only, not the library (anyio, asyncssh, pydantic, rich), whose imports would
dominate the start-up of ``--help`` (docs/performance.md). Help is plain click formatting for
the same reason.
"""

from __future__ import annotations

# The command modules register on ``app`` as they are imported: this order is --help's.
# isort: off
from remote_chain.cli import submit, status, chains, local, agent, runs  # noqa: F401

# isort: on
from remote_chain.cli.app import app
from remote_chain.cli.frame import PROG, exit_code, report

__all__ = ["PROG", "app", "exit_code", "main", "report"]


def main() -> None:
    """The console script ``remote-chain``; exits with the command's code (and answers a
    shell asking for completions: Typer's ``--install-completion`` script)."""
    app(prog_name=PROG)
