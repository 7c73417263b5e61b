"""libprobe: asyncssh's liboqs lookups run early in a thread, with the same answers (P9)."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from remote_chain import libprobe

REPO = Path(__file__).resolve().parent.parent
REPORT = (
    "import ctypes.util, sys\n"
    "original = ctypes.util.find_library\n"
    "from remote_chain import libprobe\n"
    "started = libprobe.start(sys.argv[1], sys.argv[2:])\n"
    "import asyncssh.crypto.pq as pq\n"
    "print(started, pq._oqs_lib, pq.sntrup_available, pq.mlkem_available,"
    " ctypes.util.find_library is original)\n"
)


def _report(*argv: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", REPORT, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_asyncssh_gets_the_same_answers_and_the_original_back() -> None:
    """Imported after ``start``, asyncssh finds what it finds without it (here: liboqs or
    not, sntrup and mlkem available or not), and find_library is the original again."""
    probed, plain = _report("status", "rc-x", "--json"), _report("render")
    assert probed[0] == "True"
    assert plain[0] == "False"
    assert probed[1:] == plain[1:]
    assert probed[-1] == "True"


@pytest.mark.parametrize(
    "argv",
    [["render"], ["clusters"], [None], ["status", "--help"], ["submit", "c.yaml", "-h"]],
)
def test_not_started_for_commands_that_never_connect_or_only_print_help(
    argv: list[str | None],
) -> None:
    command, args = argv[0], [a for a in argv[1:] if a]
    assert libprobe.start(command, args) is False


def test_not_started_once_asyncssh_is_imported() -> None:
    """The warm launcher's children: asyncssh (and its lookup) came with the fork."""
    import asyncssh  # noqa: F401, PLC0415 - the state under test

    assert libprobe.start("status", []) is False


def test_a_found_library_is_returned_and_the_wrapper_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first name found ends asyncssh's search: its answer, then the original back."""
    calls: list[str] = []

    def fake(name: str) -> str | None:
        calls.append(name)
        return "liboqs.so.5" if name == "oqs" else None

    monkeypatch.setattr(ctypes.util, "find_library", fake)
    monkeypatch.delitem(sys.modules, "asyncssh", raising=False)
    assert libprobe.start("status", ["rc-x"]) is True
    assert libprobe.start("status", ["rc-x"]) is False  # once per process
    assert ctypes.util.find_library("c") is None  # other names: straight to the original
    assert ctypes.util.find_library("oqs") == "liboqs.so.5"
    assert ctypes.util.find_library is fake
    assert sorted(calls) == ["c", "oqs"]  # "oqs" once: the thread's lookup, not a second
