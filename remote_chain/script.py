"""PURE: render a benchmark's ``job.sh``: ``#SBATCH`` directives, the chain prologue, the runner.

The prologue is bash (no Python on compute nodes, interface.md §3). Its decision part is
*generated* from ``chain.STATE_OUTCOMES`` and ``chain.RULES``; everything else in it is
plumbing (reading the dot-files, asking sacct, queuing the successor). Every value that
reaches bash is quoted with ``shlex.quote``: a runner argument like ``$(touch /tmp/x)``
stays a literal string.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from remote_chain._template import render_template
from remote_chain.chain import RULES, STATE_OUTCOMES
from remote_chain.durations import format_duration
from remote_chain.models import Action, Outcome, ResumePolicy
from remote_chain.sacct import SACCT_FIELDS

# State files, as the spec names them (resumable-runs.md, "What gets resumed").
CHAIN_FILE = ".gym_job_chain"
WALLTIME_FILE = ".gym_accumulated_walltime"
RETRIES_FILE = ".gym_infra_retries"
# Our additions, beside them: the marker `remote-chain cancel` leaves, an append-only event
# log that status reads (decisions, successors, runner exits), and the secrets file.
CANCEL_MARKER = ".remote_chain_cancelled"
EVENTS_FILE = ".remote_chain_events"
SECRETS_FILE = ".remote_chain_secrets"
# Beside the run's benchmark folders, written by submit: sacct's --starttime in the cluster's
# own clock (a recycled job id cannot match an older job). Owned here, used by bundle too.
SINCE_FILE = ".remote_chain_since"
CHAIN_WARNING = "Chain will NOT continue on failure"

ScalarValue = str | int | float | bool | None


@dataclass(frozen=True)
class SlurmDirectives:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_s: int | None = None
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobSpec:
    """Everything needed to render one benchmark's job script (built from the config)."""

    run_id: str
    cluster: str
    benchmark: str
    remote_dir: str  # <workdir>/<run_id>/<cluster>/<benchmark>
    argv: tuple[str, ...] = ()  # runner words + flattened run overrides
    command: str | None = None  # runs instead of argv, through bash -c
    env: tuple[tuple[str, str], ...] = ()
    secret_env_names: tuple[str, ...] = ()  # values live in SECRETS_FILE, mode 600
    policy: ResumePolicy | None = None  # None: not resumable
    slurm: SlurmDirectives = field(default_factory=SlurmDirectives)
    lookup_timeout_s: int = 60
    lookup_interval_s: int = 5
    executor: str = "slurm"

    @property
    def job_name(self) -> str:
        return job_name(self.run_id, self.benchmark)


def job_name(run_id: str, benchmark: str) -> str:
    """The Slurm job name of every job of a chain; status and cancel find jobs by it."""
    return f"{run_id}:{benchmark}"


def _hydra_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    return str(value)


def flatten_run(run: Mapping[str, object], prefix: str = "") -> list[str]:
    """Hydra-style overrides: nested mappings become dotted keys, lists ``[a,b]``."""
    tokens: list[str] = []
    for key, value in run.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            tokens += flatten_run(value, dotted + ".")
        else:
            tokens.append(f"+{dotted}={_hydra_value(value)}")
    return tokens


def runner_argv(
    runner: str, run: Mapping[str, object] | None, *, resumable: bool
) -> tuple[str, ...]:
    """The runner's argv; a resumable benchmark gets ``+resume_from_cache=true`` unless set."""
    overrides = dict(run or {})
    if resumable and "resume_from_cache" not in overrides:
        overrides["resume_from_cache"] = True
    return (*shlex.split(runner), *flatten_run(overrides))


def _q(value: object) -> str:
    return shlex.quote(str(value))


def _const(value: object) -> str:
    # Always single-quote strings (shellcheck reads `a=rc-x` as arithmetic intent otherwise).
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "'\"'\"'") + "'"


def _directive_value(value: str) -> str:
    # sbatch splits #SBATCH lines on blanks but honours double quotes.
    return f'"{value}"' if any(c.isspace() for c in value) else value


def render_directives(spec: JobSpec) -> list[str]:
    d = spec.slurm
    lines = [
        f"#SBATCH --job-name={_directive_value(spec.job_name)}",
        f"#SBATCH --chdir={_directive_value(spec.remote_dir)}",
        f"#SBATCH --output={_directive_value(spec.remote_dir + '/logs/%j.log')}",
        # A requeued job keeps its id and log file: append, do not truncate the first run's log.
        "#SBATCH --open-mode=append",
    ]
    if d.time_s is not None:
        lines.append(f"#SBATCH --time={format_duration(d.time_s)}")
    for name, value in (("partition", d.partition), ("account", d.account), ("qos", d.qos)):
        if value:
            lines.append(f"#SBATCH --{name}={_directive_value(value)}")
    lines += [f"#SBATCH {arg}" for arg in d.extra_args]
    return lines


def render_outcome_case() -> str:
    """``rc_outcome STATE``: the spec's rows keyed by sacct's first word (from STATE_OUTCOMES)."""
    by_outcome: dict[Outcome, list[str]] = {}
    for state, outcome in STATE_OUTCOMES.items():
        by_outcome.setdefault(outcome, []).append(state.value)
    arms = [
        f"    {'|'.join(sorted(states))}) echo {outcome.value} ;;"
        for outcome, states in by_outcome.items()
        if outcome is not Outcome.FAILED
    ]
    return "\n".join(
        [
            "rc_outcome() {",
            '  case "$1" in',
            *arms,
            f"    *) echo {Outcome.FAILED.value} ;;  # anything else: FAILED, OUT_OF_MEMORY, ...",
            "  esac",
            "}",
        ]
    )


def render_rules_case() -> str:
    """``rc_rule OUTCOME``: sets action/counts_retry/checks_walltime from chain.RULES."""
    arms = [
        f"    {outcome.value}) action={rule.action.value}; counts_retry={int(rule.counts_retry)};"
        f" checks_walltime={int(rule.checks_walltime)} ;;"
        for outcome, rule in RULES.items()
    ]
    return "\n".join(
        [
            "rc_rule() {",
            '  case "$1" in',
            *arms,
            '    *) rc_log "internal error: no rule for outcome $1"; exit 70 ;;',
            "  esac",
            "}",
        ]
    )


def _or_empty(value: int | None) -> object:
    return "" if value is None else value


def _constants(spec: JobSpec) -> list[str]:
    policy = spec.policy
    values: list[tuple[str, object]] = [
        ("RC_RUN_ID", spec.run_id),
        ("RC_CLUSTER", spec.cluster),
        ("RC_BENCHMARK", spec.benchmark),
        ("RC_DIR", spec.remote_dir),
        ("RC_EXECUTOR", spec.executor),
        ("RC_RESUMABLE", 1 if policy else 0),
        ("RC_MAX_RETRIES", policy.max_retries if policy else 0),
        (
            "RC_MAX_WALLTIME",
            "" if not policy or policy.max_walltime_s is None else policy.max_walltime_s,
        ),
        ("RC_ADMIN_CANCEL", policy.cancel_by_other if policy else "stop"),
        ("RC_TIME_LIMIT", _or_empty(spec.slurm.time_s)),
        ("RC_LOOKUP_TIMEOUT", spec.lookup_timeout_s),
        ("RC_LOOKUP_INTERVAL", spec.lookup_interval_s),
    ]
    return [f"{name}={_const(value)}" for name, value in values]


def _env_lines(spec: JobSpec) -> list[str]:
    """The user's exports: emitted before the prologue's constants, so those always win."""
    env = [f"export {name}={_q(value)}" for name, value in spec.env]
    if spec.secret_env_names:
        env += [
            f"# Secret values ({', '.join(spec.secret_env_names)}) are kept in a mode-600 file.",
            "# shellcheck source=/dev/null",
            f"if [[ -r {SECRETS_FILE} ]]; then set -a; . ./{SECRETS_FILE}; set +a; fi",
        ]
    return env


def _runner_lines(spec: JobSpec) -> list[str]:
    argv = ("bash", "-c", spec.command) if spec.command is not None else spec.argv
    return ["RC_RUNNER=(" + " ".join(_q(a) for a in argv) + ")"]


def render_prologue() -> str:
    """The prologue's functions, with the decision table substituted in from chain.py."""
    subs = {
        "__EVENTS__": EVENTS_FILE,
        "__SINCE__": SINCE_FILE,
        "__CHAIN__": CHAIN_FILE,
        "__WALLTIME__": WALLTIME_FILE,
        "__RETRIES__": RETRIES_FILE,
        "__CANCEL__": CANCEL_MARKER,
        "__WARNING__": CHAIN_WARNING,
        "__SACCT_FIELDS__": ",".join(SACCT_FIELDS),
        **{f"__{a.name}__": a.value for a in Action},
        **{f"__{o.name}__": o.value for o in Outcome},
    }
    return render_template("prologue.bash", subs)


def render_job_script(spec: JobSpec) -> str:
    """The whole ``job.sh``: directives, constants, generated rules, prologue, runner."""
    parts: list[Sequence[str]] = [
        ["#!/bin/bash"],
        render_directives(spec) if spec.executor == "slurm" else [],
        [
            f"# remote-chain job: run {spec.run_id}, cluster {spec.cluster}, "
            f"benchmark {spec.benchmark}.",
            "# Successors resubmit this very file; $1 is the predecessor's job id.",
            "set -uo pipefail",
            "",
        ],
        # driver.env first: reserved names are refused at config time, and the constants
        # after it are the prologue's own either way (issue 14.5).
        _env_lines(spec),
        _constants(spec),
        ["", render_outcome_case(), "", render_rules_case(), ""],
        [render_prologue(), ""],
        _runner_lines(spec),
        ["", 'rc_main "$@"', ""],
    ]
    return "\n".join(line for part in parts for line in part)
