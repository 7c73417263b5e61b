"""The wire codec: what rc_emit (bash) prints, wire.decode reads back byte for byte."""

from __future__ import annotations

import base64
import gzip
import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remote_chain.execs.templates import render_template
from remote_chain.protocol import wire
from remote_chain.protocol.wire import decode, encode

WIRE = render_template("wire.bash", {})
# Arguments of a bash function cannot hold NUL; a file's bytes can (rc_emit_file, below).
FIELD = st.binary(max_size=60).filter(lambda b: b"\0" not in b) | st.text(max_size=30).map(
    lambda t: t.replace("\0", "").encode("utf-8", "surrogateescape")
)


def _bash(script: str, *args: bytes) -> bytes:
    run = subprocess.run(
        ["bash", "-c", f"{WIRE}\n{script}", "wire", *args],
        capture_output=True,
        check=True,
        timeout=30,
    )
    return run.stdout


def _as_transport(stdout: bytes) -> str:
    # Both transports decode the channel as UTF-8 with replacement (remote/ssh.py, openssh.py).
    return stdout.decode("utf-8", "replace")


@settings(max_examples=60, deadline=None)
@given(tag=st.from_regex(r"[A-Z_]{1,10}", fullmatch=True), fields=st.lists(FIELD, max_size=5))
def test_any_fields_survive_emit_then_decode(tag: str, fields: list[bytes]) -> None:
    """Tabs, newlines, backslashes, control characters and non-UTF-8 bytes all come back."""
    out = _bash('rc_emit "$@"; rc_emit DONE', tag.encode(), *fields)
    assert out.isascii()  # nothing for a transport's decoding to lose
    records = decode(_as_transport(out), errors="surrogateescape")
    assert records[0][0] == tag
    assert [f.encode("utf-8", "surrogateescape") for f in records[0][1:]] == fields
    assert records[1] == ("DONE",)
    # Tests and fakes that speak the wire through wire.encode say exactly what bash says.
    assert out.decode().split("\n")[0] + "\n" == encode(tag, *fields)


# decode's newline-only fast path (a chain's files) against the escapes it must not mistake
# for a newline: an escaped backslash before an "n", a tab, base64 and gzip fields.
TRICKY = st.text(alphabet="\\n\t\na", max_size=12)


@settings(max_examples=300, deadline=None)
@given(fields=st.lists(TRICKY, max_size=4))
def test_backslashes_before_an_n_are_never_read_as_newlines(fields: list[str]) -> None:
    """decode never takes an escaped backslash followed by an ``n`` for a newline, in plain or gzip
    fields, while an escaped newline still decodes to one."""
    zipped = wire._GZIP + base64.b64encode(gzip.compress(b"\\n")).decode()
    records = decode(encode("BENCH", *fields) + f"GZ\t{zipped}\tx\\ny\n")
    assert records == [("BENCH", *fields), ("GZ", "\\n", "x\ny")]


# The one file is rewritten by every example, so sharing tmp_path between them is harmless.
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=st.binary(max_size=300), field=FIELD)
def test_a_files_bytes_survive_rc_emit_file(tmp_path: Path, content: bytes, field: bytes) -> None:
    """rc_emit_file sends every byte of a file, NULs included, after the other fields."""
    path = tmp_path / "f"
    path.write_bytes(content)
    out = _bash('rc_emit_file FILE "$1" "$2"', field, str(path).encode())
    records = decode(_as_transport(out), errors="surrogateescape")
    assert [f.encode("utf-8", "surrogateescape") for f in records[0][1:]] == [field, content]


def test_a_missing_file_is_an_empty_field_and_text_decodes_with_replacement() -> None:
    """An unreadable file is an empty last field; by default bad UTF-8 reads as U+FFFD."""
    out = _bash('rc_emit_file RUN 1 /nonexistent/file; rc_emit ODD "$1"', b"a\xffb")
    assert decode(_as_transport(out)) == [("RUN", "1", ""), ("ODD", "a\ufffdb")]


def test_a_field_above_64_kib_is_base64_and_survives() -> None:
    """A long field (sacct of 10,000 chains) takes base64, as wire.encode says it does."""
    big = b"1|COMPLETED|0:0\n" * 5000
    out = _bash('rc_emit SACCT 0 "$1"', big)
    assert out.decode().split("\t")[2].startswith("\\b")
    assert out.decode() == encode("SACCT", "0", big)
    assert decode(_as_transport(out))[0][2].encode() == big


def test_a_gzipped_field_survives_and_is_smaller() -> None:
    """rc_emit_gz sends a big repetitive file as \\z (gzip, base64): the same bytes come back."""
    big = b"".join(
        b"%d|PENDING|JobHeldUser|/work/rc-1/local/c%05d|rc-1:c%05d\n" % (i, i, i)
        for i in range(1500)
    )
    out = _bash('rc_emit_gz SQUEUE 0 <(printf "%s" "$1"); rc_emit_gz RUN 1 /nonexistent', big)
    fields = out.decode().split("\n")[0].split("\t")
    assert fields[2].startswith("\\z")
    assert len(fields[2]) < len(big) // 5
    records = decode(_as_transport(out), errors="surrogateescape")
    assert records[0][2].encode("utf-8", "surrogateescape") == big
    assert records[1] == ("RUN", "1", "")  # an unreadable file: an empty field, as rc_emit_file


def test_a_corrupt_gzipped_field_is_empty() -> None:
    """A \\z field that does not inflate reads as empty text, never raises."""
    assert decode("RUN\t1\t\\zbm90IGd6aXA=\n") == [("RUN", "1", "")]


def test_rc_emit_gz_sends_a_small_file_as_base64_and_a_big_one_gzipped(tmp_path: Path) -> None:
    """A run record of a few chains costs no gzip process; a big one is gzipped, byte-exact."""
    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(b'{"chains": []}\n')
    big.write_bytes(b'{"benchmark": "c00001", "time_limit_s": 600}, ' * 400)
    out = _bash('rc_emit_gz RUN "$1"; rc_emit_gz RUN "$2"', str(small).encode(), str(big).encode())
    lines = out.decode().split("\n")
    assert lines[0].split("\t")[1].startswith("\\b")
    assert lines[1].split("\t")[1].startswith("\\z")
    records = decode(_as_transport(out))
    assert [r[1].encode() for r in records] == [small.read_bytes(), big.read_bytes()]


def test_buffered_records_come_out_once_and_in_order(tmp_path: Path) -> None:
    """With rc_wire_buffered set, records are batched, a file record flushes what came before
    it, and rc_flush writes the rest: every record once, in the order emitted."""
    path = tmp_path / "f"
    path.write_bytes(b"file bytes")
    script = (
        'rc_wire_buffered=1; for i in $(seq 600); do rc_emit N "$i"; done\n'
        'rc_emit_file F "$1"; rc_emit N 601; rc_flush; rc_wire_buffered=""\n'
        "( rc_emit SUB 1 ); rc_emit DONE"
    )
    records = decode(_as_transport(_bash(script, str(path).encode())))
    expected = [("N", str(i)) for i in range(1, 601)]
    assert records == [*expected, ("F", "file bytes"), ("N", "601"), ("SUB", "1"), ("DONE",)]


def test_a_gzipped_field_past_the_bound_is_empty() -> None:
    """A \\z field that would inflate past GZIP_MAX (a gzip bomb) reads as empty text."""
    bomb = base64.b64encode(gzip.compress(b"0" * (wire.GZIP_MAX + 1))).decode()
    assert decode(f"RUN\t1\t\\z{bomb}\n") == [("RUN", "1", "")]
    fits = base64.b64encode(gzip.compress(b"0" * 1000)).decode()
    assert decode(f"RUN\t1\t\\z{fits}\n") == [("RUN", "1", "0" * 1000)]
