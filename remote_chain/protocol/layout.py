"""PURE: the run folder's protocol: every file and folder name, the event kinds, the run record.

This module is the one place that spells them (STYLE §1 "one home per idea").
Python reads the constants; the templates get them by substitution (``templates.template_subs``):
``tests/test_layout.py`` fails when any other module or template spells a run-folder name.

Chains outlive releases: a chain submitted by an older remote-chain keeps resubmitting its own
``job.sh`` for days, so these names never change, and the run record is read in every schema
version written so far (``parse_record``; version 1 had no ``schema_version`` field).

    <workdir>/<run_id>/<cluster>/     the run folder
      RECORD_FILE, SINCE_FILE, SUBMIT_LOG, UPLOADS_DIR/
      <benchmark>/                    one folder per chain
        JOB_SCRIPT, LOGS_DIR/, ARTIFACTS_DIR/, the state files (resumable-runs.md) and ours
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum

# --- The run folder (beside the benchmark folders) --------------------------------------------
# `render` runs without submitting, so there is no run id yet: this placeholder stands in.
RENDER_RUN_ID = "rc-RENDER"
RECORD_FILE = "remote-chain.json"  # the run record (RunRecord), written once by submit
# sacct's --starttime in the cluster's own clock (a recycled job id cannot match an older job).
SINCE_FILE = ".remote_chain_since"
SUBMIT_LOG = ".remote_chain_submit.out"  # what the submit exec said (read back after a drop)
UPLOADS_DIR = "files"  # the run's uploads

# --- A benchmark folder -------------------------------------------------------------------------
JOB_SCRIPT = "job.sh"  # every link of the chain is this very file, resubmitted
LOGS_DIR = "logs"  # Slurm's --output, one <job id>.log per link
ARTIFACTS_DIR = "artifacts"
# State files, as the spec names them (resumable-runs.md, "What gets resumed").
CHAIN_FILE = ".gym_job_chain"
WALLTIME_FILE = ".gym_accumulated_walltime"
RETRIES_FILE = ".gym_infra_retries"
# Our additions, beside them: the marker `remote-chain cancel` leaves, an append-only event
# log that status reads (decisions, successors, runner exits), and the secrets file.
CANCEL_MARKER = ".remote_chain_cancelled"
EVENTS_FILE = ".remote_chain_events"
SECRETS_FILE = ".remote_chain_secrets"
# Links in a row whose predecessor no source knew, and the runner lease (one runner at a time
# per benchmark folder).
UNKNOWN_FILE = ".remote_chain_unknown_links"
LEASE_FILE = ".remote_chain_lease"
FIRST_JOB_FILE = ".remote_chain_first_job"  # the chain's first job id, written by submit
SBATCH_OUT = ".remote_chain_sbatch.out"  # what sbatch said at submit
EXIT_FILE = ".remote_chain_exit"  # the shell executor's exit status (no Slurm accounting)
# The files status reads per chain, by short kind name.
CHAIN_FILES: dict[str, str] = {
    "chain": CHAIN_FILE,
    "walltime": WALLTIME_FILE,
    "retries": RETRIES_FILE,
    "events": EVENTS_FILE,
    "first": FIRST_JOB_FILE,
    "exit": EXIT_FILE,
}

# Names a benchmark may not take: they are the run folder's own (config/validators.py).
STATE_PREFIX = ".gym_"
OWN_PREFIX = ".remote_chain"


class EventKind(StrEnum):
    """The third word of an ``EVENTS_FILE`` line: ``<epoch> <job id> <kind> <args...>``.

    The prologue and the resume exec write them (by substitution); chainstatus, execs/resume and
    the timeline read them through this enum.
    """

    DECIDED = "decided"  # <action> <pred|none|marker|budget> [state walltime retries]
    SUCCESSOR = "successor"  # <job id>
    SUCCESSOR_FAILED = "successor_failed"  # [limit=...] <sbatch's words>
    SUCCESSOR_CANCELLED = "successor_cancelled"  # <job id>
    RUNNER_START = "runner_start"
    RUNNER_EXIT = "runner_exit"  # <status>
    END = "end"  # <ok|error|signalled> <status> <elapsed> [SIG|budget]
    SIGNAL = "signal"  # <SIG>
    LEASE_BROKEN = "lease_broken"  # <owner job id>
    LEASE_UNSUPPORTED = "lease_unsupported"
    CORRUPT_STATE = "corrupt_state"  # <file> <why>
    COUNTED_BY_RESUME = "counted_by_resume"  # <seconds>: walltime resume counted for the job
    RESUMED_BY_USER = "resumed_by_user"  # <user>


# --- The run record (RECORD_FILE) -------------------------------------------------------------
# 1: the record without a schema_version field; 2: schema_version first.
SCHEMA_VERSION = 2


@dataclass(frozen=True)
class ChainRecord:
    benchmark: str
    remote_dir: str
    job_name: str
    resumable: bool
    time_limit_s: int | None = None  # each link's --time; absent in early version-1 records
    # Filled in by the submit exec (only it knows them): the prefix below ends before them.
    first_job_id: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    cluster: str
    created: str  # ISO 8601 UTC
    executor: str
    run_dir: str
    chains: tuple[ChainRecord, ...] = ()
    schema_version: int = SCHEMA_VERSION
    # Appended by each resume that changed caps: {"at": ..., "chains": [...]}, kept as written.
    resumes: tuple[Mapping[str, object], ...] = field(default=())


# The record is finished on the cluster (job ids, errors): the client renders the JSON up to
# each place the submit exec fills in, and submit.bash appends the rest.
def record_head(record: RunRecord) -> str:
    """The record's JSON up to its chains' list: ``{"schema_version": 2, ..., "chains": [``."""
    head = {
        "schema_version": record.schema_version,
        "run_id": record.run_id,
        "cluster": record.cluster,
        "created": record.created,
        "executor": record.executor,
        "run_dir": record.run_dir,
    }
    return json.dumps(head)[:-1] + ', "chains": ['


def chain_prefix(chain: ChainRecord) -> str:
    """One chain's JSON up to its first job id: ``{"benchmark": ..., "first_job_id": ``."""
    static = asdict(chain)
    del static["first_job_id"], static["error"]
    return json.dumps(static)[:-1] + ', "first_job_id": '


def _str(value: object) -> str:
    return "" if value is None else str(value)


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _chain(value: Mapping[str, object]) -> ChainRecord:
    job, err = value.get("first_job_id"), value.get("error")
    return ChainRecord(
        benchmark=_str(value.get("benchmark")),
        remote_dir=_str(value.get("remote_dir")),
        job_name=_str(value.get("job_name")),
        resumable=value.get("resumable") is True,
        time_limit_s=_opt_int(value.get("time_limit_s")),
        first_job_id=str(job) if job else None,
        error=str(err) if err else None,
    )


def parse_record(value: str | Mapping[str, object] | None) -> RunRecord | None:
    """The run record of any schema version (1: no ``schema_version``); None when it is not a
    record (absent, still being written, not JSON). A chain entry that is not an object is
    skipped; missing fields read as empty."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    chains = value.get("chains") if isinstance(value, Mapping) else None
    if not isinstance(value, Mapping) or not isinstance(chains, list):
        return None
    resumes = value.get("resumes")
    return RunRecord(
        run_id=_str(value.get("run_id")),
        cluster=_str(value.get("cluster")),
        created=_str(value.get("created")),
        executor=_str(value.get("executor")),
        run_dir=_str(value.get("run_dir")),
        chains=tuple(_chain(c) for c in chains if isinstance(c, Mapping)),
        schema_version=_opt_int(value.get("schema_version")) or 1,
        resumes=tuple(r for r in resumes if isinstance(r, Mapping))
        if isinstance(resumes, list)
        else (),
    )


def time_limits(text: str | None) -> dict[str, int]:
    """Benchmark -> each link's walltime in seconds (``time_limit_s``, when a positive whole
    number), from the run record of any schema version, read as ``parse_record`` reads its
    chains without making the whole record, since every status poll reads it. Records written
    before ``time_limit_s`` was kept, or still being written, give {}."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    chains = value.get("chains") if isinstance(value, dict) else None
    if not isinstance(chains, list):
        return {}
    limits: dict[str, int] = {}
    for chain in chains:
        # dict, not Mapping: all json.loads makes, without the ABC's slower isinstance.
        if isinstance(chain, dict):
            limit = _opt_int(chain.get("time_limit_s"))
            if limit is not None and limit > 0:
                limits[_str(chain.get("benchmark"))] = limit
    return limits


# The key of ``compact_limits`` that stands for every benchmark not named (no benchmark's
# name: NAME_RE has no "*").
EVERY = "*"


def compact_limits(limits: Mapping[str, int | None]) -> dict[str, int]:
    """Benchmark -> each link's walltime, as the local index keeps it: ``{"*": s}`` when every
    benchmark has the same one (the common case: 10,000 chains in a few bytes), else each
    benchmark that has one. ``limit_of`` reads it back."""
    values = set(limits.values())
    if len(values) == 1 and (only := values.pop()) is not None and only > 0:
        return {EVERY: only}
    return {b: s for b, s in limits.items() if s is not None and s > 0}


def limit_of(limits: Mapping[str, int], benchmark: str) -> int | None:
    """A benchmark's walltime from ``time_limits`` or ``compact_limits``; None without one."""
    return limits.get(benchmark, limits.get(EVERY))


def with_resume(text: str | None, entry: Mapping[str, object]) -> str | None:
    """The record text with one more ``resumes`` entry; every other field kept as written (a
    newer schema's too); None when the text is not a record object."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    resumes = value.get("resumes")
    resumes = resumes if isinstance(resumes, list) else []
    resumes.append(dict(entry))
    value["resumes"] = resumes
    return json.dumps(value) + "\n"
