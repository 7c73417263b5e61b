"""Every row of resumable-runs.md's decision table, produced by a real Slurm event.

Every row runs on each Slurm release of the dev cluster (the ``version`` fixture: 22.05 on
``local``/``local2``, 24.11 on ``local24``/``local24b``). The scenarios that only need waiting for
are slow (a real TIMEOUT: a 1-minute limit ends 60-80 s after start), so the module fixture
submits all of them at once, as one run on ``local`` and ``local24`` together, and each test
then waits (bounded) for its own chain. The scenarios that act on a running job (cancels,
requeue, preemption, node failure) submit their own short chain in their test, one after the
other, while those progress; preemption and node failure hit a whole node, so they run on the
release's second cluster (``local2``, ``local24b``). Each test asserts the chain through the
client's status, Slurm's own view (sacct, squeue as root), the three dot-files, the event log,
and the runner's artifacts.
"""

from __future__ import annotations

import re
from pathlib import Path

import devcluster
import pytest

from remote_chain.core.models import ChainStateName

from .conftest import (
    CHAIN_WARNING,
    Chain,
    Client,
    Version,
    active_versions,
    as_user,
    assert_items_once,
    job_states,
    node_of,
    node_state,
    slurm_ok,
    squeue_state,
    submit_one,
    wait_for,
    write_config,
    write_profile,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

ONE_MINUTE = "1"  # Slurm's "MM": TIMEOUT lands 60-80 s after start on the dev cluster
TIMEOUT_ITEMS, TIMEOUT_SLEEP = 18, 5  # 90 s of work: one TIMEOUT, then the rest
WALLTIME_CAP_S = 120

# The scenarios that only need waiting for, on each release's first cluster, submitted together
# as one run.
LOCAL = {
    "completed": {"resumable": True, "run": {"items": 3, "sleep": 1}},
    "timeout": {
        "resumable": True,
        "run": {"items": TIMEOUT_ITEMS, "sleep": TIMEOUT_SLEEP},
        "slurm": {"time": ONE_MINUTE},
    },
    "failed": {
        "resumable": {"max_retries": 1},
        "run": {"items": 3, "sleep": 1, "fail_always": True},
    },
    "walltime": {
        "resumable": {"max_walltime": "2"},  # MM: two minutes
        "run": {"items": 200, "sleep": 2},
        "slurm": {"time": ONE_MINUTE},
    },
    "refused": {
        "resumable": True,
        "run": {"items": 3, "sleep": 1},
        # Delayed start: time to edit job.sh on the cluster before the first job queues its
        # successor from it (sbatch kept its own copy for the first job).
        "slurm": {"extra_args": ["--begin=now+20"]},
    },
}
# The scenarios acting on a running job: long enough to act on, short enough to resume quickly.
LONG = {"resumable": True, "run": {"items": 100, "sleep": 3}}  # cancelled: never resumed
SHORT_ITEMS = 10
SHORT = {"resumable": True, "run": {"items": SHORT_ITEMS, "sleep": 2}}


# autouse: submitted before the module's first test, so these chains run while the others act.
@pytest.fixture(scope="module", autouse=True)
def waiting(
    dev: devcluster.DevCluster,
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> dict[str, dict[str, Chain]]:
    """The waiting-only scenarios on every release, one submit; cluster -> benchmark -> chain."""
    base = tmp_path_factory.mktemp("rules")
    client = Client(dev.clusters_dir, base / "state")
    clusters = [v.cluster for v in active_versions(pytestconfig)]
    chains = client.chains_by_cluster(client.submit(write_config(base / "run", LOCAL), clusters))
    for cluster in clusters:
        _break_successor_submission(chains[cluster]["refused"])
    return chains


@pytest.fixture
def local(waiting: dict[str, dict[str, Chain]], version: Version) -> dict[str, Chain]:
    """The waiting-only scenarios of one release; benchmark name -> chain."""
    return waiting[version.cluster]


def _break_successor_submission(chain: Chain) -> None:
    """Give job.sh (which successors resubmit) a partition that does not exist."""
    job_sh = chain.remote_dir / "job.sh"
    text = job_sh.read_text(encoding="utf-8")
    good = "#SBATCH --partition=debug\n"
    assert good in text, f"job.sh has no {good!r}:\n{text[:600]}"
    job_sh.write_text(text.replace(good, "#SBATCH --partition=nosuchpart\n"), encoding="utf-8")
    state = squeue_state(chain.cluster, chain.first_job)
    assert state == "PENDING", f"first job already {state!r}: job.sh was edited too late"


def successor_of(chain: Chain, job_id: str) -> str:
    """The successor ``job_id`` queued (its ``successor`` event)."""
    events = chain.events("successor", job_id)
    assert len(events) == 1, f"{job_id} queued {len(events)} successors{chain.describe()}"
    return events[0].args[0]


def sacct_by_id(chain: Chain) -> dict[str, str]:
    return {j.job_id: j.state for j in chain.sacct()}


def withdrawn_successor(chain: Chain, job_id: str, uid: int) -> str:
    """The successor ``job_id`` queued before its lookup and cancelled when it chose not to
    run: it must never have started (no allocation spent on a job that only exits)."""
    succ = successor_of(chain, job_id)
    assert [e.args[0] for e in chain.events("successor_cancelled", job_id)] == [succ]
    found = wait_for(
        f"{succ} in accounting",
        lambda: [j for j in chain.sacct() if j.job_id == succ],
        timeout=30,
    )
    (job,) = found
    assert (job.state, job.elapsed_s) == (f"CANCELLED by {uid}", 0), chain.describe()
    assert succ not in chain.chain_ids()
    return succ


# --- user and admin cancels (they need a running job: first, while the others progress) ----
def test_cancelled_by_the_user_stops_the_chain(
    dev: devcluster.DevCluster, tmp_path: Path, version: Version
) -> None:
    """A raw scancel by the submitting user: the successor sees CANCELLED by 1001 and stops."""
    chain = submit_one(dev, tmp_path, version.cluster, "user-cancel", LONG)
    j1 = chain.wait_running(items=1)
    done = as_user(dev, chain.cluster, f"scancel {j1}")
    assert done.returncode == 0, done.stderr
    status = chain.wait_ended(timeout=120)

    assert status.state is ChainStateName.CANCELLED, chain.describe()
    j2 = successor_of(chain, j1)
    assert chain.chain_ids() == [j1, j2]
    j3 = withdrawn_successor(chain, j2, dev.test_uid)
    assert sacct_by_id(chain) == {
        j1: f"CANCELLED by {dev.test_uid}",
        j2: "COMPLETED",
        j3: f"CANCELLED by {dev.test_uid}",
    }
    assert job_states(status) == [(j1, f"CANCELLED by {dev.test_uid}"), (j2, "COMPLETED")]
    elapsed = chain.sacct()[0].elapsed_s
    assert chain.decisions() == [
        (j1, ("start", "none", "none", "0", "0")),
        (j2, ("stop_cancelled", j1, "CANCELLED", str(elapsed), "0")),
    ]
    # The stopping job runs no runner; the successor it queued before its lookup is withdrawn.
    assert not chain.events("runner_start", j2)
    assert (chain.walltime(), chain.retries()) == (elapsed, 0)
    assert (status.accumulated_walltime_s, status.infra_retries) == (elapsed, 0)


def test_cancelled_by_root_stops_the_chain_by_default(
    dev: devcluster.DevCluster, tmp_path: Path, version: Version
) -> None:
    """An admin's cancel (uid 0) under the default admin_cancel = "stop" stops the chain."""
    chain = submit_one(dev, tmp_path, version.cluster, "root-cancel", LONG)
    j1 = chain.wait_running(items=1)
    slurm_ok(chain.cluster, "scancel", j1)
    status = chain.wait_ended(timeout=120)

    assert status.state is ChainStateName.CANCELLED, chain.describe()
    j2 = successor_of(chain, j1)
    j3 = withdrawn_successor(chain, j2, dev.test_uid)
    assert sacct_by_id(chain) == {
        j1: "CANCELLED by 0",
        j2: "COMPLETED",
        j3: f"CANCELLED by {dev.test_uid}",
    }
    assert job_states(status)[0] == (j1, "CANCELLED by 0")
    assert chain.decisions()[-1][0] == j2
    assert chain.decisions()[-1][1][:3] == ("stop_cancelled", j1, "CANCELLED")
    assert not chain.events("runner_start", j2)
    assert chain.retries() == 0


# --- requeue ----------------------------------------------------------------------------------
def test_requeue_of_a_running_link_keeps_exactly_one_successor(
    dev: devcluster.DevCluster, tmp_path: Path, version: Version
) -> None:
    """``scontrol requeue`` of a running link: it restarts under its id, nothing counted twice."""
    requeueable = {**SHORT, "slurm": {"requeue": True, "extra_args": ["--requeue"]}}
    chain = submit_one(dev, tmp_path, version.cluster, "requeue", requeueable)
    j1 = chain.wait_running(items=2)
    assert j1 == chain.first_job
    j2 = successor_of(chain, j1)
    slurm_ok(chain.cluster, "scontrol", "requeue", j1)
    # Slurm fact (22.05): the afternotok successor does NOT fire on a requeue; it stays
    # pending on its unfulfilled dependency while the requeued job waits to start again.
    after = {j: squeue_state(chain.cluster, j) for j in (j1, j2)}
    print(f"right after the requeue: {after}")
    assert after[j2] == "PENDING", after
    wait_for(
        f"{j1} to run again after its requeue",
        lambda: [e for e in chain.decisions() if e[0] == j1 and e[1][0] == "restart"],
        timeout=90,
    )
    status = chain.wait_ended(timeout=180)

    assert status.state is ChainStateName.COMPLETED, chain.describe()
    assert chain.chain_ids() == [j1]  # the requeued run did not append itself again
    assert [d[1][0] for d in chain.decisions()] == ["start", "restart"]
    assert [e.args[0] for e in chain.events("successor")] == [j2]  # exactly one successor
    assert {j.job_id for j in chain.sacct()} == {j1, j2}
    runs = [j.state for j in chain.sacct(duplicates=True) if j.job_id == j1]
    assert runs == ["REQUEUED", "COMPLETED"], chain.describe()
    assert sacct_by_id(chain)[j2].startswith("CANCELLED")
    assert not chain.events(job_id=j2)  # the successor never ran its prologue
    assert (chain.walltime(), chain.retries()) == (0, 0)
    assert_items_once(chain, SHORT_ITEMS)


def test_cancelled_by_root_resumes_under_the_preempt_policy(
    dev: devcluster.DevCluster, tmp_path: Path, version: Version
) -> None:
    """With admin_cancel = "preempt", an admin's cancel resumes like preemption: no retry spent."""
    # A copy of the profile (same host, port, key) with [slurm] admin_cancel = "preempt".
    profiles = tmp_path / "clusters"
    write_profile(dev, version.cluster, profiles, slurm={"admin_cancel": "preempt"})
    chain = submit_one(
        dev, tmp_path, version.cluster, "root-cancel-preempt", SHORT, clusters_dir=profiles
    )
    assert "RC_ADMIN_CANCEL='preempt'" in (chain.remote_dir / "job.sh").read_text()
    j1 = chain.wait_running(items=2)
    slurm_ok(chain.cluster, "scancel", j1)
    status = chain.wait_ended(timeout=180)

    assert status.state is ChainStateName.COMPLETED, chain.describe()
    j2 = successor_of(chain, j1)
    assert chain.chain_ids() == [j1, j2]
    jobs = sacct_by_id(chain)
    assert (jobs[j1], jobs[j2]) == ("CANCELLED by 0", "COMPLETED")
    elapsed = next(j.elapsed_s for j in chain.sacct() if j.job_id == j1)
    assert (j2, ("resume", j1, "CANCELLED", str(elapsed), "0")) in chain.decisions()
    assert chain.retries() == 0
    assert status.infra_retries == 0
    rows = assert_items_once(chain, SHORT_ITEMS)
    assert {r["attempt"] for r in rows} == {1, 2}


# --- whole-node events, on local2 / local24b, one after the other ---------------------------
def test_preempted_job_resumes(
    dev: devcluster.DevCluster, tmp_path: Path, version: Version
) -> None:
    """A job preempted by a higher-priority partition is PREEMPTED; its successor resumes."""
    chain = submit_one(dev, tmp_path, version.node_cluster, "preempted", SHORT)
    j1 = chain.wait_running(items=2)
    _, cpus = node_of(version.node_cluster)
    preemptor = slurm_ok(
        version.node_cluster, "sbatch", "--parsable", "--partition=high", f"--cpus-per-task={cpus}",
        "--job-name=e2e-preemptor", "--output=/dev/null", "--wrap", "sleep 5",
    ).strip()  # fmt: skip
    try:
        status = chain.wait_ended(timeout=180)
    finally:
        devcluster.slurm(version.node_cluster, "scancel", preemptor)

    assert status.state is ChainStateName.COMPLETED, chain.describe()
    j2 = successor_of(chain, j1)
    assert chain.chain_ids() == [j1, j2]
    first = chain.sacct()[0]
    assert (first.job_id, first.state) == (j1, "PREEMPTED")
    assert job_states(status)[:2] == [(j1, "PREEMPTED"), (j2, "COMPLETED")]
    assert (j2, ("resume", j1, "PREEMPTED", str(first.elapsed_s), "0")) in chain.decisions()
    assert (chain.walltime(), chain.retries()) == (first.elapsed_s, 0)
    rows = assert_items_once(chain, SHORT_ITEMS)
    assert {r["attempt"] for r in rows} == {1, 2}


def test_node_failure_resumes(dev: devcluster.DevCluster, tmp_path: Path, version: Version) -> None:
    """A job on a node set DOWN ends NODE_FAIL; once the node is back its successor resumes."""
    chain = submit_one(dev, tmp_path, version.node_cluster, "node-fail", SHORT)
    j1 = chain.wait_running(items=2)
    node, _ = node_of(version.node_cluster)
    slurm_ok(
        version.node_cluster, "scontrol", "update", f"nodename={node}", "state=down", "reason=e2e"
    )
    try:
        wait_for(
            f"{j1} to end NODE_FAIL",
            lambda: [j for j in chain.sacct() if j.job_id == j1 and j.state == "NODE_FAIL"],
            timeout=60,
        )
        _return_to_service(version.node_cluster, node)
        status = chain.wait_ended(timeout=180)
    finally:
        _return_to_service(version.node_cluster, node)

    assert status.state is ChainStateName.COMPLETED, chain.describe()
    j2 = successor_of(chain, j1)
    assert chain.chain_ids() == [j1, j2]
    first = chain.sacct()[0]
    assert (first.job_id, first.state) == (j1, "NODE_FAIL")
    assert job_states(status)[:2] == [(j1, "NODE_FAIL"), (j2, "COMPLETED")]
    assert (j2, ("resume", j1, "NODE_FAIL", str(first.elapsed_s), "0")) in chain.decisions()
    assert (chain.walltime(), chain.retries()) == (first.elapsed_s, 0)
    rows = assert_items_once(chain, SHORT_ITEMS)
    assert {r["attempt"] for r in rows} == {1, 2}


def _return_to_service(cluster: str, node: str) -> None:
    """Resume the node if it is still out (ReturnToService=2 usually brings it back itself)."""
    state = node_state(cluster, node)
    print(f"{node} is {state!r}")
    if state.startswith(("down", "drain")):
        slurm_ok(cluster, "scontrol", "update", f"nodename={node}", "state=resume")


# --- chains that only need waiting for --------------------------------------------------------
def test_first_job_starts_and_completed_ends_the_chain(local: dict[str, Chain]) -> None:
    """The first job starts; when it completes, its pending successor is removed, nothing left."""
    chain = local["completed"]
    status = chain.wait_ended(timeout=120)

    assert status.state is ChainStateName.COMPLETED, chain.describe()
    j1 = chain.first_job
    j2 = successor_of(chain, j1)
    assert chain.chain_ids() == [j1]
    assert chain.decisions() == [(j1, ("start", "none", "none", "0", "0"))]
    assert [e.kind for e in chain.events(job_id=j1)] == [
        # The successor is queued first, before the decision (and any lookup) is made.
        # The link records its own end ("end ok"): the fallback when accounting never shows it.
        "successor", "decided", "runner_start", "runner_exit", "end", "successor_cancelled",
    ]  # fmt: skip
    assert chain.events("runner_exit", j1)[0].args == ("0",)
    # The job removed its own successor (it does not rely on --kill-on-invalid-dep).
    assert chain.events("successor_cancelled", j1)[0].args == (j2,)
    jobs = sacct_by_id(chain)
    assert list(jobs) == [j1, j2]
    assert jobs[j1] == "COMPLETED"
    assert jobs[j2].startswith("CANCELLED")
    # The successor the job withdrew never ran: status lists only the job that did.
    assert [j for j, _ in job_states(status)] == [j1]
    assert chain.queued() == []
    assert (chain.walltime(), chain.retries()) == (0, 0)
    assert_items_once(chain, 3)


def test_failed_jobs_count_retries_until_max_retries(local: dict[str, Chain]) -> None:
    """FAILED spends one retry per job; past max_retries the next job exits with an error."""
    chain = local["failed"]
    status = chain.wait_ended(timeout=180)

    assert status.state is ChainStateName.FAILED, chain.describe()
    j1 = chain.first_job
    j2 = successor_of(chain, j1)
    j3 = successor_of(chain, j2)
    assert chain.chain_ids() == [j1, j2, j3]
    j4 = withdrawn_successor(chain, j3, devcluster.load().test_uid)
    jobs = [j for j in chain.sacct() if j.job_id != j4]
    assert [(j.job_id, j.state, j.exit_code) for j in jobs] == [
        (j1, "FAILED", "1:0"), (j2, "FAILED", "1:0"), (j3, "FAILED", "1:0"),
    ]  # fmt: skip
    e1, e2 = jobs[0].elapsed_s, jobs[1].elapsed_s
    assert chain.decisions() == [
        (j1, ("start", "none", "none", "0", "0")),
        (j2, ("resume", j1, "FAILED", str(e1), "1")),
        (j3, ("exit_error", j2, "FAILED", str(e1 + e2), "2")),
    ]
    # The erroring job runs nothing, and withdrew its successor (its error exit would have
    # fired it): the chain ends with it.
    assert not chain.events("runner_start", j3)
    assert chain.retries() == 2
    assert status.infra_retries == 2
    assert chain.queued() == []
    assert [s for _, s in job_states(status)] == ["FAILED", "FAILED", "FAILED"]


def test_successor_submission_refused_warns_and_runs(local: dict[str, Chain]) -> None:
    """When sbatch refuses the successor, the job warns, still runs its runner, status warns."""
    chain = local["refused"]
    status = chain.wait_ended(timeout=150)

    j1 = chain.first_job
    log = chain.log(j1)
    assert CHAIN_WARNING in log, chain.describe()
    assert re.search(r"invalid partition", log, re.IGNORECASE), log
    failed = chain.events("successor_failed", j1)
    assert len(failed) == 1
    assert not chain.events("successor")
    assert [e.kind for e in chain.events(job_id=j1)] == [
        "successor_failed", "decided", "runner_start", "runner_exit", "end",
    ]  # fmt: skip
    assert chain.events("runner_exit", j1)[0].args == ("0",)
    assert_items_once(chain, 3)
    assert [(j.job_id, j.state, j.partition) for j in chain.sacct()] == [
        (j1, "COMPLETED", "debug")
    ]  # the first job ran the script as submitted
    assert status.state is ChainStateName.COMPLETED
    assert status.warnings, status.to_json()
    assert "could not queue a successor" in status.warnings[0]
    assert status.to_json()["warnings"] == list(status.warnings)


def test_timeout_resumes_from_the_artifacts(local: dict[str, Chain]) -> None:
    """A TIMEOUT link's successor resumes from the rollouts already written, then completes."""
    chain = local["timeout"]
    status = chain.wait_ended(timeout=300)

    assert status.state is ChainStateName.COMPLETED, chain.describe()
    j1 = chain.first_job
    j2 = successor_of(chain, j1)
    j3 = successor_of(chain, j2)
    assert chain.chain_ids() == [j1, j2]
    jobs = chain.sacct()
    assert [(j.job_id, j.word) for j in jobs] == [
        (j1, "TIMEOUT"),
        (j2, "COMPLETED"),
        (j3, "CANCELLED"),
    ]
    e1 = jobs[0].elapsed_s
    print(f"TIMEOUT of a 1-minute job after {e1} s")
    assert 60 <= e1 <= 95
    assert [(j, s.split(" ")[0]) for j, s in job_states(status)] == [
        (j1, "TIMEOUT"),
        (j2, "COMPLETED"),
    ]  # fmt: skip (j3, withdrawn by j2 when it completed, never ran: not listed)
    assert chain.decisions() == [
        (j1, ("start", "none", "none", "0", "0")),
        (j2, ("resume", j1, "TIMEOUT", str(e1), "0")),
    ]
    assert (chain.walltime(), chain.retries()) == (e1, 0)
    assert (status.accumulated_walltime_s, status.infra_retries) == (e1, 0)
    rows = assert_items_once(chain, TIMEOUT_ITEMS)
    first_run = [r["item"] for r in rows if r["attempt"] == 1]
    second_run = [r["item"] for r in rows if r["attempt"] == 2]
    assert first_run, rows
    assert second_run, rows
    assert max(first_run) < min(second_run)  # attempt 2 did only the missing items
    assert f"attempt 2, {len(first_run)} of {TIMEOUT_ITEMS} items cached" in chain.log(j2)


def test_max_walltime_stops_the_chain_with_exit_0(local: dict[str, Chain]) -> None:
    """Reaching max_walltime stops the chain (exit 0, ``stopped``) within seconds of the cap."""
    chain = local["walltime"]
    status = chain.wait_ended(timeout=330)

    assert status.state is ChainStateName.STOPPED, chain.describe()
    ids = chain.chain_ids()
    jobs = {j.job_id: j for j in chain.sacct()}
    spent = sum(jobs[j].elapsed_s for j in ids)
    print(f"max_walltime {WALLTIME_CAP_S} s: the chain's jobs ran {spent} s in all "
          f"({[(j, jobs[j].state, jobs[j].elapsed_s) for j in ids]})")  # fmt: skip
    assert WALLTIME_CAP_S - 5 <= spent <= WALLTIME_CAP_S + 5, chain.describe()
    last = jobs[ids[-1]]
    assert (last.state, last.exit_code) == ("COMPLETED", "0:0")  # a stopped chain is no error
    assert jobs[ids[0]].state == "TIMEOUT"
    final = chain.decisions()[-1]
    assert final[0] == ids[-1]
    assert final[1][0] == "stop_walltime"
    assert chain.walltime() >= WALLTIME_CAP_S
    assert status.accumulated_walltime_s == chain.walltime()
    assert chain.retries() == 0
    assert chain.queued() == []
    # Whatever successor the last job had queued was removed; nothing else is left.
    for job_id, job in jobs.items():
        if job_id not in ids:
            assert job.word == "CANCELLED", chain.describe()
