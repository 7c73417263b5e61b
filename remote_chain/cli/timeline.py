"""``status --timeline``: each chain a row of its links, each link a bar (rich, 80 columns).

A link's bar is coloured by how it ended (TIMEOUT, PREEMPTED, FAILED, COMPLETED, running, ...)
and filled by the share of its walltime budget (``--time``) it used, with that share printed
beside it. A run recorded before the budget was kept (no ``time_limit_s``) fills the bars
relative to the longest link shown and prints the elapsed time instead.

Only the CLI imports this module, inside a command: rich is not needed for ``--help``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from remote_chain.core.durations import format_duration

if TYPE_CHECKING:
    from remote_chain.core.chainstatus import ChainStatus, JobView
    from remote_chain.core.results import StatusResult

BAR_CELLS = 6
FULL, EMPTY = "█", "░"
# How a link ended, by the first word of its state; anything else is shown dim.
LINK_STYLES = {
    "COMPLETED": "green",
    "RUNNING": "cyan",
    "COMPLETING": "cyan",
    "PENDING": "dim",
    "REQUEUED": "dim",
    "TIMEOUT": "yellow",
    "PREEMPTED": "blue",
    "NODE_FAIL": "magenta",
    "CANCELLED": "bright_black",
    "FAILED": "red",
    "OUT_OF_MEMORY": "red",
    "BOOT_FAIL": "red",
    "DEADLINE": "red",
}
LEGEND = ("COMPLETED", "RUNNING", "TIMEOUT", "PREEMPTED", "FAILED", "CANCELLED")
CHAIN_STYLES = {
    "running": "cyan",
    "completed": "green",
    "failed": "bold red",
    "stopped": "yellow",
    "cancelled": "magenta",
}


def link_word(job: JobView) -> str:
    """The state word a link is coloured by: ``CANCELLED by 1001`` is ``CANCELLED``."""
    return job.state.split(" ", 1)[0] or "UNKNOWN"


def used_share(job: JobView, time_limit_s: int | None, longest_s: int) -> float:
    """How much of the bar to fill, 0..1: of the walltime budget, else of the longest link."""
    elapsed = job.elapsed_s or 0
    scale = time_limit_s or longest_s
    if scale <= 0:
        return 0.0
    return min(1.0, elapsed / scale)


def bar(job: JobView, time_limit_s: int | None, longest_s: int) -> Text:
    """One link: ``█████░83%`` (or ``███░░░01:02:00`` without a budget), coloured."""
    share = used_share(job, time_limit_s, longest_s)
    filled = round(share * BAR_CELLS)
    if job.elapsed_s and filled == 0:
        filled = 1  # a link that ran at all shows
    style = LINK_STYLES.get(link_word(job), "dim")
    text = Text()
    text.append(FULL * filled, style=style)
    text.append(EMPTY * (BAR_CELLS - filled), style=style)
    if job.elapsed_s is None:
        label = "-"
    elif time_limit_s:
        label = f"{round(100 * job.elapsed_s / time_limit_s)}%"
    else:
        label = format_duration(job.elapsed_s)
    # No space inside a link: rich wraps a row only between links, never inside one.
    text.append(label)
    return text


def links(chain: ChainStatus, longest_s: int) -> Text:
    """A chain's links left to right, two spaces apart, so rich wraps between links."""
    text = Text()
    for i, job in enumerate(chain.jobs):
        if i:
            text.append("  ")
        text.append_text(bar(job, chain.time_limit_s, longest_s))
    return text or Text("no jobs yet", style="dim")


def timeline_view(result: StatusResult) -> RenderableType:
    """One run: a row per chain (cluster/benchmark, state, links), a legend below."""
    longest = max((j.elapsed_s or 0 for c in result.chains for j in c.jobs), default=0)
    table = Table(
        title=f"run {result.run_id}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("chain", overflow="fold", max_width=22)
    table.add_column("state", no_wrap=True)
    table.add_column("links (walltime used)", overflow="fold", ratio=1)
    for chain in result.chains:
        state = chain.state.value
        table.add_row(
            f"{chain.cluster}/{chain.benchmark}",
            Text(state, style=CHAIN_STYLES.get(state, "dim")),
            links(chain, longest),
        )
    for failure in result.failures:
        table.add_row(failure.cluster, Text("error", style="bold red"), Text(str(failure.error)))
    return Group(table, legend(bool(result.chains) and _has_budget(result.chains)))


def _has_budget(chains: Sequence[ChainStatus]) -> bool:
    return all(c.time_limit_s for c in chains)


def legend(budget: bool) -> Text:
    """The colour key, and what a bar's length means."""
    text = Text()
    for word in LEGEND:
        text.append(FULL, style=LINK_STYLES[word])
        text.append(f" {word.lower()}  ")
    text.append(
        "\nbar: share of the link's walltime (--time) used"
        if budget
        else "\nbar: elapsed, relative to the longest link shown",
        style="dim",
    )
    return text
