"""Shell completion for bash, zsh and fish: commands, options, profile names, recent run ids.

``remote-chain completion SHELL`` prints the script to source (Typer's, which calls
``remote-chain`` back with ``_REMOTE_CHAIN_COMPLETE`` set). Commands and options come from the
click command tree; profile names (``--cluster``) from the profile folders, without reading or
validating any profile; run ids (``RUN_ID``) from the local index, newest first. A completion
never fails loudly: whatever cannot be read offers nothing.

This module is imported only while completing or printing the script, never for ``--help``
(P6: ``remote-chain --help`` cold in well under 0.4 s).
"""

from __future__ import annotations

import os
from pathlib import Path

PROG = "remote-chain"
COMPLETE_VAR = "_REMOTE_CHAIN_COMPLETE"
SHELLS = ("bash", "zsh", "fish")
RECENT_RUNS = 50


def script(shell: str) -> str:
    """The completion script for ``shell`` (bash, zsh or fish), to ``source`` or install."""
    from typer._completion_shared import get_completion_script  # noqa: PLC0415 - lazy

    return get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell) + "\n"


def cluster_names(clusters_dir: Path | None, incomplete: str) -> list[str]:
    """Profile names (``<name>.toml`` stems) in the folders ``--cluster`` searches."""
    from remote_chain.config import default_clusters_dirs  # noqa: PLC0415 - lazy
    from remote_chain.settings import load_settings  # noqa: PLC0415 - lazy

    try:
        folders = default_clusters_dirs(clusters_dir, load_settings())
        names = {
            path.stem for folder in folders if folder.is_dir() for path in folder.glob("*.toml")
        }
    except Exception:
        return []
    return sorted(n for n in names if n.startswith(incomplete))


def run_ids(incomplete: str) -> list[str]:
    """The newest run ids of the local index that start with ``incomplete``."""
    from remote_chain.index import RunIndex  # noqa: PLC0415 - lazy
    from remote_chain.settings import load_settings  # noqa: PLC0415 - lazy

    try:
        folder = RunIndex(load_settings().index_dir()).folder
        if not folder.is_dir():
            return []
        # File names are the ids: no entry needs to be parsed to offer it.
        ids = sorted(
            (p.stem for p in folder.glob("*.json") if not p.name.startswith(".")),
            reverse=True,
        )
    except Exception:
        return []
    return [i for i in ids if i.startswith(incomplete)][:RECENT_RUNS]


def prepare() -> None:
    """Register Typer's bash/zsh/fish completion classes, only if a shell is completing.

    Typer registers them itself only with ``add_completion=True``, which would also add its
    ``--install-completion`` options to every ``--help``; ``remote-chain completion`` replaces
    those.
    """
    if os.environ.get(COMPLETE_VAR):
        from typer._completion_classes import completion_init  # noqa: PLC0415 - lazy

        completion_init()
