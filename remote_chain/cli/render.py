"""Results as text for people: rich tables for stdout (``--json`` prints ``to_json()`` instead).

Only the CLI imports this module, and only inside a command: rich's table machinery is not
needed for ``--help``. Every function returns a renderable and prints nothing itself, so the
same view serves a one-off table and ``status --watch``'s live display.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from remote_chain.client.plan import describe_bundle
from remote_chain.core.durations import format_duration

if TYPE_CHECKING:
    from remote_chain.config import ClusterProfile
    from remote_chain.core.bundle import ClusterBundle
    from remote_chain.core.chainstatus import ChainStatus, JobView
    from remote_chain.core.results import (
        CancelResult,
        ClusterFailure,
        DoctorResult,
        ResumeResult,
        StatusResult,
        SubmitResult,
    )

CHAIN_STYLES = {
    "pending": "yellow",
    "running": "cyan",
    "completed": "green",
    "failed": "bold red",
    "cancelled": "magenta",
    "stopped": "yellow",
    "unknown": "dim",
}
# Job states by the first word sacct/squeue print; anything else is shown unstyled.
JOB_STYLES = {
    "COMPLETED": "green",
    "RUNNING": "cyan",
    "COMPLETING": "cyan",
    "PENDING": "yellow",
    "TIMEOUT": "yellow",
    "PREEMPTED": "yellow",
    "NODE_FAIL": "yellow",
    "CANCELLED": "magenta",
    "FAILED": "red",
    "OUT_OF_MEMORY": "red",
    "BOOT_FAIL": "red",
    "UNKNOWN": "dim",
}
NONE = "-"


def _table(title: str) -> Table:
    # No vertical rules and single spaces between columns: a status row fits 80 columns.
    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )


def _seconds(value: int | None) -> str:
    return NONE if value is None else format_duration(value)


def _jobs(jobs: Sequence[JobView]) -> Text:
    text = Text()
    for i, job in enumerate(jobs):
        if i:
            text.append(" ")
        text.append(f"{job.job_id}:")
        text.append(job.state, style=JOB_STYLES.get(job.state.split(" ", 1)[0], ""))
    return text or Text(NONE)


def _problems(chain: ChainStatus) -> Text:
    text = Text()
    if chain.error:
        text.append(chain.error, style="red")
    for warning in chain.warnings:
        text.append(("\n" if text else "") + warning, style="yellow")
    return text


def _failure_lines(failures: Sequence[ClusterFailure]) -> list[Text]:
    # Nothing: each failure is printed once, as the CLI's error line on stderr, naming
    # cluster, host, cause and fix; repeating it here would print it twice.
    del failures
    return []


def status_table(result: StatusResult) -> Table:
    """One run: a row per chain, then a row per cluster that could not be read."""
    table = _table(f"run {result.run_id}")
    table.add_column("cluster", overflow="fold")
    table.add_column("benchmark", overflow="fold")
    table.add_column("state", no_wrap=True)
    # Wide enough for the longest "id:STATE" word, so that folding happens between jobs.
    words = [f"{j.job_id}:{w}" for c in result.chains for j in c.jobs for w in j.state.split()]
    table.add_column("jobs", overflow="fold", min_width=max(map(len, words), default=4))
    table.add_column("walltime", justify="right", no_wrap=True)
    table.add_column("retries", justify="right", no_wrap=True)
    table.add_column("problems", overflow="fold", min_width=8)
    for chain in result.chains:
        state = chain.state.value
        table.add_row(
            chain.cluster,
            chain.benchmark,
            Text(state, style=CHAIN_STYLES.get(state, "")),
            _jobs(chain.jobs),
            _seconds(chain.accumulated_walltime_s),
            NONE if chain.infra_retries is None else str(chain.infra_retries),
            _problems(chain),
        )
    for failure in result.failures:
        # Its chains are unknown this time; the cause is the error line on stderr.
        table.add_row(
            failure.cluster,
            NONE,
            Text("unknown", style=CHAIN_STYLES.get("unknown", "")),
            NONE,
            NONE,
            NONE,
            Text("not read: see the error below", style="red"),
        )
    return table


def status_view(
    results: Sequence[StatusResult],
    view: Callable[[StatusResult], RenderableType] | None = None,
) -> RenderableType:
    """Several runs (``status`` without a run id): one table (or ``view``) each."""
    if not results:
        return Text(
            "no runs in the local index; name one: remote-chain status RUN_ID --cluster NAME"
        )
    return Group(*((view or status_table)(r) for r in results))


def state_summary(result: StatusResult) -> str:
    """``2 running, 1 completed`` for a progress line."""
    counts: dict[str, int] = {}
    for chain in result.chains:
        counts[chain.state.value] = counts.get(chain.state.value, 0) + 1
    parts = [f"{n} {state}" for state, n in sorted(counts.items())]
    if result.failures:
        parts.append(f"{len(result.failures)} cluster(s) unreadable")
    return ", ".join(parts) or "no chains yet"


def submit_view(result: SubmitResult, bundles: Sequence[str] = ()) -> RenderableType:
    """The jobs queued per cluster and benchmark; with ``--dry-run``, what would be sent."""
    title = f"run {result.run_id}" + (" (dry run: nothing sent)" if result.dry_run else "")
    table = _table(title)
    table.add_column("cluster", no_wrap=True)
    table.add_column("benchmark", no_wrap=True)
    table.add_column("job", no_wrap=True)
    table.add_column("remote dir", overflow="fold")
    table.add_column("error", overflow="fold")
    for sub in result.submissions:
        note = " (already submitted)" if sub.existing else ""
        table.add_row(
            sub.cluster,
            sub.benchmark,
            (sub.job_id or NONE) + note,
            sub.remote_dir,
            Text(sub.error or "", style="red"),
        )
    parts: list[RenderableType] = [table, *_failure_lines(result.failures)]
    parts += [Text(text) for text in bundles]
    if not result.dry_run and result.submissions:
        parts.append(Text(f"follow it: remote-chain wait {result.run_id}", style="dim"))
    return Group(*parts)


def describe_bundles(bundles: Sequence[ClusterBundle]) -> list[str]:

    return [describe_bundle(b) for b in bundles]


def cancel_view(result: CancelResult) -> RenderableType:
    table = _table(f"cancel {result.run_id}")
    table.add_column("cluster", no_wrap=True)
    table.add_column("benchmark", no_wrap=True)
    table.add_column("cancelled jobs", overflow="fold")
    table.add_column("error", overflow="fold")
    for entry in result.cancelled:
        table.add_row(
            entry.cluster,
            entry.benchmark or NONE,
            " ".join(entry.job_ids) or "none queued",
            Text(entry.error or "", style="red"),
        )
    return Group(table, *_failure_lines(result.failures))


def resume_view(result: ResumeResult) -> RenderableType:
    table = _table(f"resume {result.run_id}")
    table.add_column("cluster", no_wrap=True)
    table.add_column("benchmark", no_wrap=True)
    table.add_column("job", no_wrap=True)
    table.add_column("error / caps", overflow="fold")
    for entry in result.resumed:
        table.add_row(
            entry.cluster,
            entry.benchmark,
            entry.job_id or NONE,
            Text(entry.error, style="red") if entry.error else Text(_caps_text(entry.caps)),
        )
    return Group(table, *_failure_lines(result.failures))


def _caps_text(caps: dict[str, object] | None) -> str:
    """What resume counted and set, e.g. ``walltime 3720s (+120s counted); max_walltime 7200s``."""
    if not caps:
        return ""
    parts = [f"walltime {caps['accumulated_walltime_s']}s (+{caps['counted_walltime_s']}s counted)"]
    parts.append(f"retries {caps['infra_retries']}")
    for key in ("max_walltime_s", "max_retries"):
        if caps.get(key) is not None:
            parts.append(f"{key.removesuffix('_s')} {caps[key]}{'s' if key.endswith('_s') else ''}")
    return "; ".join(parts)


_LEVEL = {
    "ok": Text("ok", style="green"),
    "warn": Text("warn", style="bold yellow"),
    "fail": Text("FAIL", style="bold red"),
}


def doctor_view(result: DoctorResult) -> RenderableType:
    table = _table(f"doctor {result.cluster}")
    table.add_column("check", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("detail", overflow="fold")
    table.add_column("fix / what it means", overflow="fold")
    for check in result.checks:
        table.add_row(
            check.name,
            _LEVEL[check.level],
            check.detail,
            check.hint,
        )
    facts = result.facts
    if facts is None or facts.slurm_version is None:
        return table
    accounting = {True: "accounting on", False: "no accounting", None: "accounting unknown"}
    limits = ", ".join(f"{lim.name}={lim.value}" for lim in facts.limits) or "no job limits"
    summary = (
        f"{result.cluster}: Slurm {facts.slurm_version}, "
        f"{accounting[facts.accounting_enabled]}, {limits}, login shell {facts.login_shell}"
    )
    return Group(table, Text(summary, style="bold"))


def clusters_view(
    profiles: Sequence[ClusterProfile],
    searched: Sequence[str],
    broken: Sequence[tuple[str, Path, Exception]] = (),
) -> RenderableType:
    table = _table("cluster profiles")
    table.add_column("name", no_wrap=True)
    table.add_column("host", overflow="fold")
    table.add_column("workdir", overflow="fold")
    table.add_column("executor", no_wrap=True)
    table.add_column("transport", no_wrap=True)
    table.add_column("source", overflow="fold")
    for p in profiles:
        port = f":{p.port}" if p.port is not None else ""  # unset: the ssh config's Port
        host = f"{p.user + '@' if p.user else ''}{p.host}{port}"
        table.add_row(p.name, host, p.workdir, p.executor, p.transport, str(p.source))
    for name, path, error in broken:
        problem = Text(f"BROKEN: {error}", style="bold red")
        table.add_row(name, problem, "", "", "", str(path))
    note = Text("searched: " + ", ".join(searched), style="dim")
    if not profiles and not broken:
        return Group(Text("no cluster profiles found"), note)
    return Group(table, note)


def runs_view(rows: Sequence[dict[str, object]]) -> RenderableType:
    """``remote-chain runs``: one row per indexed run (rows are ``runs.run_json`` dicts)."""
    if not rows:
        return Text("no runs in the local index")
    table = _table("runs (local index)")
    table.add_column("run", no_wrap=True)
    table.add_column("submitted", no_wrap=True)
    table.add_column("clusters", overflow="fold")
    table.add_column("benchmarks", overflow="fold")
    table.add_column("last known state", overflow="fold")
    for row in rows:
        clusters = row.get("clusters")
        benches = row.get("benchmarks")
        state = str(row.get("state", ""))
        style = CHAIN_STYLES.get(state, "dim" if state == "not checked" else "")
        table.add_row(
            str(row["run_id"]),
            str(row.get("created") or NONE).replace("T", " ")[:19],
            ", ".join(map(str, clusters)) if isinstance(clusters, list) else NONE,
            ", ".join(map(str, benches)) if isinstance(benches, list) else NONE,
            Text(state, style=style),
        )
    return table
