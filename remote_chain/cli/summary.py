"""PURE: a run as Markdown for CI: a table of every chain and a Mermaid ``gantt`` of its links.

``wait --summary FILE`` appends it to FILE, and ``wait`` appends it to ``$GITHUB_STEP_SUMMARY``
when that is set (GitHub renders the Mermaid block as a picture). The gantt has one section per
chain and one bar per job that has started: sacct's Start to its End (a running job ends at the
time of the summary). Times are the cluster's local time, as sacct prints them.

``parse_gantt`` reads such a block back; the tests use it to check that the chart's dates and
bars equal the jobs.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from remote_chain.core.durations import format_duration

if TYPE_CHECKING:
    from remote_chain.core.chainstatus import ChainStatus, JobView
    from remote_chain.core.results import ClusterFailure, StatusResult

DATE_FORMAT = "YYYY-MM-DD HH:mm:ss"  # Mermaid's (dayjs) spelling of _STRFTIME
_STRFTIME = "%Y-%m-%d %H:%M:%S"
_SACCT_TIME = "%Y-%m-%dT%H:%M:%S"
# Mermaid task tags by how a job ended: done (grey), active (running), crit (red).
_TAGS = {
    "COMPLETED": "done",
    "RUNNING": "active",
    "COMPLETING": "active",
    "FAILED": "crit",
    "OUT_OF_MEMORY": "crit",
    "NODE_FAIL": "crit",
    "BOOT_FAIL": "crit",
    "DEADLINE": "crit",
}
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_]")
_UNSAFE_TEXT = re.compile(r"[:;#|\n\r`]")


@dataclass(frozen=True)
class GanttTask:
    """One bar of a gantt chart, as written and as read back."""

    section: str
    name: str
    tag: str
    task_id: str
    start: dt.datetime
    end: dt.datetime


def _parse_time(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(text, _SACCT_TIME)
    except ValueError:
        return None


def _cell(value: str) -> str:
    """Markdown-table safe: a ``|`` or newline would end the cell or the row."""
    return re.sub(r"[|\n\r]", " ", value).strip()


def _text(value: str) -> str:
    """Mermaid and Markdown-table safe: no ``:``, ``;``, ``#``, ``|`` or newlines."""
    return _UNSAFE_TEXT.sub(" ", value).strip()


def _jobs_cell(chain: ChainStatus) -> str:
    if not chain.jobs:
        return "-"
    return f"{len(chain.jobs)}: " + ", ".join(f"{j.job_id} {j.state}" for j in chain.jobs)


def gantt_tasks(result: StatusResult, *, now: dt.datetime) -> list[GanttTask]:
    """The bars of the chart: every job with a start time, per chain, in chain order."""
    tasks = []
    for chain in result.chains:
        section = _text(f"{chain.cluster}/{chain.benchmark}")
        for job in chain.jobs:
            task = _task(section, chain, job, now)
            if task is not None:
                tasks.append(task)
    return tasks


def _task(section: str, chain: ChainStatus, job: JobView, now: dt.datetime) -> GanttTask | None:
    start = _parse_time(job.start)
    if start is None:
        return None  # pending, or accounting has no start yet: no bar to draw
    end = _parse_time(job.end) or now
    end = max(end, start)
    word = job.state.split(" ", 1)[0]
    task_id = _UNSAFE_ID.sub("_", f"j_{chain.cluster}_{job.job_id}")
    return GanttTask(
        section, _text(f"{job.job_id} {job.state}"), _TAGS.get(word, ""), task_id, start, end
    )


def gantt(result: StatusResult, *, now: dt.datetime) -> str:
    """A Mermaid ``gantt`` block (fenced) of every chain's links."""
    lines = [
        "```mermaid",
        "gantt",
        f"    title run {_text(result.run_id)}",
        f"    dateFormat {DATE_FORMAT}",
        "    axisFormat %H:%M",
    ]
    section = None
    for task in gantt_tasks(result, now=now):
        if task.section != section:
            section = task.section
            lines.append(f"    section {section}")
        tags = ", ".join(t for t in (task.tag, task.task_id) if t)
        start, end = task.start.strftime(_STRFTIME), task.end.strftime(_STRFTIME)
        lines.append(f"    {task.name} :{tags}, {start}, {end}")
    lines.append("```")
    return "\n".join(lines)


def table(result: StatusResult) -> str:
    """The Markdown table: cluster, benchmark, state, jobs, walltime, retries per chain."""
    rows = [
        "| cluster | benchmark | state | jobs | walltime | retries |",
        "|---|---|---|---|---|---|",
    ]
    for chain in result.chains:
        walltime = chain.accumulated_walltime_s
        retries = chain.infra_retries
        rows.append(
            "| "
            + " | ".join(
                _cell(cell)
                for cell in (
                    chain.cluster,
                    chain.benchmark,
                    chain.state.value,
                    _jobs_cell(chain),
                    "-" if walltime is None else format_duration(walltime),
                    "-" if retries is None else str(retries),
                )
            )
            + " |"
        )
    return "\n".join(rows)


def _failures(failures: Sequence[ClusterFailure]) -> list[str]:
    return [f"- **{_cell(f.cluster)}** could not be read: {_cell(str(f.error))}" for f in failures]


def markdown(result: StatusResult, *, now: dt.datetime, timed_out: bool = False) -> str:
    """The whole summary: a heading, the table, unreadable clusters, the gantt."""
    counts: dict[str, int] = {}
    for chain in result.chains:
        counts[chain.state.value] = counts.get(chain.state.value, 0) + 1
    tally = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "no chains"
    parts = [
        f"## remote-chain run `{_text(result.run_id)}`",
        "",
        f"{tally}" + (" (wait timed out)" if timed_out else ""),
        "",
        table(result),
        "",
    ]
    if result.failures:
        parts += [*_failures(result.failures), ""]
    if any(True for _ in gantt_tasks(result, now=now)):
        parts += [gantt(result, now=now), ""]
    return "\n".join(parts)


_GANTT_TASK = re.compile(r"^\s{4}(?P<name>[^:]+?) :(?P<meta>[^\n]*)$")


def parse_gantt(text: str) -> list[GanttTask]:
    """The bars of the first Mermaid gantt block in ``text`` (the inverse of ``gantt``)."""
    match = re.search(r"```mermaid\ngantt\n(.*?)\n```", text, re.DOTALL)
    if match is None:
        return []
    tasks, section = [], ""
    for line in match.group(1).splitlines():
        stripped = line.strip()
        if stripped.startswith("section "):
            section = stripped.removeprefix("section ")
            continue
        if stripped.startswith(("title ", "dateFormat ", "axisFormat ")):
            if stripped.startswith("dateFormat ") and stripped != f"dateFormat {DATE_FORMAT}":
                raise ValueError(f"unexpected {stripped!r}")
            continue
        task = _GANTT_TASK.match(line)
        if task is None:
            raise ValueError(f"not a gantt task line: {line!r}")
        meta = [part.strip() for part in task.group("meta").split(",")]
        *tags, start, end = meta
        tag = tags[0] if len(tags) > 1 else ""  # [tag, id] or [id]
        tasks.append(
            GanttTask(
                section,
                task.group("name"),
                tag,
                tags[-1],
                dt.datetime.strptime(start, _STRFTIME),
                dt.datetime.strptime(end, _STRFTIME),
            )
        )
    return tasks
