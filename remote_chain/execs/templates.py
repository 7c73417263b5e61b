"""PURE: the bash templates beside the execs and the job, and their one substitution map.

Every ``__NAME__`` a template uses comes from ``template_subs`` (one home per name): the run
folder's names and event kinds (layout.py), the decision vocabulary (models.py), the Slurm
command lines (sacct.py) and the few tunables of the execs. Only data that differs per render
(the submit's payload) is passed by the caller.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources

from remote_chain.core.models import (
    LEASE_LIVE_STATES,
    NON_TERMINAL_STATES,
    QUEUED_STATES,
    Action,
    EndRecord,
    Outcome,
)
from remote_chain.core.sacct import (
    MAX_LIST_ARG_BYTES,
    PROLOGUE_SACCT_ARGS,
    SACCT_FIELDS,
    SLURM_QUERY_ENV_DROP,
    SQUEUE_FORMAT,
    SQUEUE_STATE_ARGS,
    SQUEUE_SUCCESSOR_FORMAT,
)
from remote_chain.protocol import layout
from remote_chain.protocol.guard import GUARD_PLACEHOLDER, UNSAFE_EXIT, trusted_bench_files

WIRE_PLACEHOLDER = "__WIRE__"
# Substituted per render, not from the map (the submit's base64 tarball).
PER_RENDER = frozenset({"__PAYLOAD__"})
PLACEHOLDER = re.compile(r"__[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*__")

# The execs' tunables, here rather than in the modules that render the execs: only templates
# read them, through the substitution map below.
CANCEL_ROUNDS = 30  # seconds the cancel exec keeps re-reading the queue at most
# How long a submit that finds the run folder already there waits for the other submit's
# record (a concurrent submit of the same --run-id may still be running sbatch).
RECORD_WAIT_S = 60
CHAIN_WARNING = "Chain will NOT continue on failure"  # the prologue's line when it stops a chain
# The status exec's chain files (layout.CHAIN_FILES): above MAX_FILE_BYTES one is "toolarge"
# (a chain's events file is a few KiB; more means something is wrong). Up to INLINE_FILE_BYTES
# bash reads it itself and sends it escaped (wire.py), with no process per file; bigger ones
# take base64. A status poll of many chains stays one exec and a few processes, instead of a
# few forks per file. Here, not in status.py: every template's substitution map needs them,
# and status.py imports this module.
MAX_FILE_BYTES = 1 << 20
INLINE_FILE_BYTES = 64 * 1024


# Where the templates live: beside the module that renders each (an exec's here, job.sh's
# prologue with the job).
_FOLDERS = ("remote_chain.execs", "remote_chain.job")


@functools.cache
def _read(name: str) -> str:
    for folder in _FOLDERS:
        found = resources.files(folder).joinpath(name)
        if found.is_file():
            return found.read_text("utf-8")
    raise FileNotFoundError(f"no template {name} in {', '.join(_FOLDERS)}")


def bash_array(name: str, values: Sequence[str]) -> str:
    """A bash array assignment, each value quoted: ``NAME=('a' 'b c')``."""
    return f"{name}=(" + " ".join(shlex.quote(v) for v in values) + ")"


def render_chunks_function() -> str:
    """The bash function ``rc_chunks`` that cuts a list into MAX_LIST_ARG_BYTES arguments."""
    return render_template("chunks.bash")


def _case_words(words: Iterable[str]) -> str:
    """A ``case`` pattern (``A|B|C``) from a set of states or kinds."""
    return "|".join(sorted(str(w) for w in words))


@functools.cache
def template_subs() -> Mapping[str, str]:
    """The one substitution map of every template."""
    # Imported here: these modules render templates themselves (a cycle at import time).

    chain_files = layout.CHAIN_FILES
    groups: list[Mapping[str, str]] = [
        {
            # The run folder (layout.py).
            "__RECORD__": layout.RECORD_FILE,
            "__SINCE__": layout.SINCE_FILE,
            "__LOG__": layout.SUBMIT_LOG,
            "__JOB__": layout.JOB_SCRIPT,
            "__LOGS__": layout.LOGS_DIR,
            "__ARTIFACTS__": layout.ARTIFACTS_DIR,
            "__UPLOADS__": layout.UPLOADS_DIR,
            "__CHAIN__": layout.CHAIN_FILE,
            "__WALLTIME__": layout.WALLTIME_FILE,
            "__RETRIES__": layout.RETRIES_FILE,
            "__CANCEL__": layout.CANCEL_MARKER,
            "__EVENTS__": layout.EVENTS_FILE,
            "__SECRETS__": layout.SECRETS_FILE,
            "__UNKNOWN__": layout.UNKNOWN_FILE,
            "__LEASE__": layout.LEASE_FILE,
            "__FIRST__": layout.FIRST_JOB_FILE,
            "__SBATCH_OUT__": layout.SBATCH_OUT,
            "__EXIT__": layout.EXIT_FILE,
            **{f"__EV_{k.name}__": k.value for k in layout.EventKind},
        },
        {
            # The decision vocabulary (models.py, rules.py's table).
            "__END_KINDS__": _case_words(EndRecord),
            **{f"__END_{e.name}__": e.value for e in EndRecord},
            **{f"__{a.name}__": a.value for a in Action},
            # Not FIRST: ``__FIRST__`` is the first-job file; only rc_decide (generated) needs it.
            **{f"__{o.name}__": o.value for o in Outcome if o is not Outcome.FIRST},
            "__QUEUED_STATES__": _case_words(QUEUED_STATES),
            "__LEASE_LIVE_STATES__": _case_words(LEASE_LIVE_STATES),
            "__WARNING__": CHAIN_WARNING,
            # Slurm's command lines (sacct.py).
            "__SACCT_ARGS__": PROLOGUE_SACCT_ARGS,
            "__SACCT_FIELDS__": ",".join(SACCT_FIELDS),
            "__SQUEUE_STATE_ARGS__": SQUEUE_STATE_ARGS,
            "__SQUEUE_SUCC_FORMAT__": SQUEUE_SUCCESSOR_FORMAT,
            "__SQUEUE_FORMAT__": SQUEUE_FORMAT,
            "__SLURM_ENV_DROP__": " ".join(f"-u {name}" for name in SLURM_QUERY_ENV_DROP),
            "__SQUEUE_LIVE_ERE__": "|".join(sorted(NON_TERMINAL_STATES)),
            # The execs' tunables.
            "__CHUNK__": str(MAX_LIST_ARG_BYTES),
            "__WAIT__": str(RECORD_WAIT_S),
            "__ROUNDS__": str(CANCEL_ROUNDS),
            "__MAX__": str(MAX_FILE_BYTES),
            "__INLINE__": str(INLINE_FILE_BYTES),
            "__FILES__": "\n    ".join(
                f'[[ -e "$b/{name}" ]] && rc_file {kind} "$b/{name}"'
                for kind, name in chain_files.items()
            ),
            # The shared ownership check (guard.py).
            "__UNSAFE_EXIT__": str(UNSAFE_EXIT),
            "__TRUSTED__": " ".join(trusted_bench_files()),
        },
    ]
    subs: dict[str, str] = {}
    for group in groups:
        if clash := subs.keys() & group.keys():  # one name, one meaning in every template
            raise ValueError(f"template placeholders defined twice: {sorted(clash)}")
        subs.update(group)
    return subs


@functools.cache
def _rendered(name: str) -> str:
    lines = _read(name).splitlines()
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    text = "\n".join(lines).strip("\n")
    if GUARD_PLACEHOLDER in text:
        text = text.replace(GUARD_PLACEHOLDER, _rendered("guard.bash"))
    if WIRE_PLACEHOLDER in text:  # the one wire codec of every answer (wire.py)
        text = text.replace(WIRE_PLACEHOLDER, _rendered("wire.bash"))
    subs = template_subs()
    return PLACEHOLDER.sub(lambda m: subs.get(m.group(), m.group()), text)


def render_template(name: str, subs: Mapping[str, str] | None = None) -> str:
    """The template with each ``__KEY__`` replaced (``template_subs``, then ``subs``: only
    per-render data); its leading comment block is dropped."""
    text = _rendered(name)
    for key, value in (subs or {}).items():
        text = text.replace(key, value)
    return text
