"""The openssh transport: the system ``ssh`` over a ControlMaster, against a real sshd."""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from sshd import HOST, Sshd, free_port, running_sshd

from remote_chain.errors import AuthenticationError, ConnectError, RemoteError, RemoteTimeout
from remote_chain.transport.base import CommandResult
from remote_chain.transport.connect import open_remote
from remote_chain.transport.endpoint import Endpoint
from remote_chain.transport.openssh import OpensshRemote, _run_argv, master_command

ALIAS = "loopback-sshd"

pytestmark = pytest.mark.ssh


@pytest.fixture
def anyio_backend() -> str:
    """remote-chain runs on asyncio only (asyncssh needs it)."""
    return "asyncio"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """An sshd with OpenSSH's defaults (MaxSessions 10)."""
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture
def user_ssh(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put an ``ssh`` first on PATH that reads a test ssh config, as a user's ~/.ssh/config.

    The config defines the ``loopback-sshd`` alias. The system ssh finds ~ through the passwd
    entry, not $HOME, so ``-F`` is the only way to keep the real ~/.ssh unread and unwritten.
    """
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host {ALIAS}\n  HostName {HOST}\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {sshd.known_hosts}\n  StrictHostKeyChecking yes\n"
    )
    real_ssh = shutil.which("ssh")
    assert real_ssh is not None, "openssh-client is not installed"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "ssh"
    wrapper.write_text(f'#!/bin/sh\nexec {real_ssh} -F {config} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir), prepend=os.pathsep)
    return config


@pytest.fixture
def control_path() -> Iterator[str]:
    """A ControlPath short enough for a unix socket (108 bytes, with ssh's temp suffix)."""
    directory = tempfile.mkdtemp(prefix="rc-cm-")
    yield f"{directory}/cm"
    shutil.rmtree(directory, ignore_errors=True)


def _endpoint(control_path: str) -> Endpoint:
    return Endpoint(
        name="mfa-site",
        host=ALIAS,
        control_path=control_path,
        transport="openssh",
        connect_timeout=5,
        command_timeout=30,
    )


@pytest.fixture
def master(user_ssh: Path, control_path: str) -> Iterator[Endpoint]:
    """A ControlMaster opened with the very command the missing-master error prints."""
    endpoint = _endpoint(control_path)
    opened = subprocess.run(
        shlex.split(master_command(endpoint)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=15,
    )
    assert opened.returncode == 0, opened.stderr
    try:
        yield endpoint
    finally:
        subprocess.run(
            ["ssh", "-o", f"ControlPath={control_path}", "-O", "exit", ALIAS],
            capture_output=True,
            timeout=15,
        )


@pytest.mark.anyio
async def test_without_a_master_the_error_names_the_command_that_opens_one(
    user_ssh: Path, control_path: str
) -> None:
    """No ControlMaster: an AuthenticationError spelling out the ``ssh -fNM`` to run."""
    endpoint = dataclasses.replace(_endpoint(control_path), port=2222, user="alice")
    with pytest.raises(AuthenticationError) as caught:
        await open_remote(endpoint)
    expected = (
        f"ssh -fNM -o ControlPath={control_path} -p 2222 -l alice "
        f"-o StrictHostKeyChecking=yes {ALIAS}"
    )
    assert master_command(endpoint) == expected
    assert str(caught.value).startswith("mfa-site: ")
    assert expected in str(caught.value)
    assert not caught.value.transient


@pytest.mark.anyio
async def test_commands_ride_the_master(sshd: Sshd, master: Endpoint) -> None:
    """Through the master: output, stderr and exit status as over asyncssh, no new login."""
    logins_before = sshd.accepted_logins()
    async with await open_remote(master) as remote:
        assert isinstance(remote, OpensshRemote)
        assert remote.name == "mfa-site"
        result = await remote.run("echo out; echo err >&2; exit 3")
    assert result == CommandResult(exit_status=3, stdout="out\n", stderr="err\n", noise="")
    assert sshd.accepted_logins() == logins_before


@pytest.mark.anyio
async def test_twenty_concurrent_commands_share_the_master(sshd: Sshd, master: Endpoint) -> None:
    """20 concurrent sessions over one master all succeed under the default MaxSessions."""
    results: dict[int, CommandResult] = {}

    async def run_one(remote: OpensshRemote, index: int) -> None:
        results[index] = await remote.run(f"sleep 0.2; echo {index}")

    async with await OpensshRemote.open(master) as remote, anyio.create_task_group() as group:
        for index in range(20):
            group.start_soon(run_one, remote, index)
    assert {index: result.stdout for index, result in results.items()} == {
        index: f"{index}\n" for index in range(20)
    }


@pytest.mark.anyio
async def test_a_slow_command_times_out_and_the_master_survives(master: Endpoint) -> None:
    """Past its timeout the command is a RemoteTimeout; the next command still runs."""
    async with await open_remote(master) as remote:
        started = time.monotonic()
        with pytest.raises(RemoteTimeout, match=r"0\.5 s"):
            await remote.run("sleep 3", timeout=0.5)
        assert time.monotonic() - started < 2
        assert (await remote.run("echo still here")).stdout == "still here\n"


@pytest.mark.anyio
async def test_ssh_failing_itself_is_a_connect_error(user_ssh: Path, control_path: str) -> None:
    """When ssh exits 255 without running the script (nothing listening), it is a ConnectError."""
    endpoint = dataclasses.replace(_endpoint(control_path), host=HOST, port=free_port())
    with pytest.raises(ConnectError) as caught:
        await OpensshRemote(endpoint).run("echo never")
    assert "Connection refused" in str(caught.value)
    assert caught.value.transient


@pytest.mark.anyio
async def test_a_missing_ssh_binary_is_reported_as_such(
    control_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``ssh`` on PATH the error says so, rather than blaming the master."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RemoteError, match="not found on PATH"):
        await open_remote(_endpoint(control_path))


@pytest.fixture
def config_master(sshd: Sshd, tmp_path: Path, control_path: str) -> Iterator[Path]:
    """An ssh config whose Host block names a ControlPath, and a master opened through it."""
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host {ALIAS}\n  HostName {HOST}\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.client_key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {sshd.known_hosts}\n  ControlPath {control_path}\n"
    )
    opened = subprocess.run(
        ["ssh", "-F", str(config), "-o", "BatchMode=yes", "-fNM", ALIAS],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=15,
    )
    assert opened.returncode == 0, opened.stderr
    try:
        yield config
    finally:
        subprocess.run(
            ["ssh", "-F", str(config), "-O", "exit", ALIAS], capture_output=True, timeout=15
        )


@pytest.mark.anyio
async def test_a_controlpath_from_the_ssh_config_is_used(sshd: Sshd, config_master: Path) -> None:
    """No control_path in the profile: the ssh config's ControlPath (as ``ssh -G`` shows it)
    makes commands ride the user's master, without a new login."""
    endpoint = Endpoint(name="cm", host=ALIAS, ssh_config=config_master, transport="openssh")
    logins = sshd.accepted_logins()
    async with await open_remote(endpoint) as remote:
        assert (await remote.run("echo over the master")).stdout == "over the master\n"
    assert sshd.accepted_logins() == logins


@pytest.mark.anyio
async def test_a_flooding_login_shell_is_cut_off_over_the_master(
    sshd: Sshd, master: Endpoint
) -> None:
    """Past max_output_bytes, ssh is killed and the error names the host."""
    profile = sshd.home / ".bash_profile"
    profile.write_text("while :; do echo endless login noise; done\n")
    try:
        endpoint = dataclasses.replace(master, max_output_bytes=1024 * 1024)
        async with await open_remote(endpoint) as remote:
            with pytest.raises(RemoteError, match=r"mfa-site printed more than 1048576 bytes"):
                await remote.run("echo never")
    finally:
        profile.unlink()


@pytest.mark.anyio
async def test_the_script_is_in_no_command_line(sshd: Sshd, master: Endpoint) -> None:
    """Neither ssh's argv here nor the login shell's there carries the script."""
    marker = "LOCAL-ARGV-0815"
    async with await open_remote(master) as remote:
        assert isinstance(remote, OpensshRemote)
        assert _run_argv(master, remote._resolved)[-1] == "bash -l -s"
        result = await remote.run(
            f": {marker}\nfor p in $$ $PPID; do tr '\\0' ' ' < /proc/$p/cmdline; echo; done"
        )
    assert marker not in result.stdout
    assert "bash -l -s" in result.stdout
