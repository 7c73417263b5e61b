"""PURE: ``resume`` that keeps the caps.

A resumed chain starts with no predecessor (the spec's FIRST row), so nothing of the links
before it would be counted by the engine. The client therefore, before it queues anything:

- counts the walltime of every job in ``.gym_job_chain`` that no link counted yet: a link
  counts its predecessor (the ``pred`` of its ``decided`` event), a link killed at the budget
  counts itself (``decided stop_walltime budget``), and a resume records what it counted
  (``counted_by_resume``); the rest, typically the last link, is summed over every run of the
  job in accounting (``sacct --duplicates``: a requeued job ran more than once), or, when
  accounting has no row, from the span of the job's own events (a lower bound);
- refuses a ``stopped`` chain unless ``--max-walltime`` raises the cap above the walltime
  used, and a ``failed`` resumable chain unless ``--max-retries N`` (N above the retries
  used) or ``--reset-retries`` grants retries; a cap the walltime already reached is refused
  too (the resumed job would stop at once);
- resumes a ``failed`` chain that stopped on the consecutive-unknown-links cap (accounting
  off or down, no retry spent) without a grant, and resets its counter
  (``.remote_chain_unknown_links``) to 0 with the other writes;
- writes the new caps into the chain's ``job.sh`` (the ``RC_MAX_WALLTIME=``/``RC_MAX_RETRIES=``
  constants) and into the run's record, under ``resumes``.

The remote side is two execs: a read (``render_facts_script``) and the act
(``render_resume_script``), which re-checks that nothing is queued and that the state files
are what the client read before it writes anything.
"""

from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from remote_chain.core.chainstatus import Event, parse_events
from remote_chain.core.models import JOB_ID_RE, Action, ChainStateName, JobId
from remote_chain.core.sacct import SACCT_FIELDS
from remote_chain.execs.templates import bash_array, render_template
from remote_chain.protocol.layout import (
    RETRIES_FILE,
    UNKNOWN_FILE,
    WALLTIME_FILE,
    EventKind,
    with_resume,
)
from remote_chain.protocol.wire import decode

# The event a resume appends per job whose walltime it counted: <time> <job> <kind> <seconds>.
COUNTED_EVENT = EventKind.COUNTED_BY_RESUME
_CAP = re.compile(r"^RC_(RESUMABLE|MAX_RETRIES|MAX_WALLTIME|MAX_UNKNOWN)='?(\d*)'?$")


@dataclass(frozen=True)
class ResumeCaps:
    """What the user asked of ``resume``: raised caps, granted retries (None: unchanged)."""

    max_walltime_s: int | None = None
    max_retries: int | None = None
    reset_retries: bool = False

    @property
    def given(self) -> bool:
        return self.max_walltime_s is not None or self.max_retries is not None or self.reset_retries


@dataclass(frozen=True)
class ChainFacts:
    """What the read exec found of one chain."""

    benchmark: str
    resumable: bool = False
    max_retries: int = 0
    max_walltime_s: int | None = None
    chain: str = ""
    events: str = ""
    walltime: str = ""  # the files' text as read, blanks removed ("" when missing)
    retries: str = ""
    unknown: str = ""  # consecutive links whose predecessor no source knew
    max_unknown_links: int | None = None  # None: a job.sh from before the cap


@dataclass(frozen=True)
class ResumeFacts:
    chains: dict[str, ChainFacts] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    sacct: str | None = None  # None: sacct failed or was not asked
    record: str | None = None
    record_sum: str = ""


@dataclass(frozen=True)
class Step:
    """The writes the act exec makes for one chain before it queues job.sh again."""

    benchmark: str
    old_walltime: str
    old_retries: str
    new_walltime: int
    new_retries: int
    counted: tuple[tuple[JobId, int], ...] = ()
    cap_walltime_s: int | None = None  # None: keep job.sh's
    cap_retries: int | None = None
    old_unknown: str = ""  # "" when the file is missing: nothing to reset

    def to_json(self) -> dict[str, object]:
        return {
            "benchmark": self.benchmark,
            "counted_walltime_s": sum(s for _, s in self.counted),
            "counted_jobs": [j for j, _ in self.counted],
            "accumulated_walltime_s": self.new_walltime,
            "infra_retries": self.new_retries,
            "max_walltime_s": self.cap_walltime_s,
            "max_retries": self.cap_retries,
            "unknown_links_reset": self.old_unknown not in ("", "0"),
        }


def render_facts_script(run_dir: str, benchmarks: Sequence[str]) -> str:
    head = [
        f"RC_RUN_DIR={shlex.quote(run_dir)}",
        "RC_BENCHES=(" + " ".join(shlex.quote(b) for b in benchmarks) + ")",
    ]
    return "\n".join([*head, render_template("resume_facts.bash")])


def _caps(text: str) -> dict[str, str]:
    out = {}
    for word in text.split():
        match = _CAP.match(word)
        if match:
            out[match.group(1)] = match.group(2)
    return out


def parse_facts(text: str) -> ResumeFacts:
    chains: dict[str, dict[str, object]] = {}
    missing: list[str] = []
    sacct: str | None = None
    record, record_sum = None, ""
    for parts in decode(text):
        if parts[0] == "RECORD" and len(parts) == 3:
            record, record_sum = (parts[2] or None), parts[1]
        elif parts[0] == "NOBENCH" and len(parts) == 2:
            missing.append(parts[1])
        elif parts[0] == "CAPS" and len(parts) == 3:
            caps = _caps(parts[2])
            wall, unknown = caps.get("MAX_WALLTIME", ""), caps.get("MAX_UNKNOWN", "")
            chains[parts[1]] = {
                "benchmark": parts[1],
                "resumable": caps.get("RESUMABLE") == "1",
                "max_retries": int(caps.get("MAX_RETRIES") or 0),
                "max_walltime_s": int(wall) if wall else None,
                "max_unknown_links": int(unknown) if unknown else None,
            }
        elif parts[0] == "FILE" and len(parts) == 4 and parts[1] in chains:
            content = parts[3]
            if parts[2] in ("walltime", "retries", "unknown"):
                content = "".join(content.split())
            chains[parts[1]][parts[2]] = content
        elif parts[0] == "SACCT" and len(parts) == 3 and parts[1] == "ok":
            sacct = parts[2]
    return ResumeFacts(
        {name: ChainFacts(**values) for name, values in chains.items()},  # type: ignore[arg-type]
        tuple(missing),
        sacct,
        record,
        record_sum,
    )


def uncounted_jobs(chain_ids: Sequence[JobId], events: Sequence[Event]) -> list[JobId]:
    """The jobs of the chain whose run time no link and no earlier resume counted."""
    counted: set[str] = set()
    for ev in events:
        if ev.kind == EventKind.DECIDED and len(ev.args) >= 2 and ev.args[0] != Action.YIELD:
            if ev.args[0] == Action.STOP_WALLTIME and ev.args[1] == "budget":
                counted.add(ev.job_id)  # killed at the budget: it counted its own time
            else:
                counted.add(ev.args[1])  # the predecessor it counted
        elif ev.kind == COUNTED_EVENT:
            counted.add(ev.job_id)
    return [j for j in chain_ids if j not in counted]


def elapsed_by_job(sacct: str) -> dict[str, int]:
    """Seconds per job over every run (``--duplicates``: a requeued job has a row per run)."""
    total: dict[str, int] = {}
    for line in sacct.splitlines():
        parts = line.rstrip("\r").split("|")
        if len(parts) != len(SACCT_FIELDS) or not JOB_ID_RE.match(parts[0]):
            continue
        if parts[2].strip().isdigit():
            total[parts[0]] = total.get(parts[0], 0) + int(parts[2])
    return total


def _event_span(events: Sequence[Event], job_id: str) -> int:
    times = [ev.time for ev in events if ev.job_id == job_id]
    return max(times) - min(times) if times else 0


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() and len(text) <= 15 else (0 if text == "" else None)


@dataclass(frozen=True)
class Plan:
    steps: dict[str, Step] = field(default_factory=dict)  # resumable chains, caps checked
    plain: tuple[str, ...] = ()  # not resumable: queued again as they are
    refused: dict[str, str] = field(default_factory=dict)


def plan_resume(states: dict[str, ChainStateName], facts: ResumeFacts, caps: ResumeCaps) -> Plan:
    """For each chain the client found failed or stopped: the writes, or why not."""
    steps: dict[str, Step] = {}
    plain: list[str] = []
    refused: dict[str, str] = dict.fromkeys(facts.missing, "no such benchmark in this run")
    elapsed = elapsed_by_job(facts.sacct) if facts.sacct is not None else {}
    for bench, state in states.items():
        chain = facts.chains.get(bench)
        if chain is None:
            refused.setdefault(bench, "no such benchmark in this run")
            continue
        if not chain.resumable:
            if caps.given:
                refused[bench] = (
                    "not resumable: --max-walltime, --max-retries and --reset-retries apply "
                    "to resumable benchmarks only"
                )
            else:
                plain.append(bench)
            continue
        outcome = _plan_one(chain, state, caps, elapsed)
        if isinstance(outcome, str):
            refused[bench] = outcome
        else:
            steps[bench] = outcome
    return Plan(steps, tuple(plain), refused)


def _plan_one(
    chain: ChainFacts, state: ChainStateName, caps: ResumeCaps, elapsed: dict[str, int]
) -> Step | str:
    walltime, retries, unknown = _int(chain.walltime), _int(chain.retries), _int(chain.unknown)
    if walltime is None or retries is None or unknown is None:
        return (
            f"corrupt state files ({WALLTIME_FILE} {chain.walltime[:20]!r}, {RETRIES_FILE} "
            f"{chain.retries[:20]!r}, {UNKNOWN_FILE} {chain.unknown[:20]!r}): fix or remove "
            "them first"
        )
    # Stopped on the unknown-links cap: no retry was spent (the retries cap is checked first),
    # so no grant is asked; the counter is reset below, or the first link would stop again.
    unknown_cap = chain.max_unknown_links is not None and unknown > chain.max_unknown_links
    ids = [
        JobId(line.strip()) for line in chain.chain.splitlines() if JOB_ID_RE.match(line.strip())
    ]
    events = parse_events(chain.events)
    counted = []
    for job in uncounted_jobs(ids, events):
        seconds = elapsed.get(job)
        counted.append((job, _event_span(events, job) if seconds is None else seconds))
    used = walltime + sum(s for _, s in counted)
    cap = caps.max_walltime_s if caps.max_walltime_s is not None else chain.max_walltime_s
    if state is ChainStateName.STOPPED and caps.max_walltime_s is None:
        return (
            f"stopped at its max_walltime ({used}s used of {chain.max_walltime_s}s): resume "
            "it with --max-walltime DURATION above that to raise the cap"
        )
    new_retries = 0 if caps.reset_retries else retries
    limit = caps.max_retries if caps.max_retries is not None else chain.max_retries
    if state is ChainStateName.FAILED and not unknown_cap:
        if caps.max_retries is None and not caps.reset_retries:
            return (
                f"failed after {retries} of {chain.max_retries} retries: grant retries with "
                "--max-retries N (N above the retries used) or --reset-retries"
            )
        if new_retries >= limit and not caps.reset_retries:
            return (
                f"--max-retries {limit} grants nothing: the chain already used {retries} "
                "retries; give more, or --reset-retries"
            )
    if cap is not None and used >= cap:
        return (
            f"the walltime used ({used}s, counting every job) already reaches max_walltime "
            f"{cap}s: the resumed job would stop at once; give a larger --max-walltime"
        )
    return Step(
        benchmark=chain.benchmark,
        old_walltime=chain.walltime,
        old_retries=chain.retries,
        new_walltime=used,
        new_retries=new_retries,
        counted=tuple(counted),
        cap_walltime_s=caps.max_walltime_s,
        cap_retries=caps.max_retries,
        old_unknown=chain.unknown,
    )


def updated_record(record: str | None, steps: Sequence[Step], *, at: str) -> str | None:
    """The run record with this resume's caps appended under ``resumes``; None if unreadable."""
    if not steps:
        return None
    return with_resume(record, {"at": at, "chains": [s.to_json() for s in steps]})


def act_head(steps: Sequence[Step], benchmarks: Sequence[str]) -> list[str]:
    """The per-benchmark arrays the act exec reads, in ``benchmarks`` order."""
    by = {s.benchmark: s for s in steps}

    def arr(name: str, values: Sequence[str]) -> str:
        return f"{name}=(" + " ".join(shlex.quote(v) for v in values) + ")"

    def col(get: object) -> list[str]:
        return [get(by[b]) if b in by else "" for b in benchmarks]  # type: ignore[operator]

    return [
        arr("RC_STEP", ["caps" if b in by else "plain" for b in benchmarks]),
        arr("RC_OLD_WALLTIME", col(lambda s: s.old_walltime)),
        arr("RC_OLD_RETRIES", col(lambda s: s.old_retries)),
        arr("RC_OLD_UNKNOWN", col(lambda s: s.old_unknown)),
        arr("RC_NEW_WALLTIME", col(lambda s: str(s.new_walltime))),
        arr("RC_NEW_RETRIES", col(lambda s: str(s.new_retries))),
        arr("RC_COUNTED", col(lambda s: " ".join(f"{j}:{n}" for j, n in s.counted))),
        arr(
            "RC_CAP_WALLTIME",
            col(lambda s: "keep" if s.cap_walltime_s is None else str(s.cap_walltime_s)),
        ),
        arr(
            "RC_CAP_RETRIES",
            col(lambda s: "keep" if s.cap_retries is None else str(s.cap_retries)),
        ),
    ]


def record_head(record: str | None, record_sum: str) -> list[str]:
    encoded = base64.b64encode(record.encode()).decode() if record else ""
    return [f"RC_RECORD={shlex.quote(encoded)}", f"RC_RECORD_SUM={shlex.quote(record_sum)}"]


# --- the resume exec (resume.bash): queue each chain's job.sh again --------------------------
@dataclass(frozen=True)
class ResumeAnswer:
    submitted: dict[str, JobId] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # benchmark -> why
    warnings: list[str] = field(default_factory=list)


def render_resume_script(
    run_id: str, run_dir: str, benchmarks: Sequence[str], *, steps: Sequence[str] = ()
) -> str:
    """``steps``: the per-benchmark writes (``act_head``); none: queue job.sh only."""
    head = [
        f"RC_RUN_ID={shlex.quote(run_id)}",
        f"RC_RUN_DIR={shlex.quote(run_dir)}",
        bash_array("RC_BENCHES", benchmarks),
        *(steps or [bash_array("RC_STEP", ["plain"] * len(benchmarks)), "RC_RECORD=''"]),
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
