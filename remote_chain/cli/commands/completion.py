"""Shell completion's own candidates: profile names and recent run ids.

The scripts are Typer's (``remote-chain --install-completion`` or ``--show-completion
SHELL``, for bash, zsh and fish), calling ``remote-chain`` back with ``_REMOTE_CHAIN_COMPLETE``
set. Commands and options come from the click command tree; profile names (``--cluster``)
from the profile folders, without reading or validating any profile; run ids (``RUN_ID``)
from the local index, newest first. A completion never fails loudly: whatever cannot be read
offers nothing. Imported only while completing (``cli/app`` dispatches to it).
"""

from __future__ import annotations

from pathlib import Path

from remote_chain.client.index import RunIndex
from remote_chain.config import default_clusters_dirs
from remote_chain.config.settings import load_settings

RECENT_RUNS = 50


def cluster_names(clusters_dir: Path | None, incomplete: str) -> list[str]:
    """Profile names (``<name>.toml`` stems) in the folders ``--cluster`` searches."""
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
