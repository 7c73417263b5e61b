"""``render``'s output: job scripts to stdout (with separators outside them) or to a folder.

One script goes to stdout exactly as it would be uploaded. Several are each preceded by a
``==> <cluster>/<benchmark>/job.sh <==`` header line, as ``head``/``tail`` mark files: the
header sits between scripts, never inside one, so every script (shebang first) can be cut
out by its header and is byte for byte the uploaded ``job.sh``. ``--out DIR`` writes
``DIR/<cluster>/<benchmark>/job.sh`` instead, the run folder's own layout.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from remote_chain.errors import ConfigError

if TYPE_CHECKING:
    from remote_chain.core.results import RenderedScript

HEADER = "==> {path} <=="
HEADER_RE = re.compile(r"^==> (\S+) <==$", re.MULTILINE)


def join_for_stdout(scripts: Sequence[RenderedScript]) -> str:
    """The text ``render`` prints: the script itself, or each under its header line."""
    if len(scripts) == 1:
        return scripts[0].text
    parts = []
    for script in scripts:
        text = script.text if script.text.endswith("\n") else script.text + "\n"
        parts.append(HEADER.format(path=script.path) + "\n" + text)
    return "\n".join(parts)


def write_scripts(scripts: Sequence[RenderedScript], out_dir: Path) -> list[Path]:
    """Write each script to ``out_dir/<cluster>/<benchmark>/job.sh`` (mode 700), atomically."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"{out_dir} exists and is not a folder", source=str(out_dir))
    written = []
    for script in scripts:
        path = out_dir / script.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".sh")
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(script.text)
            os.chmod(tmp, 0o700)  # the mode submit uploads it with
            os.replace(tmp, path)
        except OSError as exc:
            raise ConfigError(
                f"cannot write: {exc.strerror or exc}", source=str(path), field="--out"
            ) from None
        written.append(path)
    return written
