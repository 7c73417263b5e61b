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

import yaml

from remote_chain.config.yamlstrict import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    Path,
    StrictLoader,
    describe,
    node_lines,
)
from remote_chain.errors import ConfigError

__all__ = ["MAX_ALIAS_NODES", "MAX_DEPTH", "MAX_YAML_BYTES", "Path", "load_yaml", "load_yaml_lines"]

MAX_YAML_BYTES = 1024 * 1024


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
        loader = StrictLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None, {}
            data = loader.construct_document(node)
            lines: dict[Path, int] = {}
            # After construction: merge keys are flattened, so merged keys have paths too.
            node_lines(node, (), lines, [MAX_ALIAS_NODES * 2])
            return data, lines
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise ConfigError(describe(exc, text), source=source) from None
    except RecursionError:  # belt and braces: MAX_DEPTH should stop it first
        raise ConfigError("invalid YAML: nested too deeply", source=source) from None
