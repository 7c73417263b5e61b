"""The chain at the edges on a real Slurm, on every release of the dev cluster.

Each test runs once per Slurm release (the ``version`` fixture: 22.05 on ``local``/``local2``,
24.11 on ``local24``/``local24b``): a requeue in the middle of a chain (``scontrol requeue``, and
the ``requeue`` partition's preemption under ``[slurm] requeue = true``), a ``--signal=B:USR1@N``
warning reaching a runner that keeps its progress per item, a secret kept from slurmctld's saved
state and from slurmdbd (``AccountingStoreFlags=job_env,job_script``), and a ``sacct`` that never
answers on the compute node's PATH. The accounting-off tests run on ``localnoacct`` (no
slurmdbd at all, so nobody else's accounting is touched): a runner that dies with no trace stops
at the consecutive-unknown-links cap, and a TIMEOUT chain completes.

CI time: every chain here is short (1-minute limits, 1-2 s items); the slow ones wait in
parallel where a test owns several (the requeue test submits both of its chains at once).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import devcluster
import pytest
import yaml

from remote_chain.core.chainstatus import ChainStatus
from remote_chain.core.models import ChainStateName
from remote_chain.job.script import SECRETS_FILE, UNKNOWN_FILE

from .conftest import (
    Chain,
    Client,
    Version,
    assert_items_once,
    node_of,
    slurm_ok,
    squeue_state,
    submit_one,
    wait_for,
    write_config,
    write_profile,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(480)]

NOACCT = "localnoacct"  # the dev cluster's Slurm without accounting (no slurmdbd)
# Time to edit job.sh before the first link queues its successor from it.
EDIT_WINDOW = ["--begin=now+20"]


def edit_job_sh(chain: Chain, before_main: str = "", runner: str = "", **consts: str) -> None:
    """Edit the chain's job.sh before its successors are queued from it (first job pending)."""
    job_sh = chain.remote_dir / "job.sh"
    text = job_sh.read_text(encoding="utf-8")
    for name, value in consts.items():
        text, n = re.subn(rf"^{name}=.*$", f"{name}={value}", text, count=1, flags=re.M)
        assert n == 1, name
    if runner:
        text, n = re.subn(
            r"^RC_RUNNER=\(.*\)$", lambda m: m.group(0) + "\n" + runner, text, count=1, flags=re.M
        )
        assert n == 1
    if before_main:
        assert "\nrc_main " in text
        text = text.replace("\nrc_main ", f"\n{before_main}\nrc_main ")
    job_sh.write_text(text, encoding="utf-8")
    assert squeue_state(chain.cluster, chain.first_job) == "PENDING", "job.sh edited too late"


def path_wrapper(chain: Chain, name: str, body: str) -> str:
    """A ``name`` wrapper in the chain's folder; the job.sh line that puts it first on PATH."""
    wrappers = chain.remote_dir / "wrappers"
    wrappers.mkdir(mode=0o755, exist_ok=True)
    (wrappers / name).write_text(f"#!/bin/bash\n{body}\n")
    (wrappers / name).chmod(0o755)
    return f'export PATH="{wrappers}:$PATH"'


def runner_overlaps(chain: Chain) -> None:
    """The runner never ran twice at once: its start and exit events alternate."""
    kinds = [e.kind for e in chain.events() if e.kind in ("runner_start", "runner_exit")]
    assert kinds == ["runner_start", "runner_exit"] * (len(kinds) // 2), chain.describe()
    assert not (chain.remote_dir / ".remote_chain_lease").exists()


# --- requeue ----------------------------------------------------------------------------------
def test_requeue_mid_chain_counts_every_run_and_never_overlaps(
    dev: devcluster.DevCluster, tmp_path: Path, version: Version
) -> None:
    """`[slurm] requeue = true`; link 1 requeued mid-run (scontrol requeue; preemption in the
    `requeue` partition), then TIMEOUT: both runs counted, the runner never twice at once."""
    # 120 s of work: the requeued run restarts with ~116 s left, more than the 60-90 s a 1-minute
    # limit lets a job live (slurmctld checks time limits every 30 s), so a TIMEOUT always follows.
    # With 80 s of work the restarted run sometimes finished first and no link 2 was ever queued.
    items = 60
    spec = {"resumable": True, "run": {"items": items, "sleep": 2}, "slurm": {"time": "1"}}
    chains: dict[str, Chain] = {}
    for kind, cluster, slurm in (
        ("scontrol", version.cluster, {"requeue": True}),
        ("preempt", version.node_cluster, {"requeue": True, "partition": "requeue"}),
    ):
        profiles = tmp_path / kind / "clusters"
        write_profile(dev, cluster, profiles, slurm=slurm)
        chains[kind] = submit_one(dev, tmp_path / kind, cluster, f"rq-{kind}", spec,
                                  clusters_dir=profiles)  # fmt: skip
        assert "#SBATCH --requeue" in (chains[kind].remote_dir / "job.sh").read_text()
    j1 = {kind: chain.wait_running(items=2) for kind, chain in chains.items()}
    slurm_ok(version.cluster, "scontrol", "requeue", j1["scontrol"])
    _, cpus = node_of(version.node_cluster)
    preemptor = slurm_ok(
        version.node_cluster, "sbatch", "--parsable", "--partition=high", f"--cpus-per-task={cpus}",
        "--job-name=e2e-preemptor", "--output=/dev/null", "--wrap", "sleep 5",
    ).strip()  # fmt: skip
    try:
        ended = {kind: chain.wait_ended(timeout=400) for kind, chain in chains.items()}
    finally:
        devcluster.slurm(version.node_cluster, "scancel", preemptor)

    for kind, chain in chains.items():
        first = j1[kind]
        assert ended[kind].state is ChainStateName.COMPLETED, chain.describe()
        decisions = chain.decisions()
        assert [d[1][0] for d in decisions if d[0] == first][:2] == ["start", "restart"], (
            chain.describe()
        )
        runs = [j for j in chain.sacct(duplicates=True) if j.job_id == first]
        assert len(runs) >= 2, chain.describe()
        assert runs[0].word in ("REQUEUED", "PREEMPTED"), chain.describe()
        ids = chain.chain_ids()
        assert ids[0] == first, chain.describe()
        assert len(ids) >= 2, chain.describe()
        # Every run of the requeued link is counted by its successor (sacct --duplicates).
        counted = next(d[1][3] for d in decisions if d[0] == ids[1])
        assert int(counted) == sum(r.elapsed_s for r in runs), chain.describe()
        assert chain.retries() == 0, chain.describe()
        runner_overlaps(chain)
        assert_items_once(chain, items)


# --- checkpoint signals -----------------------------------------------------------------------
def test_batch_warning_signal_resumes_without_a_retry(
    dev: devcluster.DevCluster, tmp_path: Path, version: Version
) -> None:
    """`--signal=B:USR1@60` reaches the runner; the link ends signalled; the next resumes free."""
    items = 50  # 100 s: past the 60-90 s at which slurmctld's 30 s time-limit sweep signals
    spec = {
        "resumable": {"max_retries": 0},  # a retry spent would end the chain with an error
        "run": {"items": items, "sleep": 2},
        "slurm": {"time": "2", "extra_args": ["--signal=B:USR1@60"]},
    }
    chain = submit_one(dev, tmp_path, version.cluster, "usr1", spec)
    status = chain.wait_ended(timeout=400)

    assert status.state is ChainStateName.COMPLETED, chain.describe()
    j1 = chain.first_job
    assert [e.args for e in chain.events("signal", j1)] == [("USR1",)], chain.describe()
    ends = chain.events("end", j1)
    assert ends, chain.describe()
    assert ends[-1].args[0] == "signalled", chain.describe()
    ids = chain.chain_ids()
    assert len(ids) >= 2, chain.describe()
    assert chain.retries() == 0
    assert dict(chain.decisions())[ids[1]][:2] == ("resume", j1), chain.describe()
    rows = assert_items_once(chain, items)
    assert len({r["attempt"] for r in rows}) >= 2


# --- secrets ----------------------------------------------------------------------------------
def test_secret_reaches_the_runner_and_no_store_of_slurm(
    dev: devcluster.DevCluster, tmp_path: Path, version: Version
) -> None:
    """A secret is in the runner's environment (the control) and nowhere Slurm keeps jobs:
    slurmctld's saved state, `scontrol show job -dd`, sacct --env-vars / --batch-script."""
    secret = "e2e-secret-" + os.urandom(6).hex()
    spec = {
        "resumable": True,
        "run": {"items": 20, "sleep": 1, "fail_first": 1},  # link 2 runs the runner too
        "slurm": {"extra_args": EDIT_WINDOW},
    }
    config = write_config(tmp_path / "run", {"sec": spec})
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["driver"]["env"] = {"E2E_TOKEN": {"value": secret, "secret": True}}
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    client = Client(dev.clusters_dir, tmp_path / "state")
    chain = client.chains(client.submit(config, [version.cluster]))["sec"]
    # The control: links queued from job.sh print the variable from the runner's process. A
    # secret exported before sbatch would be found in the stores below by the same search.
    probe = 'RC_RUNNER=(bash -c \'echo "probe=$E2E_TOKEN"; exec "$@"\' probe "${RC_RUNNER[@]}")'
    edit_job_sh(chain, runner=probe)
    j1 = chain.wait_running()
    j2 = chain.events("successor", j1)[0].args[0]
    j2_running = wait_for(f"{j2} running", lambda: chain.events("runner_start", j2), timeout=120)
    assert j2_running
    j3 = chain.events("successor", j2)[0].args[0]
    state_dir = Path(_conf_value(version.cluster, "StateSaveLocation"))
    for job in (j2, j3):  # alive: slurmctld holds their saved state and answers scontrol
        saved = state_dir / f"hash.{int(job) % 10}" / f"job.{job}"
        files = [p for p in saved.iterdir() if p.is_file()] if saved.is_dir() else []
        assert files, f"slurmctld saved nothing for {job} in {saved}"
        assert b"PATH=" in (saved / "environment").read_bytes()  # not vacuous
        for path in files:
            assert secret.encode() not in path.read_bytes(), f"{secret} in {path}"
        shown = devcluster.slurm(version.cluster, "scontrol", "show", "job", "-dd", job).stdout
        assert f"JobId={job}" in shown
        assert secret not in shown
    status = chain.wait_ended(timeout=240)
    assert status.state is ChainStateName.COMPLETED, chain.describe()
    assert f"probe={secret}" in chain.log(j2), chain.describe()  # the runner had it
    for job in (j1, j2):
        env = slurm_ok(version.cluster, "sacct", "--env-vars", "-j", job)
        assert "PATH=" in env, env[:300]  # job_env stored: not vacuous
        script = slurm_ok(version.cluster, "sacct", "--batch-script", "-j", job)
        assert "rc_main" in script, script[:300]  # job_script stored
        assert secret not in env
        assert secret not in script
    for log in (chain.remote_dir / "logs").glob("*"):
        text = log.read_text(errors="replace")
        assert text.count(secret) == text.count(f"probe={secret}"), log
    assert secret not in (chain.remote_dir / "job.sh").read_text()
    assert not (chain.remote_dir / SECRETS_FILE).exists()


# --- bounded Slurm calls ----------------------------------------------------------------------
def test_a_hung_sacct_in_the_job_is_bounded(
    dev: devcluster.DevCluster, tmp_path: Path, version: Version
) -> None:
    """A sacct that never answers on the compute node: the lookup ends within its window + s."""
    spec = {
        "resumable": True,
        "run": {"items": 6, "sleep": 1, "fail_first": 1},
        "slurm": {"extra_args": EDIT_WINDOW},
    }
    chain = submit_one(dev, tmp_path, version.cluster, "hung-sacct", spec)
    edit_job_sh(chain, before_main=path_wrapper(chain, "sacct", "exec sleep 600"))
    status = chain.wait_ended(timeout=300)

    j1 = chain.first_job
    ids = chain.chain_ids()
    assert status.state is ChainStateName.COMPLETED, chain.describe()
    assert len(ids) == 2, chain.describe()
    exited = chain.events("runner_exit", j1)[0].time
    decided = chain.events("decided", ids[1])[0]
    looked = decided.time - exited
    print(f"{version}: {ids[1]} decided {looked:.0f} s after {j1}'s runner ended (sacct hung)")
    # The 60 s window + one bounded sacct (10 s) + job start; never the wrapper's 600 s.
    assert looked <= 60 + 10 + 45, chain.describe()
    # j1 FAILED: known to slurmctld (within MinJobAge, 10 s) or from its own `end error`.
    assert decided.args[:2] == ("resume", j1), chain.describe()
    assert decided.args[2] in ("FAILED", "none"), chain.describe()
    assert chain.retries() == 1, chain.describe()
    assert_items_once(chain, 6)


# --- accounting off (localnoacct) -------------------------------------------------------------
def events_text(chain: Chain) -> str:
    """The chain's event log, for failure messages (Chain.describe asks sacct, which is off)."""
    return (chain.remote_dir / ".remote_chain_events").read_text(errors="replace")


def wait_ended_without_accounting(chain: Chain, timeout: float) -> ChainStatus:
    """The client's status says the chain ended and squeue holds none of its jobs."""

    def probe() -> ChainStatus | None:
        status = chain.status()
        return status if status.state.ended and not chain.queued() else None

    return wait_for(f"{chain.name} to end ({chain.remote_dir})", probe, timeout=timeout)


def test_no_accounting_unknown_links_stop_at_the_cap_and_timeout_completes(
    dev: devcluster.DevCluster, tmp_path: Path
) -> None:
    """Without slurmdbd: links that die leaving no trace stop at max_unknown_links (3) in a
    row, with no retry spent; a TIMEOUT chain (end records, slurmctld) completes uncapped."""
    assert NOACCT in dev.clusters
    assert NOACCT not in dev.accounting
    folder = tmp_path / "run"
    client = Client(dev.clusters_dir, tmp_path / "state")
    # 100 s of work under a 1-minute limit (TIMEOUT lands 60-90 s after start): one TIMEOUT.
    result = client.submit(
        write_config(folder, {
            "ghost": {"resumable": True, "run": {"items": 3, "sleep": 1, "fail_first": 1},
                      "slurm": {"extra_args": EDIT_WINDOW}},
            "timeout": {"resumable": True, "run": {"items": 50, "sleep": 2},
                        "slurm": {"time": "1"}},
        }),
        [NOACCT],
    )  # fmt: skip
    chains = client.chains(result)
    ghost, timeout = chains["ghost"], chains["timeout"]
    # The runner kills its link's batch shell: no end record. slurmctld's final state is made
    # unreadable (as once MinJobAge has passed): no source knows how the link ended.
    scontrol = path_wrapper(
        ghost, "scontrol",
        '[[ $1 == show ]] && exit 1\nPATH=${PATH#*wrappers:} exec scontrol "$@"',
    )  # fmt: skip
    edit_job_sh(
        ghost,
        before_main=scontrol,
        runner="RC_RUNNER=(bash -c 'kill -KILL $PPID; exit 1')",
        RC_LOOKUP_TIMEOUT="10",
    )
    ended = wait_ended_without_accounting(ghost, timeout=420)
    assert ended.state is ChainStateName.FAILED, events_text(ghost)
    decisions = ghost.decisions()
    actions = [d[1][0] for d in decisions]
    # Link 1 (the job.sh submitted before the edit) fails with an end record: link 2 resumes
    # it, one retry spent. Links 2-5 die with no trace: links 3-5 resume, each an unknown link
    # in a row; link 6 finds 4 > 3 and ends the chain with an error.
    assert actions == ["start", "resume", "resume", "resume", "resume", "exit_error"], events_text(
        ghost
    )
    assert all(d[1][2] == "none" for d in decisions[2:]), events_text(ghost)
    assert (ghost.remote_dir / UNKNOWN_FILE).read_text().strip() == "4"
    assert ghost.retries() == 1
    assert not ghost.queued()

    done = wait_ended_without_accounting(timeout, timeout=420)
    assert done.state is ChainStateName.COMPLETED, events_text(timeout)
    j1 = timeout.first_job
    ids = timeout.chain_ids()
    assert len(ids) >= 2, events_text(timeout)
    decided = dict(timeout.decisions())[ids[1]]
    # slurmctld's TIMEOUT (within MinJobAge) or j1's own `end signalled` record.
    assert decided[:2] == ("resume", j1), events_text(timeout)
    assert timeout.retries() == 0
    unknown = timeout.remote_dir / UNKNOWN_FILE
    assert not unknown.exists() or unknown.read_text().strip() == "0"
    assert_items_once(timeout, 50)


def _conf_value(cluster: str, key: str) -> str:
    conf = Path(os.environ[f"REMOTE_CHAIN_DEV_SLURM_CONF_{cluster.upper()}"])
    for line in conf.read_text(encoding="utf-8").splitlines():
        name, _, value = line.partition("=")
        if name.strip() == key:
            return value.strip()
    raise AssertionError(f"{key} not in {conf}")
