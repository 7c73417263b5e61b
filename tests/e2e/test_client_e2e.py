"""The client over the dev cluster's real sshd: submit, status, cancel, wait, transports, faults.

The client flows (submit, status, cancel, wait, login noise) run on each Slurm release (the
``version`` fixture: 22.05 ``local``, 24.11 ``local24``); transport and fault tests, which do
not depend on Slurm, run once, on ``local``. Each test is quick (its chains run seconds).
Faults are injected at the ``Remote`` seam only (a wrapper around the real transport), so what
runs on the cluster is always real.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Self

import anyio
import devcluster
import pytest

from remote_chain.client.index import RunIndex
from remote_chain.client.orchestrator import Orchestrator
from remote_chain.core.models import ChainStateName
from remote_chain.core.results import StatusResult, SubmitResult
from remote_chain.errors import AuthenticationError, ConnectError, HostKeyError
from remote_chain.transport.base import CommandResult, Remote
from remote_chain.transport.connect import open_remote
from remote_chain.transport.endpoint import Endpoint

from .conftest import (
    REPO,
    Chain,
    Client,
    Version,
    active_versions,
    as_user,
    sacct_jobs,
    squeue_ids,
    wait_for,
    write_config,
    write_profile,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

NOISE = "Welcome to the remote-chain dev cluster (noise line)"
LONG = {"resumable": True, "run": {"items": 100, "sleep": 3}}
QUICK = {"resumable": True, "run": {"items": 2, "sleep": 1}}


class Wrapped:
    """A real ``Remote`` with hooks: counts execs, keeps their results, can drop the first."""

    def __init__(self, inner: Remote, log: WrapLog) -> None:
        self._inner = inner
        self._log = log

    @property
    def name(self) -> str:
        return self._inner.name

    async def run(
        self, script: str, *, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        result = await self._inner.run(script, timeout=timeout, sensitive=sensitive)
        self._log.execs[self.name] += 1
        self._log.results.append(result)
        if self._log.drop_first and self._log.execs[self.name] == 1:
            # The script ran to its end on the cluster; only the answer is lost.
            raise ConnectError("e2e: connection dropped after the script ran", host=self.name)
        return result

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class WrapLog:
    """What the wrapped transport saw: connections opened and execs run, per cluster."""

    def __init__(self, *, drop_first: bool = False) -> None:
        self.drop_first = drop_first
        self.opened: Counter[str] = Counter()
        self.execs: Counter[str] = Counter()
        self.results: list[CommandResult] = []

    async def open(self, endpoint: Endpoint) -> Remote:
        self.opened[endpoint.name] += 1
        return Wrapped(await open_remote(endpoint), self)


def _submit_with(client: Client, log: WrapLog, config: Path, clusters: list[str]) -> SubmitResult:
    async def main() -> SubmitResult:
        async with Orchestrator(
            client.settings(), clusters_dir=client.clusters_dir, opener=log.open
        ) as rc:
            return await rc.submit(config, clusters)

    return anyio.run(main, backend="asyncio")


def _job_ids(cluster: str, name: str) -> list[str]:
    return [j.job_id for j in sacct_jobs(cluster, name)]


def _chain(client: Client, result: SubmitResult, benchmark: str) -> Chain:
    return next(c for c in client.chains(result).values() if c.benchmark == benchmark)


@pytest.fixture
def client(dev: devcluster.DevCluster, tmp_path: Path) -> Client:
    return Client(dev.clusters_dir, tmp_path / "state")


def test_submit_status_cancel_leaves_nothing_queued(
    client: Client, tmp_path: Path, version: Version
) -> None:
    """After cancel returns no job of the chain is queued, none starts later, status: cancelled."""
    result = client.submit(write_config(tmp_path, {"long": LONG}), [version.cluster])
    chain = _chain(client, result, "long")
    # Status through the local index (no --cluster), as a user on the submitting machine.
    first: StatusResult = client.call(lambda rc: rc.status(result.run_id))
    assert [(c.cluster, c.benchmark) for c in first.chains] == [(version.cluster, "long")]
    assert first.chains[0].state in {ChainStateName.PENDING, ChainStateName.RUNNING}
    assert first.chains[0].jobs[0].job_id == chain.first_job
    # Cancel once a link runs and its successor waits: the case with most to clean up.
    j1 = chain.wait_running()
    j2 = chain.events("successor", j1)[0].args[0]
    # Both jobs queued: status reads them from squeue alone (sacct is asked only of jobs squeue
    # no longer shows), and says what sacct would: j1's start, its time used; j2 not started.
    live = {str(j.job_id): j for j in chain.status().jobs}
    running, pending = live[j1], live[j2]
    assert (running.state, pending.state) == ("RUNNING", "PENDING"), live
    started = devcluster.slurm(version.cluster, "sacct", "-X", "-n", "-P", "-j", j1, "-o", "Start")
    assert running.start == started.stdout.strip(), (running, started.stdout)
    assert running.elapsed_s is not None, running
    assert 0 <= running.elapsed_s < 600, running
    assert (pending.start, pending.elapsed_s) == ("", 0), pending

    cancelled = client.call(lambda rc: rc.cancel(result.run_id))
    assert cancelled.ok, cancelled.to_json()
    (entry,) = cancelled.cancelled
    assert set(entry.job_ids) == {j1, j2}
    assert chain.queued() == []
    for _ in range(10):  # and nothing of the chain starts afterwards
        time.sleep(1)
        assert chain.queued() == []
    assert {j.job_id for j in chain.sacct()} == {j1, j2}
    assert all(j.word == "CANCELLED" for j in chain.sacct())
    assert chain.status().state is ChainStateName.CANCELLED


def test_two_clusters_in_one_submit(client: Client, tmp_path: Path) -> None:
    """One submit reaches both clusters with one exec each; each answers with its own job id."""
    log = WrapLog()
    config = write_config(tmp_path, {"both": {"command": "echo both"}})
    result = _submit_with(client, log, config, ["local", "local2"])
    assert result.ok, result.to_json()
    assert log.execs == Counter({"local": 1, "local2": 1})
    assert log.opened == Counter({"local": 1, "local2": 1})
    subs = {s.cluster: s for s in result.submissions}
    assert set(subs) == {"local", "local2"}
    for cluster, sub in subs.items():
        assert sub.job_id is not None
        assert sub.remote_dir.endswith(f"/{result.run_id}/{cluster}/both")
        seen = wait_for(
            f"job {sub.job_id} in {cluster}'s accounting",
            functools.partial(_job_ids, cluster, f"{result.run_id}:both"),
            timeout=30,
        )
        assert seen == [sub.job_id]  # that cluster's own job, and only it
    final = client.call(lambda rc: rc.wait(result.run_id, timeout=120, first_interval=1))
    assert final.all_completed, final.to_json()


def test_unknown_host_key_is_refused(
    dev: devcluster.DevCluster, client: Client, tmp_path: Path
) -> None:
    """A host whose key is not in known_hosts is refused with HostKeyError; nothing is created."""
    empty = tmp_path / "known_hosts"
    empty.write_text("", encoding="utf-8")
    folder = tmp_path / "clusters"
    write_profile(dev, "local", folder, top={"known_hosts": str(empty)})
    strict = Client(folder, tmp_path / "state")
    config = write_config(tmp_path / "cfg", {"never": {"command": "echo never"}})
    result = strict.call(lambda rc: rc.submit(config, ["local"]))

    assert not result.ok
    (failure,) = result.failures
    assert failure.cluster == "local"
    assert isinstance(failure.error, HostKeyError), repr(failure.error)
    assert failure.error.host == "local"
    assert "127.0.0.1" in str(failure.error)
    assert not (dev.workdir / result.run_id).exists()


def test_login_noise_does_not_break_parsing(
    dev: devcluster.DevCluster, client: Client, tmp_path: Path, version: Version
) -> None:
    """The test user's shell prints a noise line; submit and status still parse."""
    raw = as_user(dev, version.cluster, "echo payload")
    assert raw.stdout.splitlines() == [NOISE, "payload"], raw
    log = WrapLog()
    config = write_config(tmp_path, {"noisy": QUICK})
    result = _submit_with(client, log, config, [version.cluster])
    assert result.ok, result.to_json()
    assert NOISE in log.results[0].noise  # the transport saw it, and set it aside
    chain = _chain(client, result, "noisy")
    assert chain.first_job.isdigit()
    status = chain.wait_ended(timeout=90)
    assert status.state is ChainStateName.COMPLETED
    assert status.jobs[0].job_id == chain.first_job


def test_connection_dropped_during_submit_leaves_one_chain(client: Client, tmp_path: Path) -> None:
    """A submit whose answer is lost finds its run by lookup; exactly one job exists."""
    log = WrapLog(drop_first=True)
    config = write_config(tmp_path, {"dropped": {"command": "sleep 3"}})
    result = _submit_with(client, log, config, ["local"])

    assert result.ok, result.to_json()
    assert log.opened["local"] == 2  # reconnected after the drop
    assert log.execs["local"] == 2  # the submit, then the lookup (never a second submit)
    (sub,) = result.submissions
    assert sub.existing  # found by the lookup, not submitted again
    assert sub.job_id is not None
    name = f"{result.run_id}:dropped"
    final = client.call(lambda rc: rc.wait(result.run_id, timeout=120, first_interval=1))
    assert final.all_completed, final.to_json()
    seen = wait_for(f"{name} in accounting", functools.partial(_job_ids, "local", name), timeout=30)
    assert seen == [sub.job_id]  # exactly one job of that name, ever
    assert squeue_ids("local", name) == []


@pytest.fixture
def control_master(dev: devcluster.DevCluster) -> Iterator[Path]:
    """A ControlMaster opened the way a user would (``ssh -fNM``); closed with ``-O exit``."""
    # A short folder: a unix socket path must fit in 108 bytes.
    folder = Path(tempfile.mkdtemp(prefix="rc-cm-", dir="/tmp"))
    path = folder / "cm"
    target = ["-S", str(path), "-p", str(dev.ssh_port["local"]), f"{dev.test_user}@{dev.host}"]
    options = [
        "-i", str(dev.identity_file), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
        "-o", f"UserKnownHostsFile={dev.known_hosts}", "-o", "StrictHostKeyChecking=yes",
    ]  # fmt: skip
    # -f leaves a background master holding our stdio: give it files, not pipes we wait on.
    with (folder / "master.err").open("w") as err:
        opened = subprocess.run(
            ["ssh", "-fNM", *options, *target], stdout=subprocess.DEVNULL, stderr=err, timeout=30
        )
    assert opened.returncode == 0, (folder / "master.err").read_text()
    try:
        yield path
    finally:
        subprocess.run(["ssh", "-O", "exit", *target], capture_output=True, timeout=30)


def test_openssh_transport_over_a_control_master(
    dev: devcluster.DevCluster, control_master: Path, tmp_path: Path
) -> None:
    """transport = "openssh" runs submit/status/cancel over the user's ControlMaster."""
    folder = tmp_path / "clusters"
    write_profile(
        dev, "local", folder, top={"transport": "openssh", "control_path": str(control_master)}
    )
    client = Client(folder, tmp_path / "state")
    result = client.submit(write_config(tmp_path, {"via-openssh": LONG}), ["local"])
    chain = _chain(client, result, "via-openssh")
    assert chain.status().state in {ChainStateName.PENDING, ChainStateName.RUNNING}
    cancelled = client.call(lambda rc: rc.cancel(result.run_id, clusters=["local"]))
    assert cancelled.ok, cancelled.to_json()
    assert chain.queued() == []
    assert chain.status().state is ChainStateName.CANCELLED

    subprocess.run(
        ["ssh", "-S", str(control_master), "-O", "exit", f"{dev.test_user}@{dev.host}"],
        capture_output=True,
        timeout=30,
    )
    closed = client.call(lambda rc: rc.status(result.run_id, clusters=["local"]))
    (failure,) = closed.failures
    assert isinstance(failure.error, AuthenticationError), repr(failure.error)
    assert "ssh -fNM" in str(failure.error)
    assert str(control_master) in str(failure.error)


# --- wait ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ended_runs(
    dev: devcluster.DevCluster,
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> tuple[Client, str, str]:
    """Two runs on each release's cluster that end quickly: one completes, one fails (retries
    exhausted)."""
    base = tmp_path_factory.mktemp("wait")
    client = Client(dev.clusters_dir, base / "state")
    clusters = [v.cluster for v in active_versions(pytestconfig)]
    good = client.submit(write_config(base / "good", {"ok": QUICK}), clusters)
    bad_config = write_config(
        base / "bad",
        {
            "bad": {
                "resumable": {"max_retries": 0},
                # Several items: a resumed attempt (after an accounting outage) fails too.
                "run": {"items": 3, "sleep": 0, "fail_always": True},
            }
        },
    )
    bad = client.submit(bad_config, clusters)
    client.chains_by_cluster(good)
    client.chains_by_cluster(bad)
    return client, good.run_id, bad.run_id


def test_wait_returns_all_completed_only_for_a_completed_run(
    ended_runs: tuple[Client, str, str], version: Version
) -> None:
    """``wait`` blocks until the chains end; all_completed for the good run, not the failed one."""
    client, good, bad = ended_runs
    on = [version.cluster]
    done = client.call(lambda rc: rc.wait(good, clusters=on, timeout=120, first_interval=1))
    assert done.all_completed, done.to_json()
    failed = client.call(lambda rc: rc.wait(bad, clusters=on, timeout=120, first_interval=1))
    assert failed.ended
    assert not failed.all_completed
    assert [c.state for c in failed.chains] == [ChainStateName.FAILED], failed.to_json()


def test_an_ended_jobs_record_is_read_from_sacct_once(
    ended_runs: tuple[Client, str, str], version: Version
) -> None:
    """Once a poll saw a job's final record, later polls take it from the local index and ask
    sacct of it no more: the status stays the same, and a reason changed in the index shows,
    so it did not come from sacct."""
    client, good, _ = ended_runs
    on = [version.cluster]
    first = client.call(lambda rc: rc.wait(good, clusters=on, timeout=120, first_interval=1))
    assert first.all_completed, first.to_json()
    index = RunIndex(client.settings().index_dir())
    entry = index.load(good)
    assert entry is not None
    lines = entry.final_of(version.cluster, (), dt.datetime.now(dt.UTC)).splitlines()
    assert {line.split("|")[0] for line in lines} >= {j.job_id for j in first.chains[0].jobs[:1]}
    again = client.call(lambda rc: rc.status(good, clusters=on))
    assert again.to_json() == first.to_json()

    marked = {k: v.replace("|0:0|", "|0:0|kept-by-the-index ") for k, v in entry.final.items()}
    index.save(replace(entry, final=marked))
    seen = client.call(lambda rc: rc.status(good, clusters=on))
    (chain,) = seen.chains
    assert chain.state is ChainStateName.COMPLETED
    assert any(j.reason.startswith("kept-by-the-index") for j in chain.jobs), seen.to_json()


def test_cli_wait_exit_codes(
    dev: devcluster.DevCluster, ended_runs: tuple[Client, str, str], version: Version
) -> None:
    """``remote-chain wait RUN --cluster C --json``: exit 0 if all completed, else 1."""
    client, good, bad = ended_runs
    if not (REPO / "remote_chain" / "cli" / "__init__.py").exists():
        pytest.fail("remote_chain/cli/ does not exist yet: the CLI (interface.md 4) is missing")
    env = {**os.environ, "REMOTE_CHAIN_STATE_DIR": str(client.state_dir)}
    codes = {}
    for run_id in (good, bad):
        argv = [
            sys.executable, "-c", "from remote_chain.cli import main; main()",
            "--clusters-dir", str(dev.clusters_dir), "wait", run_id, "--cluster", version.cluster,
            "--timeout", "120s", "--json",
        ]  # fmt: skip
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
        document = json.loads(done.stdout)  # exactly one JSON document on stdout
        assert document["run_id"] == run_id, done.stdout
        codes[run_id] = (done.returncode, [c["state"] for c in document["chains"]])
    assert codes == {good: (0, ["completed"]), bad: (1, ["failed"])}
