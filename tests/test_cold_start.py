"""A cold command's start-up: what the CLI and logging import, and the console script's exit
code and output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("asyncssh", "rich", "yaml", "pydantic", "structlog")


def _python(code: str, *args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter with the repository (then ``path``) on its path."""
    pythonpath = str(REPO) if path is None else f"{REPO}{os.pathsep}{path}"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": pythonpath},
        check=False,
    )


def _imported(statement: str) -> list[str]:
    code = f"import sys\n{statement}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    done = _python(code)
    assert done.returncode == 0, done.stderr
    return list(eval(done.stdout))  # noqa: S307 - our own printed list


def test_the_cli_module_imports_nothing_heavy() -> None:
    """Importing the CLI (what --help needs) imports none of the heavy libraries: the
    commands' implementations are imported by the CLI's dispatch when one runs."""
    assert _imported("import remote_chain.cli") == []


def test_main_exits_with_the_code_and_flushed_output() -> None:
    """main() exits with the command's code, its stdout and stderr written whole."""
    run = "from remote_chain.cli import main; main()"
    version = _python(run, "--version")
    assert version.returncode == 0
    assert version.stdout.startswith("remote-chain ")
    usage = _python(run, "status", "--no-such-option")
    assert usage.returncode == 2
    assert "no-such-option" in usage.stderr
    bad = _python(
        run, "--clusters-dir", "/nonexistent-dir", "status", "rc-x", "-c", "nope", "--json"
    )
    assert bad.returncode == 2
    assert '"errors"' in bad.stdout


def test_python_dash_m_runs_the_cli_package() -> None:
    """``python -m remote_chain.cli`` is the console script (cli/__main__.py), exit code kept."""
    done = subprocess.run(
        [sys.executable, "-m", "remote_chain.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("remote-chain ")
