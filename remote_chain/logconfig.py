"""Logging, configured in one place: structlog to stderr, stdlib (asyncssh) routed through it.

The CLI calls ``configure_logging`` once per invocation (STYLE.md §6):

- every record, ours (structlog) and foreign (asyncssh's stdlib ``logging``), goes through
  one stdlib handler whose ``ProcessorFormatter`` renders it, so both look the same;
- stderr only: stdout holds results (tables, the one ``--json`` document);
- human text (the console renderer, colours only on a terminal) whether or not stderr is a
  terminal: CI logs are read by people, as with ``gh`` and ``kubectl``; JSON lines only
  with ``--log-format json`` (or ``REMOTE_CHAIN_LOG_FORMAT=json``);
- WARNING by default, INFO with ``-v``, DEBUG with ``-vv``; asyncssh, which logs every
  channel at INFO, stays at WARNING unless ``-vv``;
- ``redact_secrets`` replaces the value of any key named like secret/password/token/key,
  nested ones included: defense in depth, since no code path is meant to log one.

The handler looks ``sys.stderr`` up at every record instead of holding the stream it saw at
start-up, so rich's live displays (the progress spinner) can redirect it above themselves
and test runners can capture it.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping
from typing import Any, Literal

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

LogFormat = Literal["console", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("console", "json")
REDACTED = "[redacted]"
# Matched anywhere in a key, case-insensitively: "TOKEN", "api_key", "db_password", ...
SECRET_KEY_RE = re.compile(r"secret|password|passwd|token|key", re.IGNORECASE)
# Loggers that are chatty at INFO; kept at WARNING unless -vv.
QUIET_LOGGERS = ("asyncssh",)
_MAX_DEPTH = 8  # nested containers redacted this deep; deeper ones are replaced whole


def level_for(verbosity: int) -> int:
    """The level of our own loggers for a ``-v`` count."""
    if verbosity <= 0:
        return logging.WARNING
    return logging.INFO if verbosity == 1 else logging.DEBUG


def _redact(value: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return REDACTED
    if isinstance(value, Mapping):
        return {
            k: REDACTED if isinstance(k, str) and SECRET_KEY_RE.search(k) else _redact(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(_redact(v, depth + 1) for v in value)
    return value


def redact_secrets(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Replace the value of every key named like a secret, at any depth of the event."""
    for key in list(event_dict):
        if key == "event":
            continue
        if SECRET_KEY_RE.search(key):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = _redact(event_dict[key], 1)
    return event_dict


class StderrHandler(logging.Handler):
    """Writes each formatted record to the *current* ``sys.stderr`` (see the module doc)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # logging must never take the command down
            self.handleError(record)


def _renderer(fmt: LogFormat, *, colors: bool) -> list[Processor]:
    if fmt == "json":
        return [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    # plain_traceback always, whether or not rich was importable when structlog was imported.
    return [
        structlog.dev.ConsoleRenderer(
            colors=colors, exception_formatter=structlog.dev.plain_traceback
        )
    ]


def resolve_format(fmt: str | None) -> LogFormat:
    """``fmt`` if given, else console (human text), terminal or not (STYLE.md §6)."""
    if fmt is None:
        return "console"
    if fmt not in LOG_FORMATS:
        raise ValueError(f"unknown log format {fmt!r}: use {' or '.join(LOG_FORMATS)}")
    return fmt


def configure_logging(fmt: str | None, verbosity: int) -> None:
    """Configure structlog and stdlib logging for this process (idempotent: last call wins)."""
    tty = _isatty(sys.stderr)
    resolved = resolve_format(fmt)
    level = level_for(verbosity)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_secrets,
    ]
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: modules bind their loggers at import, and a later configure (tests,
        # capture_logs) must still reach them.
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *_renderer(resolved, colors=tty),
        ],
    )
    handler = StderrHandler()
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, StderrHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbosity >= 2 else logging.WARNING)


def _isatty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:  # closed stream
        return False
