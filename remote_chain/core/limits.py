"""PURE: the user's Slurm job limits, as ``sacctmgr`` reports them and as ``sbatch`` refuses.

A chain holds a pending successor beside each running link, so a run of N resumable
benchmarks keeps up to 2N jobs in the queue (N plain ones keep N). Slurm refuses a submission
over ``MaxSubmitJobs`` (association) or ``MaxSubmitPU`` (QOS); over ``MaxJobs``/``MaxJobsPU``
jobs are accepted and wait (reason ``AssocMaxJobsLimit``/``QOSMaxJobsPerUserLimit``).

``sacctmgr -nP`` prints ``|``-separated fields in the order asked, an unset limit as an empty
field; the field names used here are the same in Slurm 22.05 and 24.11
(``src/sacctmgr/common.c``). A refused ``sbatch`` prints only Slurm's generic
``Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)``
(``ESLURM_ACCOUNTING_POLICY``, unchanged 22.05..24.11); the precise limit is in slurmctld's
log, not in the reply, so ``refusal_limit`` names what the text allows and no more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from remote_chain.core.records import Record, json_meta
from remote_chain.protocol.wire import decode

# sacctmgr formats asked by doctor.bash; the parsers below read exactly these columns.
ASSOC_FORMAT = ("Cluster", "Account", "User", "Partition", "MaxJobs", "MaxSubmitJobs", "QOS")
QOS_FORMAT = ("Name", "MaxJobsPU", "MaxSubmitPU")

# Slurm's own names of the per-user/per-account job-count limits (job_state_reason strings of
# 22.05 and 24.11). A site's job_submit plugin or a wrapper may print them in sbatch's error.
LIMIT_REASONS = (
    "QOSMaxSubmitJobPerUserLimit",
    "QOSMaxSubmitJobPerAccountLimit",
    "AssocMaxSubmitJobLimit",
    "AssocGrpSubmitJobsLimit",
    "QOSGrpSubmitJobsLimit",
    "QOSMaxJobsPerUserLimit",
    "QOSMaxJobsPerAccountLimit",
    "AssocMaxJobsLimit",
    "AssocGrpJobsLimit",
    "QOSGrpJobsLimit",
    "MaxSubmitJobs",
    "MaxSubmitPU",
    "MaxJobs",
)
ACCOUNTING_POLICY = "Job violates accounting/QOS policy"
_REASON = re.compile(r"\b(" + "|".join(LIMIT_REASONS) + r")\b")
# slurmctld's MaxJobCount (the whole queue is full): sbatch retries, then fails with EAGAIN.
_QUEUE_FULL = re.compile(r"temporarily unable to accept job|MaxJobCount", re.IGNORECASE)
_GENERIC = (
    "a per-user submit limit (MaxSubmitJobs of the association or MaxSubmitPU of the QOS; "
    "Slurm's reply does not say which, `remote-chain doctor` shows the limits)"
)


def refusal_limit(text: str) -> str | None:
    """The limit an ``sbatch`` error names or implies, or None when it is not a limit.

    >>> refusal_limit("sbatch: error: AssocMaxSubmitJobLimit")
    'AssocMaxSubmitJobLimit'
    """
    match = _REASON.search(text)
    if match:
        return match.group(1)
    if ACCOUNTING_POLICY in text:
        return _GENERIC
    if _QUEUE_FULL.search(text):
        return "the cluster's MaxJobCount (slurmctld's queue is full)"
    return None


@dataclass(frozen=True)
class Limit(Record):
    """One reported job-count limit of the user, and where Slurm keeps it."""

    # Slurm's field: MaxSubmitJobs, MaxJobs, MaxSubmitPU, MaxJobsPU ("limit" in JSON).
    name: str = field(metadata=json_meta(key="limit"))
    value: int
    source: str  # e.g. "association rc/rcuser on local", "QOS normal"

    @property
    def refuses(self) -> bool:
        """Over a submit limit sbatch is refused; over a run limit jobs only wait."""
        return "Submit" in self.name


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def parse_assoc(text: str, *, cluster: str | None = None) -> tuple[list[Limit], list[str]]:
    """``sacctmgr -nP show assoc where user=U format=ASSOC_FORMAT``: limits and QOS names.

    Rows of other clusters of a shared slurmdbd are skipped when ``cluster`` is known; lines
    of another shape (login noise, a warning) are skipped.
    """
    limits: list[Limit] = []
    qos: list[str] = []
    for line in text.splitlines():
        parts = line.rstrip("\r").split("|")
        if len(parts) != len(ASSOC_FORMAT):
            continue
        row = dict(zip(ASSOC_FORMAT, parts, strict=True))
        if cluster and row["Cluster"] and row["Cluster"] != cluster:
            continue
        where = f"association {row['Account']}/{row['User']}"
        where += f" partition {row['Partition']}" if row["Partition"] else ""
        where += f" on {row['Cluster']}" if row["Cluster"] else ""
        for name in ("MaxSubmitJobs", "MaxJobs"):
            value = _int(row[name])
            if value is not None:
                limits.append(Limit(name, value, where))
        qos += [q for q in row["QOS"].split(",") if q and q not in qos]
    return limits, qos


def parse_qos(text: str, names: set[str] | None = None) -> list[Limit]:
    """``sacctmgr -nP show qos format=QOS_FORMAT``: per-user limits of the QOS in ``names``."""
    limits: list[Limit] = []
    for line in text.splitlines():
        parts = line.rstrip("\r").split("|")
        if len(parts) != len(QOS_FORMAT) or not parts[0]:
            continue
        row = dict(zip(QOS_FORMAT, parts, strict=True))
        if names is not None and row["Name"] not in names:
            continue
        for name in ("MaxSubmitPU", "MaxJobsPU"):
            value = _int(row[name])
            if value is not None:
                limits.append(Limit(name, value, f"QOS {row['Name']}"))
    return limits


def fit_problems(
    limits: list[Limit], *, benchmarks: int, resumable: int, queued: int = 0
) -> list[str]:
    """Why a run cannot fit under each reported limit (empty: it fits).

    Submit limits count every queued job: up to two per resumable chain (a running link and
    its pending successor), one per plain benchmark, beside the ``queued`` jobs already
    there. Run limits count running jobs: one per chain.
    """
    problems = []
    for limit in limits:
        if limit.refuses:
            needed = benchmarks + resumable
            if queued + needed <= limit.value:
                continue
            problems.append(
                f"{limit.name}={limit.value} ({limit.source}): the run needs up to {needed} jobs "
                f"in the queue beside the {queued} already there (a resumable chain holds a "
                "pending successor beside each running link); sbatch will refuse the rest and "
                "a chain whose successor is refused breaks"
            )
        elif benchmarks > limit.value:
            problems.append(
                f"{limit.name}={limit.value} ({limit.source}): {benchmarks} chains cannot all "
                "run at once; the others wait in the queue"
            )
    return problems


_ASSOC_LIMIT = re.compile(r"\b(MaxJobs|MaxSubmitJobs)=(\d+)\(")
_QOS_USER_LIMIT = re.compile(r"\b(MaxJobsPU|MaxSubmitJobsPU)=(\d+)\(")
_QOS_NAME = re.compile(r"^QOS=([^\s(]+)\(")


def parse_assoc_mgr(text: str, user: str) -> list[Limit]:
    """``scontrol -o show assoc_mgr users=U flags=assoc,qos``: the user's job-count limits.

    One record per line (``-o``), the same in 22.05 and 24.11
    (``src/scontrol/info_assoc_mgr.c``): ``ClusterName=c Account=a UserName=u(uid) ...
    MaxJobs=77(0) MaxSubmitJobs=4321(0)`` (limit(used); an unset limit is ``MaxJobs=``), and
    ``QOS=q(id) ... User Limits={ u(uid)={MaxJobsPU=N(0) ... MaxSubmitJobsPU=5(1) ...}}``
    (``N``: none). slurmctld lists a QOS's per-user limits only for users with a usage record
    in it; doctor's sacctmgr view is the complete one.
    """
    limits: list[Limit] = []
    for line in text.splitlines():
        if line.startswith("ClusterName=") and f" UserName={user}(" in line:
            fields = dict(re.findall(r"\b(ClusterName|Account|Partition)=(\S*)", line))
            where = f"association {fields.get('Account', '')}/{user}"
            where += f" partition {fields['Partition']}" if fields.get("Partition") else ""
            where += f" on {fields['ClusterName']}" if fields.get("ClusterName") else ""
            for name, value in _ASSOC_LIMIT.findall(line):
                limits.append(Limit(name, int(value), where))
        elif (match := _QOS_NAME.match(line)) and f" {user}(" in line:
            mine = line.split(f" {user}(", 1)[1].split("}", 1)[0]
            for name, value in _QOS_USER_LIMIT.findall(mine):
                short = "MaxSubmitPU" if name == "MaxSubmitJobsPU" else "MaxJobsPU"
                limits.append(Limit(short, int(value), f"QOS {match.group(1)}"))
    return limits


def parse_submit_limits(text: str) -> tuple[list[Limit], int | None] | None:
    """The ``LIMITS`` record of the submit exec: the user's limits and the jobs queued after
    the submit (this run's first jobs included); None when the exec did not ask."""
    for parts in decode(text):
        if parts[0] == "LIMITS" and len(parts) == 4:
            return parse_assoc_mgr(parts[1], parts[3]), (
                int(parts[2]) if parts[2].isdigit() else None
            )
    return None
