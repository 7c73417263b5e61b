"""Connecting while the CLI imports (issue 13, P9; remote/preconnect.py).

The command line is parsed cheaply, the profile guessed from its TOML, and the guess must
build the very Endpoint the orchestrator builds; a real sshd then shows the preconnected
path makes exactly one login and reports errors exactly as the ordinary path does.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshd import Sshd, free_port, running_sshd

from remote_chain.cluster import endpoint_for
from remote_chain.config.lookup import default_clusters_dirs, find_profile
from remote_chain.remote import Endpoint, preconnect
from remote_chain.settings import load_settings

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-c", "from remote_chain.cli import main; main()"]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["status", "r1", "-c", "a", "--json"], (["a"], None)),
        (
            ["--clusters-dir", "d", "-v", "submit", "x.yaml", "-ca", "--cluster=b"],
            (["a", "b"], "d"),
        ),
        (["--clusters-dir=d", "wait", "r1", "--cluster", "a", "-c", "a"], (["a"], "d")),
        (["status", "r1"], None),  # no -c: the run's index names the clusters
        (["status", "r1", "-c", "a", "--help"], None),
        (["render", "x.yaml", "-c", "a"], None),  # connects nowhere
        (["clusters"], None),
        ([], None),
    ],
)
def test_only_connecting_commands_with_named_clusters_preconnect(
    argv: list[str], expected: tuple[list[str], str | None] | None
) -> None:
    parsed = preconnect._parse(argv)
    if expected is None:
        assert parsed is None
    else:
        assert parsed is not None
        names, folder = parsed
        assert (names, None if folder is None else str(folder)) == expected


def _profile(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "keys").mkdir(exist_ok=True)
    (folder / "keys" / "id").write_text("key\n")
    (folder / "keys" / "known").write_text("")
    path = folder / f"{name}.toml"
    path.write_text(body + 'workdir = "/scratch/rc"\n[slurm]\npartition = "debug"\n')
    return path


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for key in list(os.environ):
        if key.startswith("REMOTE_CHAIN_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)  # no .env file
    return tmp_path


def _real(name: str, folder: Path) -> object:
    settings = load_settings()
    dirs = default_clusters_dirs(folder, settings)
    return endpoint_for(find_profile(name, clusters_dirs=dirs), settings)


@pytest.mark.parametrize(
    ("body", "env"),
    [
        ('host = "login.example.org"\n', {}),
        (
            'host = "h"\nport = 2200\nuser = "me"\nidentity_file = "keys/id"\n'
            'known_hosts = "keys/known"\nproxy_jump = "gw"\n',
            {"REMOTE_CHAIN_CONNECT_TIMEOUT": "7", "REMOTE_CHAIN_KEEPALIVE_INTERVAL": "3.5"},
        ),
        ('host = "h"\nssh_config = "keys/known"\n', {"REMOTE_CHAIN_COMMAND_TIMEOUT": "9"}),
        ('host = "h"\n', {"REMOTE_CHAIN_SSH_CONFIG": "/etc/ssh/ssh_config"}),
    ],
)
def test_the_guess_is_the_endpoint_the_orchestrator_builds(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, body: str, env: dict[str, str]
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    folder = clean_env / "clusters"
    _profile(folder, "eos", body)
    guess = preconnect._guess("eos", folder)
    real = _real("eos", folder)
    assert guess is not None
    kept = {f: getattr(real, f) for f in preconnect._AFTER_CONNECT}
    assert dataclasses.replace(guess, **kept) == real


@pytest.mark.parametrize(
    ("body", "env"),
    [
        ('host = "h"\ntransport = "openssh"\n', {}),
        ('host = "h"\npersist = "10m"\n', {}),
        ('host = "h"\n', {"REMOTE_CHAIN_PERSIST": "5m"}),
        ("host = [1]\n", {}),  # invalid: the command reports it, nothing is guessed
        ("host = \n", {}),  # not TOML
    ],
)
def test_no_guess_where_the_direct_path_is_not_taken(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, body: str, env: dict[str, str]
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    folder = clean_env / "clusters"
    _profile(folder, "eos", body)
    assert preconnect._guess("eos", folder) is None
    assert preconnect._guess("missing", folder) is None


def test_a_config_that_may_reroute_gets_no_early_tcp(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("Host *\n  SendEnv LANG\n")
    guess = dataclasses.replace(_endpoint(), ssh_config=config)
    early = preconnect._raw_connect(guess)
    assert early is not None
    early[0].close()
    config.write_text("Host eos\n  HostName=other.example.org\n")
    assert preconnect._raw_connect(guess) is None
    assert preconnect._raw_connect(dataclasses.replace(guess, proxy_jump="gw")) is None


def _endpoint() -> Endpoint:
    return Endpoint(name="eos", host="127.0.0.1", port=free_port())


def _write_profile(
    folder: Path, sshd: Sshd, *, port: int | None = None, known: Path | None = None
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lo.toml").write_text(
        f'host = "127.0.0.1"\nport = {port or sshd.port}\nuser = "{sshd.user}"\n'
        f'identity_file = "{sshd.client_key}"\nknown_hosts = "{known or sshd.known_hosts}"\n'
        f'workdir = "{sshd.home}/work"\n[slurm]\npartition = "debug"\n'
    )


def _status(folder: Path, tmp: Path, *, early: bool) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("REMOTE_CHAIN_")},
        "PYTHONPATH": str(REPO),
        "REMOTE_CHAIN_STATE_DIR": str(tmp / "state"),
        "REMOTE_CHAIN_CONNECT_TIMEOUT": "5",
        "REMOTE_CHAIN_PRECONNECT": "1" if early else "0",
    }
    argv = [*CLI, "-vv", "--clusters-dir", str(folder), "status", "r-none", "-c", "lo", "--json"]
    return subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=tmp, timeout=60, check=False
    )


def test_a_preconnected_command_logs_in_once_and_answers_as_the_ordinary_path(
    sshd: Sshd, tmp_path: Path
) -> None:
    folder = tmp_path / "clusters"
    _write_profile(folder, sshd)
    before = sshd.accepted_logins()
    early = _status(folder, tmp_path, early=True)
    assert sshd.accepted_logins() == before + 1  # one connection, not a guess and a real one
    assert "preconnected=True" in early.stderr
    plain = _status(folder, tmp_path, early=False)
    assert "preconnected=True" not in plain.stderr
    assert (early.returncode, early.stdout) == (plain.returncode, plain.stdout)
    assert '"kind"' in early.stdout  # the run does not exist: the remote said so


def _error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("remote-chain: error")]


@pytest.mark.parametrize("problem", ["refused", "host key"])
def test_a_failed_preconnection_reports_what_the_ordinary_path_reports(
    sshd: Sshd, tmp_path: Path, problem: str
) -> None:
    folder = tmp_path / "clusters"
    if problem == "refused":
        _write_profile(folder, sshd, port=free_port())
    else:
        known = tmp_path / "known_hosts"
        known.write_text(f"[127.0.0.1]:{sshd.port} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE1v\n")
        _write_profile(folder, sshd, known=known)
    early = _status(folder, tmp_path, early=True)
    plain = _status(folder, tmp_path, early=False)
    assert early.returncode == plain.returncode == 3
    assert _error_lines(early) == _error_lines(plain)
    assert _error_lines(early)
    assert early.stdout == plain.stdout
