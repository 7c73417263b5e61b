"""The chain at the edges (issue 9) on a real Slurm: checkpoint signals and a hung sacct.

These need nothing but today's dev cluster (22.05, accounting on): a `--signal=B:USR1@N`
warning reaching a runner that keeps its progress per item, and a `sacct` that never answers
on the compute node's PATH. Each test names its cluster, so it can run on every cluster the dev
cluster has (``REMOTE_CHAIN_EDGE_CLUSTERS``, default ``local,local24``: 22.05 and 24.11).
"""

from __future__ import annotations

import os
from pathlib import Path

import devcluster
import pytest
import yaml

from remote_chain.chainstatus import ChainStateName

from .conftest import (
    Chain,
    Client,
    assert_items_once,
    slurm_ok,
    squeue_state,
    write_config,
    write_profile,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

# Both Slurm releases of the dev cluster (22.05 and 24.11; docs/dev-cluster.md).
CLUSTERS = os.environ.get("REMOTE_CHAIN_EDGE_CLUSTERS", "local,local24").split(",")


def submit_one(
    dev: devcluster.DevCluster, folder: Path, cluster: str, name: str, spec: dict[str, object]
) -> Chain:
    client = Client(dev.clusters_dir, folder / "state")
    result = client.submit(write_config(folder / "run", {name: spec}), [cluster])
    return client.chains(result)[name]


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_batch_warning_signal_resumes_without_a_retry(
    dev: devcluster.DevCluster, tmp_path: Path, cluster: str
) -> None:
    """`--signal=B:USR1@60` reaches the runner; the link ends signalled; the next resumes free."""
    items = 45
    spec = {
        "resumable": {"max_retries": 0},  # a retry spent would end the chain with an error
        "run": {"items": items, "sleep": 2},
        "slurm": {"time": "2", "extra_args": ["--signal=B:USR1@60"]},
    }
    chain = submit_one(dev, tmp_path, cluster, "usr1", spec)
    status = chain.wait_ended(timeout=400)

    assert status.state is ChainStateName.COMPLETED, chain.describe()
    j1 = chain.first_job
    signalled = chain.events("signal", j1)
    assert [e.args for e in signalled] == [("USR1",)], chain.describe()
    ends = chain.events("end", j1)
    assert ends, chain.describe()
    assert ends[-1].args[0] == "signalled", chain.describe()
    ids = chain.chain_ids()
    assert len(ids) >= 2, chain.describe()
    assert chain.retries() == 0
    decided = dict(chain.decisions())
    assert decided[ids[1]][:2] == ("resume", j1), chain.describe()
    rows = assert_items_once(chain, items)
    assert len({r["attempt"] for r in rows}) >= 2


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_a_hung_sacct_in_the_job_is_bounded(
    dev: devcluster.DevCluster, tmp_path: Path, cluster: str
) -> None:
    """A sacct that never answers on the compute node: the lookup ends within its window + s."""
    spec = {
        "resumable": True,
        "run": {"items": 6, "sleep": 1, "fail_first": 1},
        # Time to put the wrapper in place before the first job queues its successor.
        "slurm": {"extra_args": ["--begin=now+20"]},
    }
    chain = submit_one(dev, tmp_path, cluster, "hung-sacct", spec)
    wrappers = chain.remote_dir / "wrappers"
    wrappers.mkdir(mode=0o755)
    (wrappers / "sacct").write_text("#!/bin/sh\nexec sleep 600\n")
    (wrappers / "sacct").chmod(0o755)
    job_sh = chain.remote_dir / "job.sh"
    text = job_sh.read_text(encoding="utf-8")
    marker = "\nrc_main "
    assert marker in text
    job_sh.write_text(
        text.replace(marker, f'\nexport PATH="{wrappers}:$PATH"{marker}'), encoding="utf-8"
    )
    assert squeue_state(chain.cluster, chain.first_job) == "PENDING", "job.sh edited too late"
    status = chain.wait_ended(timeout=300)

    j1 = chain.first_job
    ids = chain.chain_ids()
    assert status.state is ChainStateName.COMPLETED, chain.describe()
    assert len(ids) == 2, chain.describe()
    exited = chain.events("runner_exit", j1)[0].time
    decided = chain.events("decided", ids[1])[0]
    looked = decided.time - exited
    print(f"{ids[1]} decided {looked:.0f} s after {j1}'s runner ended (sacct hung)")
    # The 60 s window + one bounded sacct (10 s) + job start; never the wrapper's 600 s.
    assert looked <= 60 + 10 + 45, chain.describe()
    # j1 FAILED: known to slurmctld (if within MinJobAge, 10 s on the dev cluster) or from
    # j1's own end record (`end error`): the retry is spent as the table says.
    assert decided.args[:2] == ("resume", j1), chain.describe()
    assert decided.args[2] in ("FAILED", "none"), chain.describe()
    assert chain.retries() == 1, chain.describe()
    assert_items_once(chain, 6)


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_requeue_opted_in_counts_every_run_and_never_overlaps(
    dev: devcluster.DevCluster, tmp_path: Path, cluster: str
) -> None:
    """`[slurm] requeue = true`; link 1 requeued mid-run, then TIMEOUT: both runs counted."""
    profiles = tmp_path / "clusters"
    write_profile(dev, cluster, profiles, slurm={"requeue": True})
    spec = {"resumable": True, "run": {"items": 40, "sleep": 2}, "slurm": {"time": "1"}}
    client = Client(profiles, tmp_path / "state")
    result = client.submit(write_config(tmp_path / "run", {"rq": spec}), [cluster])
    chain = client.chains(result)["rq"]
    assert "#SBATCH --requeue" in (chain.remote_dir / "job.sh").read_text()
    j1 = chain.wait_running(items=2)
    slurm_ok(cluster, "scontrol", "requeue", j1)
    status = chain.wait_ended(timeout=360)

    assert status.state is ChainStateName.COMPLETED, chain.describe()
    decisions = chain.decisions()
    assert [d for d in decisions if d[0] == j1][1][1][0] == "restart", chain.describe()
    runs = [j for j in chain.sacct(duplicates=True) if j.job_id == j1]
    assert len(runs) == 2, chain.describe()
    j2 = chain.chain_ids()[1]
    # Every run of the requeued link is counted by its successor (sacct --duplicates).
    counted = next(d[1][3] for d in decisions if d[0] == j2)
    assert int(counted) == sum(r.elapsed_s or 0 for r in runs), chain.describe()
    # The runner never ran twice at once: start/exit events alternate.
    kinds = [e.kind for e in chain.events() if e.kind in ("runner_start", "runner_exit")]
    assert kinds == ["runner_start", "runner_exit"] * (len(kinds) // 2), chain.describe()
    assert not (chain.remote_dir / ".remote_chain_lease").exists()
    assert_items_once(chain, 40)


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_secret_never_reaches_slurmctld(
    dev: devcluster.DevCluster, tmp_path: Path, cluster: str
) -> None:
    """A secret env value is in no job's saved state (environment, script) in slurmctld."""
    secret = "e2e-secret-" + os.urandom(6).hex()
    spec = {"resumable": True, "run": {"items": 8, "sleep": 2}}
    config = write_config(tmp_path / "run", {"sec": spec})
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["driver"]["env"] = {"E2E_TOKEN": {"value": secret, "secret": True}}
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    client = Client(dev.clusters_dir, tmp_path / "state")
    chain = client.chains(client.submit(config, [cluster]))["sec"]
    j1 = chain.wait_running(items=1)
    j2 = chain.events("successor", j1)[0].args[0]  # queued from inside the job
    state_dir = Path(_conf_value(cluster, "StateSaveLocation"))
    for job in (j1, j2):
        saved = state_dir / f"hash.{int(job) % 10}" / f"job.{job}"
        files = [p for p in saved.iterdir() if p.is_file()] if saved.is_dir() else []
        assert files, f"slurmctld saved nothing for {job} in {saved}"
        # Not vacuous: the saved environment is there and holds the job's other variables.
        assert b"PATH=" in (saved / "environment").read_bytes()
        for path in files:
            assert secret.encode() not in path.read_bytes(), f"{secret} in {path}"
    status = chain.wait_ended(timeout=180)
    assert status.state is ChainStateName.COMPLETED, chain.describe()
    assert not (chain.remote_dir / ".remote_chain_secrets").exists()


def _conf_value(cluster: str, key: str) -> str:
    conf = Path(os.environ[f"REMOTE_CHAIN_DEV_SLURM_CONF_{cluster.upper()}"])
    for line in conf.read_text(encoding="utf-8").splitlines():
        name, _, value = line.partition("=")
        if name.strip() == key:
            return value.strip()
    raise AssertionError(f"{key} not in {conf}")
