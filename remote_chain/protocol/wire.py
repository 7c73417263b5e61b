"""PURE: the one wire codec of everything the client's remote scripts print back.

``execs/wire.bash`` (``rc_emit``, ``rc_emit_file``) writes it; ``decode`` reads it. The
payload is what ``markers.unwrap`` cut out after the nonce marker, so login-shell noise
never reaches it. Each record is one line: a tag, then each field after a tab. A field is
either text, with ``\\\\``, ``\\t`` and ``\\n`` escaped (printable ASCII needs nothing else), or
``\\b`` and the base64 of its bytes (anything else: non-ASCII, control characters, a file's
bytes), or ``\\z`` and the base64 of its bytes gzipped (``rc_emit_gz``: big, repetitive
answers). The wire itself is thus pure ASCII, so a transport's UTF-8 decoding loses nothing.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib

_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_ESCAPES = {"\\": "\\", "t": "\t", "n": "\n"}
_B64 = "\\b"
_GZIP = "\\z"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # the gzip container, as `gzip -c` writes it
# What a \\z field may inflate to: room for a 10,000-chain run's record and squeue lines.
# The reply itself is capped (max_output_bytes); its gzip could still be a 1000-fold bomb.
GZIP_MAX = 64 << 20
ESCAPED_MAX = 65536  # bytes; a longer field is base64 (wire.bash: cheaper than bash escaping)
_PLAIN = re.compile(r"[\t\n -~]*")

Record = tuple[str, ...]  # (tag, field, ...)


def encode_field(value: bytes) -> str:
    """One field as ``rc_emit`` sends it (tests and fakes speak the wire through this)."""
    text = value.decode("ascii", "replace")
    if len(value) <= ESCAPED_MAX and value.isascii() and _PLAIN.fullmatch(text):
        return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
    return _B64 + base64.b64encode(value).decode("ascii")


def encode(tag: str, *fields: str | bytes) -> str:
    """One record line (with its newline), as ``rc_emit TAG FIELD...`` prints it."""
    raw = [f.encode("utf-8", "surrogateescape") if isinstance(f, str) else f for f in fields]
    return "\t".join([tag, *map(encode_field, raw)]) + "\n"


def decode_field(field: str, errors: str = "replace") -> str:
    """A field's text: bytes that are not UTF-8 become U+FFFD (``errors="replace"``), or
    surrogates that encode back to the very bytes (``errors="surrogateescape"``)."""
    if field.startswith(_B64):
        try:
            return base64.b64decode(field[2:], validate=True).decode("utf-8", errors)
        except (binascii.Error, ValueError):
            return ""
    if field.startswith(_GZIP):
        try:
            raw = base64.b64decode(field[2:], validate=True)
            inflate = zlib.decompressobj(_GZIP_WBITS)
            data = inflate.decompress(raw, GZIP_MAX)
            if inflate.unconsumed_tail:  # over GZIP_MAX: read as corrupt, never held whole
                return ""
            return data.decode("utf-8", errors)
        except (binascii.Error, ValueError, zlib.error):
            return ""
    if "\\" not in field:
        return field
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), field)


def decode(payload: str, errors: str = "replace") -> list[Record]:
    """Every record of a script's payload, fields decoded; blank lines are skipped.

    Lines are split on ``\\n`` only: an escaped field never holds one, while
    ``str.splitlines`` would also cut at ``\\r``, ``\\f`` or ``\\x1c``.
    """
    records: list[Record] = []
    for line in payload.split("\n"):
        if not line:
            continue
        if "\\" not in line:  # no escape and no base64 field: the fields are the text
            records.append(tuple(line.split("\t")))
        elif line.count("\\") == line.count("\\n"):
            # Every backslash starts a \n (a chain's files: "12345\n"), so none is a \b or
            # \z field, a \t or a \\: the fields are the text, newlines put back. A tenth of
            # the field-by-field decode, and what a status of 10,000 chains mostly reads.
            records.append(tuple(line.replace("\\n", "\n").split("\t")))
        else:
            tag, *fields = line.split("\t")
            records.append((tag, *(decode_field(f, errors) for f in fields)))
    return records
