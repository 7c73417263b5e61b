"""The click command of one invocation: only the command that argv names (issue 13, P9).

typer builds the click command tree from every command's signature on each call: ~9 ms of a
cold command's start for ten commands and two groups, where the one being run costs ~2 ms.
``command_app`` returns a copy of the app holding only that command when argv plainly names
one (global options, then a top-level command's name), else the app itself, whose
``--help``, "No such command" and completion need every command. What the user sees is the
same either way: a command's own help, usage line and errors never name its siblings, and
the group's callback (the global options) runs as before; tests hold both paths to the
same bytes.

The warm launcher (``warm.py``) builds the whole tree once before forking: there the app
itself is cheaper (``FULL_PREBUILT``).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence

import typer
from typer.main import get_command_name

from remote_chain.completion import COMPLETE_VAR

# The app's global options (cli/app.py ``_global_options``), by whether they take a value.
_GLOBAL_VALUED = ("--clusters-dir", "--log-format")
_GLOBAL_FLAGS = ("--verbose",)
# Set by the warm launcher, whose children get the prebuilt whole command for free.
FULL_PREBUILT = False


def named_command(args: Sequence[str]) -> str | None:
    """The command argv names after the global options; None when it is not plain to see
    (help, version, a value-less option, ``--``, a typo: the whole app decides)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-"):
            return arg
        name = arg.partition("=")[0]
        if name in _GLOBAL_VALUED:
            i += 1 if "=" in arg else 2
        elif arg in _GLOBAL_FLAGS or (len(arg) > 1 and arg[0] == "-" and set(arg[1:]) == {"v"}):
            i += 1
        else:  # -h, --help, --version, --, or an option the app does not know
            return None
    return None


def command_app(app: typer.Typer, args: Sequence[str]) -> typer.Typer:
    """``app`` with only the command ``args`` names, or ``app`` itself (see the module doc)."""
    if FULL_PREBUILT or os.environ.get(COMPLETE_VAR):
        return app
    wanted = named_command(args)
    if wanted is None:
        return app
    only = [
        info
        for info in app.registered_commands
        if info.callback is not None
        and (info.name or get_command_name(info.callback.__name__)) == wanted
    ]
    if len(only) != 1:  # a group's name, a merged group's command, or a typo
        return app
    one = copy.copy(app)
    one.registered_commands = only
    one.registered_groups = []
    return one
