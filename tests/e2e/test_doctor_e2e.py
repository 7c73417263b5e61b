"""doctor on the real dev clusters: it tells them apart (version, accounting, options, shell,
limits), each finding checked against what the cluster itself says.

Parametrised by cluster name: every cluster of the running dev cluster (``scripts/dev-cluster
env``: ``local``, ``local2``, and the 24.11 and no-accounting clusters where they exist), or the
names in ``REMOTE_CHAIN_DOCTOR_CLUSTERS`` (space-separated).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import devcluster
import pytest

from remote_chain.execs.doctor import parse_slurm_version

pytestmark = pytest.mark.e2e
CLI = (sys.executable, "-c", "from remote_chain.cli import main; main()")


def _clusters() -> tuple[str, ...]:
    chosen = os.environ.get("REMOTE_CHAIN_DOCTOR_CLUSTERS", "").split()
    if chosen:
        return tuple(chosen)
    try:
        return devcluster.load().clusters
    except RuntimeError:
        return ("local",)  # the `dev` fixture then fails the test with the reason


def _ssh(dev: devcluster.DevCluster, cluster: str, command: str) -> str:
    done = subprocess.run(
        dev.ssh_argv(cluster, command), capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def _doctor(dev: devcluster.DevCluster, cluster: str, tmp: Path) -> tuple[int, dict[str, object]]:
    env = {
        **os.environ,
        "REMOTE_CHAIN_CLUSTERS_DIR": str(dev.clusters_dir),
        "XDG_STATE_HOME": str(tmp / "state"),
    }
    done = subprocess.run(
        [*CLI, "doctor", "--cluster", cluster, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    document = json.loads(done.stdout)
    assert isinstance(document, dict), done.stdout
    return done.returncode, document


def _has_accounting(dev: devcluster.DevCluster, cluster: str) -> bool:
    conf = dev.slurm_conf[cluster].read_text(encoding="utf-8")
    return "AccountingStorageType=accounting_storage/slurmdbd" in conf.replace(" ", "")


@pytest.fixture
def held_job(dev: devcluster.DevCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A held job of the test user, so the afternotok probe has a job slurmctld knows (24.11)."""
    cluster = request.node.callspec.params["cluster"]
    out = _ssh(dev, cluster, "sbatch --parsable --hold --job-name=rc-doctor-probe --wrap=true")
    job = out.strip().splitlines()[-1].split(";")[0]
    yield job
    devcluster.slurm(cluster, "scancel", job)


@pytest.mark.parametrize("cluster", _clusters())
def test_doctor_tells_the_cluster_apart(
    dev: devcluster.DevCluster, cluster: str, held_job: str, tmp_path: Path
) -> None:
    """Version, accounting, options and login shell as the cluster itself reports them."""
    code, doc = _doctor(dev, cluster, tmp_path)
    assert code == 0, json.dumps(doc, indent=1)
    version = parse_slurm_version(_ssh(dev, cluster, "sbatch --version"))
    assert version is not None
    assert doc["slurm_version"] == version
    shell = _ssh(dev, cluster, "getent passwd $(id -un) | cut -d: -f7").splitlines()[-1]
    assert doc["login_shell"] == shell
    assert doc["dependency_options"] == {"afternotok": True, "kill_on_invalid_dep": True}
    accounting = doc["accounting"]
    assert isinstance(accounting, dict)
    on = _has_accounting(dev, cluster)
    assert accounting["enabled"] is on
    assert accounting["reachable"] is (True if on else None)
    listed = doc["checks"]
    assert isinstance(listed, list)
    checks = {c["check"]: c for c in listed}
    assert checks["accounting"]["level"] == ("ok" if on else "warn")
    if not on:
        assert "not visible" in checks["accounting"]["hint"]
    assert held_job  # the probe job was there during doctor


@pytest.mark.parametrize("cluster", [c for c in _clusters() if c in ("local", "local24")])
def test_doctor_reports_the_users_submit_limit(
    dev: devcluster.DevCluster, cluster: str, tmp_path: Path
) -> None:
    """A MaxSubmitJobs set on the user's association shows, with what it means for chains.

    The limit is far above what any test queues, and AccountingStorageEnforce is none on the
    dev cluster, so setting it disturbs no other test; it is removed at the end.
    """
    user = dev.test_user
    where = ["where", f"name={user}", f"cluster={cluster}"]
    done = devcluster.slurm(
        cluster, "sacctmgr", "-i", "modify", "user", *where, "set", "MaxSubmitJobs=4321"
    )
    assert done.returncode == 0, done.stderr
    try:
        code, doc = _doctor(dev, cluster, tmp_path)
    finally:
        devcluster.slurm(
            cluster, "sacctmgr", "-i", "modify", "user", *where, "set", "MaxSubmitJobs=-1"
        )
    assert code == 0, json.dumps(doc, indent=1)
    limits = doc["job_limits"]
    assert isinstance(limits, dict)
    (limit,) = [lim for lim in limits["limits"] if lim["limit"] == "MaxSubmitJobs"]
    assert limit["value"] == 4321
    assert cluster in limit["source"]
    listed = doc["checks"]
    assert isinstance(listed, list)
    checks = {c["check"]: c for c in listed}
    assert checks["job_limits"]["level"] == "warn"
    assert "2 queue slots per resumable benchmark" in checks["job_limits"]["hint"]
