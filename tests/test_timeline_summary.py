"""Look rather than read: ``status --timeline`` at 80 columns, and the CI summary for ``wait``.

The Mermaid gantt is validated by parsing it back: its sections, dates and bars equal the
jobs. The CLI flows run over the fake clusters of test_cli.py (``world``).
"""

# The `world` fixture is imported from test_cli; each test naming it as a parameter is
# what pytest asks for, not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from test_cli import World, world  # noqa: F401 - the fixture, shared with test_cli

from remote_chain.cli.summary import DATE_FORMAT, gantt, markdown, parse_gantt
from remote_chain.cli.timeline import BAR_CELLS, EMPTY, FULL, LINK_STYLES, bar, timeline_view
from remote_chain.core.chainstatus import ChainStatus, JobView
from remote_chain.core.models import ChainStateName, JobId
from remote_chain.core.results import ClusterFailure, StatusResult
from remote_chain.errors import ConnectError
from remote_chain.protocol.layout import time_limits

NOW = dt.datetime(2026, 11, 29, 23, 0, 0)


def _job(job_id: str, state: str, elapsed: int | None, start: str = "", end: str = "") -> JobView:
    return JobView(JobId(job_id), state, elapsed, "0:0", "None", start, end)


RESULT = StatusResult(
    "rc-20261129T200000Z-abc123",
    (
        ChainStatus(
            "eos",
            "rc-20261129T200000Z-abc123",
            "gpqa-long-benchmark-name",
            ChainStateName.RUNNING,
            (
                _job("1001", "TIMEOUT", 3600, "2026-11-29T20:00:00", "2026-11-29T21:00:00"),
                _job("1002", "PREEMPTED", 1800, "2026-11-29T21:00:05", "2026-11-29T21:30:05"),
                _job("1003", "NODE_FAIL", 60, "2026-11-29T21:31:00", "2026-11-29T21:32:00"),
                _job("1004", "FAILED", 10, "2026-11-29T21:33:00", "2026-11-29T21:33:10"),
                _job("1005", "RUNNING", 900, "2026-11-29T21:34:00", ""),
                _job("1006", "PENDING", None),
            ),
            accumulated_walltime_s=6370,
            infra_retries=1,
            time_limit_s=3600,
        ),
        ChainStatus(
            "dgx",
            "rc-20261129T200000Z-abc123",
            "smoke",
            ChainStateName.COMPLETED,
            (_job("77_1", "COMPLETED", 120, "2026-11-29T20:00:10", "2026-11-29T20:02:10"),),
            accumulated_walltime_s=120,
            infra_retries=0,
            time_limit_s=600,
        ),
    ),
    (ClusterFailure("draco", ConnectError("connection refused", host="draco.example")),),
)


def _render(renderable: object, width: int = 80) -> str:
    console = Console(file=io.StringIO(), width=width, color_system="truecolor", record=True)
    console.print(renderable)
    return console.export_text(styles=False)


def test_timeline_fits_80_columns_with_a_bar_per_link() -> None:
    """At 80 columns no line is wider; each chain shows every link's bar and budget share."""
    text = _render(timeline_view(RESULT))
    assert all(len(line) <= 80 for line in text.splitlines()), text
    # A row wraps only between links: no line starts with a link's label.
    assert not any(line.strip()[:1].isdigit() for line in text.splitlines()), text
    # Six links on eos (five ran), one on dgx, each a BAR_CELLS-wide bar.
    assert text.count(FULL) + text.count(EMPTY) >= 7 * BAR_CELLS
    for label in ("100%", "50%", "25%", "20%"):  # of the 3600 s / 600 s budgets
        assert label in text
    assert "eos/gpqa" in text
    assert "draco" in text  # an unreadable cluster is a row too
    assert "walltime (--time) used" in text


@pytest.mark.parametrize("state", ["TIMEOUT", "PREEMPTED", "FAILED", "COMPLETED", "RUNNING"])
def test_a_link_bar_is_coloured_by_how_it_ended(state: str) -> None:
    """Each end state has its own colour, and the bar's fill is the budget share used."""
    text = bar(_job("1", state, 1800), 3600, 0)
    assert {span.style for span in text.spans} == {LINK_STYLES[state]}
    assert text.plain == FULL * (BAR_CELLS // 2) + EMPTY * (BAR_CELLS - BAR_CELLS // 2) + "50%"


def test_colours_of_end_states_differ() -> None:
    """TIMEOUT, PREEMPTED, FAILED, COMPLETED and running are told apart by colour."""
    words = ["TIMEOUT", "PREEMPTED", "FAILED", "COMPLETED", "RUNNING"]
    assert len({LINK_STYLES[w] for w in words}) == len(words)


def test_without_a_budget_bars_are_relative_and_show_elapsed() -> None:
    """A run recorded before time_limit_s was kept: bars relative to the longest link."""
    text = bar(_job("1", "COMPLETED", 1800), None, 3600)
    assert text.plain == FULL * 3 + EMPTY * 3 + "00:30:00"


def test_markdown_table_lists_every_chain() -> None:
    """The summary's table has cluster, benchmark, state, jobs, walltime and retries."""
    text = markdown(RESULT, now=NOW)
    assert "| cluster | benchmark | state | jobs | walltime | retries |" in text
    assert "| dgx | smoke | completed | 1: 77_1 COMPLETED | 00:02:00 | 0 |" in text
    row = next(line for line in text.splitlines() if line.startswith("| eos |"))
    assert row.count("|") == 7
    assert "6: 1001 TIMEOUT, 1002 PREEMPTED" in row
    assert "**draco** could not be read" in text


def test_the_gantt_parses_back_to_the_jobs() -> None:
    """Every started job is one bar, in its chain's section, with its sacct Start and End."""
    block = gantt(RESULT, now=NOW)
    assert f"dateFormat {DATE_FORMAT}" in block
    tasks = parse_gantt(markdown(RESULT, now=NOW))
    expected = [
        (f"{c.cluster}/{c.benchmark}", j)
        for c in RESULT.chains
        for j in c.jobs
        if j.start  # the pending job has no bar
    ]
    assert len(tasks) == len(expected) == 6
    for task, (section, job) in zip(tasks, expected, strict=True):
        assert task.section == section
        assert task.name == f"{job.job_id} {job.state}"
        assert task.start == dt.datetime.fromisoformat(job.start)
        assert task.end == (dt.datetime.fromisoformat(job.end) if job.end else NOW)
    assert len({t.task_id for t in tasks}) == len(tasks)  # ids are unique
    tags = {t.name: t.tag for t in tasks}
    assert (tags["1004 FAILED"], tags["77_1 COMPLETED"], tags["1005 RUNNING"]) == (
        "crit",
        "done",
        "active",
    )


def _finish_with_times(world: World, cluster: str, job_id: str, start: str, end: str) -> None:
    """Finish a fake job, then give accounting real Start/End times (sacct's last line wins)."""
    fake = world.cluster(cluster)
    fake.finish(job_id, "COMPLETED", elapsed=90)
    with (fake.state / "accounting").open("a") as handle:
        handle.write(f"{job_id}|COMPLETED|90|0:0|None|{start}|{end}\n")


def test_wait_summary_file_and_github_step_summary(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wait --summary FILE appends the summary; $GITHUB_STEP_SUMMARY gets it too, once."""
    step = tmp_path / "step-summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    run_id = str(world.submit()["run_id"])
    starts = {}
    for n, job_id in enumerate(sorted(world.cluster("eos").queue())):
        start, end = f"2026-11-29T20:0{n}:00", f"2026-11-29T20:0{n}:30"
        starts[job_id] = (start, end)
        _finish_with_times(world, "eos", job_id, start, end)
    own = tmp_path / "summary.md"
    result = world.invoke("wait", run_id, "--summary", str(own), "--timeout", "30s")
    assert result.exit_code in (0, 1), result.stderr
    status = json.loads(world.invoke("status", run_id, "--json").stdout)
    for path in (own, step):
        text = path.read_text()
        assert text.count("```mermaid") == 1
        tasks = parse_gantt(text)
        assert {t.name.split()[0]: (t.start, t.end) for t in tasks} == {
            job["job_id"]: (
                dt.datetime.fromisoformat(job["start"]),
                dt.datetime.fromisoformat(job["end"]),
            )
            for chain in status["chains"]
            for job in chain["jobs"]
        }
        assert set(starts) <= {t.name.split()[0] for t in tasks}
    assert step.read_text().startswith("earlier step\n")  # appended, never overwritten


def test_status_timeline_from_the_cli(world: World) -> None:
    """status --timeline prints each chain as a row of link bars at 80 columns."""
    run_id = str(world.submit()["run_id"])
    result = world.invoke("status", run_id, "--timeline")
    assert result.exit_code == 0, result.stderr
    assert "eos/gpqa" in result.stdout
    assert FULL in result.stdout or EMPTY in result.stdout


def test_status_watch_timeline_redraws_until_the_chains_end(world: World) -> None:
    """status --watch --timeline draws the link bars; it returns once every chain has ended."""
    run_id = str(world.submit()["run_id"])
    eos = world.cluster("eos")
    for job_id in list(eos.queue()):
        eos.finish(job_id, "COMPLETED")
    result = world.invoke("status", run_id, "--watch", "--timeline")
    assert result.exit_code == 0, result.stderr
    assert "eos/gpqa" in result.stdout
    assert "walltime" in result.stdout  # the legend under the bars


def test_runs_recorded_before_time_limits_read_as_no_budget() -> None:
    """A run record without time_limit_s (older runs), or a half-written one, gives no budget."""
    old = json.dumps({"run_id": "rc-x", "chains": [{"benchmark": "gpqa", "first_job_id": "1"}]})
    new = json.dumps({"chains": [{"benchmark": "gpqa", "time_limit_s": 600}]})
    assert time_limits(old) == {}
    assert time_limits('{"run_id": "rc-x", "chains": [{"bench') == {}
    assert time_limits(None) == {}
    assert time_limits(new) == {"gpqa": 600}
