"""Slurm 22.05 and 24.11 side by side, and login shells other than bash.

- One ``remote-chain submit --cluster local --cluster local24`` of a chain that times out once
  and completes: it does on both releases, and ``status --json`` has the same shape on both.
- The client flows the other modules do not cover (logs, resume, doctor) on each release.
- The 24.11 tree's users whose login shell is tcsh or zsh, for whom only their rc file
  (``.tcshrc``, ``.zshenv``) puts the Slurm commands on PATH: submit, status, logs and cancel,
  and a chain whose jobs' own ``sbatch``/``sacct`` calls (the successor, the lookup) work.

The slow chains (a real TIMEOUT) are submitted together when the module starts, and each test
waits for its own.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import devcluster
import pytest
from slurmcli import parse_sbatch_parsable, sacct_argv, squeue_argv

from remote_chain.core.models import ChainStateName, JobId, SacctRecord, SlurmState
from remote_chain.core.results import SubmitResult
from remote_chain.core.sacct import parse_sacct, parse_squeue

from .conftest import (
    _SUBMITTED,
    REPO,
    VERSIONS,
    Chain,
    Client,
    Version,
    as_user,
    assert_items_once,
    job_states,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420), pytest.mark.cross_release]

ITEMS = 18
# 90 s of work under a 1-minute limit: one TIMEOUT (60-90 s after start), then the rest.
TIMEOUT_ONCE = {"resumable": True, "run": {"items": ITEMS, "sleep": 5}, "slurm": {"time": "1"}}
LONG = {"resumable": True, "run": {"items": 100, "sleep": 3}}
BENCH = "timeout-once"


def cli(dev: devcluster.DevCluster, state: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``remote-chain ARGV...`` in a subprocess (this checkout's code), as a user would run it."""
    env = {**os.environ, "REMOTE_CHAIN_STATE_DIR": str(state)}
    command = [sys.executable, "-c", "from remote_chain.cli import main; main()"]
    return subprocess.run(
        [*command, "--clusters-dir", str(dev.clusters_dir), *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


# autouse: both slow runs start when the module does, and run side by side.
@pytest.fixture(scope="module", autouse=True)
def fanned(
    dev: devcluster.DevCluster, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Client, str, dict[str, Chain]]:
    """One CLI submit of the timing-out chain to ``local`` (22.05) and ``local24`` (24.11)."""
    base = tmp_path_factory.mktemp("fanout")
    client = Client(dev.clusters_dir, base / "state")
    config = write_config(base / "run", {BENCH: TIMEOUT_ONCE})
    clusters = [v.cluster for v in VERSIONS]
    argv = ["submit", str(config), "--json"]
    for cluster in clusters:
        argv += ["--cluster", cluster]
    done = cli(dev, client.state_dir, *argv)
    assert done.returncode == 0, f"submit: {done.returncode}\n{done.stdout}\n{done.stderr}"
    document = json.loads(done.stdout)
    run_id = document["run_id"]
    chains = {}
    for sub in document["submissions"]:
        assert sub["job_id"], done.stdout
        chain = Chain(
            client, run_id, sub["cluster"], sub["benchmark"], sub["job_id"], Path(sub["remote_dir"])
        )
        _SUBMITTED.append((chain.cluster, chain.name))
        chains[chain.cluster] = chain
    assert sorted(chains) == sorted(clusters), done.stdout
    return client, run_id, chains


@pytest.fixture(scope="module", autouse=True)
def shells(
    dev: devcluster.DevCluster, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Chain]:
    """The timing-out chain on each login-shell user's profile, one submit; profile -> chain."""
    base = tmp_path_factory.mktemp("shells")
    client = Client(dev.clusters_dir, base / "state")
    profiles = sorted(dev.shell_profiles)
    assert profiles, "the dev cluster has no login-shell users (scripts/dev-cluster env)"
    result = client.submit(write_config(base / "run", {BENCH: TIMEOUT_ONCE}), profiles)
    return {name: chains[BENCH] for name, chains in client.chains_by_cluster(result).items()}


def shape(value: object) -> object:
    """A JSON document's shape: its keys and the types of its values, not the values."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in sorted(value.items())}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return type(value).__name__


def logs_of(chain: Chain) -> str:
    """The chain's logs as ``remote-chain logs`` fetches them."""
    out: list[str] = []
    chain.client.call(
        lambda rc: rc.logs(chain.run_id, chain.benchmark, cluster=chain.cluster, write=out.append)
    )
    return "".join(out)


def assert_timed_out_once_and_completed(chain: Chain) -> None:
    status = chain.wait_ended(timeout=360)
    assert status.state is ChainStateName.COMPLETED, chain.describe()
    states = [state for _, state in job_states(status)]
    assert states == ["TIMEOUT", "COMPLETED"], chain.describe()
    j1, j2 = (job_id for job_id, _ in job_states(status))
    assert chain.chain_ids() == [j1, j2]
    assert [(d[0], d[1][:3]) for d in chain.decisions()] == [
        (j1, ("start", "none", "none")),
        (j2, ("resume", j1, "TIMEOUT")),
    ], chain.describe()
    rows = assert_items_once(chain, ITEMS)
    assert {r["attempt"] for r in rows} == {1, 2}


def test_fan_out_over_both_releases_times_out_once_and_completes(
    dev: devcluster.DevCluster, fanned: tuple[Client, str, dict[str, Chain]]
) -> None:
    """``submit --cluster local --cluster local24``: the chain times out once and completes on
    22.05 and on 24.11, and ``status --json`` describes both in the same shape."""
    client, run_id, chains = fanned
    for chain in chains.values():
        assert_timed_out_once_and_completed(chain)
    done = cli(dev, client.state_dir, "status", run_id, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    by_cluster = {c["cluster"]: c for c in document["chains"]}
    assert sorted(by_cluster) == sorted(chains), done.stdout
    old, new = (by_cluster[v.cluster] for v in VERSIONS)
    assert shape(old) == shape(new), json.dumps([old, new], indent=1)
    assert [j["state"] for j in old["jobs"]] == [j["state"] for j in new["jobs"]]


def test_logs_resume_and_doctor_on_each_release(
    fanned: tuple[Client, str, dict[str, Chain]], version: Version
) -> None:
    """logs of a finished chain, resume refused for a completed one, doctor all green."""
    client, run_id, chains = fanned
    chain = chains[version.cluster]
    chain.wait_ended(timeout=360)
    text = logs_of(chain)
    assert f"rollouts: all {ITEMS} items done" in text, text[-2000:]

    resumed = client.call(lambda rc: rc.resume(run_id, clusters=[version.cluster]))
    (entry,) = resumed.resumed
    assert entry.job_id is None, resumed.to_json()
    assert "completed" in (entry.error or ""), resumed.to_json()

    (doctor,) = client.call(lambda rc: rc.doctor([version.cluster]))
    assert doctor.ok, json.dumps(doctor.to_json(), indent=1)


def test_login_shell_users_run_a_chain_whose_jobs_call_slurm(
    dev: devcluster.DevCluster, shells: dict[str, Chain]
) -> None:
    """tcsh and zsh users (Slurm on PATH only through their rc file): the chain times out once,
    its job queues the successor and looks the TIMEOUT up in sacct, and it completes; logs too."""
    for name, chain in shells.items():
        user = dev.shell_profiles[name].user
        assert chain.remote_dir.is_relative_to(dev.state_dir / f"work-{user}"), chain.remote_dir
        assert_timed_out_once_and_completed(chain)
        assert f"rollouts: all {ITEMS} items done" in logs_of(chain), chain.describe()


def test_login_shell_users_cancel(dev: devcluster.DevCluster, tmp_path: Path) -> None:
    """cancel as a tcsh or zsh user leaves nothing queued (scancel found through the rc file)."""
    client = Client(dev.clusters_dir, tmp_path / "state")
    profiles = sorted(dev.shell_profiles)
    result: SubmitResult = client.submit(write_config(tmp_path / "run", {"long": LONG}), profiles)
    chains = {name: c["long"] for name, c in client.chains_by_cluster(result).items()}
    for chain in chains.values():
        chain.wait_running()
    cancelled = client.call(lambda rc: rc.cancel(result.run_id))
    assert cancelled.ok, cancelled.to_json()
    for name, chain in chains.items():
        assert chain.queued() == [], name
        assert chain.status().state is ChainStateName.CANCELLED, chain.describe()
        assert all(j.word == "CANCELLED" for j in chain.sacct()), chain.describe()


# sacct's Reason of a pending (held) job: 22.05 said "JobHeldUser" in some runs and "None" for
# more than 30 s in others (it depends on when slurmctld sends the job's record to slurmdbd);
# 24.11 said "None" in every run. Not a field to read a queued job's reason from, on either
# release: remote-chain takes it from squeue, which says JobHeldUser on both.
SACCT_REASONS_OF_A_HELD_JOB = {"22.05": {"JobHeldUser", "None"}, "24.11": {"None"}}


def _sacct_record(dev: devcluster.DevCluster, cluster: str, job_id: str) -> SacctRecord | None:
    """The job's line of remote-chain's own sacct query, run as the test user."""
    out = as_user(dev, cluster, shlex.join(sacct_argv([job_id]))).stdout
    return parse_sacct(out).get(JobId(job_id))


def test_a_held_job_reads_the_same_on_both_releases(dev: devcluster.DevCluster) -> None:
    """remote-chain's own sacct and squeue queries, parsed, on a held job: PENDING in both, and
    squeue's reason JobHeldUser in both; sacct's Reason is the field that differs (above)."""
    for version in VERSIONS:
        sub = as_user(dev, version.cluster, "sbatch --parsable --hold --wrap true")
        job_id = parse_sbatch_parsable(sub.stdout)
        assert job_id, sub
        try:
            rec = wait_for(
                f"{job_id} in sacct on {version.cluster}",
                functools.partial(_sacct_record, dev, version.cluster, job_id),
                timeout=30,
            )
            queued = parse_squeue(as_user(dev, version.cluster, shlex.join(squeue_argv())).stdout)
        finally:
            as_user(dev, version.cluster, f"scancel {job_id}")
        assert rec.state is SlurmState.PENDING, rec
        assert rec.reason in SACCT_REASONS_OF_A_HELD_JOB[version.slurm], rec
        assert queued[job_id].state is SlurmState.PENDING, queued
        assert queued[job_id].reason == "JobHeldUser", queued
