"""The user's Slurm job limits: sacctmgr output of 22.05 and 24.11, and sbatch's refusals."""

from __future__ import annotations

import pytest

from remote_chain.core.limits import (
    Limit,
    fit_problems,
    parse_assoc,
    parse_assoc_mgr,
    parse_qos,
    refusal_limit,
)

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


# `scontrol -o show assoc_mgr users=rcuser flags=assoc,qos` on the dev cluster (22.05.8) with
# MaxJobs=77 MaxSubmitJobs=4321 set on rcuser's association, recorded whole (one line per
# record, wrapped here); the QOS line of a QOS with per-user limits is 24.11's one-liner format
# (src/scontrol/info_assoc_mgr.c, _print_used_user_limit, the same in 22.05).
ASSOC_MGR = (
    "Welcome to the remote-chain dev cluster (noise line)\n"
    "Current Association Manager state\nAssociation Records\n"
    "ClusterName=local Account=root UserName= Partition= Priority=0 ID=1 MaxJobs= "
    "MaxJobsAccrue= MaxSubmitJobs=9(0) MaxWallPJ=\n"
    "ClusterName=local Account=rc UserName=rcuser(1001) Partition= Priority=0 ID=4 SharesRaw/No"
    "rm/Level/Factor=1/18446744073709551616.00/1/0.00 UsageRaw/Norm/Efctv=0.00/1.00/0.00 Parent"
    "Account= Lft=3 DefAssoc=Yes GrpJobs=N(0) GrpJobsAccrue=N(0) GrpSubmitJobs=N(0) GrpWall=N(0"
    ".00) GrpTRES=cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0),fs/disk=N(0),vmem=N(0),p"
    "ages=N(0) GrpTRESMins=cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0),fs/disk=N(0),vm"
    "em=N(0),pages=N(0) GrpTRESRunMins=cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0),fs/"
    "disk=N(0),vmem=N(0),pages=N(0) MaxJobs=77(0) MaxJobsAccrue= MaxSubmitJobs=4321(0) MaxWallP"
    "J= MaxTRESPJ= MaxTRESPN= MaxTRESMinsPJ= MinPrioThresh=\n"
    "QOS Records\n"
    "QOS=normal(1) UsageRaw=0.000000 GrpJobs=N(0) GrpJobsAccrue=N(0) GrpSubmitJobs=N(0) GrpWall"
    "=N(0.00) MaxWallPJ= MinPrioThresh=  MinTRESPJ= PreemptMode=OFF Priority=0 Account Limits=No "
    "Accounts User Limits=No Users\n"
    "QOS=long(2) UsageRaw=0.000000 GrpJobs=N(0) PreemptMode=OFF Priority=0 Account Limits=No "
    "Accounts User Limits= rcuser(1001)={MaxJobsPU=2(1) MaxJobsAccruePU=N(0) "
    "MaxSubmitJobsPU=6(3) MaxTRESPU=cpu=N(0)}\n"
)


def test_assoc_mgr_gives_the_users_limits() -> None:
    """slurmctld's cache: the user's association limits and its QOS per-user limits."""
    assert parse_assoc_mgr(ASSOC_MGR, "rcuser") == [
        Limit("MaxJobs", 77, "association rc/rcuser on local"),
        Limit("MaxSubmitJobs", 4321, "association rc/rcuser on local"),
        Limit("MaxJobsPU", 2, "QOS long"),
        Limit("MaxSubmitPU", 6, "QOS long"),
    ]
    assert parse_assoc_mgr(ASSOC_MGR, "someone") == []
    assert parse_assoc_mgr("garbage\nClusterName=x\n", "rcuser") == []
