"""asyncssh's liboqs lookup without gcc (remote/liblookup.py, issue 13 P9): the transport's
import runs no compiler, ``find_library`` answers as the stdlib's for what dlopen can load,
and the stdlib's own function is back once asyncssh is imported."""

from __future__ import annotations

import ctypes.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from remote_chain.remote import liblookup

REPO = Path(__file__).resolve().parent.parent


def _compilers_logged(tmp_path: Path, statement: str) -> list[str]:
    """Run ``statement`` in a new interpreter whose ``gcc`` and ``cc`` log each run (then
    run the real ones); the lines logged."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "compilers.log"
    log.write_text("")
    for name in ("gcc", "cc"):
        real = shutil.which(name) or "false"
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\nexec {real} "$@"\n')
        wrapper.chmod(0o755)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("LD_LIBRARY_PATH", None)
    done = subprocess.run(
        [sys.executable, "-c", statement], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines()


@pytest.mark.skipif(sys.platform != "linux", reason="ctypes.util's gcc step is Linux's")
def test_the_transport_imports_asyncssh_without_running_a_compiler(tmp_path: Path) -> None:
    stock = _compilers_logged(tmp_path, "import asyncssh")
    if ctypes.util.find_library("oqs") is None:  # not installed: the stdlib asks gcc, twice
        assert len(stock) >= 2, stock
    assert _compilers_logged(tmp_path, "import remote_chain.remote.ssh") == []
    # The openssh transport reads the ssh config with asyncssh's parser: its first import.
    assert _compilers_logged(tmp_path, "import remote_chain.remote.openssh") == []


def test_find_library_answers_as_the_stdlib_for_cached_and_missing_libraries() -> None:
    assert liblookup.find_library("c") == ctypes.util.find_library("c")
    assert liblookup.find_library("c") is not None
    assert liblookup.find_library("no-such-library-rc") is None


@pytest.mark.skipif(
    shutil.which("ld") is None or shutil.which("objdump") is None,
    reason="the stdlib's ld step needs binutils (ld, and objdump for the soname)",
)
def test_find_library_searches_ld_library_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library only LD_LIBRARY_PATH holds (what dlopen searches first) is still found."""
    libc = ctypes.util.find_library("c")
    assert libc is not None
    # This interpreter's own libc, by the path it was mapped from.
    maps = Path("/proc/self/maps").read_text().splitlines()
    real = next(Path(line.split()[-1]) for line in maps if line.endswith(f"/{libc}"))
    (tmp_path / "librcplanted.so").symlink_to(real)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    assert liblookup.find_library("rcplanted") == libc  # its soname, as the stdlib answers
    monkeypatch.delenv("LD_LIBRARY_PATH")
    assert liblookup.find_library("rcplanted") is None


def test_the_stdlib_function_is_back_after_the_import() -> None:
    stdlib = ctypes.util.find_library
    with liblookup.without_compiler():
        if sys.platform == "linux":
            assert ctypes.util.find_library is liblookup.find_library
    assert ctypes.util.find_library is stdlib
    with pytest.raises(RuntimeError), liblookup.without_compiler():
        raise RuntimeError
    assert ctypes.util.find_library is stdlib
