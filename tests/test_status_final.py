"""A job's final sacct record is asked once: the local index keeps it, and
later status polls send its id in ``RC_FINAL_IDS`` so the exec leaves it out of ``sacct``,
unless squeue shows the job again (requeued): then squeue speaks. Run by bash with stub
``sacct``/``squeue`` on PATH that log what they are asked; the index and the merge are pure."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import pytest
from localexec import run_script, stubs_on_path

from remote_chain.client.index import FINAL_TTL, ISO_UTC, IndexedCluster, IndexedRun, RunIndex
from remote_chain.client.runs import note_status
from remote_chain.core.chainstatus import ChainStatus, JobView, derive, final_lines
from remote_chain.core.models import ChainStateName, JobId, SlurmState
from remote_chain.core.results import StatusResult
from remote_chain.core.sacct import parse_sacct
from remote_chain.core.snapshot import ChainFiles, FileRead, RunFiles, Snapshot, Target
from remote_chain.execs.status import parse_status_output, render_status_script
from remote_chain.job.script import CHAIN_FILE

RUN_ID = "rc-20261203T000000Z-abcdef"
CHAINS = 6
END = "2026-12-03T01:02:03"

# sacct answers COMPLETED for every id asked (reason "from-sacct"); squeue shows the ids of
# RC_STUB_LIVE (comma-separated) pending, in their chain's folder, or fails (RC_STUB_FAIL).
_SACCT = r"""#!/bin/bash
echo sacct >> "$RC_STUB_LOG"
while (( $# )); do [[ $1 == --jobs ]] && jobs=$2; shift; done
IFS=, read -r -a ids <<< "$jobs"
printf '%s\n' "${ids[@]}" >> "$RC_STUB_LOG.ids"
for id in "${ids[@]}"; do
  printf '%s|COMPLETED|5|0:0|from-sacct|2026-12-03T01:00:00|2026-12-03T01:00:05\n' "$id"
done
"""
_SQUEUE = r"""#!/bin/bash
echo squeue >> "$RC_STUB_LOG"
[[ -n ${RC_STUB_FAIL:-} ]] && { echo "squeue: error: no controller" >&2; exit 1; }
IFS=, read -r -a live <<< "${RC_STUB_LIVE:-}"
for id in "${live[@]}"; do
  i=$((id - 100000))
  printf '%s|PENDING|JobHeldUser|N/A|0:00|%s/chain%d|%s:chain%d\n' "$id" "$RC_RUN_DIR" "$i" \
    "__RUN_ID__" "$i"
done
"""


def _env(tmp: Path, run_dir: Path, **extra: str) -> dict[str, str]:
    stubs = {"sacct": _SACCT, "squeue": _SQUEUE.replace("__RUN_ID__", RUN_ID)}
    return stubs_on_path(tmp, stubs, RC_RUN_DIR=str(run_dir), **extra)


def _run_dir(tmp: Path) -> Path:
    run_dir = tmp / RUN_ID
    for i in range(CHAINS):
        bench = run_dir / f"chain{i}"
        bench.mkdir(parents=True)
        (bench / "job.sh").write_text("#!/bin/bash\n")
        (bench / CHAIN_FILE).write_text(f"{100000 + i}\n")
    return run_dir


def _poll(tmp: Path, target: Target, env: dict[str, str]) -> tuple[Snapshot, list[str], list[str]]:
    """One status exec: the snapshot, the tools called, and the ids sacct was asked of."""
    for log in (tmp / "calls.log", tmp / "calls.log.ids"):
        log.unlink(missing_ok=True)
    payload = run_script(render_status_script([target]), env)
    calls = (tmp / "calls.log").read_text().split()
    ids_log = tmp / "calls.log.ids"
    asked = ids_log.read_text().split() if ids_log.exists() else []
    return parse_status_output(payload, [target]), calls, asked


def _final(*ids: int, reason: str = "from-cache") -> str:
    return "\n".join(f"{i}|COMPLETED|7|0:0|{reason}|2026-12-03T00:00:00|{END}" for i in ids)


def test_final_jobs_are_not_asked_and_come_back_from_the_index(tmp_path: Path) -> None:
    """A job whose final line the index holds is left out of sacct's ids and comes back from the
    index, unless squeue shows it queued again."""
    run_dir = _run_dir(tmp_path)
    # 100000 queued; 100001 final; 100002 final but queued again (requeued): squeue's.
    env = _env(tmp_path, run_dir, RC_STUB_LIVE="100000,100002")
    target = Target(RUN_ID, str(run_dir), final=_final(100001, 100002))
    snap, calls, asked = _poll(tmp_path, target, env)
    assert calls == ["squeue", "sacct"]
    assert sorted(asked) == ["100003", "100004", "100005"]
    assert snap.sacct[JobId("100001")].reason == "from-cache"
    assert snap.sacct[JobId("100003")].reason == "from-sacct"
    assert JobId("100002") not in snap.sacct
    assert snap.squeue[JobId("100002")].state is SlurmState.PENDING


def test_no_sacct_at_all_when_every_ended_job_is_known(tmp_path: Path) -> None:
    """Held chains queued and the ended ones' records known: squeue alone. Also when squeue
    answers nothing (no job of ours queued)."""
    run_dir = _run_dir(tmp_path)
    env = _env(tmp_path, run_dir, RC_STUB_LIVE="100000,100001,100002")
    target = Target(RUN_ID, str(run_dir), final=_final(100003, 100004, 100005))
    snap, calls, _ = _poll(tmp_path, target, env)
    assert calls == ["squeue"]
    assert snap.sacct_ok
    assert {str(j) for j in snap.sacct} == {"100003", "100004", "100005"}

    env = _env(tmp_path, run_dir, RC_STUB_LIVE="")
    target = Target(RUN_ID, str(run_dir), final=_final(*range(100000, 100000 + CHAINS)))
    snap, calls, _ = _poll(tmp_path, target, env)
    assert calls == ["squeue"]
    assert len(snap.sacct) == CHAINS


def test_squeue_failing_sends_every_id_to_sacct_whose_answer_wins(tmp_path: Path) -> None:
    """Without squeue's answer a final job may be queued again: nothing is left out, and what
    sacct says now replaces what the index kept."""
    run_dir = _run_dir(tmp_path)
    env = _env(tmp_path, run_dir, RC_STUB_FAIL="1")
    target = Target(RUN_ID, str(run_dir), final=_final(100001))
    snap, calls, asked = _poll(tmp_path, target, env)
    assert calls == ["squeue", "sacct"]
    assert sorted(asked) == [str(100000 + i) for i in range(CHAINS)]
    assert snap.sacct[JobId("100001")].reason == "from-sacct"


def test_only_job_ids_leave_the_index_for_the_script() -> None:
    """A hand-edited index line that is no sacct line of a job id never reaches the shell."""
    bad = "1; touch /tmp/pwned|COMPLETED|1|0:0||2026-12-03T00:00:00|2026-12-03T00:00:01"
    script = render_status_script([Target(RUN_ID, "/w/r", final=f"{bad}\n{_final(42)}")])
    head = next(line for line in script.splitlines() if line.startswith("RC_FINAL_IDS="))
    assert head == "RC_FINAL_IDS=(42)"
    assert "pwned" not in script


def _chain_files(i: int, events: str = "") -> ChainFiles:
    files = {"chain": FileRead("ok", f"{100000 + i}\n")}
    if events:
        files["events"] = FileRead("ok", events)
    return ChainFiles(RUN_ID, f"chain{i}", f"/w/{RUN_ID}/chain{i}", files, False)


_RECORDS = "\n".join(
    [
        f"100000|COMPLETED|60|0:0|None|2026-12-03T00:00:00|{END}",
        f"100001|CANCELLED by 1234|3|0:15|None|2026-12-03T00:00:00|{END}",
        f"100002|TIMEOUT||0:0|TimeLimit|Unknown|{END}",
        f"100003|FAILED|9|1:0|NonZeroExitCode|2026-12-03T00:00:00|{END}",
        "100004|NODE_FAIL|9|0:0|None|2026-12-03T00:00:00|" + END,  # may be requeued: not kept
        "100005|COMPLETED|9|0:0|None|2026-12-03T00:00:00|Unknown",  # no End yet: not kept
    ]
)


def test_a_chain_derived_from_kept_lines_is_the_one_sacct_gave() -> None:
    """final_lines round-trips through parse_sacct: the status of every chain is the same
    whether its records came from sacct or from the index."""
    chains = tuple(_chain_files(i) for i in range(CHAINS))
    runs = (RunFiles(RUN_ID, f"/w/{RUN_ID}", True, None, None, chains),)
    from_sacct = Snapshot(runs, sacct=parse_sacct(_RECORDS))
    first = [derive("c", files, from_sacct) for files in chains]
    kept = "\n".join(filter(None, (final_lines(c) for c in first)))
    assert {line.split("|")[0] for line in kept.splitlines()} == {
        "100000",
        "100001",
        "100002",
        "100003",
    }
    from_index = Snapshot(
        runs,
        sacct=parse_sacct(kept)
        | {j: r for j, r in parse_sacct(_RECORDS).items() if j in {"100004", "100005"}},
    )
    assert [derive("c", files, from_index) for files in chains] == first
    assert first[1].jobs[0].state == "CANCELLED by 1234"


def _status(i: int, job: JobView) -> ChainStatus:
    return ChainStatus("c", RUN_ID, f"chain{i}", ChainStateName.COMPLETED, (job,))


def test_the_index_keeps_final_lines_per_chain_and_drops_a_requeued_one(tmp_path: Path) -> None:
    """note_status keeps each chain's final lines with when sacct gave them (renewed only past
    FINAL_TTL), and drops a chain's lines once its job is queued again."""
    index = RunIndex(tmp_path)
    clusters = {"c": IndexedCluster("/w/r", ("chain0", "chain1")), "d": IndexedCluster("/x", ())}
    index.save(IndexedRun(RUN_ID, "2026-12-03T00:00:00Z", clusters, final={"d/chain0": _final(7)}))
    done = JobView(JobId("100000"), "COMPLETED", 5, "0:0", "None", "2026-12-03T00:00:00", END)
    other = JobView(JobId("100001"), "FAILED", 5, "1:0", "None", "2026-12-03T00:00:00", END)
    note_status(index, [StatusResult(RUN_ID, (_status(0, done), _status(1, other)))])
    entry = index.load(RUN_ID)
    assert entry is not None
    assert set(entry.final) == {"c/chain0", "c/chain1", "d/chain0"}
    now = dt.datetime.now(dt.UTC)
    assert entry.final_of("c", ("chain1",), now).startswith("100001|FAILED|")
    assert entry.final_of("d", (), now) == ""  # no time it was read: stale
    first_read = entry.final_read["c/chain0"]

    # The same lines again within FINAL_TTL (taken from the index) keep their time; past it
    # (not sent, so sacct gave them again) they take the poll's.
    note_status(index, [StatusResult(RUN_ID, (_status(0, done),))])
    entry = index.load(RUN_ID)
    assert entry is not None
    assert entry.final_read["c/chain0"] == first_read
    old = (now - FINAL_TTL - dt.timedelta(seconds=5)).strftime(ISO_UTC)
    index.save(replace(entry, final_read={**entry.final_read, "c/chain0": old}))
    note_status(index, [StatusResult(RUN_ID, (_status(0, done),))])
    entry = index.load(RUN_ID)
    assert entry is not None
    assert entry.final_read["c/chain0"] != old
    assert "c/chain0" in entry.fresh(dt.datetime.now(dt.UTC))

    # chain0's job queued again (squeue's view: no End): the next poll asks sacct of it.
    requeued = JobView(JobId("100000"), "PENDING", 0, "", "BeginTime")
    note_status(index, [StatusResult(RUN_ID, (_status(0, requeued),))])
    entry = index.load(RUN_ID)
    assert entry is not None
    assert set(entry.final) == {"c/chain1", "d/chain0"}


@pytest.mark.parametrize("raw", [None, "garbage", {"c/x": 3}])
def test_an_index_entry_without_usable_final_lines_reads_as_none(raw: object) -> None:
    """An index entry whose ``final`` is missing or malformed has no final lines."""
    data: dict[str, object] = {"run_id": RUN_ID, "created": "", "clusters": {}}
    if raw is not None:
        data["final"] = raw
    assert IndexedRun.from_json(data).final == {}


@pytest.mark.parametrize(
    ("read", "fresh"),
    [
        ("2026-12-03T11:59:59Z", True),
        ("2026-12-03T11:00:01Z", True),
        ("2026-12-03T11:00:00Z", False),  # FINAL_TTL ago: asked again
        ("2026-12-03T12:00:01Z", False),  # in the future (a clock set back)
        ("2026-12-03T11:30:00", False),  # not of the form written
        ("2026-12-03T11:30:00Zjunk", False),
    ],
)
def test_final_lines_are_fresh_for_an_hour_from_when_sacct_gave_them(
    read: str, fresh: bool
) -> None:
    """Kept final lines are fresh for under an hour from when they were read, and stale when that
    time is in the future or not of the form written."""
    run = IndexedRun(RUN_ID, "", final={"c/a": _final(1)}, final_read={"c/a": read})
    now = dt.datetime(2026, 12, 3, 12, 0, 0, tzinfo=dt.UTC)
    assert (run.fresh(now) == {"c/a"}) is fresh
    assert bool(run.final_of("c", (), now)) is fresh


def test_an_end_read_before_is_still_known_when_this_polls_sacct_fails() -> None:
    """Accounting down: a chain whose last job's final record the index kept shows that end,
    whichever other chains the poll had to ask sacct of; any other chain is unknown, and so
    is a withdrawn successor whose predecessor's record is not known (never guessed)."""
    chains = (
        _chain_files(0),  # its job's end was read before
        _chain_files(1),  # never read
        # 100002 ran its prologue and queued 100007, which was cancelled: needs 100002's record
        _chain_files(2, "1 100002 successor 100007\n"),
    )
    runs = (RunFiles(RUN_ID, f"/w/{RUN_ID}", True, None, None, chains),)
    kept = parse_sacct(
        f"100000|FAILED|9|1:0|NonZeroExitCode|2026-12-03T00:00:00|{END}\n"
        f"100007|CANCELLED by 0|0|0:0|None|Unknown|{END}"
    )
    down = Snapshot(runs, sacct=dict(kept), sacct_ok=False, sacct_error="down", kept=kept)
    states = [derive("c", files, down).state for files in chains]
    assert states == [ChainStateName.FAILED, ChainStateName.UNKNOWN, ChainStateName.UNKNOWN]
    # The same records as this poll's own answer: the successor's chain is decided.
    up = Snapshot(runs, sacct=dict(kept) | parse_sacct(_final(100002)))
    assert derive("c", chains[2], up).state is ChainStateName.COMPLETED
