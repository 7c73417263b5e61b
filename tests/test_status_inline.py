"""The status exec reads chain files with bash itself (no process per file) and sends them
escaped; every byte sequence a state file may hold must come back unchanged."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remote_chain.core.snapshot import FileRead, Snapshot, Target
from remote_chain.execs.status import parse_status_output, render_status_script
from remote_chain.execs.templates import INLINE_FILE_BYTES, MAX_FILE_BYTES
from remote_chain.job.script import CHAIN_FILE, EVENTS_FILE
from remote_chain.protocol import wire
from remote_chain.protocol.markers import wrap


def _status(run_dir: Path) -> Snapshot:
    targets = [Target("rc-1", str(run_dir))]
    wrapped, nonce = wrap(render_status_script(targets, executor="shell"))
    proc = subprocess.run(
        ["bash", "-s"],
        input=wrapped.encode(),
        capture_output=True,
        timeout=60,
        check=True,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
    )
    text = proc.stdout.decode("utf-8", "replace")
    start = text.index(f"__REMOTE_CHAIN_BEGIN_{nonce}\n") + len(f"__REMOTE_CHAIN_BEGIN_{nonce}\n")
    end = text.index(f"\n__REMOTE_CHAIN_END_{nonce}")
    return parse_status_output(text[start:end], targets)


def _bench(tmp_path: Path) -> Path:
    bench = tmp_path / "rc-1" / "c1" / "b"
    bench.mkdir(parents=True)
    (bench / "job.sh").write_text("#!/bin/bash\n")
    return bench


# Text a prologue or a runner may leave: backslashes, tabs, CR, form feeds, \x1c (a line
# break for str.splitlines), non-ASCII, and no final newline. NUL is left out: bash
# variables cannot hold it, and no state file is meant to.
CONTENT = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    max_size=300,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=CONTENT)
def test_any_small_file_round_trips(tmp_path_factory: pytest.TempPathFactory, content: str) -> None:
    """Whatever text a chain file holds, status returns it byte for byte."""
    bench = _bench(tmp_path_factory.mktemp("s"))
    (bench / EVENTS_FILE).write_bytes(content.encode())
    snap = _status(bench.parent)
    (chain,) = snap.runs[0].chains
    assert chain.files["events"].status == "ok"
    assert chain.files["events"].content == content
    assert "chain" not in chain.files  # not sent: it does not exist
    assert chain.file("chain").status == "missing"


def test_big_and_oversized_files_take_the_other_paths(tmp_path: Path) -> None:
    """Above the inline size a file comes back whole (base64); above the cap, as toolarge."""
    bench = _bench(tmp_path)
    big = "1234\t\\\n" * (INLINE_FILE_BYTES // 7 + 10)
    (bench / EVENTS_FILE).write_text(big)
    (bench / CHAIN_FILE).write_bytes(b"9" * (MAX_FILE_BYTES + 1))
    (chain,) = _status(bench.parent).runs[0].chains
    assert chain.files["events"].status == "ok"
    assert chain.files["events"].content == big
    assert chain.files["chain"].status == "toolarge"
    assert chain.files["chain"].content == ""


def test_status_exec_runs_in_the_c_locale_before_anything_else() -> None:
    """Every process of the status exec runs in the C locale (a UTF-8 locale costs login-node
    CPU); set before the wire and guard code, whatever the login shell's locale."""
    script = render_status_script([Target("rc-1", "/nowhere/rc-1")])
    body = script[script.index("rc_chunks()") :]  # after the RC_* heads and rc_chunks
    assert body.count("export LC_ALL=C") == 1
    assert body.index("export LC_ALL=C") < body.index("rc_emit()")
    assert body.index("export LC_ALL=C") < body.index("rc_guard")


@pytest.mark.parametrize("extra", [0, 1, 2])
def test_multibyte_text_at_the_inline_limit_round_trips(tmp_path: Path, extra: int) -> None:
    """Two-byte characters at the inline limit, which counts bytes since the exec runs in the
    C locale: exactly INLINE_FILE_BYTES (inline), one byte over with the limit cutting a
    character, two bytes over (both the whole-file path) each come back unchanged from a
    login whose locale is UTF-8."""
    bench = _bench(tmp_path)
    text = "x" * extra + "é" * (INLINE_FILE_BYTES // 2)
    assert len(text.encode()) == INLINE_FILE_BYTES + extra
    (bench / EVENTS_FILE).write_bytes(text.encode())
    (chain,) = _status(bench.parent).runs[0].chains
    assert chain.files["events"].status == "ok"
    assert chain.files["events"].content == text


def test_records_become_each_runs_chains_in_the_order_sent() -> None:
    """parse_status_output, pure: each run's chains in the order sent, a chain sent twice in its
    first place with its last record (status.bash may send one again after a fallback), a FILE
    record (a big file, base64) added to its own chain's files, nothing to another run's."""
    text = "".join(
        [
            wire.encode("RUN", "0", "1", "", ""),
            wire.encode("RUN", "1", "1", "", ""),
            wire.encode("BENCH", "0", "b", "0", "first", "ok", "11\n"),
            wire.encode("BENCH", "1", "b", "1", "first", "ok", "21\n"),
            wire.encode("BENCH", "0", "a", "0", "first", "ok", "12\n"),
            wire.encode("BENCH", "0", "b", "1", "first", "ok", "13\n", "chain", "ok", "13\n"),
            wire.encode("FILE", "0", "events", "a", "ok", b"1 12 decided start\n"),
            "DONE\n",
        ]
    )
    snap = parse_status_output(text, [Target("rc-1", "/w/rc-1"), Target("rc-2", "/w/rc-2")])
    zero, one = snap.runs
    assert [c.benchmark for c in zero.chains] == ["b", "a"]
    b, a = zero.chains
    assert b.cancel_marker is True
    assert b.file("first").content == "13\n"
    assert b.file("chain").content == "13\n"
    assert a.file("events") == FileRead("ok", "1 12 decided start\n")
    assert a.file("chain").status == "missing"
    assert a.remote_dir == "/w/rc-1/a"
    (other,) = one.chains
    assert (other.run_id, other.remote_dir, other.file("first").content) == (
        "rc-2",
        "/w/rc-2/b",
        "21\n",
    )
    assert "events" not in other.files
