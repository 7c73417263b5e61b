"""resume keeps the caps on the real dev cluster: a failed chain needs granted
retries, a stopped one a raised max_walltime, and every job's walltime is counted from
Slurm's accounting before the chain goes on.

Runs on ``local`` by default; ``REMOTE_CHAIN_RESUME_CLUSTERS`` (space-separated) names others,
e.g. the 24.11 cluster where the dev cluster has it.
"""

from __future__ import annotations

import os
from pathlib import Path

import devcluster
import pytest

from remote_chain.core.models import ChainStateName
from remote_chain.core.results import ResumeResult
from remote_chain.execs.resume import ResumeCaps

from .conftest import Chain, Client, write_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]
CLUSTERS = tuple(os.environ.get("REMOTE_CHAIN_RESUME_CLUSTERS", "local").split())


def _resume(chain: Chain, caps: ResumeCaps) -> ResumeResult:
    return chain.client.call(
        lambda rc: rc.resume(
            chain.run_id, clusters=[chain.cluster], benchmarks=[chain.benchmark], caps=caps
        )
    )


def _submit(dev: devcluster.DevCluster, tmp: Path, cluster: str, bench: dict[str, object]) -> Chain:
    client = Client(dev.clusters_dir, tmp / "state")
    return client.chains(client.submit(write_config(tmp / "run", {"b": bench}), [cluster]))["b"]


def _elapsed(chain: Chain) -> dict[str, int]:
    """Seconds per job over every run (sacct --duplicates, as root)."""
    out: dict[str, int] = {}
    for job in chain.sacct(duplicates=True):
        if job.elapsed_s is not None:
            out[job.job_id] = out.get(job.job_id, 0) + job.elapsed_s
    return out


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_failed_chain_resumes_only_with_granted_retries(
    dev: devcluster.DevCluster, tmp_path: Path, cluster: str
) -> None:
    """Refused without a grant; with --max-retries 2 the cap is in job.sh and the walltime of
    both jobs (the last one uncounted by the chain) is counted before the new link runs."""
    chain = _submit(
        dev,
        tmp_path,
        cluster,
        {"resumable": {"max_retries": 0}, "run": {"items": 50, "sleep": 1, "fail_always": True}},
    )
    assert chain.wait_ended(timeout=240).state is ChainStateName.FAILED, chain.describe()
    ids = chain.chain_ids()
    assert len(ids) == 2, chain.describe()

    (refused,) = _resume(chain, ResumeCaps()).resumed
    assert refused.job_id is None
    assert "--max-retries N" in str(refused.error)
    assert chain.queued() == []

    (short,) = _resume(chain, ResumeCaps(max_retries=1)).resumed  # 1 retry used already
    assert "grants nothing" in str(short.error)
    (entry,) = _resume(chain, ResumeCaps(max_retries=2)).resumed
    assert entry.error is None, entry
    assert entry.job_id is not None
    elapsed = _elapsed(chain)
    assert chain.walltime() == sum(elapsed[j] for j in ids), chain.describe()
    assert entry.caps is not None
    assert entry.caps["counted_jobs"] == [ids[-1]]
    assert "\nRC_MAX_RETRIES=2\n" in (chain.remote_dir / "job.sh").read_text()
    # The resumed link fails, its successor spends retry 2 and fails, the next one's retry 3
    # exceeds the new cap: the chain ends failed there.
    final = chain.wait_ended(timeout=240)
    assert final.state is ChainStateName.FAILED, chain.describe()
    assert chain.retries() == 3
    assert chain.chain_ids()[len(ids)] == entry.job_id


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_stopped_chain_resumes_only_with_a_raised_cap(
    dev: devcluster.DevCluster, tmp_path: Path, cluster: str
) -> None:
    """Stopped at a 20 s max_walltime: refused as is, resumed with --max-walltime 1 (minute),
    the walltime kept, and stopped again at the new cap."""
    chain = _submit(
        dev,
        tmp_path,
        cluster,
        {"resumable": {"max_walltime": "00:20"}, "run": {"items": 200, "sleep": 1}},
    )
    assert chain.wait_ended(timeout=240).state is ChainStateName.STOPPED, chain.describe()
    used = chain.walltime()
    assert used >= 20

    (refused,) = _resume(chain, ResumeCaps()).resumed
    assert "--max-walltime" in str(refused.error)
    (refused,) = _resume(chain, ResumeCaps(max_walltime_s=used)).resumed
    assert "already reaches" in str(refused.error)
    assert chain.queued() == []

    (entry,) = _resume(chain, ResumeCaps(max_walltime_s=60)).resumed
    assert entry.error is None, entry
    assert "\nRC_MAX_WALLTIME=60\n" in (chain.remote_dir / "job.sh").read_text()
    final = chain.wait_ended(timeout=240)
    assert final.state is ChainStateName.STOPPED, chain.describe()
    # At most the kill-after grace (15 s) past the cap: a runner slow to die on TERM.
    assert 60 <= chain.walltime() <= 60 + 20, chain.describe()
    record = (chain.remote_dir.parent / "remote-chain.json").read_text()
    assert '"max_walltime_s": 60' in record
