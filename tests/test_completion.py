"""Shell completion, as the shells call it: a real ``remote-chain`` process per completion.

bash, zsh and fish each get commands, options, profile names (``--cluster``) and recent run ids
(``RUN_ID``, from the local index); ``--help`` stays free of the completion machinery.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CLI = "import sys; from remote_chain.cli import main; sys.argv[0] = 'remote-chain'; main()"
RUN_IDS = ["rc-20261128T000000Z-aaaaaa", "rc-20261130T000000Z-bbbbbb"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Two profiles in ./clusters and two runs in the local index."""
    (tmp_path / "clusters").mkdir()
    for name in ("eos", "selene"):
        (tmp_path / "clusters" / f"{name}.toml").write_text('host = "h"\nworkdir = "/w"\n')
    index = tmp_path / "state" / "remote-chain" / "runs"
    index.mkdir(parents=True)
    for run_id in RUN_IDS:
        (index / f"{run_id}.json").write_text(json.dumps({"run_id": run_id, "clusters": {}}))
    return tmp_path


def _complete(home: Path, **env: str) -> str:
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith(("REMOTE_CHAIN_", "_REMOTE_"))
    }
    environ |= {
        "PYTHONPATH": str(REPO),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"),
        **env,
    }
    proc = subprocess.run(
        [sys.executable, "-c", "from remote_chain.cli import main; main()"],
        cwd=home,
        env=environ,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def bash(home: Path, line: str) -> list[str]:
    words = line.split(" ")
    out = _complete(
        home,
        _REMOTE_CHAIN_COMPLETE="complete_bash",
        COMP_WORDS=line,
        COMP_CWORD=str(len(words) - 1),
    )
    return out.split()


def zsh(home: Path, line: str) -> str:
    return _complete(home, _REMOTE_CHAIN_COMPLETE="complete_zsh", _TYPER_COMPLETE_ARGS=line)


def fish(home: Path, line: str) -> list[str]:
    out = _complete(
        home,
        _REMOTE_CHAIN_COMPLETE="complete_fish",
        _TYPER_COMPLETE_FISH_ACTION="get-args",
        _TYPER_COMPLETE_ARGS=line,
    )
    return [row.split("\t", 1)[0] for row in out.splitlines()]


def test_bash_completes_commands_profiles_and_run_ids(home: Path) -> None:
    """bash: command names, --cluster profile names, RUN_ID newest first."""
    assert bash(home, "remote-chain st") == ["status"]
    assert set(bash(home, "remote-chain ")) >= {"submit", "status", "wait", "runs", "agent"}
    assert bash(home, "remote-chain status --cluster ") == ["eos", "selene"]
    assert bash(home, "remote-chain wait ") == list(reversed(RUN_IDS))
    assert bash(home, "remote-chain wait rc-20261128") == [RUN_IDS[0]]


def test_zsh_completes_options_and_profiles(home: Path) -> None:
    """zsh: options with their help, and profile names."""
    assert '"--summary"' in zsh(home, "remote-chain wait --")
    assert "selene" in zsh(home, "remote-chain submit eval.yaml --cluster s")


def test_fish_completes_subcommands_and_run_ids(home: Path) -> None:
    """fish: `runs` subcommands, run ids for `runs forget`."""
    assert fish(home, "remote-chain runs ") == ["forget", "prune"]
    assert fish(home, "remote-chain runs forget ") == list(reversed(RUN_IDS))


def test_show_completion_prints_the_script_of_the_shell_it_runs_in(home: Path) -> None:
    """`remote-chain --show-completion`, run from bash, prints the script bash sources: it
    calls the program back with the completion variable set."""
    environ = {"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"], "HOME": str(home)}
    proc = subprocess.run(
        ["bash", "-c", '"$0" -c "$1" --show-completion', sys.executable, CLI],
        env=environ,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "_REMOTE_CHAIN_COMPLETE=complete_bash" in proc.stdout
    assert "complete -o default -F _remote_chain_completion remote-chain" in proc.stdout


def test_help_does_not_load_completion_or_rich() -> None:
    """--help imports none of rich or the commands' implementations: the CLI's dispatch
    imports a command's module only when it runs."""
    code = (
        "import sys\nfrom remote_chain.cli import main\ntry:\n    main()\n"
        "except SystemExit:\n    pass\nprint(sorted(m for m in sys.modules if m.startswith(('rich',"
        " 'remote_chain.summary', 'remote_chain.runs', 'remote_chain.timeline'))),"
        " file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "--help"],
        env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert "completion" in proc.stdout
    assert proc.stderr.strip() == "[]"
