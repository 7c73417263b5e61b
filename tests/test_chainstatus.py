"""A chain's state from its files, sacct and squeue: one case per way a chain can be."""

from __future__ import annotations

from dataclasses import replace

import pytest

from remote_chain.core.chainstatus import derive, parse_events
from remote_chain.core.models import ChainStateName, JobId, SacctRecord, SlurmState
from remote_chain.core.sacct import QueuedJob
from remote_chain.core.snapshot import ChainFiles, FileRead, Snapshot

S = SlurmState
NAME = "rc-1:gpqa"
DIR = "/w/rc-1/c/gpqa"


def files(
    chain: str = "",
    events: str = "",
    *,
    first: str = "10",
    walltime: str = "0",
    retries: str = "0",
    marker: bool = False,
) -> ChainFiles:
    reads = {
        "chain": FileRead("ok", chain) if chain else FileRead("missing"),
        "events": FileRead("ok", events) if events else FileRead("missing"),
        "first": FileRead("ok", first + "\n"),
        "walltime": FileRead("ok", walltime + "\n"),
        "retries": FileRead("ok", retries + "\n"),
    }
    return ChainFiles("rc-1", "gpqa", "/w/rc-1/c/gpqa", reads, marker)


def snap(
    sacct: dict[str, tuple[SlurmState, int | None]] | None = None,
    squeue: dict[str, SlurmState] | None = None,
    *,
    sacct_ok: bool = True,
    reason: str = "None",
) -> Snapshot:
    return Snapshot(
        runs=(),
        sacct={
            JobId(j): SacctRecord(JobId(j), s, by, elapsed_s=60, reason=reason)
            for j, (s, by) in (sacct or {}).items()
        },
        sacct_ok=sacct_ok,
        squeue={JobId(j): QueuedJob(s, "None", DIR, NAME) for j, s in (squeue or {}).items()},
    )


def ev(*lines: str) -> str:
    return "".join(f"{1000 + i} {line}\n" for i, line in enumerate(lines))


RAN_TIMEOUT = ev("10 decided start none none 0 0", "10 successor 11", "10 runner_start")

CASES = [
    pytest.param(files(), snap({}, {"10": S.PENDING}), ChainStateName.PENDING, id="first-queued"),
    pytest.param(
        files("10\n", ev("10 decided start none none 0 0", "10 successor 11")),
        snap({"10": (S.RUNNING, None)}, {"10": S.RUNNING, "11": S.PENDING}),
        ChainStateName.RUNNING,
        id="running-with-successor-waiting",
    ),
    pytest.param(
        files("10\n", RAN_TIMEOUT + ev("10 runner_exit 0", "10 successor_cancelled 11")),
        snap({"10": (S.COMPLETED, None), "11": (S.CANCELLED, 1001)}),
        ChainStateName.COMPLETED,
        id="completed-own-successor-cancelled",
    ),
    pytest.param(
        files("10\n", RAN_TIMEOUT),
        snap({"10": (S.TIMEOUT, None)}, {"11": S.PENDING}),
        ChainStateName.PENDING,
        id="timeout-successor-queued",
    ),
    pytest.param(
        files("10\n11\n", RAN_TIMEOUT + ev("11 decided stop_walltime 10 TIMEOUT 7200 0")),
        snap({"10": (S.TIMEOUT, None), "11": (S.COMPLETED, None)}),
        ChainStateName.STOPPED,
        id="walltime-stopped",
    ),
    pytest.param(
        files("10\n11\n", RAN_TIMEOUT + ev("11 decided exit_error 10 FAILED 60 4")),
        snap({"10": (S.FAILED, None), "11": (S.FAILED, None)}),
        ChainStateName.FAILED,
        id="retries-exhausted",
    ),
    pytest.param(
        files("10\n11\n", RAN_TIMEOUT + ev("11 decided stop_cancelled 10 CANCELLED 60 0")),
        snap({"10": (S.CANCELLED, 1001), "11": (S.COMPLETED, None)}),
        ChainStateName.CANCELLED,
        id="cancelled-by-user-seen-by-successor",
    ),
    pytest.param(
        files("10\n", RAN_TIMEOUT, marker=True),
        snap({"10": (S.CANCELLED, 1001), "11": (S.CANCELLED, 1001)}),
        ChainStateName.CANCELLED,
        id="cancelled-by-remote-chain",
    ),
    pytest.param(
        files("10\n", RAN_TIMEOUT),
        snap({"10": (S.TIMEOUT, None), "11": (S.CANCELLED, 1001)}),
        ChainStateName.CANCELLED,
        id="waiting-successor-cancelled-by-hand",
    ),
    pytest.param(
        # Status read the files while link 10 was ending (no runner_exit yet), then saw its
        # withdrawn successor CANCELLED while accounting still says 10 is running.
        files("10\n", RAN_TIMEOUT),
        snap({"10": (S.RUNNING, None), "11": (S.CANCELLED, 1001)}),
        ChainStateName.UNKNOWN,
        id="successor-withdrawn-by-a-link-still-ending",
    ),
    pytest.param(
        files("10\n", RAN_TIMEOUT),
        snap({"10": (S.TIMEOUT, None), "11": (S.NODE_FAIL, None)}),
        ChainStateName.FAILED,
        id="successor-died-before-prologue-broke",
    ),
    pytest.param(
        files("10\n", ev("10 decided start none none 0 0", "10 successor_failed bad partition")),
        snap({"10": (S.TIMEOUT, None)}),
        ChainStateName.FAILED,
        id="no-successor-could-be-queued",
    ),
    pytest.param(
        files("10\n", RAN_TIMEOUT), snap(sacct_ok=False), ChainStateName.UNKNOWN, id="acct-down"
    ),
    pytest.param(files(), snap({}), ChainStateName.UNKNOWN, id="just-submitted-not-visible"),
    pytest.param(
        files("10\n", RAN_TIMEOUT),
        snap({"10": (S.RUNNING, None)}),
        ChainStateName.UNKNOWN,
        id="stale-running-not-in-queue",
    ),
    pytest.param(
        files(walltime="12x"),
        snap({"10": (S.FAILED, None)}),
        ChainStateName.FAILED,
        id="corrupt-walltime",
    ),
]


@pytest.mark.parametrize(("chain_files", "snapshot", "state"), CASES)
def test_derive(chain_files: ChainFiles, snapshot: Snapshot, state: ChainStateName) -> None:
    """Each situation maps to one state; missing evidence is unknown, never done."""
    assert derive("c", chain_files, snapshot).state is state


@pytest.mark.parametrize(("chain_files", "snapshot", "state"), CASES)
def test_a_file_not_sent_is_a_missing_one(
    chain_files: ChainFiles, snapshot: Snapshot, state: ChainStateName
) -> None:
    """The exec sends only the files that exist (snapshot.parse_status_output): a kind absent
    from ``files`` derives exactly as one read as "missing", whole status alike."""
    sent = {k: r for k, r in chain_files.files.items() if r.status != "missing"}
    absent = replace(chain_files, files=sent)
    assert derive("c", absent, snapshot) == derive("c", chain_files, snapshot)
    assert derive("c", absent, snapshot).state is state


def test_jobs_list_the_whole_chain_in_order() -> None:
    """The job ids of the whole chain come back, successors included, oldest first."""
    st = derive(
        "c",
        files("10\n11\n", RAN_TIMEOUT + ev("11 decided resume 10 TIMEOUT 60 0", "11 successor 12")),
        snap(
            {"10": (S.TIMEOUT, None), "11": (S.RUNNING, None)}, {"11": S.RUNNING, "12": S.PENDING}
        ),
    )
    assert [(j.job_id, j.state) for j in st.jobs] == [
        ("10", "TIMEOUT"),
        ("11", "RUNNING"),
        ("12", "PENDING"),
    ]
    assert st.to_json()["jobs"] == [j.to_json() for j in st.jobs]


def test_successor_withdrawn_by_the_chain_is_not_listed() -> None:
    """The successor a finished job cancelled itself never ran: not part of the jobs list."""
    st = derive(
        "c",
        files("10\n", RAN_TIMEOUT + ev("10 runner_exit 0", "10 successor_cancelled 11")),
        snap({"10": (S.COMPLETED, None), "11": (S.CANCELLED, 1001)}),
    )
    assert st.state is ChainStateName.COMPLETED
    assert [j.job_id for j in st.jobs] == ["10"]


def test_corrupt_file_is_named_in_the_error() -> None:
    """Status reports which file is corrupt and how."""
    st = derive("c", files(chain="10\n1x\n", walltime="abc"), snap({"10": (S.FAILED, None)}))
    assert st.error is not None
    assert ".gym_job_chain: bad line '1x'" in st.error
    assert ".gym_accumulated_walltime: not a whole number" in st.error
    assert st.accumulated_walltime_s is None


def test_successor_failure_is_a_warning() -> None:
    """A failed successor submission is visible to status as a warning."""
    st = derive(
        "c",
        files("10\n", ev("10 decided start none none 0 0", "10 successor_failed no partition")),
        snap({"10": (S.RUNNING, None)}, {"10": S.RUNNING}),
    )
    assert st.state is ChainStateName.RUNNING
    assert st.warnings == ("job 10: could not queue a successor: no partition",)


def test_parse_events_skips_garbage() -> None:
    """Torn or foreign lines in the events file are skipped."""
    events = parse_events("1 10 decided start none\ngarbage\n2 10 runner_exit 0\n3 10")
    assert [(e.job_id, e.kind, e.args) for e in events] == [
        ("10", "decided", ("start", "none")),
        ("10", "runner_exit", ("0",)),
    ]


def test_successor_refused_by_a_submit_limit_names_the_limit() -> None:
    """status names the per-user limit when sbatch refused the successor on one."""
    refusal = (
        "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy "
        "(job submit limit, user's size and/or time limits)"
    )
    st = derive(
        "c",
        files("10\n", ev("10 decided start none none 0 0", f"10 successor_failed {refusal}")),
        snap({"10": (S.RUNNING, None)}, {"10": S.RUNNING}),
    )
    (warning,) = st.warnings
    assert warning.startswith("job 10: could not queue a successor (refused by a per-user")
    assert "MaxSubmitJobs" in warning
    assert refusal in warning


def test_the_prologues_limit_prefix_is_read() -> None:
    """The prologue's `limit=<name>` prefix in the event: status names that limit."""
    events = ev(
        "10 decided start none none 0 0",
        "10 successor_failed limit=QOSMaxSubmitJobPerUserLimit sbatch: error",
    )
    status = derive("c", files("10\n", events), snap({"10": (S.RUNNING, None)}, {"10": S.RUNNING}))
    assert status.warnings == (
        "job 10: could not queue a successor (refused by QOSMaxSubmitJobPerUserLimit):"
        " limit=QOSMaxSubmitJobPerUserLimit sbatch: error",
    )
