"""The command line (interface.md §4): argv -> config -> one ``anyio.run`` -> exit code.

``main`` is the console script ``remote-chain``. One module per concern:

- ``frame``   the one invocation frame: settings, logging, progress, ``--json`` output, and
              the one place errors become exit codes (``guard``, ``report``, ``exit_code``)
- ``app``     the typer app, global options, completion callbacks, shared option types
- ``submit``, ``status`` (and ``wait``), ``chains`` (``cancel``, ``resume``, ``logs``),
  ``local`` (``render``, ``doctor``, ``clusters``), ``agent``, ``runs``, ``shell``
  (``completion``): the command declarations, each registered on ``app`` when imported below

Start-up time matters (``remote-chain --help`` in well under 0.4 s): only typer and small
modules are imported here; the orchestrator (anyio, tenacity, pydantic), structlog and rich
are imported inside the commands. Help is plain click formatting for the same reason:
typer's rich help alone costs ~0.1 s of imports.

Test seam: ``_OPENER`` (below).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# The command modules register on ``app`` as they are imported: this order is --help's.
# isort: off
from remote_chain.cli import submit, status, chains, local, agent, runs, shell  # noqa: F401

# isort: on
from remote_chain.cli.app import app
from remote_chain.cli.frame import PROG, exit_code, report
from remote_chain.cli.status import parse_timeout
from remote_chain.jobscripts import RENDER_RUN_ID

if TYPE_CHECKING:
    from remote_chain.cluster import Opener

# The Opener every command's Orchestrator connects with; None means the real transports
# (``remote_chain.remote.open_remote``). Tests replace it with ``FakeSlurm.open`` (tests/fakes.py)
# via ``monkeypatch.setattr(cli, "_OPENER", ...)``; ``Invocation.orchestrator`` reads it from
# here. Deliberately not settable from the environment or the command line: no production
# path can swap the transport.
_OPENER: Opener | None = None

__all__ = [
    "PROG",
    "RENDER_RUN_ID",
    "app",
    "exit_code",
    "main",
    "parse_timeout",
    "report",
    "run_cli",
]


def main() -> None:
    """The console script ``remote-chain``."""
    run_cli()


def run_cli() -> None:
    """The command line; raises SystemExit with the exit code, like click's own ``main``."""
    from remote_chain.completion import prepare  # noqa: PLC0415 - a small module

    prepare()
    app(prog_name=PROG)
