"""The persistent connection against the real dev cluster: a real agent
process over real sshd gives the same status JSON as the direct path, and an agent killed
mid-command is a ConnectError after which the command's session goes direct."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

import anyio
import devcluster  # tests/ is on sys.path: pytest's rootdir-relative import, as in conftest.py
import pytest

from remote_chain.client.cluster import endpoint_for
from remote_chain.client.orchestrator import Orchestrator
from remote_chain.config import find_profile
from remote_chain.config.settings import Settings
from remote_chain.errors import ConnectError, RemoteTimeout
from remote_chain.transport import agent
from remote_chain.transport.base import CommandResult
from remote_chain.transport.connect import open_remote
from remote_chain.transport.endpoint import Endpoint
from remote_chain.transport.shell import ShellRemote
from remote_chain.transport.ssh import SshRemote

from .conftest import write_config, write_profile

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
CLUSTER = "local"
REPO = Path(__file__).resolve().parents[2]


def _endpoint(folder: Path, state: Path) -> Endpoint:
    settings = Settings(state_dir=state)
    return endpoint_for(find_profile(CLUSTER, clusters_dirs=[folder]), settings)


def test_status_json_is_the_same_through_the_agent(
    dev: devcluster.DevCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """persist set: the first command starts the agent; status JSON equals the direct one."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    direct_dir = tmp_path / "direct"
    kept_dir = tmp_path / "kept"
    write_profile(dev, CLUSTER, direct_dir)
    write_profile(dev, CLUSTER, kept_dir, top={"persist": "2m"})
    config = write_config(
        tmp_path, {"c0": {"command": "true", "slurm": {"extra_args": ["--hold"]}}}
    )
    state = tmp_path / "state"

    async def flow() -> tuple[object, object, int]:
        async with Orchestrator(Settings(state_dir=state), clusters_dir=direct_dir) as rc:
            submitted = await rc.submit(config, [CLUSTER])
        # Right after a submit the job's details still settle (accounting lag, the hold's
        # reason): compare polls taken back to back until two agree, a few times at most.
        for _ in range(5):
            async with Orchestrator(Settings(state_dir=state), clusters_dir=direct_dir) as rc:
                direct = await rc.status(submitted.run_id, clusters=[CLUSTER])
            async with Orchestrator(Settings(state_dir=state), clusters_dir=kept_dir) as rc:
                kept = await rc.status(submitted.run_id, clusters=[CLUSTER])
            if kept.to_json() == direct.to_json():
                break
            await anyio.sleep(1)
        answer = await agent.request(agent.socket_path(_endpoint(kept_dir, state)), {"op": "ping"})
        assert answer is not None
        pid = int(answer["pid"])
        devcluster.slurm(CLUSTER, "scancel", *[s.job_id for s in submitted.submissions if s.job_id])
        return direct.to_json(), kept.to_json(), pid

    direct, kept, pid = anyio.run(flow, backend="asyncio")
    try:
        assert kept == direct
    finally:
        os.kill(pid, signal.SIGTERM)


def test_agent_killed_mid_command(
    dev: devcluster.DevCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL to the agent while a command runs: ConnectError; the next command goes direct."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    folder = tmp_path / "kept"
    write_profile(dev, CLUSTER, folder, top={"persist": "2m"})
    endpoint = dataclasses.replace(_endpoint(folder, tmp_path / "state"), command_timeout=60)

    async def flow() -> tuple[str, bool]:
        async with await open_remote(endpoint) as remote:
            assert isinstance(remote, agent.AgentRemote)
            answer = await agent.request(agent.socket_path(endpoint), {"op": "ping"})
            assert answer is not None

            async def kill_soon() -> None:
                await anyio.sleep(1.0)
                os.kill(int(answer["pid"]), signal.SIGKILL)

            async with anyio.create_task_group() as tg:
                tg.start_soon(kill_soon)
                with pytest.raises(ConnectError, match="went away"):
                    await remote.run("sleep 5; echo late")
            after = await remote.run("echo direct")
            return after.stdout, agent.socket_path(endpoint).exists()

    stdout, _ = anyio.run(flow, backend="asyncio")
    assert stdout == "direct\n"


def test_polls_go_over_the_shell_channel_and_survive_its_death(
    dev: devcluster.DevCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent answers over its persistent shell channel (the same bytes as an exec);
    the remote loop killed by PID costs a new channel, not the command; a timeout discards
    the channel and the next command gets a new one."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    folder = tmp_path / "kept"
    write_profile(dev, CLUSTER, folder, top={"persist": "2m"})
    endpoint = dataclasses.replace(_endpoint(folder, tmp_path / "state"), command_timeout=60)
    script = "echo out; echo err >&2; squeue --me --noheader -o %i >/dev/null; exit 4"

    async def shell_pid() -> int:
        for _ in range(50):  # the agent opens the channel just after it says READY
            answer = await agent.request(agent.socket_path(endpoint), {"op": "ping"})
            assert answer is not None
            if answer.get("shell_pid"):
                return int(answer["shell_pid"])
            await anyio.sleep(0.1)
        raise AssertionError("the agent opened no shell channel")

    async def flow() -> tuple[list[object], int]:
        async with await open_remote(endpoint) as remote:
            assert isinstance(remote, agent.AgentRemote)
            first = await remote.run(script)
            pid = await shell_pid()
            os.kill(pid, signal.SIGKILL)  # the login node's loop, by PID (same machine here)
            await anyio.sleep(0.3)
            second = await remote.run(script)
            pid2 = await shell_pid()
            assert pid2 != pid
            with pytest.raises(RemoteTimeout):
                await remote.run("sleep 5; echo late", timeout=1)
            third = await remote.run(script)
            pid3 = await shell_pid()
            assert pid3 not in (pid, pid2)
            answer = await agent.request(agent.socket_path(endpoint), {"op": "ping"})
            assert answer is not None
            return [first, second, third], int(answer["pid"])

    async def direct() -> object:
        async with await SshRemote.open(endpoint) as remote:
            return await remote.run(script)

    results, agent_pid = anyio.run(flow, backend="asyncio")
    try:
        want = anyio.run(direct, backend="asyncio")
        assert results == [want, want, want]
    finally:
        os.kill(agent_pid, signal.SIGTERM)


def test_the_shell_channel_starts_as_an_exec_does_for_tcsh_and_zsh_users(
    dev: devcluster.DevCluster, tmp_path: Path
) -> None:
    """The loop is started by the user's login shell as `bash -l -s`, as every exec is: for a
    tcsh or zsh user whose rc file alone puts Slurm on PATH, a request over the
    channel finds squeue where an exec finds it, with the same PATH."""
    assert dev.shell_profiles, "the dev cluster has no tcsh/zsh users"
    script = "command -v squeue; echo $PATH; squeue --me --noheader -o %i | wc -l"

    async def compare(name: str) -> tuple[object, object, object]:
        endpoint = endpoint_for(
            find_profile(name, clusters_dirs=[dev.clusters_dir]),
            Settings(state_dir=tmp_path / "state"),
        )
        async with await SshRemote.open(endpoint) as direct:
            want = await direct.run(script)
        async with ShellRemote(await SshRemote.open(endpoint)) as shell:
            await shell.warm()
            assert shell.shell_pid is not None
            return want, await shell.run(script), await shell.run(script)

    for name in dev.shell_profiles:
        want, first, second = anyio.run(compare, name, backend="asyncio")
        assert isinstance(want, CommandResult)
        assert want.exit_status == 0, want
        for got in (first, second):
            assert isinstance(got, CommandResult)
            assert (got.exit_status, got.stdout, got.stderr) == (0, want.stdout, want.stderr)
