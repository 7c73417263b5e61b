"""Field checks shared by the submit and profile models, and their frozen base.

A validator that checks a whole subtree raises ``Problems`` (a path below the field and a
message per problem); ``translate.py`` turns them, like every pydantic error, into one
``ConfigError``. Durations: see ``Duration`` and ``FROM_FILE``.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, ValidationInfo

from remote_chain.core.durations import MAX_DURATION_S, format_duration, parse_duration
from remote_chain.core.models import NAME_RE
from remote_chain.protocol.layout import OWN_PREFIX, RECORD_FILE, STATE_PREFIX, UPLOADS_DIR

MAX_NAME_LEN = 100
# Siblings of the benchmark folders in <workdir>/<run_id>/<cluster>/ (interface.md section 3):
# the uploads folder, the run record (and its temporary file), and the run's own dot-files
# (.remote_chain_since, .remote_chain_submit.out, ...). The prefixes are reserved whole, so a
# file the layout adds later can never land on a benchmark's folder.
RESERVED_BENCHMARK_NAMES = frozenset({UPLOADS_DIR, RECORD_FILE})
RESERVED_BENCHMARK_PREFIXES = (OWN_PREFIX, STATE_PREFIX, RECORD_FILE)
# Validation-context key set by the loaders: ints in durations are Slurm minutes.
FROM_FILE = "from_file"
# The `source` of a config or profile built in Python rather than loaded from a file.
IN_CODE = Path("<python>")

CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


class Problems(ValueError):
    """Raised by a validator that checks a whole subtree: (path below the field, message)."""

    def __init__(self, problems: list[tuple[tuple[str | int, ...], str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(message for _, message in problems))


def render_loc(parts: Iterable[object]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif isinstance(part, str) and _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:  # json.dumps quotes, and escapes newlines and non-ASCII, so the path prints safely
            out += f"[{json.dumps(str(part))}]"
    return out


def check_name(name: str, what: str = "name") -> str:
    if not NAME_RE.fullmatch(name) or name in (".", ".."):
        raise ValueError(
            f"invalid {what} {json.dumps(name)}: use letters, digits, '.', '_' and '-' "
            "(it names a folder on the cluster), and not '.' or '..'"
        )
    if len(name) > MAX_NAME_LEN:
        raise ValueError(f"{what} is longer than {MAX_NAME_LEN} characters")
    return name


def check_benchmark_name(name: str) -> str:
    check_name(name, "benchmark name")
    if name in RESERVED_BENCHMARK_NAMES or name.startswith(RESERVED_BENCHMARK_PREFIXES):
        raise ValueError(
            f"benchmark name {name!r} is reserved: the run folder on the cluster holds a file "
            f"or folder of that name (reserved: {', '.join(sorted(RESERVED_BENCHMARK_NAMES))} "
            f"and names starting with {', '.join(RESERVED_BENCHMARK_PREFIXES)})"
        )
    return name


def one_line(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if CONTROL.search(value):
        raise ValueError("must be one line, without control characters")
    return value


def context_of(info: ValidationInfo) -> Mapping[str, Any]:
    return info.context if isinstance(info.context, Mapping) else {}


def _parse_duration_field(value: Any, info: ValidationInfo) -> int:
    if isinstance(value, datetime.time):
        # TOML reads an unquoted 04:00:00 as a time of day.
        raise ValueError('a time of day is not a duration: quote it, e.g. time = "04:00:00"')
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and not context_of(info).get(FROM_FILE)
    ):
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


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
