"""The `shell` executor over the real sshd: a host without Slurm runs job.sh in the background."""

from __future__ import annotations

import time
from pathlib import Path

import devcluster
import pytest

from remote_chain.core.models import ChainStateName
from remote_chain.errors import ConfigError

from .conftest import Client, write_config, write_profile

pytestmark = pytest.mark.e2e


@pytest.fixture
def shell_client(dev: devcluster.DevCluster, tmp_path: Path) -> Client:
    """A profile copy of `local` with executor = "shell": same host and key, no scheduler."""
    write_profile(dev, "local", tmp_path / "clusters", top={"executor": "shell"})
    return Client(tmp_path / "clusters", tmp_path / "state")


def _wait_state(client: Client, run_id: str, bench: str, want: ChainStateName) -> ChainStateName:
    deadline = time.monotonic() + 60
    state = ChainStateName.UNKNOWN
    while time.monotonic() < deadline:
        state = client.status(run_id, "local", bench).state
        if state is want:
            break
        time.sleep(1)
    return state


def test_shell_executor_runs_reports_and_cancels(shell_client: Client, tmp_path: Path) -> None:
    """Runs detached on the host; status from its pid and exit file; cancel kills its group."""
    config = write_config(
        tmp_path / "cfg",
        {
            "ok": {"run": {"items": 2, "sleep": 0.5}},
            "bad": {"command": "echo about to fail; exit 3"},
            "long": {"command": "sleep 300"},
        },
    )
    result = shell_client.submit(config, ["local"])
    run_id = result.run_id
    assert all(s.job_id and s.job_id.isdigit() for s in result.submissions)

    assert (
        _wait_state(shell_client, run_id, "ok", ChainStateName.COMPLETED)
        is ChainStateName.COMPLETED
    )
    assert _wait_state(shell_client, run_id, "bad", ChainStateName.FAILED) is ChainStateName.FAILED
    assert shell_client.status(run_id, "local", "long").state is ChainStateName.RUNNING
    rollouts = Path(result.submissions[0].remote_dir) / "artifacts" / "rollouts.jsonl"
    assert len(rollouts.read_text().splitlines()) == 2

    cancelled = shell_client.call(
        lambda rc: rc.cancel(run_id, clusters=["local"], benchmarks=["long"])
    )
    assert cancelled.ok, cancelled.to_json()
    (entry,) = cancelled.cancelled
    assert entry.job_ids  # the pid it killed
    state = _wait_state(shell_client, run_id, "long", ChainStateName.CANCELLED)
    assert state is ChainStateName.CANCELLED

    logs: list[str] = []
    shell_client.call(lambda rc: rc.logs(run_id, "bad", cluster="local", write=logs.append))
    assert "about to fail" in "".join(logs)


def test_resumable_on_the_shell_executor_is_refused(shell_client: Client, tmp_path: Path) -> None:
    """`resumable` needs a scheduler: a config error naming the benchmark, nothing sent."""
    config = write_config(tmp_path / "cfg", {"r": {"resumable": True, "run": {"items": 1}}})
    with pytest.raises(ConfigError) as err:
        shell_client.call(lambda rc: rc.submit(config, ["local"]))
    assert "r" in str(err.value)
    assert "shell" in str(err.value)
