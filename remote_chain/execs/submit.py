"""PURE: the single remote exec that submits a whole run on one cluster, and its answer.

One script carries everything (interface.md §3 layout): it makes the run folder atomically
(``mkdir`` fails if it exists, so a retried or concurrent submit of the same run id can never
make a second chain), unpacks a base64 tarball of every file (uploads, each ``job.sh``, secret
files), runs ``sbatch --parsable`` per benchmark, and writes the run record. It ignores SIGHUP
and SIGPIPE once it has started, so a connection dropped mid-way cannot leave a half-submitted
run: the client reconnects and reads the record (``render_lookup_script``).
"""

from __future__ import annotations

import base64
import io
import json
import shlex
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass

from remote_chain.core.bundle import BundleFile, ClusterBundle
from remote_chain.core.models import JOB_ID_RE, JobId
from remote_chain.execs.templates import render_template
from remote_chain.protocol import layout
from remote_chain.protocol.layout import ChainRecord, RunRecord, chain_prefix, record_head
from remote_chain.protocol.wire import decode

# The run folder's names are layout.py's; these aliases keep this module's importers working.
FIRST_JOB_FILE = layout.FIRST_JOB_FILE
RECORD_FILE = layout.RECORD_FILE
SBATCH_OUT = layout.SBATCH_OUT
SUBMIT_LOG = layout.SUBMIT_LOG


@dataclass(frozen=True)
class Submitted:
    benchmark: str
    job_id: JobId | None
    error: str | None


@dataclass(frozen=True)
class SubmitAnswer:
    """What the submit (or lookup) script said.

    ``existed``: the run folder was already there (a retry or a concurrent submit); then
    ``record`` is the existing run's record, or None if it never completed.
    """

    existed: bool
    submitted: tuple[Submitted, ...] = ()
    record: dict[str, object] | None = None
    error: str | None = None
    workdir_error: bool = False  # the error is the profile's workdir (a config problem)


def tarball(files: Sequence[BundleFile]) -> bytes:
    """A gzipped tar of the files with their modes, folders 0700, deterministic."""
    buf = io.BytesIO()
    dirs: set[str] = set()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for f in files:
            parts = f.path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode = tarfile.DIRTYPE, 0o700
                    tar.addfile(info)
            info = tarfile.TarInfo(f.path)
            info.size, info.mode = len(f.data), f.mode
            tar.addfile(info, io.BytesIO(f.data))
    return buf.getvalue()


def _run_record(bundle: ClusterBundle) -> RunRecord:
    """The run record as the client knows it (the job ids are the submit exec's to add)."""
    chains = tuple(
        ChainRecord(c.benchmark, c.remote_dir, c.job_name, c.resumable, c.time_limit_s)
        for c in bundle.chains
    )
    return RunRecord(
        bundle.run_id, bundle.cluster, bundle.created, bundle.executor, bundle.run_dir, chains
    )


def _body(payload: str | None = None) -> str:
    return render_template("submit.bash", None if payload is None else {"__PAYLOAD__": payload})


def _head(bundle: ClusterBundle, mode: str) -> list[str]:
    parent = bundle.run_dir.rsplit("/", 1)[0]
    record = _run_record(bundle)
    return [
        f"RC_MODE={mode}",
        f"RC_RUN_DIR={shlex.quote(bundle.run_dir)}",
        f"RC_PARENT={shlex.quote(parent)}",
        f"RC_EXECUTOR={shlex.quote(bundle.executor)}",
        "RC_BENCHMARKS=(" + " ".join(shlex.quote(c.benchmark) for c in bundle.chains) + ")",
        "RC_JOB_NAMES=(" + " ".join(shlex.quote(c.job_name) for c in bundle.chains) + ")",
        f"RC_RECORD_HEAD={shlex.quote(record_head(record))}",
        "RC_RECORD_PREFIX=(" + " ".join(shlex.quote(chain_prefix(c)) for c in record.chains) + ")",
    ]


def render_submit_script(bundle: ClusterBundle) -> str:
    """The whole submission as one bash script (to run through ``Remote.run``)."""
    payload = base64.encodebytes(tarball(bundle.files)).decode("ascii").rstrip("\n")
    body = _body(payload)
    return "\n".join([*_head(bundle, "submit"), body])


def render_lookup_script(bundle: ClusterBundle) -> str:
    """After a lost connection: does the run exist here, and what did it submit?"""
    body = _body().split("# mkdir is atomic", 1)[0]
    return "\n".join([*_head(bundle, "lookup"), body, "rc_emit ABSENT"])


def parse_submit_output(text: str) -> SubmitAnswer:
    """Read the records (wire.py) the submit/lookup script printed."""
    submitted: list[Submitted] = []
    records = decode(text)
    for parts in records:
        kind = parts[0]
        if kind in ("ERROR", "WORKDIR") and len(parts) == 2:
            return SubmitAnswer(existed=False, error=parts[1], workdir_error=kind == "WORKDIR")
        if kind == "EXISTS" and len(parts) == 2:
            return SubmitAnswer(existed=True, record=_record(parts[1]))
        if kind == "ABSENT":
            return SubmitAnswer(existed=False)
        if kind == "SUBMITTED" and len(parts) == 3:
            if JOB_ID_RE.match(parts[2]):
                submitted.append(Submitted(parts[1], JobId(parts[2]), None))
        elif kind == "FAILED" and len(parts) == 3:
            submitted.append(Submitted(parts[1], None, parts[2].strip() or "sbatch failed"))
    if not records or records[-1][0] != "DONE":
        return SubmitAnswer(existed=False, submitted=tuple(submitted), error="no answer")
    return SubmitAnswer(existed=False, submitted=tuple(submitted))


def _record(text: str) -> dict[str, object] | None:
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
