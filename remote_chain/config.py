"""Submit configs (YAML) and cluster profiles (TOML) as frozen pydantic models.

Shapes: interface.md sections 1 and 2. Every model forbids unknown keys, so a typo is an
error (with a "did you mean") instead of a silently ignored setting. Every failure, whether
from YAML, TOML, pydantic or the file system, leaves this module as one ``ConfigError``
naming the file (``source``) and the dotted field path (``field``), e.g.
``driver.benchmarks.gpqa.resumable.max_retries``; keys that are not plain words are quoted,
as in ``driver.benchmarks["my bench"]``, and list items are indexed, ``driver.upload[2]``.

Durations are held as int seconds and dump back to Slurm's form (``"04:00:00"``). In a file
they are written in Slurm's forms (``durations.py``), where a bare number means minutes, as
``sbatch --time=240`` does. Built in Python (``SlurmOptions(time=3600)``), a bare int is
seconds, the attribute's own unit: the loaders mark their data with ``FROM_FILE`` in the
validation context, and only such data reads ints as minutes.
"""

from __future__ import annotations

import datetime
import difflib
import json
import math
import os
import posixpath
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PlainSerializer,
    StrictBool,
    StrictInt,
    StrictStr,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from remote_chain.durations import MAX_DURATION_S, format_duration, parse_duration, parse_persist
from remote_chain.errors import ConfigError
from remote_chain.models import NAME_RE
from remote_chain.yamlload import MAX_YAML_BYTES, load_yaml_lines

if TYPE_CHECKING:
    from remote_chain.settings import Settings

MAX_UPLOADS = 1000
MAX_NAME_LEN = 100
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Siblings of the benchmark folders in <workdir>/<run_id>/<cluster>/ (interface.md section 3):
# the uploads folder, the run record (and its temporary file), and the run's own dot-files
# (.remote_chain_since, .remote_chain_submit.out, ...). The prefixes are reserved whole, so a
# file the layout adds later can never land on a benchmark's folder (issue 9, class 9).
RESERVED_BENCHMARK_NAMES = frozenset({"files", "remote-chain.json"})
RESERVED_BENCHMARK_PREFIXES = (".remote_chain", ".gym_", "remote-chain.json")
# Executors that can chain jobs; `shell` has no scheduler to queue a successor with.
RESUMABLE_EXECUTORS = frozenset({"slurm"})
COMMAND_LINE = "<command line>"
# Validation-context key set by the loaders: ints in durations are Slurm minutes.
FROM_FILE = "from_file"

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
_RUN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")
_SLURM_WORD = re.compile(r"[A-Za-z0-9_.,:@+=/-]+")
_SBATCH_ARG = re.compile(r"--([A-Za-z][A-Za-z0-9-]*)(?:=([^\s\x00-\x1f\x7f]+))?")
_WORKDIR = re.compile(r"/[A-Za-z0-9._/@+,:=~-]*")
# sbatch options we own, or that have a key of their own. sbatch (getopt_long) accepts any
# unambiguous prefix, so `--part=x` is caught too.
_OWN_OPTIONS = (
    "chdir",
    "dependency",
    "kill-on-invalid-dep",
    "output",
    "error",
    "job-name",  # status and cancel find a chain's jobs by its name (issue 14.5)
    "array",  # one job per link: the chain files hold one job id per line
)
# Requeue is the profile's `[slurm] requeue` setting, not an extra argument (issue 14.5).
_REQUEUE_OPTIONS = ("requeue", "no-requeue")
_KEYED_OPTIONS = ("time", "partition", "account", "qos")
_TAG_FLAG = "resumable:bool"
_TAG_SPEC = "resumable:mapping"


class _Problems(ValueError):
    """Raised by a validator that checks a whole subtree: (path below the field, message)."""

    def __init__(self, problems: list[tuple[tuple[str | int, ...], str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(message for _, message in problems))


def _render_loc(parts: Iterable[object]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif isinstance(part, str) and _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:  # json.dumps quotes, and escapes newlines and non-ASCII, so the path prints safely
            out += f"[{json.dumps(str(part))}]"
    return out


def _check_name(name: str, what: str = "name") -> str:
    if not NAME_RE.fullmatch(name) or name in (".", ".."):
        raise ValueError(
            f"invalid {what} {json.dumps(name)}: use letters, digits, '.', '_' and '-' "
            "(it names a folder on the cluster), and not '.' or '..'"
        )
    if len(name) > MAX_NAME_LEN:
        raise ValueError(f"{what} is longer than {MAX_NAME_LEN} characters")
    return name


def _check_benchmark_name(name: str) -> str:
    _check_name(name, "benchmark name")
    if name in RESERVED_BENCHMARK_NAMES or name.startswith(RESERVED_BENCHMARK_PREFIXES):
        raise ValueError(
            f"benchmark name {name!r} is reserved: the run folder on the cluster holds a file "
            f"or folder of that name (reserved: {', '.join(sorted(RESERVED_BENCHMARK_NAMES))} "
            f"and names starting with {', '.join(RESERVED_BENCHMARK_PREFIXES)})"
        )
    return name


def _one_line(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if _CONTROL.search(value):
        raise ValueError("must be one line, without control characters")
    return value


def _context(info: ValidationInfo) -> Mapping[str, Any]:
    return info.context if isinstance(info.context, Mapping) else {}


def _parse_duration_field(value: Any, info: ValidationInfo) -> int:
    if isinstance(value, datetime.time):
        # TOML reads an unquoted 04:00:00 as a time of day.
        raise ValueError('a time of day is not a duration: quote it, e.g. time = "04:00:00"')
    if isinstance(value, int) and not isinstance(value, bool) and not _context(info).get(FROM_FILE):
        seconds = value  # built in Python: seconds, like the attribute
        if not 0 <= seconds <= MAX_DURATION_S:
            raise ValueError(f"{seconds} seconds is out of range (0 to {MAX_DURATION_S})")
    else:
        seconds = parse_duration(value)
    if seconds == 0:
        # sbatch reads --time=0 as "no limit", which is never what a zero cap means.
        raise ValueError("must be longer than zero; leave the key out for no limit")
    return seconds


Duration = Annotated[
    int,
    BeforeValidator(_parse_duration_field),
    PlainSerializer(format_duration, return_type=str),
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ResumableSpec(_Frozen):
    """The mapping form of ``resumable`` (resumable-runs.md, "To tune it")."""

    max_retries: StrictInt = Field(default=3, ge=0, le=1000)
    max_walltime: Duration | None = None


def _slurm_word(value: str) -> str:
    if not _SLURM_WORD.fullmatch(value):
        raise ValueError(
            f"{json.dumps(value)} is not a Slurm name: letters, digits and ._,:@+=/- only "
            "(it is written into an #SBATCH line)"
        )
    return value


# sbatch's short forms of the options above, named in the error.
_OWN_SHORT = {
    "J": "job-name",
    "D": "chdir",
    "o": "output",
    "e": "error",
    "d": "dependency",
    "a": "array",
}


def _sbatch_arg(value: str) -> str:
    short = re.match(r"-([A-Za-z])", value)
    if short and not value.startswith("--") and short.group(1) in _OWN_SHORT:
        own = _OWN_SHORT[short.group(1)]
        raise ValueError(
            f"-{short.group(1)} (--{own}): remote-chain sets --{own} itself; the run layout "
            "and the chain depend on it"
        )
    match = _SBATCH_ARG.fullmatch(value)
    if match is None:
        raise ValueError(
            f"{json.dumps(value)}: write one sbatch option as --name or --name=value, "
            "without spaces (each entry becomes one #SBATCH line)"
        )
    name = match.group(1)
    for keyed in _KEYED_OPTIONS:
        if keyed.startswith(name):
            raise ValueError(f"--{name}: use the slurm key {keyed!r} instead of extra_args")
    for own in _OWN_OPTIONS:
        if own.startswith(name):
            raise ValueError(
                f"--{name}: remote-chain sets --{own} itself; the run layout and the chain "
                "depend on it"
            )
    return value


def _requeue_arg(value: str) -> str | None:
    """The requeue option ``value`` names (sbatch takes any unambiguous prefix), or None."""
    match = _SBATCH_ARG.fullmatch(value)
    name = match.group(1) if match else ""
    return next((own for own in _REQUEUE_OPTIONS if own.startswith(name)), None)


SlurmWord = Annotated[StrictStr, AfterValidator(_slurm_word)]


class SlurmOptions(_Frozen):
    """A ``[slurm]`` table: a profile's defaults, or a benchmark's overrides of them."""

    partition: SlurmWord | None = None
    account: SlurmWord | None = None
    qos: SlurmWord | None = None
    time: Duration | None = None
    extra_args: tuple[Annotated[StrictStr, AfterValidator(_sbatch_arg)], ...] = ()
    # Our addition: how a chain reads "CANCELLED by <uid>" from a uid other than the user's
    # (admin tooling, preemption scripts). "stop" follows the spec's CANCELLED row.
    admin_cancel: Literal["stop", "preempt"] = "stop"
    # Whether Slurm may requeue a link (#SBATCH --requeue); --requeue/--no-requeue in
    # extra_args are refused in favour of this key (issue 14.5).
    requeue: StrictBool = False

    @model_validator(mode="after")
    def _requeue_needs_the_key(self) -> SlurmOptions:
        for index, arg in enumerate(self.extra_args):
            own = _requeue_arg(arg)
            if own is not None and not self.requeue:
                raise _Problems(
                    [
                        (
                            ("extra_args", index),
                            f"--{own}: requeueing is remote-chain's to decide (the chain "
                            "reads a requeued link as the same link); set requeue = true "
                            "in this [slurm] table to allow it",
                        )
                    ]
                )
        return self


class EnvVar(_Frozen):
    """One variable exported in every job; a secret one never shows its value in a repr."""

    name: StrictStr
    value: StrictStr
    secret: StrictBool = False

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not ENV_NAME_RE.fullmatch(name):
            raise ValueError(f"invalid variable name {json.dumps(name)}")
        return name

    def __repr_args__(self) -> Iterable[tuple[str | None, Any]]:
        # Also used by str() and rich's pretty printer.
        yield "name", self.name
        yield "value", "********" if self.secret else self.value
        yield "secret", self.secret


# driver.env names a job may not set (issue 14.5): the job script exports driver.env before
# the prologue runs, so these would steer the prologue itself (its own RC_ values, the
# successor's sbatch, how bash parses and what it loads). By prefix, then by exact name.
RESERVED_ENV_PREFIXES = {
    "RC_": "the job prologue's own variables (RC_SELF, RC_MAX_RETRIES, ...) start with RC_",
    "REMOTE_CHAIN_": "the REMOTE_CHAIN_ prefix is reserved for remote-chain's own settings",
    "SBATCH_": "sbatch reads SBATCH_* as options: the successor's submission would change",
    "SLURM_": "Slurm sets SLURM_* in every job; the prologue reads them (SLURM_JOB_ID, ...)",
    "BASH_FUNC_": "exported bash functions would replace commands the prologue calls",
}
RESERVED_ENV_NAMES = {
    "PATH": "the prologue finds sbatch and sacct through PATH; extend it in the runner "
    "(e.g. command: 'PATH=/opt/x/bin:$PATH ...') or with module load in your shell setup",
    "IFS": "changes how bash splits every word of the job script",
    "BASH_ENV": "bash would source that file before every bash the job starts",
    "ENV": "sh would source that file before every shell the job starts",
    "SHELLOPTS": "changes bash's own options for every bash the job starts",
    "BASHOPTS": "changes bash's own options for every bash the job starts",
    "POSIXLY_CORRECT": "changes how bash and the tools the prologue calls behave",
    "CDPATH": "changes where the job script's cd commands go",
    "GLOBIGNORE": "changes which files the job script's globs match",
    "PS4": "bash evaluates it for every traced command",
    "PROMPT_COMMAND": "bash runs it as a command",
    "LD_PRELOAD": "loads a library into every program the job starts, sbatch included",
    "LD_AUDIT": "loads a library into every program the job starts, sbatch included",
    "HOME": "Slurm and ssh read the user's files from HOME",
}


def reserved_env_reason(name: str) -> str | None:
    """Why ``driver.env`` may not set ``name``, or None if it may."""
    if name in RESERVED_ENV_NAMES:
        return f"{name} is reserved: {RESERVED_ENV_NAMES[name]}"
    for prefix, reason in RESERVED_ENV_PREFIXES.items():
        if name.startswith(prefix):
            return f"{name} is reserved: {reason}"
    return None


def _env_var(name: object, spec: object, environ: Mapping[str, str]) -> EnvVar | list[str]:
    """The EnvVar for one ``driver.env`` entry, or the problems found in it."""
    if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
        return ["invalid variable name: letters, digits and '_', not starting with a digit"]
    reserved = reserved_env_reason(name)
    if reserved is not None:
        return [reserved]
    secret = False
    if isinstance(spec, Mapping):
        unknown = sorted(str(key) for key in spec if key not in ("value", "from_env", "secret"))
        if unknown:
            return [f"unknown key {unknown[0]!r} (allowed: value, from_env, secret)"]
        if ("value" in spec) == ("from_env" in spec):
            return ["give exactly one of value or from_env"]
        flag = spec.get("secret", "from_env" in spec)
        if not isinstance(flag, bool):
            return ["secret must be true or false"]
        secret = flag
        if "from_env" in spec:
            local = spec["from_env"]
            if not isinstance(local, str) or not ENV_NAME_RE.fullmatch(local):
                return ["from_env must name a variable of this machine's environment"]
            if local not in environ:
                return [f"from_env: {local} is not set in the environment of this machine"]
            spec = environ[local]
        else:
            spec = spec["value"]
    if isinstance(spec, bool) or not isinstance(spec, str | int | float):
        return ["expected a string (quote it), {value: ...} or {from_env: NAME}"]
    text = str(spec)
    if "\x00" in text:
        return ["the value contains a NUL byte"]
    return EnvVar(name=name, value=text, secret=secret)


def _run_problems(
    value: object, path: tuple[str | int, ...]
) -> list[tuple[tuple[str | int, ...], str]]:
    if isinstance(value, Mapping):
        if path and not value:
            return [(path, "empty mapping: it would pass no argument; remove it")]
        problems = []
        for key, item in value.items():
            if not isinstance(key, str) or not _RUN_KEY.fullmatch(key):
                problems.append(
                    ((*path, str(key)), "invalid argument name: letters, digits and _./- only")
                )
            else:
                problems.extend(_run_problems(item, (*path, key)))
        return problems
    if isinstance(value, list):
        problems = []
        for index, item in enumerate(value):
            if isinstance(item, Mapping | list):
                problems.append(
                    ((*path, index), "a list may hold only strings, numbers, booleans and null")
                )
            else:
                problems.extend(_run_problems(item, (*path, index)))
        return problems
    if isinstance(value, str):
        return [(path, "contains a NUL byte")] if "\x00" in value else []
    if isinstance(value, float) and not math.isfinite(value):
        return [(path, "must be a finite number")]
    if value is None or isinstance(value, bool | int | float):
        return []
    return [(path, f"unsupported value of type {type(value).__name__}")]


def _resumable_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return _TAG_FLAG
    if isinstance(value, Mapping | ResumableSpec):
        return _TAG_SPEC
    return None


Resumable = Annotated[
    Annotated[StrictBool, Tag(_TAG_FLAG)] | Annotated[ResumableSpec, Tag(_TAG_SPEC)],
    Discriminator(
        _resumable_kind,
        custom_error_type="resumable_type",
        custom_error_message="expected true, false or a mapping with max_retries/max_walltime",
    ),
]


class BenchmarkConfig(_Frozen):
    """One entry of ``driver.benchmarks`` (interface.md section 1)."""

    run: dict[str, Any] | None = None
    command: Annotated[StrictStr, AfterValidator(_one_line)] | None = None
    resumable: Resumable = False
    slurm: SlurmOptions = SlurmOptions()

    @field_validator("run", mode="before")
    @classmethod
    def _run(cls, value: Any) -> Any:
        if value is None or not isinstance(value, Mapping):
            return value  # pydantic reports a non-mapping
        problems = _run_problems(value, ())
        if problems:
            raise _Problems(problems)
        return value

    @model_validator(mode="after")
    def _exclusive(self) -> BenchmarkConfig:
        if self.command is not None and self.resume is not None:
            # resumable-runs.md: resuming relies on the runner's cache, a command has none.
            raise _Problems([(("command",), "a benchmark with a command cannot be resumable")])
        if self.command is not None and self.run is not None:
            raise _Problems([(("command",), "give either command or run, not both")])
        return self

    @property
    def resume(self) -> ResumableSpec | None:
        """The resume policy: None if not resumable, the defaults for ``resumable: true``."""
        if isinstance(self.resumable, ResumableSpec):
            return self.resumable
        return ResumableSpec() if self.resumable else None


def _upload_path(entry: object, base: Path) -> Path | str:
    """The resolved path of one upload entry, or why it cannot be uploaded."""
    if isinstance(entry, Path):
        entry = str(entry)
    if not isinstance(entry, str) or not entry.strip() or _CONTROL.search(entry):
        return "expected a path to a local file or folder"
    try:
        path = (base / Path(entry).expanduser()).resolve()
        exists = path.exists()
    except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop (Python 3.11)
        return f"{entry!r}: {exc}"
    if not exists:
        return f"{entry!r} not found (looked for {path})"
    if not path.name:
        return f"{entry!r}: cannot upload the filesystem root"
    if not os.access(path, os.R_OK):
        return f"{entry!r} is not readable ({path})"
    return path


class DriverConfig(_Frozen):
    """The ``driver`` mapping of a submit config."""

    runner: Annotated[StrictStr, AfterValidator(_one_line)] = "gym eval run"
    env: tuple[EnvVar, ...] = ()
    upload: tuple[Path, ...] = ()
    benchmarks: dict[Annotated[StrictStr, AfterValidator(_check_benchmark_name)], BenchmarkConfig]

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return ()
        if isinstance(value, list | tuple) and all(isinstance(v, EnvVar) for v in value):
            return tuple(value)
        if not isinstance(value, Mapping):
            raise ValueError("expected a mapping of NAME: value")
        environ = _context(info).get("environ", os.environ)
        found: list[EnvVar] = []
        problems: list[tuple[tuple[str | int, ...], str]] = []
        for name, spec in value.items():
            var = _env_var(name, spec, environ)
            if isinstance(var, EnvVar):
                found.append(var)
            else:
                problems.extend(((str(name),), message) for message in var)
        if problems:
            raise _Problems(problems)
        return tuple(found)

    @field_validator("upload", mode="before")
    @classmethod
    def _upload(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return ()
        if not isinstance(value, list | tuple):
            raise ValueError("expected a list of paths, relative to the config file")
        if len(value) > MAX_UPLOADS:
            raise ValueError(f"{len(value)} entries; at most {MAX_UPLOADS} (upload a folder)")
        base = Path(_context(info).get("base_dir", Path.cwd()))
        paths: list[Path] = []
        by_name: dict[str, str] = {}
        problems: list[tuple[tuple[str | int, ...], str]] = []
        for index, entry in enumerate(value):
            path = _upload_path(entry, base)
            if isinstance(path, str):
                problems.append(((index,), path))
            elif path.name in by_name:
                # Uploads land flat in files/ (interface.md section 3).
                problems.append(
                    (
                        (index,),
                        f"{entry!r} and {by_name[path.name]!r} would both land in "
                        f"files/{path.name}",
                    )
                )
            else:
                by_name[path.name] = str(entry)
                paths.append(path)
        if problems:
            raise _Problems(problems)
        return tuple(paths)

    @field_validator("benchmarks")
    @classmethod
    def _some_benchmarks(cls, value: dict[str, BenchmarkConfig]) -> dict[str, BenchmarkConfig]:
        if not value:
            raise ValueError("no benchmarks: add at least one")
        return value


class _SubmitFile(_Frozen):
    driver: DriverConfig


# The `source` of a config or profile built in Python rather than loaded from a file.
IN_CODE = Path("<python>")


class SubmitConfig(_Frozen):
    """A submit config: loaded from a file (``source``), or built in code.

    In code, durations are seconds and upload paths are relative to the working directory::

        SubmitConfig(driver=DriverConfig(benchmarks={"gpqa": BenchmarkConfig(run={...})}))
    """

    driver: DriverConfig
    source: Path = IN_CODE


def _ssh_word(value: str) -> str:
    if not value or _CONTROL.search(value) or any(ch.isspace() for ch in value):
        raise ValueError("must be one word, without spaces or control characters")
    if value.startswith("-"):
        raise ValueError("must not start with '-' (ssh would read it as an option)")
    return value


def _host(value: str) -> str:
    _ssh_word(value)
    if "@" in value:
        raise ValueError("put the user name in `user`, not in `host`")
    return value


def _workdir(value: str) -> str:
    if not _WORKDIR.fullmatch(value):
        raise ValueError(
            f"{json.dumps(value)}: must be an absolute POSIX path of letters, digits and "
            "._/@+,:=~- (no spaces, quotes, '$' or '%': it is used in #SBATCH lines and commands)"
        )
    if ".." in value.split("/"):
        raise ValueError(f"{json.dumps(value)}: must not contain '..'")
    normal = posixpath.normpath(value)
    if normal in ("/", "//"):
        raise ValueError("must not be the filesystem root")
    return normal


def _local_path(value: Any, info: ValidationInfo) -> Any:
    if not isinstance(value, str):
        return value  # pydantic reports the type
    _one_line(value)
    base = Path(_context(info).get("base_dir", Path.cwd()))
    return base / Path(value).expanduser()


LocalPath = Annotated[Path, BeforeValidator(_local_path)]


class ClusterProfile(_Frozen):
    """One ``clusters/<name>.toml`` (interface.md section 2); ``name`` is the file's stem.

    It can also be built in code, ``ClusterProfile(name="eos", host=..., workdir=...)``, and
    passed to the Orchestrator wherever a profile name goes. ``name`` stays required: it is
    part of every remote path (``<workdir>/<run_id>/<name>``).
    """

    name: Annotated[StrictStr, AfterValidator(_check_name)]
    host: Annotated[StrictStr, AfterValidator(_host)]
    # None: the ssh config's Port, else 22. A set field overrides the ssh config, like `ssh -p`.
    port: StrictInt | None = Field(default=None, ge=1, le=65535)
    user: Annotated[StrictStr, AfterValidator(_ssh_word)] | None = None
    identity_file: LocalPath | None = None
    known_hosts: LocalPath | None = None
    proxy_jump: Annotated[StrictStr, AfterValidator(_ssh_word)] | None = None
    control_path: Annotated[StrictStr, AfterValidator(_one_line)] | None = None
    ssh_config: LocalPath | None = None  # read instead of ~/.ssh/config (ssh -F)
    workdir: Annotated[StrictStr, AfterValidator(_workdir)]
    executor: Literal["slurm", "shell"] = "slurm"
    transport: Literal["asyncssh", "openssh"] = "asyncssh"
    # Seconds the agent keeps the connection idle (issue 13, P8); 0: every command connects.
    persist: Annotated[int, BeforeValidator(parse_persist)] = 0
    slurm: SlurmOptions = SlurmOptions()
    source: Path = IN_CODE

    @model_validator(mode="after")
    def _control_path_needs_openssh(self) -> ClusterProfile:
        if self.control_path is not None and self.transport != "openssh":
            raise _Problems(
                [(("control_path",), 'only used with transport = "openssh"; set that too')]
            )
        if self.persist and self.transport == "openssh":
            raise _Problems(
                [(("persist",), 'only for transport = "asyncssh": a ControlMaster persists')]
            )
        return self

    def check_local_files(self) -> None:
        """Raise ``ConfigError`` if ``identity_file`` or ``known_hosts`` is not a readable file.

        Separate from loading, so ``render`` and ``clusters`` work on a machine without keys.
        """
        for field in ("identity_file", "known_hosts", "ssh_config"):
            path: Path | None = getattr(self, field)
            if path is None:
                continue
            try:
                usable = path.is_file() and os.access(path, os.R_OK)
            except OSError:
                usable = False
            if not usable:
                raise ConfigError(
                    f"{path} is not a readable file", source=str(self.source), field=field
                )


# --- ValidationError -> ConfigError ------------------------------------------------------

_FROM_CALLER = frozenset({"name", "source"})  # ClusterProfile fields not written in the file
_YAML_TYPES = {"dict": "mapping", "list": "list", "str": "string", "NoneType": "null"}


def _as_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, UnionType, Annotated):
        for arg in get_args(annotation):
            model = _as_model(arg)
            if model is not None:
                return model
    return None


def _model_at(root: type[BaseModel], loc: Sequence[object]) -> type[BaseModel] | None:
    """The model class validating the mapping at ``loc``, to list its keys in an error."""
    current: Any = root
    for part in loc:
        model = _as_model(current)
        if model is not None:
            if not isinstance(part, str) or part not in model.model_fields:
                return None
            current = model.model_fields[part].annotation
        elif get_origin(current) is dict:
            current = get_args(current)[1]
        elif get_origin(current) is tuple:
            current = get_args(current)[0]
        else:
            return None
    return _as_model(current)


def _message(err: Any, loc: Sequence[object], root: type[BaseModel]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        model = _model_at(root, loc[:-1])
        allowed = [f for f in model.model_fields if f not in _FROM_CALLER] if model else []
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        listing = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return f"unknown key {json.dumps(key)}{hint}{listing}"
    if kind == "missing":
        return "required, but missing"
    message = str(err["msg"])
    if message.startswith("Value error, "):
        return message.removeprefix("Value error, ")
    if kind.endswith("_type") or kind.endswith("_parsing"):
        # The input's type, never its value: it may be a secret.
        got = type(err.get("input")).__name__
        return f"{message} (got {_YAML_TYPES.get(got, got)})"
    return message


def _at_line(message: str, loc: Sequence[object], lines: Mapping[tuple[Any, ...], int]) -> str:
    """``message (line N)``: the line of the deepest key of ``loc`` that the file wrote."""
    path = tuple(p if isinstance(p, int) and not isinstance(p, bool) else str(p) for p in loc)
    for end in range(len(path), 0, -1):
        if path[:end] in lines:
            return f"{message} (line {lines[path[:end]]})"
    return message


def _config_error(
    exc: ValidationError,
    *,
    source: str,
    root: type[BaseModel],
    lines: Mapping[tuple[Any, ...], int] | None = None,
) -> ConfigError:
    problems: list[tuple[str, str]] = []
    lines = lines or {}
    for err in exc.errors(include_url=False):
        # "[key]" marks a dict key's own error, the tags are our discriminated union's.
        loc = [p for p in err["loc"] if p not in ("[key]", _TAG_FLAG, _TAG_SPEC)]
        inner = (err.get("ctx") or {}).get("error")
        if isinstance(inner, _Problems):
            problems.extend(
                (_render_loc([*loc, *sub]), _at_line(message, [*loc, *sub], lines))
                for sub, message in inner.problems
            )
        else:
            problems.append((_render_loc(loc), _at_line(_message(err, loc, root), loc, lines)))
    field, message = problems[0]
    if len(problems) > 1:
        shown = [f"  {where or '(top level)'}: {what}" for where, what in problems[:20]]
        if len(problems) > 20:
            shown.append(f"  ... and {len(problems) - 20} more")
        message = f"{len(problems)} problems:\n" + "\n".join(shown)
    return ConfigError(message, source=source, field=field or None)


# --- loading ------------------------------------------------------------------------------


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_YAML_BYTES + 1)  # enough for the size check to fire
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", source=str(path)) from None


def load_submit_config(path: Path, *, environ: Mapping[str, str] | None = None) -> SubmitConfig:
    """Read and validate a submit config; ``environ`` feeds ``from_env`` (default os.environ)."""
    source = str(path)
    raw, lines = load_yaml_lines(_read(path), source=source)
    if not isinstance(raw, Mapping):
        raise ConfigError("expected a mapping with a 'driver' key at the top", source=source)
    # Top-level x-* keys are the user's own (a home for anchors, as in docker compose).
    raw = {k: v for k, v in raw.items() if not (isinstance(k, str) and k.startswith("x-"))}
    context = {
        FROM_FILE: True,
        "base_dir": path.absolute().parent,
        "environ": os.environ if environ is None else environ,
    }
    try:
        parsed = _SubmitFile.model_validate(raw, context=context)
    except ValidationError as exc:
        raise _config_error(exc, source=source, root=_SubmitFile, lines=lines) from None
    return SubmitConfig(driver=parsed.driver, source=path.absolute())


def load_profile(path: Path) -> ClusterProfile:
    """Read and validate one cluster profile; its name is the file's stem."""
    source = str(path)
    data = _read(path)
    if len(data) > MAX_YAML_BYTES:
        raise ConfigError(f"larger than {MAX_YAML_BYTES} bytes", source=source)
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})", source=source
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", source=source) from None
    clash = sorted(_FROM_CALLER & raw.keys())
    if clash:
        raise ConfigError(
            "not a profile key (the name comes from the file name); remove it",
            source=source,
            field=clash[0],
        )
    try:
        _check_name(path.stem, "profile name")
    except ValueError as exc:
        raise ConfigError(f"{exc}; rename the file", source=source) from None
    try:
        return ClusterProfile.model_validate(
            {**raw, "name": path.stem, "source": path.absolute()},
            context={FROM_FILE: True, "base_dir": path.absolute().parent},
        )
    except ValidationError as exc:
        raise _config_error(exc, source=source, root=ClusterProfile) from None


# --- lookup -------------------------------------------------------------------------------


def _config_home() -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    return Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"


def default_clusters_dirs(cli_dir: Path | None, settings: Settings) -> list[Path]:
    """Where profiles are looked up, in order (interface.md section 2), duplicates dropped.

    ``--clusters-dir`` and ``REMOTE_CHAIN_CLUSTERS_DIR`` name folders on purpose, so one that
    does not exist is an error (a typo must not fall through to another folder's profile).
    ``$XDG_CONFIG_HOME`` replaces ``~/.config`` when set, as the XDG spec asks.
    """
    explicit: list[tuple[Path, str, str]] = []
    if cli_dir is not None:
        explicit.append((cli_dir.expanduser(), COMMAND_LINE, "--clusters-dir"))
    explicit.extend(
        (folder, "environment", "REMOTE_CHAIN_CLUSTERS_DIR") for folder in settings.clusters_dirs()
    )
    for folder, source, field in explicit:
        if not folder.is_dir():
            raise ConfigError(f"{folder} is not a folder", source=source, field=field)
    candidates = [
        *(folder for folder, _, _ in explicit),
        Path("clusters"),
        _config_home() / "remote-chain" / "clusters",
    ]
    ordered: list[Path] = []
    for folder in candidates:
        absolute = folder.absolute()
        if absolute not in ordered:
            ordered.append(absolute)
    return ordered


def _profile_files(clusters_dirs: Sequence[Path]) -> dict[str, Path]:
    """Profile name -> file, the first folder winning."""
    found: dict[str, Path] = {}
    for folder in clusters_dirs:
        try:
            files = sorted(folder.glob("*.toml")) if folder.is_dir() else []
        except OSError as exc:
            raise ConfigError(f"cannot list: {exc.strerror or exc}", source=str(folder)) from None
        for file in files:
            found.setdefault(file.stem, file)
    return found


def list_profiles(clusters_dirs: Sequence[Path]) -> list[ClusterProfile]:
    """Every profile found, sorted by name; a name in two folders is taken from the first."""
    files = _profile_files(clusters_dirs)
    return [load_profile(files[name]) for name in sorted(files)]


def scan_profiles(
    clusters_dirs: Sequence[Path],
) -> tuple[list[ClusterProfile], list[tuple[str, Path, ConfigError]]]:
    """Every profile found, and every broken one with its error (``clusters`` lists both)."""
    good: list[ClusterProfile] = []
    broken: list[tuple[str, Path, ConfigError]] = []
    files = _profile_files(clusters_dirs)
    for name in sorted(files):
        try:
            good.append(load_profile(files[name]))
        except ConfigError as exc:
            broken.append((name, files[name], exc))
    return good, broken


def find_profile(name: str, *, clusters_dirs: Sequence[Path]) -> ClusterProfile:
    """The profile ``<name>.toml`` from the first folder holding one."""
    try:
        _check_name(name, "cluster name")
    except ValueError as exc:
        raise ConfigError(str(exc), source=COMMAND_LINE, field="cluster") from None
    for folder in clusters_dirs:
        candidate = folder / f"{name}.toml"
        try:
            exists = candidate.is_file()
        except OSError as exc:
            raise ConfigError(f"cannot read: {exc.strerror}", source=str(candidate)) from None
        if exists:
            return load_profile(candidate)
    searched = ", ".join(
        f"{folder}{'' if folder.is_dir() else ' (missing)'}" for folder in clusters_dirs
    )
    names = ", ".join(sorted(_profile_files(clusters_dirs))) or "none"
    raise ConfigError(
        f"unknown cluster {name!r}: no {name}.toml in {searched or 'no folder'}; "
        f"profiles found: {names}",
        source=COMMAND_LINE,
        field="cluster",
    )


# --- a config against a cluster -----------------------------------------------------------


def check_for_cluster(config: SubmitConfig, profile: ClusterProfile) -> None:
    """Raise ``ConfigError`` if the config asks for what the cluster's executor cannot do."""
    if profile.executor in RESUMABLE_EXECUTORS:
        return
    offending = [n for n, bench in config.driver.benchmarks.items() if bench.resume is not None]
    if offending:
        names = ", ".join(repr(n) for n in offending)
        what = f"benchmarks {names} are" if len(offending) > 1 else f"benchmark {names} is"
        raise ConfigError(
            f"{what} resumable, but cluster profile {profile.name!r} "
            f"({profile.source}) uses executor {profile.executor!r}, which cannot chain jobs; "
            f"resumable needs executor {' or '.join(sorted(RESUMABLE_EXECUTORS))!r}",
            source=str(config.source),
            field=_render_loc(("driver", "benchmarks", offending[0], "resumable")),
        )


def effective_slurm(profile: ClusterProfile, bench: BenchmarkConfig) -> SlurmOptions:
    """The profile's [slurm] with the benchmark's explicitly set keys on top.

    ``extra_args`` add up, profile's first: for a repeated option sbatch's last one wins.
    """
    override = bench.slurm
    update: dict[str, Any] = {
        key: getattr(override, key) for key in override.model_fields_set if key != "extra_args"
    }
    update["extra_args"] = profile.slurm.extra_args + override.extra_args
    return profile.slurm.model_copy(update=update)
