"""PURE: the strict PyYAML loader behind ``yamlload`` (whose docstring says what it refuses):
its resolver, constructor and composer, and the line of every node."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

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


class StrictLoader(yaml.SafeLoader):
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
StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag in _KEPT_RESOLVERS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
StrictLoader.add_implicit_resolver(_CORE + "int", _INT_RE, list("-+0123456789"))
StrictLoader.add_implicit_resolver(_CORE + "float", _FLOAT_RE, list("-+0123456789."))
for _tag, _construct in {
    "null": yaml.SafeLoader.construct_yaml_null,
    "bool": StrictLoader.construct_yaml_bool,
    "int": StrictLoader.construct_yaml_int,
    "float": StrictLoader.construct_yaml_float,
    "str": yaml.SafeLoader.construct_yaml_str,
    "seq": yaml.SafeLoader.construct_yaml_seq,
    "map": yaml.SafeLoader.construct_yaml_map,
}.items():
    StrictLoader.add_constructor(_CORE + _tag, _construct)
# Every other tag (!!binary, !!timestamp, !!set, !!omap, !!pairs, !custom, ...).
StrictLoader.add_constructor(None, StrictLoader.construct_disallowed)


def describe(exc: yaml.YAMLError, text: str) -> str:
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


def node_lines(node: Node, path: Path, out: dict[Path, int], budget: list[int]) -> None:
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
            node_lines(value_node, sub, out, budget)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            out[(*path, i)] = item.start_mark.line + 1
            node_lines(item, (*path, i), out, budget)
