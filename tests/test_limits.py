"""The user's Slurm job limits: sacctmgr output of 22.05 and 24.11, and sbatch's refusals."""

from __future__ import annotations

import pytest

from remote_chain.limits import Limit, fit_problems, parse_assoc, parse_qos, refusal_limit

# Recorded on the dev cluster (Slurm 22.05.8), `sacctmgr -nP show assoc where user=rcuser
# format=Cluster,Account,User,Partition,MaxJobs,MaxSubmitJobs,QOS`, after the login banner;
# the slurmdbd is shared by the clusters local and local2.
ASSOC_2205 = """\
Welcome to the remote-chain dev cluster (noise line)
local|rc|rcuser||||normal
local2|rc|rcuser||||normal
"""
# The same query where limits are set (the format is the same in 24.11: sacctmgr -P prints
# the asked fields in order, `|`-separated, an unset limit empty): one per-partition row.
ASSOC_LIMITS = """\
local|rc|rcuser||4|10|normal,long
local|rc|rcuser|gpu||3|normal
local2|rc|rcuser||1|1|normal
"""
QOS = """\
normal||
long|2|6
other|1|1
"""

POLICY = (
    "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy "
    "(job submit limit, user's size and/or time limits)"
)


def test_no_limits_set_gives_none_and_the_qos_names() -> None:
    """Empty limit fields are no limits; the QOS names are collected once each."""
    assert parse_assoc(ASSOC_2205, cluster="local") == ([], ["normal"])
    assert parse_qos("normal||\n", {"normal"}) == []


def test_assoc_limits_of_this_cluster_only() -> None:
    """Rows of another cluster of a shared slurmdbd are skipped; each limit names its source."""
    limits, qos = parse_assoc(ASSOC_LIMITS, cluster="local")
    assert qos == ["normal", "long"]
    assert limits == [
        Limit("MaxSubmitJobs", 10, "association rc/rcuser on local"),
        Limit("MaxJobs", 4, "association rc/rcuser on local"),
        Limit("MaxSubmitJobs", 3, "association rc/rcuser partition gpu on local"),
    ]


def test_qos_limits_of_the_user_qos_only() -> None:
    """Per-user QOS limits (MaxSubmitPU, MaxJobsPU) of the QOS the user may use."""
    assert parse_qos(QOS, {"normal", "long"}) == [
        Limit("MaxSubmitPU", 6, "QOS long"),
        Limit("MaxJobsPU", 2, "QOS long"),
    ]


@pytest.mark.parametrize("garbage", ["", "garbage\n", "a|b\n", "|||||||\n", "x|y|z|w|v|u|t|s\n"])
def test_parsers_skip_noise(garbage: str) -> None:
    """Lines of another shape (banners, warnings, empty output) are skipped, never raised on."""
    assert parse_assoc(garbage)[0] == []
    assert parse_qos(garbage) == []


def test_a_run_that_cannot_fit_under_a_submit_limit() -> None:
    """3 resumable chains need 6 queue slots: over MaxSubmitJobs=5, under MaxSubmitPU=6."""
    limits = [
        Limit("MaxSubmitJobs", 5, "association a/u"),
        Limit("MaxSubmitPU", 6, "QOS q"),
        Limit("MaxJobs", 2, "association a/u"),
    ]
    problems = fit_problems(limits, benchmarks=3, resumable=3)
    assert len(problems) == 2
    assert problems[0].startswith("MaxSubmitJobs=5 (association a/u): the run needs up to 6 jobs")
    assert problems[1].startswith("MaxJobs=2 (association a/u): 3 chains cannot all run at once")
    assert fit_problems(limits[1:2], benchmarks=3, resumable=3) == []
    assert fit_problems(limits[1:2], benchmarks=3, resumable=3, queued=1) != []


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        (POLICY, "MaxSubmitJobs"),
        ("sbatch: error: QOSMaxSubmitJobPerUserLimit", "QOSMaxSubmitJobPerUserLimit"),
        ("job_submit/lua: AssocMaxSubmitJobLimit reached", "AssocMaxSubmitJobLimit"),
        (
            "sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying",
            "MaxJobCount",
        ),
    ],
)
def test_refusal_by_a_limit_is_named(text: str, limit: str) -> None:
    """sbatch errors caused by a job-count limit name it (or the limits it may be)."""
    named = refusal_limit(text)
    assert named is not None
    assert limit in named


@pytest.mark.parametrize(
    "text",
    [
        "sbatch: error: invalid partition specified: nope",
        "sbatch: error: Batch job submission failed: Job dependency problem",
        "",
    ],
)
def test_other_refusals_name_no_limit(text: str) -> None:
    """An sbatch error that is not a limit names none."""
    assert refusal_limit(text) is None
