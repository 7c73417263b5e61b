"""PURE: the bash templates shipped in ``remote_chain/templates/`` and their one substitution map.

Every ``__NAME__`` a template uses comes from ``template_subs`` (issue 12 point 1): the run
folder's names and event kinds (layout.py), the decision vocabulary (models.py), the Slurm
command lines (sacct.py) and the few tunables of the execs. Only data that differs per render
(the submit's payload) is passed by the caller.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from importlib import resources

from remote_chain import layout
from remote_chain.guard import GUARD_PLACEHOLDER, UNSAFE_EXIT, trusted_bench_files

WIRE_PLACEHOLDER = "__WIRE__"
# Substituted per render, not from the map (the submit's base64 tarball).
PER_RENDER = frozenset({"__PAYLOAD__"})
PLACEHOLDER = re.compile(r"__[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*__")

# The execs' tunables, here rather than in the modules that render the execs: only templates
# read them, and a status would otherwise import bundle, script, chain and actions for three
# numbers (~10 ms of a cold command, issue 13 P9).
CANCEL_ROUNDS = 30  # seconds the cancel exec keeps re-reading the queue at most
# How long a submit that finds the run folder already there waits for the other submit's
# record (a concurrent submit of the same --run-id may still be running sbatch).
RECORD_WAIT_S = 60
CHAIN_WARNING = "Chain will NOT continue on failure"  # the prologue's line when it stops a chain
# The status exec's chain files (layout.CHAIN_FILES): above MAX_FILE_BYTES one is "toolarge"
# (a chain's events file is a few KiB; more means something is wrong). Up to INLINE_FILE_BYTES
# bash reads it itself and sends it escaped (wire.py), with no process per file; bigger ones
# take base64. A status poll of 200 chains stays one exec and a few processes, instead of ~4
# forks per file (benchmarks issue, P3: 200 chains ~ 1 chain). Here, not in snapshot.py: every
# template's substitution map needs them, and a submit would import the status exec's parser.
MAX_FILE_BYTES = 1 << 20
INLINE_FILE_BYTES = 64 * 1024


@functools.cache
def _read(name: str) -> str:
    return resources.files("remote_chain").joinpath("templates", name).read_text("utf-8")


def _case_words(words: Iterable[str]) -> str:
    """A ``case`` pattern (``A|B|C``) from a set of states or kinds."""
    return "|".join(sorted(str(w) for w in words))


@functools.cache
def template_subs() -> Mapping[str, str]:
    """The one substitution map of every template."""
    # Imported here: these modules render templates themselves (a cycle at import time).
    from remote_chain.models import (  # noqa: PLC0415
        LEASE_LIVE_STATES,
        NON_TERMINAL_STATES,
        QUEUED_STATES,
        Action,
        EndRecord,
        Outcome,
    )
    from remote_chain.sacct import (  # noqa: PLC0415
        MAX_LIST_ARG_BYTES,
        PROLOGUE_SACCT_ARGS,
        SACCT_FIELDS,
        SLURM_QUERY_ENV_DROP,
        SQUEUE_FORMAT,
        SQUEUE_STATE_ARGS,
        SQUEUE_SUCCESSOR_FORMAT,
    )

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
            # The decision vocabulary (models.py, chain.py's table).
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


# Templates that become a job's script (job.sh, read by people and by sbatch once a link):
# sent as written. Every other template is a client exec, sent with each command.
JOB_TEMPLATES = frozenset({"prologue.bash"})


@functools.cache
def _compact(name: str) -> str:
    """A client exec's template without its comment lines, blank lines and indentation: what
    bash runs is the same (tests/test_template_compact.py compares bash's own listing of the
    code, ``declare -f``, before and after), in ~2/5 of the bytes. The status exec was 35 KB:
    it rides twice in each exec (the env request and stdin, markers.py), is encrypted, sent
    and decrypted, and read by bash on the login node, with every poll (issue 13, P7 and P9).
    Per-render data (a submit's payload) is substituted after, never touched."""
    out: list[str] = []
    quote, heredoc, joined = "", "", False
    for written in _rendered(name).split("\n"):
        if heredoc:  # a here-document's lines are data, kept as they are
            out.append(written)
            heredoc = "" if written == heredoc else heredoc
            continue
        line = written
        if not quote and not joined:  # the line starts as code: a comment or indentation goes
            line = written.lstrip()
            if not line or line.startswith("#"):
                continue
        out.append(line)
        quote, heredoc, joined = _scan(line, quote)
    return "\n".join(out)


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def _scan(line: str, quote: str) -> tuple[str, str, bool]:
    """The quote still open at the end of a bash line ("" none, "'", '"', or "$'" for
    $'...'), the delimiter of a here-document it starts, and whether it ends in a line
    continuation. Enough of bash's quoting for the templates; the test holds it to bash."""
    i, heredoc = 0, ""
    while i < len(line):
        c = line[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif quote in {'"', "$'"}:
            if c == "\\":
                i += 1
            elif c == quote[-1]:
                quote = ""
        elif c == "\\":
            if i == len(line) - 1:
                return quote, heredoc, True
            i += 1
        elif c == "'":
            quote = "$'" if line[i - 1 : i] == "$" else "'"
        elif c == '"':
            quote = '"'
        elif c == "#" and (i == 0 or line[i - 1] in " \t;|&()"):
            break  # a comment to the end of the line
        elif line.startswith("<<", i) and not line.startswith("<<<", i):
            m = _HEREDOC.match(line, i)
            if m:
                heredoc = m.group(2)
                i = m.end() - 1
        i += 1
    return quote, heredoc, False


def render_template(name: str, subs: Mapping[str, str] | None = None) -> str:
    """The template with each ``__KEY__`` replaced (``template_subs``, then ``subs``: only
    per-render data); its leading comment block is dropped, and a client exec's comments and
    indentation too (``_compact``)."""
    text = _rendered(name) if name in JOB_TEMPLATES else _compact(name)
    for key, value in (subs or {}).items():
        text = text.replace(key, value)
    return text
