"""PURE: the one remote exec behind ``status``: every chain's files, one squeue, one sacct.

However many chains are asked for, a cluster is asked exactly once per poll: the script reads
each chain's dot-files (through the wire codec, so nothing in them can break the framing),
gathers every job id they name, and makes one ``squeue`` call for all of them, then one
``sacct`` call for those squeue no longer shows, none when it shows them all (slurmctld's load
stays flat, and polls of live chains spare slurmdbd); a job whose final record an earlier poll
read (``Target.final``, kept in the local index) is not asked again.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from remote_chain.core.models import Executor, JobId, SacctRecord
from remote_chain.core.sacct import parse_sacct, parse_squeue
from remote_chain.core.snapshot import ChainFiles, FileRead, RunFiles, Snapshot, Target
from remote_chain.execs.templates import render_chunks_function, render_template
from remote_chain.protocol.wire import decode


def render_status_script(targets: Sequence[Target], *, executor: Executor = "slurm") -> str:
    body = render_template("status.bash")
    head = [
        f"RC_EXECUTOR={shlex.quote(executor)}",
        "RC_RUN_DIRS=(" + " ".join(shlex.quote(t.run_dir) for t in targets) + ")",
        "RC_RUN_IDS=(" + " ".join(shlex.quote(t.run_id) for t in targets) + ")",
        "RC_BENCHES=(" + " ".join(shlex.quote(" ".join(t.benchmarks)) for t in targets) + ")",
        # 0: the client has what it reads from the run record (Target.time_limits).
        "RC_RECORDS=(" + " ".join("1" if t.time_limits is None else "0" for t in targets) + ")",
        # Only ids parse_sacct accepts (JOB_ID_RE) leave the index for the script.
        "RC_FINAL_IDS=(" + " ".join(shlex.quote(i) for i in _final(targets)) + ")",
    ]
    return "\n".join([*head, render_chunks_function(), body])


def _final(targets: Sequence[Target]) -> dict[JobId, SacctRecord]:
    return parse_sacct("\n".join(t.final for t in targets if t.final))


@dataclass
class _Run:
    exists: bool = False
    record: str | None = None
    created: str | None = None


def parse_status_output(text: str, targets: Sequence[Target]) -> Snapshot:
    """Turn the status script's records (wire.py) into a Snapshot; unknown ones are skipped."""
    runs: dict[int, _Run] = {}
    # Run index -> chain -> (its cancel marker, its files), in the order sent; a chain sent
    # twice keeps its place and its last record.
    benches: dict[int, dict[str, tuple[bool, dict[str, FileRead]]]] = {}
    missing: dict[int, list[str]] = {}
    unreadable: dict[int, list[str]] = {}
    sacct_text, sacct_ok, squeue_text, squeue_ok = "", True, "", True
    live: set[str] = set()
    for parts in decode(text):
        kind, size = parts[0], len(parts)
        if size < 2 or (kind in {"RUN", "BENCH", "FILE"} and not parts[1].isdigit()):
            continue
        # BENCH first: all but a few of a poll's records, one a chain.
        if kind == "BENCH" and size >= 4 and size % 3 == 1:
            # BENCH i bench marker, then KIND STATUS CONTENT for each file that exists.
            if size == 7:  # a held or queued chain: its first-job file alone
                status = parts[5]
                files = {parts[4]: FileRead(status, parts[6] if status == "ok" else "")}
            else:
                files = {
                    parts[k]: FileRead(parts[k + 1], parts[k + 2] if parts[k + 1] == "ok" else "")
                    for k in range(4, size, 3)
                }
            benches.setdefault(int(parts[1]), {})[parts[2]] = (parts[3] == "1", files)
        elif kind == "RUN" and size >= 3:
            created = parts[3].strip() or None if size > 3 else None
            record = parts[4] or None if size > 4 else None
            runs[int(parts[1])] = _Run(parts[2] == "1", record, created)
        elif kind == "NOBENCH" and size == 3 and parts[1].isdigit():
            missing.setdefault(int(parts[1]), []).append(parts[2])
        elif kind == "UNREADABLE" and size == 3 and parts[1].isdigit():
            unreadable.setdefault(int(parts[1]), []).append(parts[2])
        elif kind == "FILE" and len(parts) == 6:  # a file above INLINE_FILE_BYTES, base64
            big = benches.get(int(parts[1]), {}).get(parts[3])
            if big is not None:
                big[1][parts[2]] = FileRead(parts[4], parts[5] if parts[4] == "ok" else "")
        elif kind == "SACCT" and len(parts) == 3:
            sacct_ok, sacct_text = parts[1] == "0", parts[2]
        elif kind == "SQUEUE" and len(parts) == 3:
            squeue_ok, squeue_text = parts[1] == "0", parts[2]
        elif kind == "SQUEUE_STREAMED" and len(parts) == 3:  # its text first (status.bash)
            squeue_ok, squeue_text = parts[2] == "0", parts[1]
        elif kind == "LIVE":
            live.add(parts[1])
    run_files = []
    for i, target in enumerate(targets):
        run = runs.get(i, _Run())
        # A file the script left out does not exist (status.bash sends only those that do):
        # it is absent from ``files`` (ChainFiles.file). Filling in the five a held chain
        # lacks would cost a dict per chain, and derive a look at each.
        run_id, run_dir = target.run_id, target.run_dir
        chains = tuple(
            [
                ChainFiles(run_id, name, f"{run_dir}/{name}", files, marker)
                for name, (marker, files) in benches.get(i, {}).items()
            ]
        )
        run_files.append(
            RunFiles(
                target.run_id,
                target.run_dir,
                run.exists,
                run.record,
                run.created,
                chains,
                tuple(missing.get(i, ())),
                tuple(unreadable.get(i, ())),
                target.time_limits,
            )
        )
    squeue = parse_squeue(squeue_text) if squeue_ok else {}
    sacct = parse_sacct(sacct_text) if sacct_ok else {}
    # The final records the exec did not ask sacct of: what sacct said of them before. A job
    # squeue shows (requeued) is squeue's, and sacct's answer, when it was asked, wins.
    kept = {}
    for job_id, rec in _final(targets).items():
        if job_id not in squeue and job_id not in sacct:
            sacct[job_id] = kept[job_id] = rec
    return Snapshot(
        runs=tuple(run_files),
        sacct=sacct,
        sacct_ok=sacct_ok,
        sacct_error="" if sacct_ok else sacct_text.strip()[-500:],
        squeue=squeue,
        squeue_ok=squeue_ok,
        live_pids=frozenset(live),
        kept=kept,
    )
