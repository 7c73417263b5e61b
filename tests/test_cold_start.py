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
    """Importing the CLI (what --help needs) imports none of the heavy libraries."""
    assert _imported("import remote_chain.cli") == []


def test_logging_imports_structlog_without_rich() -> None:
    """Configuring logs imports structlog but not rich (tables import it when they need it)."""
    assert _imported("import remote_chain.logconfig") == ["structlog"]
    assert "rich" in _imported("import remote_chain.logconfig, rich.console")


def test_logging_hides_colorama_from_structlog_on_posix(tmp_path: Path) -> None:
    """structlog.dev imports colorama (with ctypes) for Windows consoles only; on POSIX it is
    hidden like rich, and importable again afterwards. The stand-in here lacks colorama's
    ``Style``, so structlog importing it fails the command."""
    (tmp_path / "colorama.py").write_text("STAND_IN = True\n")
    code = (
        "import sys\nimport remote_chain.logconfig\nseen = 'colorama' in sys.modules\n"
        "import colorama\nprint(seen, colorama.STAND_IN)"
    )
    done = _python(code, path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_config_loading_imports_no_yaml_until_a_yaml_is_read() -> None:
    """Profiles (TOML) load without PyYAML; status never reads YAML."""
    assert "yaml" not in _imported("import remote_chain.config")


OTHER_FLOWS = (
    "remote_chain.actions",
    "remote_chain.bundle",
    "remote_chain.chain",
    "remote_chain.doctor",
    "remote_chain.resumecaps",
    "remote_chain.script",
)


def test_a_status_command_imports_no_other_flows_modules() -> None:
    """What a cold `status` imports (the CLI, the orchestrator, the ssh transport) holds no
    module of submit, cancel, resume, logs or doctor: their dataclasses alone cost ~20 ms of
    a cold command's CPU. Each flow imports its own where it runs (cluster.py, plan.py)."""
    imports = "import remote_chain.cli, remote_chain.orchestrator, remote_chain.remote.ssh"
    # Its exec rendered too: the template map once imported submit's and cancel's modules
    # for three constants.
    render = "from remote_chain.snapshot import render_status_script; render_status_script([])"
    code = (
        f"import sys\n{imports}\n{render}\n"
        f"print(sorted(m for m in {OTHER_FLOWS!r} if m in sys.modules))"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


STATUS_MODULES = ("remote_chain.chainstatus", "remote_chain.runstatus", "remote_chain.snapshot")


def test_a_submit_imports_none_of_the_status_execs_modules(tmp_path: Path) -> None:
    """And the other way round: a cold `submit` (the same imports, its config and profile
    loaded, its bundle built, its exec rendered and its answer read) imports nothing of the
    status exec's (~7 ms): the templates' map once imported snapshot for three constants."""
    (tmp_path / "eval.yaml").write_text("driver:\n  benchmarks:\n    b0: {command: 'true'}\n")
    (tmp_path / "c1.toml").write_text('host = "h"\nworkdir = "/w"\n')
    code = f"""import sys, datetime
import remote_chain.cli, remote_chain.orchestrator, remote_chain.remote.ssh
from pathlib import Path
from remote_chain.bundle import parse_submit_output, render_submit_script
from remote_chain.cluster import _limit_warnings
from remote_chain.config import load_profile, load_submit_config
from remote_chain.plan import build_bundle, read_uploads
cfg = load_submit_config(Path({str(tmp_path / "eval.yaml")!r}))
profile = load_profile(Path({str(tmp_path / "c1.toml")!r}))
now = datetime.datetime.now(datetime.UTC)
bundle = build_bundle(cfg, profile, ["b0"], read_uploads(cfg, max_bytes=1 << 20),
                      run_id="rc-20261202T000000Z-abcdef", created=now)
assert "sbatch" in render_submit_script(bundle)
answer = parse_submit_output("DONE\\n")
_limit_warnings(bundle, answer, "DONE\\n")
print(sorted(m for m in {STATUS_MODULES!r} if m in sys.modules))
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


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
