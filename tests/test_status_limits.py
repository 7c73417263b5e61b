"""Each link's walltime, without the run record: submit keeps every chain's
time limit in the local index (``IndexedCluster.time_limits``, compact), and a status whose
Target carries them asks the exec not to send the record, which it read for nothing else
(gzipped and parsed on every poll). Without them (an entry of an
earlier release, ``--cluster`` from another machine) the record is sent and read as before.
Run by bash with quiet stub Slurm tools; the index and the lookup are pure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from localexec import run_script, stubs_on_path

from remote_chain.client.index import IndexedCluster, IndexedRun, RunIndex
from remote_chain.core.runstatus import statuses
from remote_chain.core.snapshot import Target
from remote_chain.execs.status import parse_status_output, render_status_script
from remote_chain.protocol.layout import EVERY, RECORD_FILE, compact_limits, limit_of

RUN_ID = "rc-20261203T000000Z-abcdef"
_QUIET = "#!/bin/sh\nexit 0\n"


def _run_dir(tmp: Path, limits: dict[str, int | None]) -> Path:
    run_dir = tmp / RUN_ID
    chains = []
    for bench, limit in limits.items():
        (run_dir / bench).mkdir(parents=True)
        (run_dir / bench / "job.sh").write_text("#!/bin/bash\n")
        chains.append({"benchmark": bench, "time_limit_s": limit})
    (run_dir / RECORD_FILE).write_text(json.dumps({"run_id": RUN_ID, "chains": chains}))
    return run_dir


def _limits_seen(tmp: Path, target: Target) -> tuple[dict[str, int | None], str | None]:
    """Each chain's time_limit_s as status derives it, and the record the exec sent."""
    env = stubs_on_path(tmp, {"squeue": _QUIET, "sacct": _QUIET})
    snap = parse_status_output(run_script(render_status_script([target]), env), [target])
    chains = statuses("c1", snap, "slurm")
    return {c.benchmark: c.time_limit_s for c in chains}, snap.runs[0].record


@pytest.mark.parametrize(
    "limits",
    [{"a": 600, "b": 600, "c": 600}, {"a": 600, "b": 3600, "c": None}, {"a": None}],
    ids=["one-for-all", "each-its-own", "none"],
)
def test_limits_from_the_index_give_what_the_record_gives_without_it(
    tmp_path: Path, limits: dict[str, int | None]
) -> None:
    """Time limits from the index give each chain the walltime the run record gives, and the exec
    then does not send the record."""
    run_dir = _run_dir(tmp_path, limits)
    from_record, record = _limits_seen(tmp_path, Target(RUN_ID, str(run_dir)))
    assert record is not None
    assert from_record == limits
    kept = compact_limits(limits)
    from_index, record = _limits_seen(tmp_path, Target(RUN_ID, str(run_dir), time_limits=kept))
    assert record is None  # the exec did not send it
    assert from_index == limits


def test_one_limit_for_every_chain_is_kept_in_a_few_bytes() -> None:
    """One limit shared by every chain is kept as a single entry, chains without a limit are left
    out, and limit_of reads both forms."""
    assert compact_limits({f"c{i:05d}": 600 for i in range(10_000)}) == {EVERY: 600}
    assert compact_limits({"a": 600, "b": None}) == {"a": 600}
    assert compact_limits({"a": None}) == {}
    assert limit_of({EVERY: 600}, "anything") == 600
    assert limit_of({"a": 60}, "b") is None


def test_the_index_keeps_the_limits_and_refuses_a_hand_edit_it_cannot_trust(
    tmp_path: Path,
) -> None:
    """The index keeps a cluster's time limits, and reads hand-edited or missing ones as none, so
    that the record is read instead."""
    index = RunIndex(tmp_path)
    cluster = IndexedCluster("/w/run/c1", ("a", "b"), "slurm", {EVERY: 600})
    index.save(IndexedRun(RUN_ID, "2026-12-03T00:00:00+00:00", {"c1": cluster}))
    loaded = index.load(RUN_ID)
    assert loaded is not None
    assert loaded.clusters["c1"].time_limits == {EVERY: 600}
    path = tmp_path / f"{RUN_ID}.json"
    for edited in ({"a": "600"}, {"a": -1}, {"a": True}, [600]):
        entry = json.loads(path.read_text())
        entry["clusters"]["c1"]["time_limits"] = edited
        path.write_text(json.dumps(entry))
        again = index.load(RUN_ID)
        assert again is not None
        assert again.clusters["c1"].time_limits is None  # the record is read instead
    entry = json.loads(path.read_text())
    del entry["clusters"]["c1"]["time_limits"]  # an entry of an earlier release
    path.write_text(json.dumps(entry))
    older = index.load(RUN_ID)
    assert older is not None
    assert older.clusters["c1"].time_limits is None
