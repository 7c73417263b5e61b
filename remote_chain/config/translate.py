"""Error translation: one pydantic ``ValidationError`` -> one ``ConfigError``.

The ``ConfigError`` names the file (``source``) and the dotted field path (``field``), e.g.
``driver.benchmarks.gpqa.resumable.max_retries``, with the line the file wrote it on; an
unknown key gets a "did you mean" and the keys allowed there. A value is never echoed for a
type error (it may be a secret), only its type.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from remote_chain.config.submit import TAG_FLAG, TAG_SPEC
from remote_chain.config.validators import Problems, render_loc
from remote_chain.errors import ConfigError

FROM_CALLER = frozenset({"name", "source"})  # ClusterProfile fields not written in the file
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
        allowed = [f for f in model.model_fields if f not in FROM_CALLER] if model else []
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


def config_error(
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
        loc = [p for p in err["loc"] if p not in ("[key]", TAG_FLAG, TAG_SPEC)]
        inner = (err.get("ctx") or {}).get("error")
        if isinstance(inner, Problems):
            problems.extend(
                (render_loc([*loc, *sub]), _at_line(message, [*loc, *sub], lines))
                for sub, message in inner.problems
            )
        else:
            problems.append((render_loc(loc), _at_line(_message(err, loc, root), loc, lines)))
    field, message = problems[0]
    if len(problems) > 1:
        shown = [f"  {where or '(top level)'}: {what}" for where, what in problems[:20]]
        if len(problems) > 20:
            shown.append(f"  ... and {len(problems) - 20} more")
        message = f"{len(problems)} problems:\n" + "\n".join(shown)
    return ConfigError(message, source=source, field=field or None)
