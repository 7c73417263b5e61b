"""What each flow reports from a cluster's answers (outcomes.py), without a cluster."""

from __future__ import annotations

import datetime as dt

from remote_chain.client.index import IndexedCluster, IndexedRun
from remote_chain.client.outcomes import (
    cancel_entries,
    per_run,
    planned,
    recent_targets,
    resumable,
    resume_entries,
    submissions,
)
from remote_chain.core.bundle import ChainPlan, ClusterBundle
from remote_chain.core.chainstatus import ChainStatus
from remote_chain.core.models import ChainStateName, JobId
from remote_chain.core.results import CancelEntry, ClusterFailure, ResumeEntry, Submission
from remote_chain.errors import RemoteError
from remote_chain.execs.cancel import CancelAnswer
from remote_chain.execs.resume import Plan, ResumeAnswer
from remote_chain.execs.submit import SubmitAnswer, Submitted

BUNDLE = ClusterBundle(
    "rc-1",
    "eos",
    "/w/rc-1/eos",
    "2026-01-01T00:00:00Z",
    "slurm",
    (
        ChainPlan("a", "/w/rc-1/eos/a", "rc-1:a", False),
        ChainPlan("b", "/w/rc-1/eos/b", "rc-1:b", True),
    ),
    (),
)


def test_a_dry_run_plans_each_chain_and_queues_none() -> None:
    """A dry run lists every chain's folder with no job id."""
    assert planned("eos", BUNDLE) == [
        Submission("eos", "a", None, "/w/rc-1/eos/a", None),
        Submission("eos", "b", None, "/w/rc-1/eos/b", None),
    ]


def test_a_chain_the_answer_leaves_out_is_an_error() -> None:
    """Each chain of the bundle is reported; one missing from the answer says so."""
    answer = SubmitAnswer(False, (Submitted("a", JobId("11"), None),))
    assert submissions("eos", BUNDLE, answer) == [
        Submission("eos", "a", "11", "/w/rc-1/eos/a", None),
        Submission("eos", "b", None, "/w/rc-1/eos/b", "no answer for this benchmark"),
    ]


def test_an_existing_run_reports_its_own_jobs_never_a_second() -> None:
    """A run already there reports the recorded first jobs, marked existing."""
    record: dict[str, object] = {
        "chains": [{"benchmark": "a", "first_job_id": "7", "remote_dir": "/w/a", "error": None}]
    }
    found = submissions("eos", BUNDLE, SubmitAnswer(True, record=record))
    assert found == [Submission("eos", "a", "7", "/w/a", None, existing=True)]
    incomplete = submissions("eos", BUNDLE, SubmitAnswer(True, record=None))
    assert [s.existing and s.job_id is None and s.error for s in incomplete] == [
        "run already exists here but its record is incomplete (submit in progress?)"
    ] * 2


def test_a_cancel_that_gave_up_says_so_on_every_chain() -> None:
    """Jobs still queued at the end are an error on each chain, missing ones their own."""
    answer = CancelAnswer({"a": (JobId("1"),)}, missing=("zz",), left=True)
    assert cancel_entries("eos", answer) == [
        CancelEntry("eos", "a", ("1",), "jobs were still queued when cancel gave up"),
        CancelEntry("eos", "zz", (), "no such benchmark in this run"),
    ]
    failed = CancelAnswer({}, errors=("scancel: denied",))
    assert cancel_entries("eos", failed) == [CancelEntry("eos", "", (), "scancel: denied")]


def _chain(bench: str, state: ChainStateName, cluster: str = "eos") -> ChainStatus:
    return ChainStatus(cluster, "rc-1", bench, state)


def test_only_failed_or_stopped_chains_resume() -> None:
    """Failed and stopped chains are wanted per cluster; any other is refused with its state."""
    wanted, refused = resumable(
        [
            _chain("a", ChainStateName.FAILED),
            _chain("b", ChainStateName.STOPPED),
            _chain("c", ChainStateName.RUNNING),
        ]
    )
    assert wanted == {"eos": {"a": ChainStateName.FAILED, "b": ChainStateName.STOPPED}}
    assert refused == [
        ResumeEntry("eos", "c", None, "chain is running; only failed or stopped chains resume")
    ]
    answer = ResumeAnswer({"a": JobId("12")}, {"b": "walltime cap reached"})
    assert resume_entries("eos", answer, Plan()) == [
        ResumeEntry("eos", "a", "12", None, None),
        ResumeEntry("eos", "b", None, "walltime cap reached"),
    ]


def test_recent_runs_read_each_cluster_once_and_split_back_per_run() -> None:
    """Targets group by cluster (filtered); results and failures go back to their runs."""
    line = "7|COMPLETED|1|0:0|None|2026-12-03T00:00:00|2026-12-03T00:00:01"
    runs = [
        IndexedRun("rc-1", "", {"eos": IndexedCluster("/w/rc-1/eos", ("a",))}),
        IndexedRun(
            "rc-2",
            "",
            {"eos": IndexedCluster("/w/rc-2/eos", ("a",))},
            final={"eos/a": line},
            final_read={"eos/a": "2026-12-03T00:00:00Z"},
        ),
    ]
    now = dt.datetime(2026, 12, 3, 0, 30, tzinfo=dt.UTC)
    targets = recent_targets(runs, [], now)
    assert [t.run_dir for t in targets["eos"]] == ["/w/rc-1/eos", "/w/rc-2/eos"]
    assert [t.final for t in targets["eos"]] == ["", line]
    later = recent_targets(runs, [], now + dt.timedelta(hours=1))  # stale: sacct asked again
    assert [t.final for t in later["eos"]] == ["", ""]
    assert recent_targets(runs, ["dgx"], now) == {}
    failure = ClusterFailure("eos", RemoteError("down", host="eos"))
    results = per_run(runs, {"eos": [_chain("a", ChainStateName.RUNNING)]}, [failure])
    assert [(r.run_id, len(r.chains), r.failures) for r in results] == [
        ("rc-1", 1, (failure,)),
        ("rc-2", 0, (failure,)),
    ]
