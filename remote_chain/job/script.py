"""PURE: render a benchmark's ``job.sh``: ``#SBATCH`` directives, the chain prologue, the runner.

The prologue is bash (no Python on compute nodes, interface.md §3). Its decision part,
``rc_decide``, is *generated* from core/rules.py's tables (``GUARDS``, ``STATE_OUTCOMES``,
``END_OUTCOMES``, ``RULES``, ``LIMITS``); everything else in it is I/O (reading the dot-files,
asking Slurm with the command lines of sacct.py, queuing the successor, running the runner).
Every value that reaches bash is quoted with ``shlex.quote``: a runner argument like
``$(touch /tmp/x)`` stays a literal string.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from remote_chain.core.durations import format_duration
from remote_chain.core.models import JOB_ID_ERE, EndRecord, Executor, Outcome, ResumePolicy
from remote_chain.core.rules import (
    END_OUTCOMES,
    GUARDS,
    LIMITS,
    RULES,
    SIGNALLED_OVERRIDES,
    STATE_OUTCOMES,
    Counter,
)
from remote_chain.core.sacct import (
    PROLOGUE_QUERY_TIMEOUT_S,
    PROLOGUE_SBATCH_TIMEOUT_S,
    SBATCH_LIMIT_ERE,
)
from remote_chain.execs.templates import render_template
from remote_chain.protocol import layout
from remote_chain.protocol.layout import LOGS_DIR

# The run folder's names are layout.py's; these aliases keep this module's importers working.
CANCEL_MARKER = layout.CANCEL_MARKER
CHAIN_FILE = layout.CHAIN_FILE
EVENTS_FILE = layout.EVENTS_FILE
LEASE_FILE = layout.LEASE_FILE
RETRIES_FILE = layout.RETRIES_FILE
SECRETS_FILE = layout.SECRETS_FILE
SINCE_FILE = layout.SINCE_FILE
UNKNOWN_FILE = layout.UNKNOWN_FILE
WALLTIME_FILE = layout.WALLTIME_FILE

ScalarValue = str | int | float | bool | None


@dataclass(frozen=True)
class SlurmDirectives:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_s: int | None = None
    extra_args: tuple[str, ...] = ()
    # The chain is the resumption mechanism: links are --no-requeue unless the profile opts in.
    requeue: bool = False


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
    executor: Executor = "slurm"
    max_unknown_links: int = 3

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
        f"#SBATCH --output={_directive_value(f'{spec.remote_dir}/{LOGS_DIR}/%j.log')}",
        # A requeued job keeps its id and log file: append, do not truncate the first run's log.
        "#SBATCH --open-mode=append",
        # A requeue under the same id would race the successor it woke.
        "#SBATCH --requeue" if d.requeue else "#SBATCH --no-requeue",
    ]
    if d.time_s is not None:
        lines.append(f"#SBATCH --time={format_duration(d.time_s)}")
    for name, value in (("partition", d.partition), ("account", d.account), ("qos", d.qos)):
        if value:
            lines.append(f"#SBATCH --{name}={_directive_value(value)}")
    lines += [f"#SBATCH {arg}" for arg in d.extra_args]
    return lines


def render_outcome_case() -> str:
    """``rc_outcome STATE`` sets RC_OUTCOME: the spec's rows by sacct's first word."""
    by_outcome: dict[Outcome, list[str]] = {}
    for state, outcome in STATE_OUTCOMES.items():
        by_outcome.setdefault(outcome, []).append(state.value)
    arms = [
        f"    {'|'.join(sorted(states))}) RC_OUTCOME={outcome.value} ;;"
        for outcome, states in by_outcome.items()
        if outcome is not Outcome.FAILED
    ]
    return "\n".join(
        [
            "rc_outcome() {",
            '  case "$1" in',
            *arms,
            f"    *) RC_OUTCOME={Outcome.FAILED.value} ;;  # anything else: FAILED, OOM, ...",
            "  esac",
            "}",
        ]
    )


# How the generated bash names decide()'s inputs: counters (rc_main's locals) and caps.
_COUNTER_VARS = {
    Counter.RETRIES: "retries",
    Counter.UNKNOWN_LINKS: "unknown",
    Counter.WALLTIME: "walltime",
}
_BOUND_CONSTS = {
    "max_retries": "RC_MAX_RETRIES",
    "max_unknown_links": "RC_MAX_UNKNOWN",
    "max_walltime_s": "RC_MAX_WALLTIME",
}


def _bash_message(template: str, counter: str, bound: str) -> str:
    # decide()'s message, with bash's variables where Python formats the values in.
    text = template.replace("{value}", "${" + counter + "}").replace("{bound}", "${" + bound + "}")
    return f'"{text}"'


def render_decide() -> str:
    """``rc_decide``: rules.decide() in bash, generated from the same tables.

    Inputs: the ``F_<FACT>`` flags, ``pred`` (empty: first job), ``P_STATE``/``P_BY``/
    ``P_ELAPSED``/``P_END``; the counters ``walltime``/``retries``/``unknown`` are updated in
    place. Outputs: ``action``, ``outcome`` (empty when a guard decided: nothing to record)
    and ``message``.
    """
    lines = ["rc_decide() {", '  action="" outcome="" message=""']
    for guard in GUARDS:
        flag = f"F_{guard.fact.name}"
        lines.append(
            f"  if (( {flag} )); then action={guard.action.value}; "
            f"message={_const(guard.message)}; return 0; fi"
        )
    end_arms = " ".join(f"{end.value}) outcome={o.value} ;;" for end, o in END_OUTCOMES.items())
    overrides = "|".join(sorted(o.value for o in SIGNALLED_OVERRIDES))
    lines += [
        f"  if [[ -z $pred ]]; then outcome={Outcome.FIRST.value}",
        f"  elif [[ -z $P_STATE ]]; then outcome={Outcome.NOT_VISIBLE.value}",
        '  else rc_outcome "$P_STATE"; outcome=$RC_OUTCOME',
        "  fi",
        "  if [[ -n $pred ]]; then",
        f"    if [[ $outcome == {Outcome.NOT_VISIBLE.value} ]]; then",
        f'      case "$P_END" in {end_arms} esac',
        "    fi",
        f"    if [[ $P_END == {EndRecord.SIGNALLED.value} ]]; then"
        f' case "$outcome" in {overrides}) outcome={Outcome.INFRA.value} ;; esac; fi',
        # _cancel_stops(): an admin's cancel read as preemption, by policy.
        f"    if [[ $outcome == {Outcome.CANCELLED.value} && $RC_ADMIN_CANCEL == preempt"
        f' && -n $P_BY && $P_BY != "$RC_UID" ]]; then outcome={Outcome.INFRA.value}; fi',
        # A final elapsed counts; a stale record's does not.
        f"    if [[ ( -z $P_STATE || $outcome != {Outcome.NOT_VISIBLE.value} )"
        " && $P_ELAPSED =~ ^[0-9]+$ ]]; then",
        "      walltime=$(( walltime + 10#$P_ELAPSED ))",
        "    fi",
        "  fi",
        "  local counts_retry=0 checks_walltime=0 counts_unknown=0",
        '  case "$outcome" in',
    ]
    for outcome, rule in RULES.items():
        lines.append(
            f"    {outcome.value}) action={rule.action.value};"
            f" counts_retry={int(rule.counts_retry)};"
            f" checks_walltime={int(rule.checks_walltime)};"
            f" counts_unknown={int(rule.counts_unknown)} ;;"
        )
    lines += [
        '    *) rc_log "internal error: no rule for outcome $outcome"; exit 70 ;;',
        "  esac",
        "  if (( counts_retry )); then retries=$(( retries + 1 )); fi",
        "  if (( counts_unknown )); then unknown=$(( unknown + 1 )); else unknown=0; fi",
    ]
    for limit in LIMITS:
        var, bound = _COUNTER_VARS[limit.counter], _BOUND_CONSTS[limit.bound]
        op = ">=" if limit.at else ">"
        lines.append(
            f"  if (( {limit.when} )) && [[ -n ${bound} ]] && (( {var} {op} {bound} )); then "
            f"action={limit.action.value}; message={_bash_message(limit.message, var, bound)}; "
            "return 0; fi"
        )
    lines += ["  return 0", "}"]
    return "\n".join(lines)


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
        ("RC_ADMIN_CANCEL", policy.admin_cancel if policy else "stop"),
        ("RC_TIME_LIMIT", _or_empty(spec.slurm.time_s)),
        ("RC_LOOKUP_TIMEOUT", spec.lookup_timeout_s),
        ("RC_LOOKUP_INTERVAL", spec.lookup_interval_s),
        ("RC_MAX_UNKNOWN", spec.max_unknown_links),
        ("RC_QUERY_TIMEOUT", PROLOGUE_QUERY_TIMEOUT_S),
        ("RC_SBATCH_TIMEOUT", PROLOGUE_SBATCH_TIMEOUT_S),
        ("RC_KILL_AFTER", 15),  # seconds from the budget's TERM to KILL, as `timeout -k` had
        # Minutes after which a lease's break folder is a dead breaker's (a break takes ms).
        ("RC_BREAK_STALE", 10),
        ("RC_JOB_NAME", spec.job_name),
        ("RC_SECRETS", 1 if spec.secret_env_names else 0),
        ("RC_JOB_ID_ERE", JOB_ID_ERE),
        ("RC_LIMIT_ERE", SBATCH_LIMIT_ERE),
    ]
    return [f"{name}={_const(value)}" for name, value in values]


def _env_lines(spec: JobSpec) -> list[str]:
    """The user's exports: emitted before the prologue's constants, so those always win."""
    env = [f"export {name}={_q(value)}" for name, value in spec.env]
    if spec.secret_env_names:
        # Sourced by rc_start_runner in the runner's own process only.
        env.append(
            f"# Secret values ({', '.join(spec.secret_env_names)}) are kept in a mode-600 file."
        )
    return env


def _runner_lines(spec: JobSpec) -> list[str]:
    argv = ("bash", "-c", spec.command) if spec.command is not None else spec.argv
    return ["RC_RUNNER=(" + " ".join(_q(a) for a in argv) + ")"]


def render_prologue() -> str:
    """The prologue's functions, its names substituted in (``templates.template_subs``)."""
    return render_template("prologue.bash")


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
        # after it are the prologue's own either way.
        _env_lines(spec),
        _constants(spec),
        ["", render_outcome_case(), "", render_decide(), ""],
        [render_prologue(), ""],
        _runner_lines(spec),
        ["", 'rc_main "$@"', ""],
    ]
    return "\n".join(line for part in parts for line in part)
