"""Status past 256 chains lists the user's jobs once and keeps the run's with awk, where it asked
``squeue --name`` below that: on each Slurm release, the status exec of 40 held
chains with each path forced returns the same SQUEUE record, and every chain reads pending
with squeue's reason."""

from __future__ import annotations

import subprocess
from pathlib import Path

import devcluster
import pytest
from localexec import squeue_record

from remote_chain.core.models import ChainStateName
from remote_chain.core.results import StatusResult
from remote_chain.core.snapshot import Target
from remote_chain.execs.status import parse_status_output, render_status_script
from remote_chain.protocol.markers import wrap

from .conftest import Client, Version, slurm_ok, wait_for, write_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CHAINS = 40  # under the awk path's 256 names: each path is forced in turn
THRESHOLD = "(( ${#names[@]} > 256 ))"


def _exec(dev: devcluster.DevCluster, cluster: str, script: str) -> str:
    """The status script run by the test user's login shell over ssh; its payload."""
    wrapped, nonce = wrap(script)
    argv = [a for a in dev.ssh_argv(cluster, "bash -s") if a != "-n"]
    done = subprocess.run(argv, input=wrapped, capture_output=True, text=True, timeout=120)
    text = done.stdout
    begin = f"__REMOTE_CHAIN_BEGIN_{nonce}\n"
    assert begin in text, done.stderr
    return text[text.index(begin) + len(begin) : text.index(f"\n__REMOTE_CHAIN_END_{nonce}")]


_squeue = squeue_record


def test_held_chains_read_as_with_squeue_name(
    dev: devcluster.DevCluster, version: Version, tmp_path: Path
) -> None:
    """On 40 held chains, the status exec's squeue of the user's jobs kept by awk gives the same
    SQUEUE record as its ``squeue --name`` path, and every chain reads pending with squeue's reason
    JobHeldUser."""
    benches = {
        f"c{i:02d}": {"command": "true", "slurm": {"extra_args": ["--hold"]}} for i in range(CHAINS)
    }
    client = Client(dev.clusters_dir, tmp_path / "state")
    result = client.submit(write_config(tmp_path / "run", benches), [version.cluster])
    chains = client.chains(result)
    names = ",".join(c.name for c in chains.values())

    def held() -> bool:  # right after sbatch the hold's reason still settles
        reasons = slurm_ok(
            version.cluster, "squeue", "--noheader", "--format=%r", f"--name={names}"
        )
        return reasons.split() == ["JobHeldUser"] * CHAINS

    try:
        wait_for("the hold's reason in squeue", held, timeout=60)
        run_dir = str(next(iter(chains.values())).remote_dir.parent)
        targets = [Target(result.run_id, run_dir)]
        script = render_status_script(targets)
        assert THRESHOLD in script
        new = _exec(dev, version.cluster, script.replace(THRESHOLD, "(( 1 ))"))
        old = _exec(dev, version.cluster, script.replace(THRESHOLD, "(( 0 ))"))
        assert _squeue(new) == _squeue(old)
        assert _squeue(new)[1] == "0"
        snap = parse_status_output(new, targets)
        assert {c.first_job for c in chains.values()} <= set(snap.squeue)
        status: StatusResult = client.call(lambda rc: rc.status(result.run_id))
        assert not status.failures
        assert len(status.chains) == CHAINS
        for chain in status.chains:
            assert chain.state == ChainStateName.PENDING, chain
            assert chain.jobs[-1].reason == "JobHeldUser", chain
    finally:
        slurm_ok(version.cluster, "scancel", *[c.first_job for c in chains.values()])
