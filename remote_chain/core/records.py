"""PURE: the one JSON encoder of every result record (``--json``, interface.md §4).

A record is a frozen dataclass deriving from ``Record``; its JSON is its fields in order,
encoded recursively: enums by value, tuples as lists, an exception as its message, a nested
record by this same encoder. Three declarations cover what a field's name and value alone do
not say, so no record writes its own ``to_json``:

- ``field(metadata=json_meta(key=..., empty_null=..., skip=...))``: a field under another
  key, ``""`` as ``null``, or a field left out (not part of the document);
- ``JSON_KEYS``: the output order when it names properties too (``ok``, ``level``, ``kind``);
- ``JSON_FLATTEN``: attributes whose document's keys are merged into this one's.

Keys and values are the interface's contract: tests/test_records.py pins every shape.
One value keeps a hand-made document: ``doctor.DoctorFacts`` regroups its flat findings into
nested sections (``accounting``, ``job_limits``, ...); the encoder takes its ``to_json()``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from json.encoder import encode_basestring
from typing import ClassVar, cast

_KEY = "json_key"
_EMPTY_NULL = "json_empty_null"
_SKIP = "json_skip"


def json_meta(
    *, key: str | None = None, empty_null: bool = False, skip: bool = False
) -> dict[str, object]:
    """A field's ``metadata``: how the encoder writes it (``dataclasses.field(metadata=...)``)."""
    return {_KEY: key, _EMPTY_NULL: empty_null, _SKIP: skip}


class Record:
    """A result record: ``to_json()`` is ``encode(self)``, the one encoder."""

    # Attribute names (fields or properties) in output order; None: every field, in order.
    JSON_KEYS: ClassVar[tuple[str, ...] | None] = None
    # Attributes whose (dict) document is merged into this record's, not nested under a key.
    JSON_FLATTEN: ClassVar[frozenset[str]] = frozenset()

    def to_json(self) -> dict[str, object]:
        document = encode(self)
        assert isinstance(document, dict)  # noqa: S101 - a Record always encodes to a dict
        return document


def encode(value: object) -> object:
    """``value`` as JSON-ready data (dicts, lists, str, int, float, bool, None)."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, enum.Enum):
        return encode(value.value)
    if isinstance(value, str):
        return value
    if isinstance(value, BaseException):
        return str(value)
    if isinstance(value, Record) and dataclasses.is_dataclass(value):
        return _encode_record(value)
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    to_json = getattr(value, "to_json", None)
    if callable(to_json):  # DoctorFacts: a regrouped document, see the module docstring
        return to_json()
    raise TypeError(f"no JSON form for {type(value).__name__}")


# Per attribute: its name, its key in the document (None: merged, JSON_FLATTEN), and
# whether "" reads as null.
_Plan = tuple[tuple[str, str | None, bool], ...]
_PLANS: dict[type, _Plan] = {}
# Values written as they are: the common case of a field, without encode's tests.
_PLAIN = frozenset({str, int, float, type(None), bool})


def _plan(cls: type[Record]) -> _Plan:
    """What ``_encode_record`` writes of a record class, worked out once per class: a status
    encodes a few records per chain, and asking dataclasses each time would repeat the work."""
    plan = _PLANS.get(cls)
    if plan is None:
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        names = cls.JSON_KEYS if cls.JSON_KEYS is not None else tuple(fields)
        steps = []
        for name in names:
            meta = fields[name].metadata if name in fields else {}
            if meta.get(_SKIP):
                continue
            key = None if name in cls.JSON_FLATTEN else (meta.get(_KEY) or name)
            steps.append((name, key, bool(meta.get(_EMPTY_NULL))))
        plan = _PLANS[cls] = tuple(steps)
    return plan


def _encode_record(record: Record) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, key, empty_null in _plan(type(record)):
        value = getattr(record, name)
        if empty_null and value == "":
            value = None
        encoded = value if type(value) in _PLAIN else encode(value)
        if key is None:
            if not isinstance(encoded, dict):
                raise TypeError(f"{type(record).__name__}.{name}: only a record flattens")
            out.update(encoded)
        else:
            out[key] = encoded
    return out


class _NotPlain(Exception):
    """A value ``indented_json`` leaves to ``json.dumps``."""


_PLAIN_TYPES = frozenset({str, int, float, bool, type(None), dict, list, tuple})
_STR_ONLY = {str}
# The least items a container has for the one-join shortcut to be tried: asking each small
# one (a chain's record, a dozen keys) its types costs more than the shortcut saves.
_FLAT_MIN = 16


def _text_mapping(value: dict[object, object], pad: str) -> str | None:
    """A dict of exact str to exact str (the index's chain states, their final sacct lines)
    as ``indented_json`` writes it, in one join, not four parts and a walk a pair; None for
    any other dict."""
    if not _STR_ONLY == set(map(type, value.values())) == set(map(type, value)):
        return None
    pairs = (f"{encode_basestring(k)}: {encode_basestring(v)}" for k, v in value.items())  # type: ignore[arg-type]
    return _joined("{", pairs, pad, "}")


def _joined(opening: str, items: Iterable[str], pad: str, closing: str) -> str:
    """Encoded items of a non-empty container, one a line, indented one step past ``pad``."""
    inner = pad + "  "
    return opening + "\n" + inner + (",\n" + inner).join(items) + "\n" + pad + closing


def indented_json(document: object) -> str:
    """``json.dumps(document, indent=2, ensure_ascii=False)``, byte for byte, done with less work.

    With ``indent`` the json module encodes in Python, a generator per value; this walk of
    the plain types (dict, list, tuple, str, int, float, bool, None; C's ``encode_basestring``
    for the strings) does less per value. Every ``--json`` output goes through it; the local
    index writes its entries with it too.
    Anything else (a subclass, a key that is not a str, NaN, a cycle) goes to ``json.dumps``
    whole, which says what it says of it.
    """
    parts: list[str] = []
    add = parts.append

    def walk(value: object, pad: str) -> None:
        if type(value) not in _PLAIN_TYPES:
            raise _NotPlain
        if isinstance(value, str):
            add(encode_basestring(value))
        elif value is None or isinstance(value, bool):
            add("null" if value is None else "true" if value else "false")
        elif isinstance(value, int):
            add(int.__repr__(value))
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise _NotPlain
            add(float.__repr__(value))
        elif isinstance(value, dict):
            mapping(value, pad)
        elif isinstance(value, list | tuple):
            sequence(value, pad)

    def mapping(value: dict[object, object], pad: str) -> None:
        if not value:
            add("{}")
            return
        text = _text_mapping(value, pad) if len(value) >= _FLAT_MIN else None
        if text is not None:
            add(text)
            return
        inner = pad + "  "
        sep = "{\n" + inner
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            add(sep)
            add(encode_basestring(key))
            add(": ")
            walk(item, inner)
            sep = ",\n" + inner
        add("\n" + pad + "}")

    def sequence(value: Sequence[object], pad: str) -> None:
        if not value:
            add("[]")
            return
        if len(value) >= _FLAT_MIN and set(map(type, value)) == _STR_ONLY:  # benchmarks
            add(_joined("[", map(encode_basestring, cast("Sequence[str]", value)), pad, "]"))
            return
        inner = pad + "  "
        sep = "[\n" + inner
        for item in value:
            add(sep)
            walk(item, inner)
            sep = ",\n" + inner
        add("\n" + pad + "]")

    try:
        walk(document, "")
    except (_NotPlain, RecursionError):
        return json.dumps(document, indent=2, ensure_ascii=False)
    return "".join(parts)
