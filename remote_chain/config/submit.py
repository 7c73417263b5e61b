"""The submit config (YAML, interface.md section 1): driver, env, uploads, benchmarks."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    Discriminator,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from remote_chain.config.slurm import SlurmOptions
from remote_chain.config.validators import (
    CONTROL,
    IN_CODE,
    Duration,
    Frozen,
    Problems,
    check_benchmark_name,
    context_of,
    one_line,
)

MAX_UPLOADS = 1000
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RUN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")
TAG_FLAG = "resumable:bool"
TAG_SPEC = "resumable:mapping"


class ResumableSpec(Frozen):
    """The mapping form of ``resumable`` (resumable-runs.md, "To tune it")."""

    max_retries: StrictInt = Field(default=3, ge=0, le=1000)
    max_walltime: Duration | None = None


class EnvVar(Frozen):
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


# driver.env names a job may not set: the job script exports driver.env before
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
        return TAG_FLAG
    if isinstance(value, Mapping | ResumableSpec):
        return TAG_SPEC
    return None


Resumable = Annotated[
    Annotated[StrictBool, Tag(TAG_FLAG)] | Annotated[ResumableSpec, Tag(TAG_SPEC)],
    Discriminator(
        _resumable_kind,
        custom_error_type="resumable_type",
        custom_error_message="expected true, false or a mapping with max_retries/max_walltime",
    ),
]


class BenchmarkConfig(Frozen):
    """One entry of ``driver.benchmarks`` (interface.md section 1)."""

    run: dict[str, Any] | None = None
    command: Annotated[StrictStr, AfterValidator(one_line)] | None = None
    resumable: Resumable = False
    slurm: SlurmOptions = SlurmOptions()

    @field_validator("run", mode="before")
    @classmethod
    def _run(cls, value: Any) -> Any:
        if value is None or not isinstance(value, Mapping):
            return value  # pydantic reports a non-mapping
        problems = _run_problems(value, ())
        if problems:
            raise Problems(problems)
        return value

    @model_validator(mode="after")
    def _exclusive(self) -> BenchmarkConfig:
        if self.command is not None and self.resume is not None:
            # resumable-runs.md: resuming relies on the runner's cache, a command has none.
            raise Problems([(("command",), "a benchmark with a command cannot be resumable")])
        if self.command is not None and self.run is not None:
            raise Problems([(("command",), "give either command or run, not both")])
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
    if not isinstance(entry, str) or not entry.strip() or CONTROL.search(entry):
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


class DriverConfig(Frozen):
    """The ``driver`` mapping of a submit config."""

    runner: Annotated[StrictStr, AfterValidator(one_line)] = "gym eval run"
    env: tuple[EnvVar, ...] = ()
    upload: tuple[Path, ...] = ()
    benchmarks: dict[Annotated[StrictStr, AfterValidator(check_benchmark_name)], BenchmarkConfig]

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return ()
        if isinstance(value, list | tuple) and all(isinstance(v, EnvVar) for v in value):
            return tuple(value)
        if not isinstance(value, Mapping):
            raise ValueError("expected a mapping of NAME: value")
        environ = context_of(info).get("environ", os.environ)
        found: list[EnvVar] = []
        problems: list[tuple[tuple[str | int, ...], str]] = []
        for name, spec in value.items():
            var = _env_var(name, spec, environ)
            if isinstance(var, EnvVar):
                found.append(var)
            else:
                problems.extend(((str(name),), message) for message in var)
        if problems:
            raise Problems(problems)
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
        base = Path(context_of(info).get("base_dir", Path.cwd()))
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
            raise Problems(problems)
        return tuple(paths)

    @field_validator("benchmarks")
    @classmethod
    def _some_benchmarks(cls, value: dict[str, BenchmarkConfig]) -> dict[str, BenchmarkConfig]:
        if not value:
            raise ValueError("no benchmarks: add at least one")
        return value


class SubmitFile(Frozen):
    driver: DriverConfig


class SubmitConfig(Frozen):
    """A submit config: loaded from a file (``source``), or built in code.

    In code, durations are seconds and upload paths are relative to the working directory::

        SubmitConfig(driver=DriverConfig(benchmarks={"gpqa": BenchmarkConfig(run={...})}))
    """

    driver: DriverConfig
    source: Path = IN_CODE
