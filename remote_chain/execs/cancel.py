"""PURE: the remote exec of ``cancel`` (cancel.bash) and the parser of its answer."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from remote_chain.core.models import JOB_ID_RE, Executor, JobId
from remote_chain.execs.templates import bash_array, render_chunks_function, render_template
from remote_chain.protocol.wire import decode


@dataclass(frozen=True)
class CancelAnswer:
    cancelled: dict[str, tuple[JobId, ...]]  # benchmark -> job ids scancel'd
    missing: tuple[str, ...] = ()
    left: bool = False  # jobs were still queued when the exec gave up
    errors: tuple[str, ...] = ()


def render_cancel_script(
    run_id: str, run_dir: str, benchmarks: Sequence[str], *, executor: Executor = "slurm"
) -> str:
    head = [
        f"RC_EXECUTOR={shlex.quote(executor)}",
        f"RC_RUN_ID={shlex.quote(run_id)}",
        f"RC_RUN_DIR={shlex.quote(run_dir)}",
        bash_array("RC_BENCHES", benchmarks),
    ]
    return "\n".join([*head, render_chunks_function(), render_template("cancel.bash")])


def parse_cancel_output(text: str, benchmarks: Sequence[str]) -> CancelAnswer:
    by_id: dict[str, str] = {}
    scancelled: list[str] = []
    missing, errors, left, done = [], [], False, False
    for parts in decode(text):
        if parts[0] == "SEEN" and len(parts) == 4:
            by_id[parts[2]] = parts[1]
        elif parts[0] == "NORUN":
            errors.append("no such run on this cluster")
        elif parts[0] == "BENCHES" and len(parts) == 2:
            benchmarks = parts[1].split()
        elif parts[0] == "SCANCEL" and len(parts) == 2 and JOB_ID_RE.match(parts[1]):
            scancelled.append(parts[1])
        elif parts[0] == "NOBENCH" and len(parts) == 2:
            missing.append(parts[1])
        elif parts[0] == "NOMARK" and len(parts) == 2:
            errors.append(f"{parts[1]}: could not write the cancel marker")
        elif parts[0] == "SQUEUE_FAILED" and len(parts) == 2:
            errors.append(f"squeue failed: {parts[1].strip()[:300]}")
        elif parts[0] == "LEFT":
            left = True
        elif parts[0] == "DONE":
            done = True
    if not done:
        errors.append("the cancel script did not finish")
    cancelled: dict[str, list[JobId]] = {b: [] for b in benchmarks if b not in missing}
    for job in scancelled:
        bench = by_id.get(job)
        if bench in cancelled and JobId(job) not in cancelled[bench]:
            cancelled[bench].append(JobId(job))
    return CancelAnswer(
        {b: tuple(ids) for b, ids in cancelled.items()}, tuple(missing), left, tuple(errors)
    )
