"""PURE: what the flows return, the records behind every ``--json`` (interface.md §4).

Frozen dataclasses, written to JSON by the one encoder in ``records.py``: field names are the
document's keys unless a field says otherwise (``failures`` is ``"errors"`` on the wire).
Also doctor's findings (``Check``, ``DoctorFacts``), which ``execs/doctor`` reads from its exec's
answer. The package's public API (``remote_chain/__init__``) names the ones users import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from remote_chain.core.limits import Limit
from remote_chain.core.models import ChainStateName
from remote_chain.core.records import Record, json_meta
from remote_chain.errors import RemoteChainError
from remote_chain.protocol.layout import JOB_SCRIPT

if TYPE_CHECKING:  # each flow's own modules: a status command never imports submit's or doctor's
    from remote_chain.core.bundle import ClusterBundle
    from remote_chain.core.chainstatus import ChainStatus

# The failures of a flow are "errors" in every document (interface.md §4).
ERRORS_KEY = "errors"
_AS_ERRORS = json_meta(key=ERRORS_KEY)
_NOT_IN_JSON = json_meta(skip=True)


# --- doctor's findings (execs/doctor reads them from its exec's answer) ---------------------
@dataclass(frozen=True)
class Check(Record):
    JSON_KEYS = ("name", "ok", "level", "detail", "hint")

    name: str = field(metadata=json_meta(key="check"))
    ok: bool
    detail: str
    hint: str = ""  # the fix of a failed check, or what a passed one means for runs
    warn: bool = False  # passed, but it limits what runs can do here

    @property
    def level(self) -> str:
        return "fail" if not self.ok else "warn" if self.warn else "ok"


@dataclass(frozen=True)
class DoctorFacts:
    """The per-cluster findings of ``doctor --json`` beside its checks (interface.md §4)."""

    slurm_version: str | None = None
    config: dict[str, str] = field(default_factory=dict)
    accounting_enabled: bool | None = None
    accounting_reachable: bool | None = None
    login_shell: str | None = None
    afternotok: bool | None = None
    kill_on_invalid_dep: bool | None = None
    limits: tuple[Limit, ...] = ()
    limits_enforced: bool | None = None
    queued: int | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "slurm_version": self.slurm_version,
            "slurm_config": self.config,
            "accounting": {
                "enabled": self.accounting_enabled,
                "reachable": self.accounting_reachable,
                "storage_type": self.config.get("AccountingStorageType"),
                "enforce": self.config.get("AccountingStorageEnforce"),
            },
            "login_shell": self.login_shell,
            "dependency_options": {
                "afternotok": self.afternotok,
                "kill_on_invalid_dep": self.kill_on_invalid_dep,
            },
            "job_limits": {
                "limits": [limit.to_json() for limit in self.limits],
                "enforced": self.limits_enforced,
                "queued_now": self.queued,
            },
        }


@dataclass(frozen=True)
class ClusterFailure(Record):
    """A cluster the flow could not complete on, with its error (``"errors"`` in JSON)."""

    JSON_KEYS = ("cluster", "error", "kind")

    cluster: str
    error: RemoteChainError

    @property
    def kind(self) -> str:
        return type(self.error).__name__


Failures = tuple[ClusterFailure, ...]


@dataclass(frozen=True)
class Submission(Record):
    cluster: str
    benchmark: str
    job_id: str | None
    remote_dir: str
    error: str | None
    existing: bool = False


@dataclass(frozen=True)
class SubmitResult(Record):
    run_id: str
    submissions: tuple[Submission, ...]
    failures: Failures = field(default=(), metadata=_AS_ERRORS)
    dry_run: bool = False
    bundles: tuple[ClusterBundle, ...] = field(
        default=(), repr=False, metadata=json_meta(skip=True)
    )
    warnings: tuple[str, ...] = ()  # "<cluster>: why the run may not fit its job limits"

    @property
    def ok(self) -> bool:
        return not self.failures and all(s.error is None for s in self.submissions)


@dataclass(frozen=True)
class StatusResult(Record):
    run_id: str
    chains: tuple[ChainStatus, ...]
    failures: Failures = field(default=(), metadata=_AS_ERRORS)

    @property
    def ended(self) -> bool:
        return not self.failures and all(c.state.ended for c in self.chains)

    @property
    def all_completed(self) -> bool:
        return (
            not self.failures
            and bool(self.chains)
            and all(c.state is ChainStateName.COMPLETED for c in self.chains)
        )


@dataclass(frozen=True)
class CancelEntry(Record):
    cluster: str
    benchmark: str
    job_ids: tuple[str, ...]
    error: str | None


@dataclass(frozen=True)
class CancelResult(Record):
    run_id: str
    cancelled: tuple[CancelEntry, ...]
    failures: Failures = field(default=(), metadata=_AS_ERRORS)

    @property
    def ok(self) -> bool:
        return not self.failures and all(c.error is None for c in self.cancelled)


@dataclass(frozen=True)
class ResumeEntry(Record):
    cluster: str
    benchmark: str
    job_id: str | None
    error: str | None
    caps: dict[str, object] | None = None  # what resume counted and wrote (resumable chains)


@dataclass(frozen=True)
class ResumeResult(Record):
    run_id: str
    resumed: tuple[ResumeEntry, ...]
    failures: Failures = field(default=(), metadata=_AS_ERRORS)

    @property
    def ok(self) -> bool:
        return not self.failures and all(r.error is None for r in self.resumed)


@dataclass(frozen=True)
class DoctorResult(Record):
    """One cluster's checks, and its findings flattened beside them (``doctor --json``)."""

    JSON_KEYS = ("cluster", "ok", "checks", "all_facts")
    JSON_FLATTEN: ClassVar[frozenset[str]] = frozenset({"all_facts"})

    cluster: str
    checks: tuple[Check, ...]
    facts: DoctorFacts | None = None  # None: the cluster was not reached

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def all_facts(self) -> DoctorFacts:
        """The findings; all unknown (null) when the cluster was not reached."""

        return self.facts or DoctorFacts()


@dataclass(frozen=True)
class RenderedScript:
    """One ``job.sh`` exactly as submit would upload it to ``<run_dir>/<benchmark>/job.sh``."""

    cluster: str
    benchmark: str
    text: str

    @property
    def path(self) -> str:
        """Where it lands under ``render --out DIR``: the run folder's own layout."""
        return f"{self.cluster}/{self.benchmark}/{JOB_SCRIPT}"
