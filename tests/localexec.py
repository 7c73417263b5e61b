"""Client scripts run by local bash with stub Slurm tools on PATH: the fast layer below the
real cluster. A script is wrapped and unwrapped exactly as the SSH transports do
(``remote.markers``, ``remote.result_from_output``), so what is tested is what a login node
runs and what the client reads back."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from remote_chain.protocol import wire
from remote_chain.protocol.markers import wrap
from remote_chain.transport.base import result_from_output


def stubs_on_path(tmp: Path, stubs: Mapping[str, str], **env: str) -> dict[str, str]:
    """Each stub (name -> bash text) an executable in ``tmp/bin``, first on PATH; calls may be
    logged to ``RC_STUB_LOG`` (``tmp/calls.log``); the C.UTF-8 locale, as on a login node."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in stubs.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "RC_STUB_LOG": str(tmp / "calls.log"),
        "LC_ALL": "C.UTF-8",
        **env,
    }


def run_script(script: str, env: Mapping[str, str], *, timeout: float = 300) -> str:
    """The script's own output (between the markers), run by ``bash -s`` as sshd would."""
    wrapped, nonce = wrap(script)
    proc = subprocess.run(
        ["bash", "-s"], input=wrapped.encode(), capture_output=True, timeout=timeout, env=env
    )
    return result_from_output(
        name="local",
        nonce=nonce,
        stdout=proc.stdout.decode(),
        stderr=proc.stderr.decode(),
        exit_status=proc.returncode,
        lost=False,
    ).stdout


def squeue_record(payload: str) -> tuple[str, ...]:
    """A status payload's one squeue record as ``SQUEUE STATUS TEXT``: the streamed one
    (``SQUEUE_STREAMED TEXT STATUS``, status.bash) sends its status last."""
    (record,) = [r for r in wire.decode(payload) if r[0].startswith("SQUEUE")]
    if record[0] == "SQUEUE_STREAMED":
        return ("SQUEUE", record[2], record[1])
    return record
