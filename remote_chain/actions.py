"""PURE: the remote execs of cancel, resume, logs and doctor, and parsers of their answers."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from remote_chain._template import render_template
from remote_chain.layout import EventKind
from remote_chain.limits import ASSOC_FORMAT, QOS_FORMAT
from remote_chain.models import JOB_ID_RE, Executor, JobId
from remote_chain.records import Record, json_meta
from remote_chain.sacct import render_chunks_function
from remote_chain.wire import decode

# The event a resume appends per job whose walltime it counted: <time> <job> <kind> <seconds>.
COUNTED_EVENT = EventKind.COUNTED_BY_RESUME
LOG_CHUNK = 4 << 20  # bytes of a log one exec returns at most


def _array(name: str, values: Sequence[str]) -> str:
    return f"{name}=(" + " ".join(shlex.quote(v) for v in values) + ")"


# --- cancel ------------------------------------------------------------------------------------
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
        _array("RC_BENCHES", benchmarks),
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


# --- resume ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResumeAnswer:
    submitted: dict[str, JobId] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # benchmark -> why
    warnings: list[str] = field(default_factory=list)


def render_resume_script(
    run_id: str, run_dir: str, benchmarks: Sequence[str], *, steps: Sequence[str] = ()
) -> str:
    """``steps``: the per-benchmark writes (``resumecaps.act_head``); none: queue job.sh only."""
    head = [
        f"RC_RUN_ID={shlex.quote(run_id)}",
        f"RC_RUN_DIR={shlex.quote(run_dir)}",
        _array("RC_BENCHES", benchmarks),
        *(steps or [_array("RC_STEP", ["plain"] * len(benchmarks)), "RC_RECORD=''"]),
    ]
    return "\n".join([*head, render_template("resume.bash")])


def parse_resume_output(text: str) -> ResumeAnswer:
    answer = ResumeAnswer()
    for parts in decode(text):
        if parts[0] == "SUBMITTED" and len(parts) == 3 and JOB_ID_RE.match(parts[2]):
            answer.submitted[parts[1]] = JobId(parts[2])
        elif parts[0] == "LIVE" and len(parts) == 3:
            answer.refused[parts[1]] = f"still queued: job {parts[2].strip()}"
        elif parts[0] == "NOBENCH" and len(parts) == 2:
            answer.refused[parts[1]] = "no such benchmark in this run"
        elif parts[0] == "FAILED" and len(parts) == 3:
            answer.refused[parts[1]] = parts[2].strip()[:500] or "sbatch failed"
        elif parts[0] == "CHANGED" and len(parts) == 2:
            answer.refused[parts[1]] = "its state files changed while resuming: try again"
        elif parts[0] == "NOSECRETS" and len(parts) == 2:
            answer.refused[parts[1]] = (
                "its secrets were removed when the chain ended: submit it again to send them"
            )
        elif parts[0] == "NORECORD":
            answer.warnings.append("the run record changed meanwhile: the new caps are not in it")
    return answer


# --- logs --------------------------------------------------------------------------------------
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


# --- doctor ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Check(Record):
    JSON_KEYS = ("name", "ok", "level", "detail", "hint")

    name: str = field(metadata=json_meta(key="check"))
    ok: bool
    detail: str
    hint: str = ""  # the fix of a failed check, or what a passed one means for runs
    warn: bool = False  # passed, but it limits what runs can do here

    @property
    def level(self) -> str:
        return "fail" if not self.ok else "warn" if self.warn else "ok"


HINTS = {
    "command": "load Slurm in your login environment (e.g. `module load slurm` in ~/.bash_profile)",
    "accounting": "sacct must answer: ask the admins whether slurmdbd accounting is enabled",
    "partition": "set [slurm] partition in the profile to one `sinfo -s` lists",
    "workdir": "set `workdir` in the profile to a folder you can write on the cluster",
}


def render_doctor_script(
    *, workdir: str, partition: str | None, executor: Executor, sbatch_args: Sequence[str] = ()
) -> str:
    """``sbatch_args``: the profile's own sbatch options, for the ``--test-only`` probes."""
    head = [
        f"RC_WORKDIR={shlex.quote(workdir)}",
        f"RC_PARTITION={shlex.quote(partition or '')}",
        f"RC_EXECUTOR={shlex.quote(executor)}",
        _array("RC_SBATCH", sbatch_args),
        f"RC_ASSOC_FORMAT={','.join(ASSOC_FORMAT)}",
        f"RC_QOS_FORMAT={','.join(QOS_FORMAT)}",
    ]
    return "\n".join([*head, render_template("doctor.bash")])


def parse_doctor_output(text: str) -> list[Check]:
    checks = []
    for parts in decode(text):
        if parts[0] == "CHECK" and len(parts) == 4:
            ok = parts[2] == "ok"
            family = parts[1].split(":", 1)[0]
            hint = "" if ok else HINTS.get(family, "")
            checks.append(Check(parts[1], ok, parts[3].strip()[:500], hint))
    return checks
