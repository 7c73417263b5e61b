"""PURE: YAML bytes to plain Python data, strictly, for config files.

PyYAML's ``safe_load`` is safe from code execution but not from surprises. This loader
differs from it on purpose:

- UTF-8 only, at most ``MAX_YAML_BYTES``: a config is small text, and an error is better than
  mojibake in a command line.
- Anchors, aliases and merge keys (``<<: *gpu``) are accepted (one ``slurm:`` block shared by
  forty benchmarks is the common pattern), but what aliases expand to is capped at
  ``MAX_ALIAS_NODES`` nodes in all: a ten-line "billion laughs" alias bomb would otherwise
  expand to gigabytes. Keys written in a mapping override merged ones, as YAML's merge key
  says; a key written twice in one mapping is still an error.
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
``load_yaml_lines`` also returns the line of every key and list item, so that validation
errors (config.py) can name the line as well as the field.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from remote_chain.errors import ConfigError

MAX_YAML_BYTES = 1024 * 1024
MAX_DEPTH = 64
# Nodes that aliases may expand to, all aliases of a document together: a real config's
# shared blocks come to a few thousand at most; "billion laughs" needs billions.
MAX_ALIAS_NODES = 100_000
# A path into the loaded data: mapping keys (as str) and list indexes.
Path = tuple[str | int, ...]

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
    _expanded = 0

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        # id(node) -> how many nodes it stands for once every alias inside it is expanded.
        self._weights: dict[int, int] = {}

    def _weight(self, node: Node) -> int:
        return self._weights.get(id(node), 1)

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        mark: Any = event.start_mark
        if self._depth >= MAX_DEPTH:
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is None:
            return None
        if isinstance(event, yaml.AliasEvent):
            # The alias stands for a copy of its anchor's whole tree: count it, so that nested
            # aliases (each level doubling the last) hit the cap after a few levels.
            self._expanded += self._weight(node)
            if self._expanded > MAX_ALIAS_NODES:
                raise ComposerError(
                    None,
                    None,
                    f"aliases expand to more than {MAX_ALIAS_NODES} nodes (an alias bomb?)",
                    mark,
                )
        elif isinstance(node, MappingNode):
            self._weights[id(node)] = 1 + sum(
                self._weight(k) + self._weight(v) for k, v in node.value
            )
        elif isinstance(node, SequenceNode):
            self._weights[id(node)] = 1 + sum(self._weight(item) for item in node.value)
        return node

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, MappingNode):
            raise ConstructorError(
                None, None, f"expected a mapping, found {type(node).__name__}", node.start_mark
            )
        own = sum(1 for key_node, _ in node.value if key_node.tag != _CORE + "merge")
        # PyYAML's flatten_mapping puts the merged pairs first, in merge order (for a list of
        # mappings the first one wins), and keeps the written pairs last.
        self.flatten_mapping(node)
        merged = node.value[: len(node.value) - own]
        mapping: dict[Any, Any] = {}
        for key_node, value_node in merged:
            mapping[self._key(key_node, deep)] = self.construct_object(value_node, deep=deep)
        written: set[Any] = set()
        for key_node, value_node in node.value[len(node.value) - own :]:
            key = self._key(key_node, deep)
            if key in written:
                raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            written.add(key)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def _key(self, key_node: Node, deep: bool) -> Any:
        key = self.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise ConstructorError(
                None, None, "a mapping key must be a scalar", key_node.start_mark
            ) from None
        return key

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


def _lines(node: Node, path: Path, out: dict[Path, int], budget: list[int]) -> None:
    """The 1-based line of every key and list item under ``node``, keyed by its path.

    A merged key (``<<: *gpu``) has the line where the anchor wrote it, unless overridden.
    """
    budget[0] -= 1
    if budget[0] < 0:  # aliases may repeat subtrees; their size is capped, this walk too
        return
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                continue
            sub = (*path, str(key_node.value))
            out[sub] = key_node.start_mark.line + 1  # written keys come after merged ones
            _lines(value_node, sub, out, budget)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            out[(*path, i)] = item.start_mark.line + 1
            _lines(item, (*path, i), out, budget)


def load_yaml(data: bytes, *, source: str) -> object:
    """The one document in ``data`` as plain dicts, lists and scalars; ``ConfigError`` otherwise."""
    return load_yaml_lines(data, source=source)[0]


def load_yaml_lines(data: bytes, *, source: str) -> tuple[object, dict[Path, int]]:
    """``load_yaml``, and the line of every key and list item (path -> 1-based line)."""
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
            node = loader.get_single_node()
            if node is None:
                return None, {}
            data = loader.construct_document(node)
            lines: dict[Path, int] = {}
            # After construction: merge keys are flattened, so merged keys have paths too.
            _lines(node, (), lines, [MAX_ALIAS_NODES * 2])
            return data, lines
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise ConfigError(_describe(exc, text), source=source) from None
    except RecursionError:  # belt and braces: MAX_DEPTH should stop it first
        raise ConfigError("invalid YAML: nested too deeply", source=source) from None
