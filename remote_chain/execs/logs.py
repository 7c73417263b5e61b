"""PURE: the remote exec of ``logs`` (logs.bash): one chunk of a job's log, and its parser."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from remote_chain.core.models import JOB_ID_RE, Executor, JobId
from remote_chain.execs.templates import render_template
from remote_chain.protocol.wire import decode

LOG_CHUNK = 4 << 20  # bytes of a log one exec returns at most


@dataclass(frozen=True)
class LogChunk:
    job_id: JobId | None
    live: bool
    size: int
    data: str
    problem: str | None = None


def render_logs_script(
    run_dir: str, benchmark: str, *, job_id: str | None, offset: int, executor: Executor
) -> str:
    head = [
        f"RC_RUN_DIR={shlex.quote(run_dir)}",
        f"RC_BENCH={shlex.quote(benchmark)}",
        f"RC_JOB={shlex.quote(job_id or '')}",
        f"RC_OFFSET={int(offset)}",
        f"RC_MAX={LOG_CHUNK}",
        f"RC_EXECUTOR={shlex.quote(executor)}",
    ]
    return "\n".join([*head, render_template("logs.bash")])


def parse_logs_output(text: str) -> LogChunk:
    records = decode(text)
    parts = records[0] if records else ("",)
    if parts[0] == "NOBENCH":
        return LogChunk(None, False, 0, "", "no such benchmark in this run")
    if parts[0] == "NOJOB":
        return LogChunk(None, False, 0, "", "no job has been recorded for this chain yet")
    if parts[0] != "LOG" or len(parts) != 5 or not JOB_ID_RE.match(parts[1]):
        return LogChunk(None, False, 0, "", "unexpected answer from the cluster")
    size = int(parts[3]) if parts[3].isdigit() else 0
    return LogChunk(JobId(parts[1]), parts[2] == "1", size, parts[4])
