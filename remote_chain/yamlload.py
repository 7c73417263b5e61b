"""PURE: YAML bytes to plain Python data, strictly, for config files.

PyYAML's ``safe_load`` is safe from code execution but not from surprises. This loader
differs from it on purpose:

- UTF-8 only, at most ``MAX_YAML_BYTES``: a config is small text, and an error is better than
  mojibake in a command line.
- No anchors or aliases: a ten-line "billion laughs" alias bomb expands to gigabytes, and a
  config has no need for them. Merge keys (``<<``) go with them.
- YAML 1.1's sexagesimal numbers are not resolved: ``time: 48:00:00`` stays the string
  ``"48:00:00"`` (PyYAML would read 172800), so Slurm durations reach ``parse_duration``
  exactly as written. Only decimal ints are implicit ints: ``0123`` (YAML 1.1 octal 83),
  ``0x1f`` and ``0b101`` stay strings rather than silently changing value.
- Dates stay strings (``2024-02-30`` would otherwise crash ``datetime``), ``=`` is a string
  (PyYAML resolves it to a tag it cannot construct), and only the core tags (str, int, float,
  bool, null, seq, map) may be written explicitly.
- A key given twice is an error, not last-one-wins.
- Nesting deeper than ``MAX_DEPTH`` is an error, not a RecursionError.

Every failure is a ``ConfigError`` naming the file and, where YAML knows it, the line.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode

from remote_chain.errors import ConfigError

MAX_YAML_BYTES = 1024 * 1024
MAX_DEPTH = 64

_CORE = "tag:yaml.org,2002:"
_KEPT_RESOLVERS = {_CORE + "null", _CORE + "bool", _CORE + "merge"}
# PyYAML's own patterns minus the sexagesimal, octal, hex and binary branches.
_INT_RE = re.compile(r"^[-+]?(?:0|[1-9][0-9_]*)$")
_FLOAT_RE = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9_]+(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.VERBOSE,
)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with the restrictions listed in the module docstring."""

    # A fresh table, so nothing registered here leaks into yaml.SafeLoader.
    yaml_constructors: ClassVar[dict[str | None, Any]] = {}

    _depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        mark: Any = event.start_mark
        anchor = getattr(event, "anchor", None)
        if isinstance(event, yaml.AliasEvent):
            raise ComposerError(None, None, f"aliases (*{anchor}) are not allowed", mark)
        if anchor is not None:
            raise ComposerError(None, None, f"anchors (&{anchor}) are not allowed", mark)
        if self._depth >= MAX_DEPTH:
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        return node

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, MappingNode):
            raise ConstructorError(
                None, None, f"expected a mapping, found {type(node).__name__}", node.start_mark
            )
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _CORE + "merge":
                raise ConstructorError(
                    None, None, "merge keys (<<) are not allowed", key_node.start_mark
                )
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in mapping
            except TypeError:
                raise ConstructorError(
                    None, None, "a mapping key must be a scalar", key_node.start_mark
                ) from None
            if duplicate:
                raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def construct_yaml_int(self, node: ScalarNode) -> int:
        if ":" in str(node.value):  # `!!int 1:30` would still be read as base 60
            raise ConstructorError(
                None, None, "sexagesimal (base 60) integers are not supported", node.start_mark
            )
        try:
            return super().construct_yaml_int(node)
        except ValueError as exc:  # `!!int abc`, or more digits than int() accepts
            raise ConstructorError(None, None, f"not an integer: {exc}", node.start_mark) from None

    def construct_yaml_float(self, node: ScalarNode) -> float:
        try:
            return super().construct_yaml_float(node)
        except ValueError as exc:  # `!!float abc`
            raise ConstructorError(None, None, f"not a number: {exc}", node.start_mark) from None

    def construct_yaml_bool(self, node: ScalarNode) -> bool:
        value = self.construct_scalar(node)
        if isinstance(value, str) and value.lower() in self.bool_values:
            return bool(self.bool_values[value.lower()])
        # PyYAML would raise KeyError for `!!bool maybe`.
        raise ConstructorError(None, None, f"not a boolean: {value!r}", node.start_mark)

    def construct_disallowed(self, node: Node) -> Any:
        tag = node.tag.replace(_CORE, "!!")
        raise ConstructorError(None, None, f"tag {tag} is not allowed here", node.start_mark)


# A fresh table too: PyYAML's minus int, float (re-added below), timestamp, value and yaml.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag in _KEPT_RESOLVERS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(_CORE + "int", _INT_RE, list("-+0123456789"))
_StrictLoader.add_implicit_resolver(_CORE + "float", _FLOAT_RE, list("-+0123456789."))
for _tag, _construct in {
    "null": yaml.SafeLoader.construct_yaml_null,
    "bool": _StrictLoader.construct_yaml_bool,
    "int": _StrictLoader.construct_yaml_int,
    "float": _StrictLoader.construct_yaml_float,
    "str": yaml.SafeLoader.construct_yaml_str,
    "seq": yaml.SafeLoader.construct_yaml_seq,
    "map": yaml.SafeLoader.construct_yaml_map,
}.items():
    _StrictLoader.add_constructor(_CORE + _tag, _construct)
# Every other tag (!!binary, !!timestamp, !!set, !!omap, !!pairs, !custom, ...).
_StrictLoader.add_constructor(None, _StrictLoader.construct_disallowed)


def _describe(exc: yaml.YAMLError, text: str) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        context = f" ({exc.context})" if exc.context and exc.problem else ""
        if mark is None:
            return f"invalid YAML: {problem}{context}"
        return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}{context}"
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        char = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or "?")
        return f"invalid YAML at line {line}: control character U+{char:04X} is not allowed"
    return f"invalid YAML: {exc}"


def load_yaml(data: bytes, *, source: str) -> object:
    """The one document in ``data`` as plain dicts, lists and scalars; ``ConfigError`` otherwise."""
    if len(data) > MAX_YAML_BYTES:
        raise ConfigError(
            f"file is {len(data)} bytes; a config may be at most {MAX_YAML_BYTES} bytes",
            source=source,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line} (offset {exc.start});"
            " save the file as UTF-8",
            source=source,
        ) from None
    try:
        # The Reader checks for non-printable characters already in the constructor.
        loader = _StrictLoader(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise ConfigError(_describe(exc, text), source=source) from None
    except RecursionError:  # belt and braces: MAX_DEPTH should stop it first
        raise ConfigError("invalid YAML: nested too deeply", source=source) from None
