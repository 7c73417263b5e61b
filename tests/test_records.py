"""Every result record's JSON, from the one encoder (records.py): keys, order and values are
interface.md §4's contract, pinned here shape by shape."""

from __future__ import annotations

import json

import pytest

from remote_chain.core.chainstatus import ChainStatus, JobView
from remote_chain.core.models import ChainStateName, JobId
from remote_chain.core.records import Record, encode
from remote_chain.core.results import (
    CancelEntry,
    CancelResult,
    Check,
    ClusterFailure,
    DoctorFacts,
    DoctorResult,
    ResumeEntry,
    ResumeResult,
    StatusResult,
    Submission,
    SubmitResult,
)
from remote_chain.errors import ConfigError, RemoteError

FAILURE = ClusterFailure("eos", RemoteError("cannot connect", host="eos"))
FAILURE_JSON = {"cluster": "eos", "error": "eos: cannot connect", "kind": "RemoteError"}


def _ordered(document: object) -> str:
    return json.dumps(document)  # key order included


def test_cluster_failure_names_the_error_class() -> None:
    """A failure is its cluster, the error's message and the error's class name."""
    assert _ordered(FAILURE.to_json()) == _ordered(FAILURE_JSON)


def test_submit_result_leaves_out_the_bundles() -> None:
    """submit --json: run_id, submissions, errors, dry_run, warnings; bundles stay local."""
    sub = Submission("dgx", "gpqa", "123", "/w/rc-1/dgx/gpqa", None)
    result = SubmitResult("rc-1", (sub,), (FAILURE,), warnings=("dgx: near MaxSubmitJobs",))
    expected = {
        "run_id": "rc-1",
        "submissions": [
            {
                "cluster": "dgx",
                "benchmark": "gpqa",
                "job_id": "123",
                "remote_dir": "/w/rc-1/dgx/gpqa",
                "error": None,
                "existing": False,
            }
        ],
        "errors": [FAILURE_JSON],
        "dry_run": False,
        "warnings": ["dgx: near MaxSubmitJobs"],
    }
    assert _ordered(result.to_json()) == _ordered(expected)


def test_status_result_holds_each_chain_with_its_jobs() -> None:
    """status --json: each chain's state by value, its jobs, empty start/end as null."""
    job = JobView(JobId("123_4"), "RUNNING", 60, "0:0", "", start="2026-01-01T10:00:00")
    chain = ChainStatus(
        "eos", "rc-1", "gpqa", ChainStateName.RUNNING, (job,), 60, 0, "/w/g", None, ("w",), 3600
    )
    expected = {
        "run_id": "rc-1",
        "chains": [
            {
                "cluster": "eos",
                "benchmark": "gpqa",
                "state": "running",
                "jobs": [
                    {
                        "job_id": "123_4",
                        "state": "RUNNING",
                        "elapsed_s": 60,
                        "exit_code": "0:0",
                        "reason": "",
                        "start": "2026-01-01T10:00:00",
                        "end": None,
                    }
                ],
                "accumulated_walltime_s": 60,
                "infra_retries": 0,
                "remote_dir": "/w/g",
                "error": None,
                "warnings": ["w"],
                "time_limit_s": 3600,
            }
        ],
        "errors": [],
    }
    assert _ordered(StatusResult("rc-1", (chain,)).to_json()) == _ordered(expected)


def test_cancel_and_resume_results() -> None:
    """cancel --json lists job ids per chain; resume --json each chain's job and caps."""
    cancel = CancelResult("rc-1", (CancelEntry("eos", "gpqa", ("1", "2"), None),))
    assert _ordered(cancel.to_json()) == _ordered(
        {
            "run_id": "rc-1",
            "cancelled": [
                {"cluster": "eos", "benchmark": "gpqa", "job_ids": ["1", "2"], "error": None}
            ],
            "errors": [],
        }
    )
    caps = {"benchmark": "gpqa", "max_retries": 3}
    resume = ResumeResult("rc-1", (ResumeEntry("eos", "gpqa", "9", None, caps),), (FAILURE,))
    assert _ordered(resume.to_json()) == _ordered(
        {
            "run_id": "rc-1",
            "resumed": [
                {
                    "cluster": "eos",
                    "benchmark": "gpqa",
                    "job_id": "9",
                    "error": None,
                    "caps": caps,
                }
            ],
            "errors": [FAILURE_JSON],
        }
    )


@pytest.mark.parametrize("facts", [None, DoctorFacts(slurm_version="22.05.9")])
def test_doctor_result_flattens_its_facts_beside_the_checks(facts: DoctorFacts | None) -> None:
    """doctor --json: cluster, ok, checks, then the facts' keys (all null if unreached)."""
    check = Check("ssh", False, "refused", "check host and port")
    result = DoctorResult("eos", (check,), facts)
    expected = {
        "cluster": "eos",
        "ok": False,
        "checks": [
            {
                "check": "ssh",
                "ok": False,
                "level": "fail",
                "detail": "refused",
                "hint": "check host and port",
            }
        ],
        **(facts or DoctorFacts()).to_json(),
    }
    assert _ordered(result.to_json()) == _ordered(expected)


def test_encode_refuses_what_it_cannot_write() -> None:
    """A value with no JSON form is a TypeError naming its type, not a silent str()."""
    with pytest.raises(TypeError, match="object"):
        encode(object())
    assert encode(ConfigError("bad", source="x.yaml")) == "x.yaml: bad"
    assert isinstance(FAILURE, Record)
