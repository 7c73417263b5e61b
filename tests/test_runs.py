"""The local run index as users manage it: ``runs``, ``runs forget``, ``runs prune``, no ghosts.

CLI flows run over the fake clusters of test_cli.py (``world``); the index helpers are tested
directly on a temporary folder.
"""

# The `world` fixture is imported from test_cli; each test naming it as a parameter is
# what pytest asks for, not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from test_cli import World, world  # noqa: F401 - the fixture, shared with test_cli

from remote_chain.client.index import IndexedCluster, IndexedRun, RunIndex
from remote_chain.client.runs import NEVER_CHECKED, last_state, parse_age, prune, run_json
from remote_chain.errors import ConfigError, ConnectError


def _rows(document: dict[str, object], key: str) -> list[Any]:
    """The JSON array at ``key``; its rows are ``Any`` as ``json.loads`` gives them."""
    rows = document[key]
    assert isinstance(rows, list)
    return rows


def _index(world: World) -> RunIndex:
    return RunIndex(world.tmp / "state" / "remote-chain" / "runs")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        *[("45s", 45), ("90m", 5400), ("12h", 43200), ("30d", 2592000), ("2w", 1209600)],
        *[("10", 600), ("1-00:00:00", 86400), ("2-12", 216000)],
    ],
)
def test_parse_age_reads_units_and_slurm_durations(text: str, seconds: int) -> None:
    """--older-than takes 45s/90m/12h/30d/2w and Slurm's duration forms (bare number: minutes)."""
    assert parse_age(text) == seconds


@pytest.mark.parametrize("text", ["", "3y", "-1d", "1.5d", "soon"])
def test_parse_age_rejects_garbage_naming_the_option(text: str) -> None:
    """A bad duration is a ConfigError naming --older-than."""
    with pytest.raises(ConfigError) as info:
        parse_age(text)
    assert info.value.field == "--older-than"


def test_prune_forgets_only_old_runs_and_keeps_undatable_ones(tmp_path: Path) -> None:
    """prune removes runs submitted before the cutoff; an unreadable date is never a reason."""
    index = RunIndex(tmp_path)
    now = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
    for run_id, created in [
        ("rc-old", (now - dt.timedelta(days=40)).isoformat()),
        ("rc-new", (now - dt.timedelta(days=1)).isoformat()),
        ("rc-odd", "yesterday"),
    ]:
        index.save(IndexedRun(run_id, created, {"eos": IndexedCluster("/w/x/eos", ("a",))}))
    removed = prune(index, 30 * 86400, now=now)
    assert [r.run_id for r in removed] == ["rc-old"]
    assert {r.run_id for r in index.recent(None)} == {"rc-new", "rc-odd"}


def test_old_index_entries_read_as_never_checked(tmp_path: Path) -> None:
    """An entry written before states were kept loads, with the state "not checked"."""
    (tmp_path / "rc-legacy.json").write_text(
        json.dumps(
            {
                "run_id": "rc-legacy",
                "created": "2026-11-01T00:00:00+00:00",
                "clusters": {"eos": {"run_dir": "/w/rc-legacy/eos", "benchmarks": ["gpqa"]}},
            }
        )
    )
    run = RunIndex(tmp_path).load("rc-legacy")
    assert run is not None
    assert last_state(run) == NEVER_CHECKED
    row = run_json(run)
    assert (row["clusters"], row["benchmarks"], row["checked"]) == (["eos"], ["gpqa"], None)


def test_an_entry_is_read_again_whenever_its_file_changed(tmp_path: Path) -> None:
    """The index keeps what it read or wrote while the file is the same; a hand edit in place
    (same inode, new time), another process's save (a new inode) or a removal is seen."""
    index = RunIndex(tmp_path)
    run = IndexedRun("rc-1", "2026-12-01", {"eos": IndexedCluster("/w/rc-1/eos", ("a",))})
    index.save(run)
    assert index.load("rc-1") is run  # what this process wrote, not parsed again
    path = tmp_path / "rc-1.json"
    doc = json.loads(path.read_text())
    doc["states"] = {"eos/a": "running"}
    with path.open("r+") as f:  # in place, as an editor that keeps the inode does
        f.write(json.dumps(doc))
        f.truncate()
    edited = index.load("rc-1")
    assert edited is not None
    assert edited.states == {"eos/a": "running"}
    assert index.load("rc-1") is edited
    other = RunIndex(tmp_path)  # another process
    other.save(IndexedRun("rc-1", "2026-12-01", states={"eos/a": "completed"}))
    again = index.load("rc-1")
    assert again is not None
    assert again.states == {"eos/a": "completed"}
    path.unlink()
    assert index.load("rc-1") is None
    index.save(run)
    assert index.forget("rc-1")
    assert index.load("rc-1") is None


def test_the_index_keeps_only_its_latest_entries(tmp_path: Path) -> None:
    """Listing many runs does not keep them all: the latest KEPT, the oldest read again."""
    index = RunIndex(tmp_path)
    runs = [IndexedRun(f"rc-{i}", "2026-12-01") for i in range(RunIndex.KEPT + 2)]
    for run in runs:
        index.save(run)
    assert index.load(runs[-1].run_id) is runs[-1]
    first = index.load(runs[0].run_id)
    assert first is not None
    assert first is not runs[0]
    assert first.run_id == runs[0].run_id


def test_last_state_is_one_word_or_counts() -> None:
    """All chains in one state show that state; mixed states show counts."""
    run = IndexedRun("rc-x", "", {}, {"eos/a": "running", "eos/b": "running"})
    assert last_state(run) == "running"
    mixed = IndexedRun("rc-x", "", {}, {"eos/a": "running", "dgx/a": "completed"})
    assert last_state(mixed) == "1 completed, 1 running"


def test_runs_lists_the_index_without_ssh(world: World) -> None:
    """runs --json lists id, when, clusters, benchmarks and the state status last saw: no SSH."""
    run_id = world.submit("eos", "dgx")["run_id"]
    connects = world.cluster("eos").connects
    (row,) = _rows(world.json("runs"), "runs")
    assert row["run_id"] == run_id
    assert row["clusters"] == ["dgx", "eos"]
    assert row["benchmarks"] == ["gpqa", "smoke"]
    assert row["state"] == NEVER_CHECKED
    assert world.cluster("eos").connects == connects
    world.json("status", str(run_id))
    (row,) = _rows(world.json("runs"), "runs")
    assert row["state"] == "pending"
    assert set(row["states"]) == {f"{c}/{b}" for c in ("eos", "dgx") for b in ("gpqa", "smoke")}
    human = world.invoke("runs")
    assert human.exit_code == 0
    assert str(run_id) in human.stdout
    assert "pending" in human.stdout


def test_runs_refresh_reads_the_clusters(world: World) -> None:
    """runs --refresh reads every listed run's state again, then lists it."""
    run_id = str(world.submit()["run_id"])
    eos = world.cluster("eos")
    for job_id in list(eos.queue()):
        eos.finish(job_id, "COMPLETED")
    before = eos.connects
    (row,) = _rows(world.json("runs", "--refresh"), "runs")
    assert eos.connects > before
    assert row["run_id"] == run_id
    assert row["checked"] is not None


def test_runs_forget_and_prune_touch_only_the_index(world: World) -> None:
    """forget removes named entries (exit 1 if one is unknown); prune by age; no remote change."""
    first = str(world.submit(extra=("--run-id", "rc-first"))["run_id"])
    second = str(world.submit(extra=("--run-id", "rc-second"))["run_id"])
    forgot = world.json("runs", "forget", first, "rc-nope", code=1)
    assert forgot == {"forgotten": [first], "not_found": ["rc-nope"]}
    assert (world.cluster("eos").workdir / first).is_dir()  # nothing remote is removed
    assert world.invoke("status", first).exit_code == 2  # no longer in the index
    assert world.json("runs", "prune", "--older-than", "30d") == {"forgotten": []}
    assert world.json("runs", "prune", "--older-than", "0s") == {"forgotten": [second]}
    assert world.json("runs")["runs"] == []
    bad = world.invoke("runs", "forget", "../../etc")
    assert bad.exit_code == 2


def test_a_submit_that_queued_nothing_is_not_recorded(world: World) -> None:
    """Every cluster unreachable: exit 3 and no index entry, so status never chases a ghost."""
    world.cluster("eos").refuse(ConnectError)
    result = world.invoke("submit", str(world.config), "--cluster", "eos", "--run-id", "rc-ghost")
    assert result.exit_code == 3
    assert _index(world).load("rc-ghost") is None
    assert world.json("runs")["runs"] == []


def test_an_unreachable_cluster_is_dropped_from_the_entry(world: World) -> None:
    """One cluster of two unreachable: the run is recorded with the cluster that queued jobs."""
    world.cluster("dgx").refuse(ConnectError)
    world.invoke("submit", str(world.config), "-c", "eos", "-c", "dgx", "--run-id", "rc-half")
    entry = _index(world).load("rc-half")
    assert entry is not None
    assert set(entry.clusters) == {"eos"}


def test_status_without_run_id_takes_a_limit(world: World) -> None:
    """status --limit N shows the N newest runs of the index."""
    for n in range(3):
        world.submit(extra=("--run-id", f"rc-2026110{n}T000000Z-aaaaa{n}"))
    document = world.json("status", "--limit", "2")
    ids = [r["run_id"] for r in _rows(document, "runs")]
    assert ids == ["rc-20261102T000000Z-aaaaa2", "rc-20261101T000000Z-aaaaa1"]
