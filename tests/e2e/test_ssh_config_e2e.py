"""The ssh config means what it means to ``ssh``, on the real dev cluster.

A profile holding only ``host = "<alias>"`` and ``workdir`` reaches the cluster through an ssh
config file (``REMOTE_CHAIN_SSH_CONFIG``, like ``ssh -F``) whose Host block sets HostName,
Port, User, IdentityFile and UserKnownHostsFile: over both transports, checked with ``doctor``
(ssh, login, Slurm's commands, accounting, workdir).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import devcluster
import pytest

from remote_chain.core.models import Transport

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
ALIAS = "devlab"


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMOTE_CHAIN_")}
    env["PYTHONPATH"] = str(REPO)
    env["REMOTE_CHAIN_SSH_CONFIG"] = str(tmp_path / "ssh_config")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    code = "from remote_chain.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "--clusters-dir", str(tmp_path / "clusters"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("transport", ["asyncssh", "openssh"])
def test_an_alias_only_profile_reaches_the_dev_cluster(
    dev: devcluster.DevCluster, tmp_path: Path, transport: Transport
) -> None:
    """doctor passes every check with host and port, user, key and known_hosts from the config."""
    (tmp_path / "ssh_config").write_text(
        f"Host {ALIAS}\n  HostName {dev.host}\n  Port {dev.ssh_port['local']}\n"
        f"  User {dev.test_user}\n  IdentityFile {dev.identity_file}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {dev.known_hosts}\n"
    )
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "lab.toml").write_text(
        f'host = "{ALIAS}"\nworkdir = "{dev.workdir}"\ntransport = "{transport}"\n'
    )
    done = _cli(tmp_path, "doctor", "--cluster", "lab", "--json")
    assert done.returncode == 0, (done.stdout, done.stderr)
    checks = {c["check"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["ssh"]["ok"] is True
    assert checks["login"]["detail"].startswith(dev.test_user)
    assert checks["accounting"]["ok"] is True
    listed = _cli(tmp_path, "clusters", "--json")
    assert json.loads(listed.stdout)["clusters"][0]["port"] is None  # the config's Port


def test_a_profile_port_overrides_the_config_s(dev: devcluster.DevCluster, tmp_path: Path) -> None:
    """A set profile field wins: port = <local2's sshd> beats the Host block's Port."""
    (tmp_path / "ssh_config").write_text(
        f"Host {ALIAS}\n  HostName {dev.host}\n  Port 1\n  User {dev.test_user}\n"
        f"  IdentityFile {dev.identity_file}\n  UserKnownHostsFile {dev.known_hosts}\n"
    )
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "lab.toml").write_text(
        f'host = "{ALIAS}"\nport = {dev.ssh_port["local2"]}\nworkdir = "{dev.workdir}"\n'
    )
    done = _cli(tmp_path, "doctor", "--cluster", "lab", "--json")
    assert done.returncode == 0, (done.stdout, done.stderr)
