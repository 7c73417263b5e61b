"""The command line (interface.md §4) over fake clusters: commands, JSON shapes, exit codes.

Every command runs in-process through typer's CliRunner, with ``invocation.OPENER`` replaced by
``fakes.FakeSlurm.open`` (tests/fakes.py): the scripts the client sends run in local bash under stub
Slurm commands, so the whole client (submit, status, wait, cancel, resume, logs, doctor)
runs end to end in milliseconds, without SSH.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
import structlog
from fakes import FakeCluster, FakeSlurm
from typer.testing import CliRunner, Result

from remote_chain import cli
from remote_chain.cli import invocation, jobscripts
from remote_chain.cli.commands.status import parse_timeout
from remote_chain.errors import (
    AuthenticationError,
    CommandFailedError,
    ConfigError,
    ConnectError,
    HostKeyError,
    RemoteChainError,
    RemoteTimeout,
    StateError,
    SubmitError,
    WaitTimeout,
)
from remote_chain.job.script import EVENTS_FILE, RETRIES_FILE, WALLTIME_FILE
from remote_chain.logconfig import REDACTED, configure_logging, redact_secrets
from remote_chain.protocol.layout import RENDER_RUN_ID
from remote_chain.transport.base import Remote
from remote_chain.transport.endpoint import Endpoint

REPO = Path(__file__).resolve().parent.parent
SECRET = "s3cr3t-value-9f8e"  # noqa: S105 - the fake secret whose absence is checked
CONFIG = f"""\
driver:
  runner: "true"
  env:
    HF_HOME: /lustre/cache
    TOKEN: {{value: {SECRET}, secret: true}}
  benchmarks:
    gpqa:
      resumable: true
      run: {{config_paths: [benchmarks/gpqa/config.yaml]}}
    smoke:
      command: "echo hello-from-the-job"
"""
SUBMISSION_KEYS = {"cluster", "benchmark", "job_id", "remote_dir", "error"}
CHAIN_KEYS = {
    "cluster",
    "benchmark",
    "state",
    "jobs",
    "accumulated_walltime_s",
    "infra_retries",
    "remote_dir",
    "error",
}
JOB_KEYS = {"job_id", "state", "elapsed_s", "exit_code", "reason"}


@dataclass
class World:
    """Two fake clusters (eos, dgx) with profiles, a submit config, and a CLI runner."""

    tmp: Path
    fake: FakeSlurm
    clusters_dir: Path
    config: Path

    def cluster(self, name: str) -> FakeCluster:
        return self.fake.cluster(name)

    def invoke(self, *args: str) -> Result:
        return CliRunner().invoke(cli.app, ["--clusters-dir", str(self.clusters_dir), *args])

    def json(self, *args: str, code: int = 0) -> dict[str, object]:
        """Run with --json; stdout must be exactly one JSON document (json.loads takes all)."""
        result = self.invoke(*args, "--json")
        assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
        document = json.loads(result.stdout)
        assert isinstance(document, dict)
        return document

    def submit(self, *clusters: str, extra: tuple[str, ...] = ()) -> dict[str, object]:
        args = [a for c in clusters or ("eos",) for a in ("--cluster", c)]
        return self.json("submit", str(self.config), *args, *extra)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state; put it back after each test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    asyncssh_level = logging.getLogger("asyncssh").level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("asyncssh").setLevel(asyncssh_level)
    structlog.reset_defaults()


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    # No ./clusters, ~/.config profiles, .env or run index of the machine running the tests.
    monkeypatch.chdir(tmp_path)
    for var in [v for v in os.environ if v.startswith("REMOTE_CHAIN_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("COLUMNS", "200")
    # Zero-ish waits: the fake answers at once, retries and polls need not back off.
    monkeypatch.setenv("REMOTE_CHAIN_SACCT_WAIT_MAX", "0.01")
    monkeypatch.setenv("REMOTE_CHAIN_POLL_INTERVAL", "0.05")
    fake = FakeSlurm(tmp_path)
    monkeypatch.setattr(invocation, "OPENER", fake.open)
    clusters_dir = tmp_path / "clusters"
    for name in ("eos", "dgx"):
        fake.profile(clusters_dir, name)
        fake.cluster(name).partitions("batch")
    config = tmp_path / "eval.yaml"
    config.write_text(CONFIG)
    return World(tmp_path, fake, clusters_dir, config)


def _run_id(document: dict[str, object]) -> str:
    run_id = document["run_id"]
    assert isinstance(run_id, str)
    return run_id


def _items(document: dict[str, object], key: str) -> list[dict[str, object]]:
    items = document[key]
    assert isinstance(items, list)
    return items


def _chains(document: dict[str, object]) -> dict[str, dict[str, object]]:
    return {f"{c['cluster']}/{c['benchmark']}": c for c in _items(document, "chains")}


# --- submit ---------------------------------------------------------------------------------


def test_submit_prints_the_interface_json_and_queues_one_job_per_benchmark(world: World) -> None:
    """submit --json prints the documented shape; each benchmark's first job is in the queue."""
    document = world.submit()
    run_id = _run_id(document)
    assert run_id.startswith("rc-")
    subs = _items(document, "submissions")
    assert all(s.keys() >= SUBMISSION_KEYS for s in subs)
    by_bench = {s["benchmark"]: s for s in subs}
    assert set(by_bench) == {"gpqa", "smoke"}
    assert all(s["error"] is None and s["cluster"] == "eos" for s in subs)
    queued = world.cluster("eos").queue()
    assert {by_bench["gpqa"]["job_id"], by_bench["smoke"]["job_id"]} == set(queued)
    workdir = world.cluster("eos").workdir
    assert by_bench["gpqa"]["remote_dir"] == f"{workdir}/{run_id}/eos/gpqa"
    assert (workdir / run_id / "eos" / "gpqa" / "job.sh").is_file()


def test_submit_fans_out_to_every_cluster(world: World) -> None:
    """One submit to two clusters queues the run on both, each in its own folder."""
    document = world.submit("eos", "dgx")
    clusters = {(s["cluster"], s["benchmark"]) for s in _items(document, "submissions")}
    assert clusters == {(c, b) for c in ("eos", "dgx") for b in ("gpqa", "smoke")}
    assert len(world.cluster("eos").calls("sbatch")) == 2
    assert len(world.cluster("dgx").calls("sbatch")) == 2


def test_submit_dry_run_sends_nothing(world: World) -> None:
    """--dry-run builds the run but opens no connection and queues nothing."""
    document = world.submit(extra=("--dry-run",))
    assert document["dry_run"] is True
    assert all(s["job_id"] is None for s in _items(document, "submissions"))
    assert world.cluster("eos").connects == 0


def test_submit_table_without_json(world: World) -> None:
    """Without --json, submit prints a table naming the run, benchmarks and job ids."""
    result = world.invoke("submit", str(world.config), "--cluster", "eos", "--run-id", "rc-t1")
    assert result.exit_code == 0, result.stderr
    assert "rc-t1" in result.stdout
    for token in ("gpqa", "smoke", "1001", "1002"):
        assert token in result.stdout


def test_submit_after_a_lost_reply_leaves_exactly_one_submission(world: World) -> None:
    """The connection drops after the submit script ran: the client looks it up, never resends."""
    eos = world.cluster("eos")
    eos.drop(run=1, after=True)
    document = world.submit(extra=("--run-id", "rc-drop"))
    jobs = {s["benchmark"]: s["job_id"] for s in _items(document, "submissions")}
    # The benchmarks' sbatch calls run concurrently: which gets which id is not fixed.
    # (key=str: JSON values are `object` to mypy; on the strings expected it sorts the same.)
    assert sorted(jobs, key=str) == ["gpqa", "smoke"]
    assert sorted(jobs.values(), key=str) == ["1001", "1002"]
    assert len(eos.calls("sbatch")) == 2  # one per benchmark: the script ran exactly once
    assert sum("RC_MODE=submit" in s for s in eos.scripts) == 1
    assert eos.connects == 2  # reconnected for the lookup


def test_submit_dropped_before_running_is_sent_again_once(world: World) -> None:
    """The connection drops before the script started: the lookup finds nothing, one resend."""
    eos = world.cluster("eos")
    eos.drop(run=1, after=False)
    document = world.submit(extra=("--run-id", "rc-drop2"))
    assert all(s["job_id"] for s in _items(document, "submissions"))
    assert len(eos.calls("sbatch")) == 2
    assert sum("RC_MODE=submit" in s for s in eos.scripts) == 1


def test_submitting_a_run_id_again_reports_the_existing_jobs(world: World) -> None:
    """A second submit with the same --run-id finds the run: no second chain is queued."""
    world.submit(extra=("--run-id", "rc-again"))
    again = world.submit(extra=("--run-id", "rc-again"))
    assert {s["job_id"] for s in _items(again, "submissions")} == {"1001", "1002"}
    assert all(s.get("existing") for s in _items(again, "submissions"))
    assert len(world.cluster("eos").calls("sbatch")) == 2


# --- status / wait --------------------------------------------------------------------------


def test_status_follows_the_chain_from_pending_to_completed(world: World) -> None:
    """status shows pending after submit and completed once the jobs ran, in the JSON shape."""
    run_id = _run_id(world.submit())
    chains = _chains(world.json("status", run_id))
    assert {c["state"] for c in chains.values()} == {"pending"}
    eos = world.cluster("eos")
    for job_id in sorted(eos.queue()):
        assert eos.run_job(job_id) == 0
    document = world.json("status", run_id)
    assert document["run_id"] == run_id
    chains = _chains(document)
    assert set(chains) == {"eos/gpqa", "eos/smoke"}
    for chain in chains.values():
        assert chain.keys() >= CHAIN_KEYS
        assert chain["state"] == "completed"
        jobs = chain["jobs"]
        assert isinstance(jobs, list)
        assert all(j.keys() >= JOB_KEYS for j in jobs)
    smoke_jobs = chains["eos/smoke"]["jobs"]
    assert isinstance(smoke_jobs, list)
    assert smoke_jobs[0]["state"] == "COMPLETED"


def test_status_table_shows_states_and_jobs(world: World) -> None:
    """The human table has the cluster, benchmark, state and id:STATE of each job."""
    run_id = _run_id(world.submit())
    world.cluster("eos").set_state("1001", "RUNNING")
    result = world.invoke("status", run_id)
    assert result.exit_code == 0, result.stderr
    assert "running" in result.stdout
    assert "1001:RUNNING" in result.stdout
    assert "pending" in result.stdout
    assert "1002:PENDING" in result.stdout


def test_status_with_cluster_works_without_the_local_index(world: World) -> None:
    """With --cluster, status reads the run folder on the cluster, no local index needed."""
    run_id = _run_id(world.submit())
    for entry in (world.tmp / "state" / "remote-chain" / "runs").iterdir():
        entry.unlink()
    assert world.invoke("status", run_id).exit_code == 2  # not in the index: name a cluster
    chains = _chains(world.json("status", run_id, "--cluster", "eos"))
    assert set(chains) == {"eos/gpqa", "eos/smoke"}


def test_status_without_run_id_lists_recent_runs(world: World) -> None:
    """status without RUN_ID prints {"runs": [...]} with every indexed run."""
    first = _run_id(world.submit(extra=("--run-id", "rc-a")))
    second = _run_id(world.submit("dgx", extra=("--run-id", "rc-b")))
    document = world.json("status")
    runs = {r["run_id"]: r for r in _items(document, "runs")}
    assert set(runs) == {first, second}
    assert {c["cluster"] for c in _items(runs["rc-b"], "chains")} == {"dgx"}


def test_status_watch_json_prints_only_the_final_state(world: World) -> None:
    """status --watch --json polls until every chain ended, then prints one document."""
    run_id = _run_id(world.submit())
    eos = world.cluster("eos")
    for job_id in sorted(eos.queue()):
        eos.run_job(job_id)
    document = world.json("status", run_id, "--watch")
    assert {c["state"] for c in _chains(document).values()} == {"completed"}


def test_status_watch_draws_the_table(world: World) -> None:
    """status --watch without --json ends with the table of the ended chains."""
    run_id = _run_id(world.submit())
    eos = world.cluster("eos")
    for job_id in sorted(eos.queue()):
        eos.run_job(job_id)
    result = world.invoke("status", run_id, "--watch")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("completed") == 2


def test_wait_exits_0_when_every_chain_completed(world: World) -> None:
    """wait returns 0 once every chain completed."""
    run_id = _run_id(world.submit())
    eos = world.cluster("eos")
    for job_id in sorted(eos.queue()):
        eos.run_job(job_id)
    document = world.json("wait", run_id)
    assert {c["state"] for c in _chains(document).values()} == {"completed"}


def test_wait_exits_1_when_a_chain_did_not_complete(world: World) -> None:
    """A chain that ended failed makes wait exit 1, and the JSON says which."""
    world.config.write_text(CONFIG.replace("echo hello-from-the-job", "exit 3"))
    run_id = _run_id(world.submit(extra=("--benchmark", "smoke")))
    eos = world.cluster("eos")
    assert eos.run_job("1001") == 3
    document = world.json("wait", run_id, code=1)
    assert _chains(document)["eos/smoke"]["state"] == "failed"


def test_wait_past_its_timeout_exits_4(world: World) -> None:
    """wait --timeout gives up with exit 4, still printing one JSON document."""
    run_id = _run_id(world.submit())
    result = world.invoke("wait", run_id, "--timeout", "1s", "--json")
    assert result.exit_code == 4, (result.stdout, result.stderr)
    document = json.loads(result.stdout)
    assert document["timed_out"] is True
    assert {c["state"] for c in _chains(document).values()} == {"pending"}
    assert "remote-chain: error:" in result.stderr


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("5", 300.0), ("01:30", 90.0), ("1:00:00", 3600.0), ("1-00", 86400.0)],
)
def test_timeout_accepts_slurm_durations_and_seconds(text: str, seconds: float) -> None:
    """--timeout takes Slurm's forms (a bare number is minutes) or seconds with an s."""
    assert parse_timeout(text) == seconds


def test_a_bad_timeout_is_a_usage_error(world: World) -> None:
    """An unparsable --timeout exits 2 naming the option."""
    result = world.invoke("wait", "rc-x", "--cluster", "eos", "--timeout", "soon")
    assert result.exit_code == 2
    assert "--timeout" in result.stderr


# --- cancel / resume / logs -----------------------------------------------------------------


def test_cancel_takes_every_job_of_the_run_off_the_queue(world: World) -> None:
    """cancel --json names the cancelled job ids per chain and leaves nothing queued."""
    submitted = world.submit()
    run_id = _run_id(submitted)
    ids = {s["benchmark"]: s["job_id"] for s in _items(submitted, "submissions")}
    document = world.json("cancel", run_id)
    assert document["run_id"] == run_id
    entries = {e["benchmark"]: e for e in _items(document, "cancelled")}
    assert set(entries) == {"gpqa", "smoke"}
    assert entries["gpqa"]["job_ids"] == [ids["gpqa"]]
    assert entries["smoke"]["job_ids"] == [ids["smoke"]]
    assert all(e["error"] is None and e["cluster"] == "eos" for e in entries.values())
    assert world.cluster("eos").queue() == {}
    chains = _chains(world.json("status", run_id))
    assert {c["state"] for c in chains.values()} == {"cancelled"}


def test_cancel_one_benchmark_leaves_the_others(world: World) -> None:
    """cancel --benchmark touches that chain only."""
    submitted = world.submit()
    run_id = _run_id(submitted)
    ids = {s["benchmark"]: s["job_id"] for s in _items(submitted, "submissions")}
    document = world.json("cancel", run_id, "--benchmark", "smoke")
    assert [e["benchmark"] for e in _items(document, "cancelled")] == ["smoke"]
    assert world.cluster("eos").queue() == {ids["gpqa"]: "PENDING"}


NO_SECRET = CONFIG.replace(f"    TOKEN: {{value: {SECRET}, secret: true}}\n", "")


def test_resume_requeues_a_failed_chain(world: World) -> None:
    """A chain that ended failed is queued again in its folder; resume exits 0."""
    world.config.write_text(NO_SECRET.replace("echo hello-from-the-job", "exit 3"))
    run_id = _run_id(world.submit(extra=("--benchmark", "smoke")))
    eos = world.cluster("eos")
    eos.run_job("1001")
    document = world.json("resume", run_id)
    (entry,) = _items(document, "resumed")
    assert entry == {
        "cluster": "eos",
        "benchmark": "smoke",
        "job_id": "1002",
        "error": None,
        "caps": None,  # not resumable: no caps to keep
    }
    assert eos.job("1002").script == eos.job("1001").script


def test_resume_refuses_a_chain_whose_secrets_went_with_its_end(world: World) -> None:
    """Its secrets were removed when it failed: queued again it would run without them.
    Refused with exit 1, the reason in the JSON, nothing queued."""
    world.config.write_text(CONFIG.replace("echo hello-from-the-job", "exit 3"))
    run_id = _run_id(world.submit(extra=("--benchmark", "smoke")))
    eos = world.cluster("eos")
    eos.run_job("1001")
    (entry,) = _items(world.json("resume", run_id, code=1), "resumed")
    assert entry["job_id"] is None
    assert "secrets were removed" in str(entry["error"])
    assert len(eos.calls("sbatch")) == 1


def test_resume_refuses_a_live_chain_with_exit_1(world: World) -> None:
    """Resuming a chain that is still queued is refused, with the reason in the JSON."""
    run_id = _run_id(world.submit(extra=("--benchmark", "smoke")))
    document = world.json("resume", run_id, code=1)
    (entry,) = _items(document, "resumed")
    assert entry["job_id"] is None
    assert "pending" in str(entry["error"])
    assert len(world.cluster("eos").calls("sbatch")) == 1


CAPPED = """\
driver:
  runner: "{runner}"
  benchmarks:
    gpqa:
      resumable: {{max_retries: 0, max_walltime: "00:02:00"}}
"""


def _capped_run(world: World, runner: str) -> tuple[str, FakeCluster, Path]:
    world.config.write_text(CAPPED.format(runner=runner))
    submitted = world.submit()
    (sub,) = _items(submitted, "submissions")
    return _run_id(submitted), world.cluster("eos"), Path(str(sub["remote_dir"]))


def test_resume_of_a_stopped_chain_needs_a_raised_cap_and_counts_every_job(world: World) -> None:
    """A stopped chain is refused until --max-walltime exceeds all the walltime used (9.7)."""
    run_id, eos, folder = _capped_run(world, "true")
    eos.run_job("1001", state="TIMEOUT", elapsed=150)
    eos.run_job("1002", elapsed=60)  # counts 150 s >= 120 s: stops, itself not counted
    assert _chains(world.json("status", run_id))["eos/gpqa"]["state"] == "stopped"
    (entry,) = _items(world.json("resume", run_id, code=1), "resumed")
    assert "--max-walltime" in str(entry["error"])
    # 150 s + the stopping link's own 60 s = 210 s: a cap of 3 min would stop at once.
    (entry,) = _items(world.json("resume", run_id, "--max-walltime", "3", code=1), "resumed")
    assert "210s" in str(entry["error"])
    mode = (folder / "job.sh").stat().st_mode
    (entry,) = _items(world.json("resume", run_id, "--max-walltime", "10"), "resumed")
    assert entry["error"] is None
    assert entry["caps"] == {
        "benchmark": "gpqa",
        "counted_walltime_s": 60,
        "counted_jobs": ["1002"],
        "accumulated_walltime_s": 210,
        "infra_retries": 0,
        "max_walltime_s": 600,
        "max_retries": None,
        "unknown_links_reset": False,
    }
    script = (folder / "job.sh").read_text()
    assert "\nRC_MAX_WALLTIME=600\n" in script
    assert "\nRC_MAX_RETRIES=0\n" in script
    assert (folder / "job.sh").stat().st_mode == mode
    assert (folder / WALLTIME_FILE).read_text() == "210\n"
    record = json.loads((folder.parent / "remote-chain.json").read_text())
    (resumed,) = record["resumes"]
    assert resumed["chains"][0]["max_walltime_s"] == 600
    new_job = str(entry["job_id"])
    assert eos.job(new_job).args == ()  # no predecessor: the FIRST row
    # The resumed link starts from the counted walltime, under the raised cap.
    eos.run_job(new_job, elapsed=30)
    events = (folder / EVENTS_FILE).read_text().splitlines()
    assert any(line.endswith(" 1002 counted_by_resume 60") for line in events)
    assert any(f" {new_job} decided start none none 210 0" in line for line in events)


def test_resume_of_a_failed_chain_needs_granted_retries(world: World) -> None:
    """A failed resumable chain is refused until --max-retries grants more, or --reset-retries."""
    run_id, eos, folder = _capped_run(world, "false")
    eos.run_job("1001", elapsed=30)  # the runner fails
    eos.run_job("1002", elapsed=30)  # counts the retry: 1 > max_retries 0, the chain ends failed
    assert _chains(world.json("status", run_id))["eos/gpqa"]["state"] == "failed"
    (entry,) = _items(world.json("resume", run_id, code=1), "resumed")
    assert "--max-retries N" in str(entry["error"])
    (entry,) = _items(world.json("resume", run_id, "--max-retries", "1", code=1), "resumed")
    assert "grants nothing" in str(entry["error"])
    assert len(eos.calls("sbatch")) == 3  # submit and two successors: none by the refusals
    (entry,) = _items(world.json("resume", run_id, "--max-retries", "3"), "resumed")
    caps = entry["caps"]
    assert isinstance(caps, dict)
    assert (caps["accumulated_walltime_s"], caps["infra_retries"], caps["max_retries"]) == (
        60,
        1,
        3,
    )
    assert "\nRC_MAX_RETRIES=3\n" in (folder / "job.sh").read_text()


def test_resume_reset_retries_starts_the_count_again(world: World) -> None:
    """--reset-retries writes 0 retries; the job.sh cap is left as it was."""
    run_id, eos, folder = _capped_run(world, "false")
    eos.run_job("1001", elapsed=30)
    eos.run_job("1002", elapsed=30)
    (entry,) = _items(world.json("resume", run_id, "--reset-retries"), "resumed")
    assert entry["error"] is None
    assert (folder / RETRIES_FILE).read_text() == "0\n"
    assert "\nRC_MAX_RETRIES=0\n" in (folder / "job.sh").read_text()


def test_logs_prints_the_job_log(world: World) -> None:
    """logs prints what the newest job of the chain wrote."""
    run_id = _run_id(world.submit(extra=("--benchmark", "smoke")))
    world.cluster("eos").run_job("1001")
    result = world.invoke("logs", run_id, "--benchmark", "smoke")
    assert result.exit_code == 0, result.stderr
    assert "hello-from-the-job" in result.stdout


def test_logs_of_an_unknown_benchmark_exits_1(world: World) -> None:
    """logs for a benchmark the run does not have is an error naming the cluster."""
    run_id = _run_id(world.submit())
    result = world.invoke("logs", run_id, "--benchmark", "nope")
    assert result.exit_code == 1
    assert "remote-chain: error: eos: no such benchmark" in result.stderr


# --- doctor / clusters / render -------------------------------------------------------------


def test_doctor_passes_on_a_healthy_cluster(world: World) -> None:
    """doctor --json lists every check; all ok exits 0."""
    document = world.json("doctor", "--cluster", "eos")
    assert document["cluster"] == "eos"
    assert document["ok"] is True
    names = {c["check"] for c in _items(document, "checks")}
    assert {"ssh", "accounting", "workdir", "command:sbatch", "command:sacct"} <= names


def test_doctor_failing_check_exits_1_with_a_fix_hint(world: World) -> None:
    """A failed check (accounting down) exits 1 and the table says how to fix it."""
    world.cluster("eos").fail("sacct", "slurmdbd: connection refused")
    result = world.invoke("doctor", "--cluster", "eos")
    assert result.exit_code == 1
    assert "FAIL" in result.stdout
    assert "slurmdbd" in result.stdout
    assert "ask the admins" in result.stdout


def test_doctor_json_tells_the_cluster_apart(world: World) -> None:
    """doctor --json reports the version, accounting, options, shell and limits it found."""
    eos = world.cluster("eos")
    eos.slurm_says("version", "slurm 24.11.5\n")
    eos.slurm_says("assoc", "fake|acct|u||2|8|normal\n")
    eos.slurm_says("qos", "normal||\n")
    document = world.json("doctor", "--cluster", "eos")
    assert document["slurm_version"] == "24.11.5"
    assert document["accounting"] == {
        "enabled": True,
        "reachable": True,
        "storage_type": "accounting_storage/slurmdbd",
        "enforce": None,
    }
    assert document["dependency_options"] == {"afternotok": True, "kill_on_invalid_dep": True}
    assert isinstance(document["login_shell"], str)
    limits = document["job_limits"]
    assert isinstance(limits, dict)
    assert [lim["limit"] for lim in limits["limits"]] == ["MaxSubmitJobs", "MaxJobs"]
    probes = [c for c in eos.calls("sbatch") if "--test-only" in c]
    assert len(probes) == 4
    assert not eos.queue()  # the probes queued nothing


def test_doctor_on_a_cluster_without_accounting_warns_and_passes(world: World) -> None:
    """No slurmdbd: sacct fails, doctor says what that means for resumable runs, exit 0."""
    eos = world.cluster("eos")
    eos.slurm_says("config", "AccountingStorageType   = accounting_storage/none\n")
    eos.fail("sacct", "sacct: error: Slurm accounting storage is disabled")
    result = world.invoke("doctor", "--cluster", "eos")
    assert result.exit_code == 0, result.stdout
    assert "warn" in result.stdout
    assert "accounting_storage/none" in result.stdout
    document = world.json("doctor", "--cluster", "eos")
    assert document["accounting"] == {
        "enabled": False,
        "reachable": None,
        "storage_type": "accounting_storage/none",
        "enforce": None,
    }


def test_doctor_fails_when_afternotok_is_refused(world: World) -> None:
    """A cluster that refuses afternotok fails doctor (exit 1), the table saying what it means."""
    world.cluster("eos").slurm_says(
        "refuse", "afternotok\tsbatch: error: Batch job submission failed: Job dependency problem\n"
    )
    result = world.invoke("doctor", "--cluster", "eos")
    assert result.exit_code == 1, result.stdout
    assert "dependency:afternotok" in result.stdout
    assert "Job dependency problem" in result.stdout


def test_submit_warns_when_the_run_cannot_fit_under_a_submit_limit(world: World) -> None:
    """A resumable chain needs two queue slots: 1 resumable + 1 plain over MaxSubmitJobs=2."""
    eos = world.cluster("eos")
    user = pwd.getpwuid(os.getuid()).pw_name
    eos.slurm_says("assoc_mgr", _assoc_mgr(user, 2))
    document = world.submit()
    warnings = document["warnings"]
    assert isinstance(warnings, list)
    (warning,) = warnings
    assert str(warning).startswith(f"eos: MaxSubmitJobs=2 (association acct/{user} on fake)")
    assert "needs up to 3 jobs" in str(warning)


def test_submit_under_the_limits_says_nothing(world: World) -> None:
    """Limits the run fits under (3 slots of 3) give no warning."""
    user = pwd.getpwuid(os.getuid()).pw_name
    world.cluster("eos").slurm_says("assoc_mgr", _assoc_mgr(user, 3))
    assert world.submit()["warnings"] == []


def _assoc_mgr(user: str, max_submit: int) -> str:
    """`scontrol -o show assoc_mgr` as 22.05 prints it (abridged), one association limited."""
    return (
        "Current Association Manager state\nAssociation Records\n"
        f"ClusterName=fake Account=acct UserName={user}(1000) Partition= Priority=0 ID=4 "
        f"MaxJobs= MaxJobsAccrue= MaxSubmitJobs={max_submit}(0) MaxWallPJ=\n"
    )


def test_doctor_exits_3_when_ssh_fails(world: World) -> None:
    """An unreachable cluster fails doctor's ssh check: exit 3, with the hint."""
    world.cluster("eos").refuse(HostKeyError)
    document = world.json("doctor", "--cluster", "eos", code=3)
    (check,) = _items(document, "checks")
    assert check["check"] == "ssh"
    assert check["ok"] is False
    assert "eos.test" in str(check["detail"])
    assert "known_hosts" in str(check["hint"])


def test_clusters_lists_profiles_with_their_source(world: World) -> None:
    """clusters --json names every profile and the file it came from."""
    document = world.json("clusters")
    found = {c["name"]: c for c in _items(document, "clusters")}
    assert set(found) == {"dgx", "eos"}
    assert found["eos"]["source"] == str(world.clusters_dir / "eos.toml")
    assert found["eos"]["host"] == "eos.test"
    searched = document["searched"]
    assert isinstance(searched, list)
    assert searched[0] == str(world.clusters_dir)  # --clusters-dir is searched first


def test_render_prints_the_job_script_without_secrets(world: World) -> None:
    """render prints the exact job.sh (placeholder run id), sourcing secrets, never showing them."""
    result = world.invoke("render", str(world.config), "--cluster", "eos", "--benchmark", "gpqa")
    assert result.exit_code == 0, result.stderr
    script = result.stdout
    assert script.startswith("#!/bin/bash\n")
    assert f"#SBATCH --job-name={RENDER_RUN_ID}:gpqa" in script
    assert "HF_HOME=/lustre/cache" in script
    assert "+resume_from_cache=true" in script
    assert "TOKEN" in script
    assert SECRET not in script
    assert world.cluster("eos").connects == 0
    check = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert check.returncode == 0, check.stderr


def test_render_of_every_benchmark_separates_the_scripts(world: World) -> None:
    """Several scripts are each under a header line outside them; each is the uploaded job.sh."""
    document = world.submit(extra=("--run-id", "rc-same"))
    result = world.invoke("render", str(world.config), "--cluster", "eos", "--run-id", "rc-same")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("==> eos/gpqa/job.sh <==\n#!/bin/bash\n")
    scripts = split_stdout(result.stdout)
    assert set(scripts) == {"eos/gpqa/job.sh", "eos/smoke/job.sh"}
    workdir = world.cluster("eos").workdir / _run_id(document)
    for path, text in scripts.items():
        assert text.startswith("#!/bin/bash\n")
        assert (workdir / path).read_text() == text  # byte for byte what submit uploaded


# --- secrets --------------------------------------------------------------------------------


def test_secrets_never_reach_output_logs_or_job_scripts(world: World) -> None:
    """A secret env value is delivered in a mode-600 file only: not in stdout, logs or job.sh."""
    result = world.invoke(
        "-vv", "--log-format", "json", "submit", str(world.config), "--cluster", "eos", "--json"
    )
    assert result.exit_code == 0, result.stderr
    run_id = json.loads(result.stdout)["run_id"]
    assert "job_submitted" in result.stderr  # logs were emitted, and are checked below
    status = world.invoke("-vv", "status", run_id, "--json")
    rendered = world.invoke("render", str(world.config), "--cluster", "eos")
    for text in (result.stdout, result.stderr, status.stdout, status.stderr, rendered.stdout):
        assert SECRET not in text
    bench = world.cluster("eos").workdir / run_id / "eos" / "gpqa"
    assert SECRET not in (bench / "job.sh").read_text()
    secrets = bench / ".remote_chain_secrets"
    assert SECRET in secrets.read_text()  # it does reach the job, privately
    assert secrets.stat().st_mode & 0o077 == 0


def test_redaction_hides_values_of_secret_named_keys() -> None:
    """The log processor replaces values of keys like token/password/secret/key, nested too."""
    event = {
        "event": "x",
        "TOKEN": "a",
        "db_password": "b",
        "api_key": "c",
        "env": {"HF_TOKEN": "d", "HOME": "/h"},
        "items": [{"secret": "e"}],
        "cluster": "eos",
    }
    out = redact_secrets(None, "info", event)
    assert out["TOKEN"] == out["db_password"] == out["api_key"] == REDACTED
    assert out["env"] == {"HF_TOKEN": REDACTED, "HOME": "/h"}
    assert out["items"] == [{"secret": REDACTED}]
    assert out["cluster"] == "eos"


def test_configured_logging_redacts_and_writes_json_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """configure_logging sends structlog and stdlib records to stderr, redacted, as JSON."""
    configure_logging("json", 1)
    structlog.get_logger("remote_chain").info("probe_event", token=SECRET, cluster="eos")
    logging.getLogger("asyncssh").info("asyncssh chatter at INFO stays hidden")
    logging.getLogger("asyncssh").warning("asyncssh warning shows")
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = [json.loads(line) for line in captured.err.splitlines()]
    assert lines[0]["event"] == "probe_event"
    assert lines[0]["token"] == REDACTED
    assert lines[0]["level"] == "info"
    assert lines[0]["cluster"] == "eos"
    assert [line["event"] for line in lines[1:]] == ["asyncssh warning shows"]
    assert SECRET not in captured.err


def test_default_log_level_is_warning(capsys: pytest.CaptureFixture[str]) -> None:
    """Without -v, info logs are not shown; warnings are."""
    configure_logging("json", 0)
    log = structlog.get_logger("remote_chain")
    log.info("hidden_event")
    log.warning("shown_event")
    err = capsys.readouterr().err
    assert "hidden_event" not in err
    assert "shown_event" in err


# --- --json discipline and errors -----------------------------------------------------------


def test_json_stdout_is_one_document_while_logs_go_to_stderr(world: World) -> None:
    """With -v logs are emitted, all on stderr; stdout parses as one JSON document."""
    result = world.invoke("-v", "submit", str(world.config), "--cluster", "eos", "--json")
    assert result.exit_code == 0, result.stderr
    assert "job_submitted" in result.stderr
    assert json.loads(result.stdout)["submissions"]


def test_config_error_names_file_and_field_and_exits_2(world: World) -> None:
    """An invalid field exits 2 with one line naming the file and the dotted field."""
    world.config.write_text(CONFIG.replace("resumable: true", "resumable: {max_retries: -1}"))
    result = world.invoke("submit", str(world.config), "--cluster", "eos", "--json")
    assert result.exit_code == 2
    assert str(world.config) in result.stderr
    assert "driver.benchmarks.gpqa.resumable.max_retries" in result.stderr
    assert result.stderr.startswith("remote-chain: error: ")
    assert "Traceback" not in result.stderr
    (error,) = _items(json.loads(result.stdout), "errors")
    assert error["kind"] == "ConfigError"
    assert world.cluster("eos").connects == 0


def test_unknown_cluster_exits_2(world: World) -> None:
    """A --cluster without a profile is a config error naming it, before any connection."""
    result = world.invoke("submit", str(world.config), "--cluster", "nope")
    assert result.exit_code == 2
    assert "unknown cluster 'nope'" in result.stderr
    assert world.cluster("eos").calls("sbatch") == []


def test_usage_errors_exit_2(world: World) -> None:
    """A missing required option or an unknown one is a usage error: exit 2."""
    assert world.invoke("submit", str(world.config)).exit_code == 2
    assert world.invoke("status", "--bogus").exit_code == 2
    assert world.invoke("logs", "rc-x").exit_code == 2


def test_a_missing_clusters_dir_exits_2(world: World) -> None:
    """--clusters-dir naming no folder is a config error, not a silent fallback."""
    result = CliRunner().invoke(cli.app, ["--clusters-dir", "/no/such/dir", "clusters"])
    assert result.exit_code == 2
    assert "/no/such/dir" in result.stderr


@pytest.mark.parametrize("error", [ConnectError, HostKeyError, AuthenticationError])
def test_unreachable_cluster_exits_3_naming_the_host(
    world: World, error: type[ConnectError]
) -> None:
    """A cluster that cannot be reached or authenticated exits 3, naming its host."""
    world.cluster("eos").refuse(error)
    result = world.invoke("submit", str(world.config), "--cluster", "eos", "--json")
    assert result.exit_code == 3, result.stderr
    assert "eos.test" in result.stderr
    document = json.loads(result.stdout)
    (failure,) = _items(document, "errors")
    assert failure["cluster"] == "eos"
    assert failure["kind"] == error.__name__


def test_one_unreachable_cluster_of_two_still_submits_the_other(world: World) -> None:
    """Every failure being unreachable still exits 3; the reachable cluster got its jobs."""
    world.cluster("dgx").refuse(ConnectError)
    result = world.invoke(
        "submit", str(world.config), "--cluster", "eos", "--cluster", "dgx", "--json"
    )
    assert result.exit_code == 3
    document = json.loads(result.stdout)
    assert {s["cluster"] for s in _items(document, "submissions")} == {"eos"}
    assert [e["cluster"] for e in _items(document, "errors")] == ["dgx"]
    assert result.stderr.count("remote-chain: error: dgx:") == 1


def test_mixed_failures_exit_1(world: World) -> None:
    """One cluster unreachable and another refusing sbatch: not all alike, so exit 1."""
    world.cluster("dgx").refuse(ConnectError)
    world.cluster("eos").fail("sbatch", "sbatch: error: invalid partition")
    document = world.json(
        "submit", str(world.config), "--cluster", "eos", "--cluster", "dgx", code=1
    )
    errors = [s["error"] for s in _items(document, "submissions")]
    assert all("invalid partition" in str(e) for e in errors)


def test_status_of_an_unreachable_cluster_exits_3(world: World) -> None:
    """status exits 3 when the run's only cluster cannot be reached, listing it in errors."""
    run_id = _run_id(world.submit())
    world.cluster("eos").refuse(RemoteTimeout)
    document = world.json("status", run_id, code=3)
    assert [e["cluster"] for e in _items(document, "errors")] == ["eos"]


def test_a_bug_exits_1_with_one_line_and_no_traceback(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug inside the task group is flattened to one line; -vv adds the traceback."""

    async def broken(endpoint: Endpoint) -> Remote:
        raise RuntimeError("boom")

    monkeypatch.setattr(invocation, "OPENER", broken)
    result = world.invoke("submit", str(world.config), "--cluster", "eos")
    assert result.exit_code == 1
    assert result.stderr.count("remote-chain: error: internal error: RuntimeError: boom") == 1
    assert "Traceback" not in result.stderr
    verbose = world.invoke("-vv", "submit", str(world.config), "--cluster", "eos")
    assert "Traceback" in verbose.stderr


def test_ctrl_c_exits_130(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (KeyboardInterrupt) ends the command with exit 130 and no traceback."""

    async def interrupted(endpoint: Endpoint) -> Remote:
        signal.raise_signal(signal.SIGINT)  # what Ctrl-C sends; asyncio cancels the main task
        await anyio.sleep(30)
        raise AssertionError("SIGINT did not interrupt the command")

    monkeypatch.setattr(invocation, "OPENER", interrupted)
    result = world.invoke("status", "rc-x", "--cluster", "eos")
    assert result.exit_code == 130
    assert "Traceback" not in result.stderr


# --- the exit-code table --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ConfigError("bad", source="f.yaml", field="x"), 2),
        (ConnectError("refused", host="eos"), 3),
        (HostKeyError("changed", host="eos"), 3),
        (AuthenticationError("denied", host="eos"), 3),
        (RemoteTimeout("slow", host="eos"), 3),
        (CommandFailedError("x", host="eos", command="c", exit_status=1, stderr=""), 1),
        (SubmitError("refused"), 1),
        (StateError("torn", path="p"), 1),
        (RemoteChainError("other"), 1),
        (KeyboardInterrupt(), 130),
        (ValueError("bug"), 1),
    ],
)
def test_exit_code_table(error: BaseException, code: int) -> None:
    """Each error class maps to the exit code of interface.md §4."""
    assert cli.exit_code(error) == code


def test_wait_timeout_exits_4() -> None:
    """WaitTimeout is exit 4 (interface.md §4)."""
    from remote_chain.core.results import StatusResult  # noqa: PLC0415

    assert cli.exit_code(WaitTimeout(StatusResult("rc-x", ()))) == 4


def test_exception_groups_are_flattened_and_each_failure_reported_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A nested group of two unreachable clusters is two lines and exit 3; mixed is exit 1."""
    a, b = ConnectError("down", host="eos"), HostKeyError("changed", host="dgx")
    group = ExceptionGroup("outer", [ExceptionGroup("inner", [a, b]), a])
    assert cli.report(group, json_output=False, verbosity=0) == 3
    err = capsys.readouterr().err.splitlines()
    assert err == ["remote-chain: error: eos: down", "remote-chain: error: dgx: changed"]
    mixed = ExceptionGroup("g", [a, ConfigError("bad", source="f")])
    assert cli.report(mixed, json_output=False, verbosity=0) == 1


# --- start-up -------------------------------------------------------------------------------


def test_importing_the_cli_imports_no_heavy_module() -> None:
    """remote-chain --help stays fast: the CLI module imports no asyncssh, rich, pydantic, ..."""
    heavy = ("asyncssh", "rich", "structlog", "pydantic", "anyio", "tenacity", "yaml")
    code = f"import sys, remote_chain.cli; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "[]"


def test_version_and_help() -> None:
    """--version prints the version; --help lists every command of interface.md §4."""
    runner = CliRunner()
    version = runner.invoke(cli.app, ["--version"])
    assert version.exit_code == 0
    assert version.stdout.startswith("remote-chain ")
    help_text = runner.invoke(cli.app, ["--help"]).stdout
    for command in ("submit", "status", "wait", "cancel", "logs", "resume", "render", "doctor"):
        assert command in help_text


def split_stdout(text: str) -> dict[str, str]:
    """The inverse of ``join_for_stdout`` for several scripts: path -> script text."""
    marks = list(jobscripts.HEADER_RE.finditer(text))
    out = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() - 1 if i + 1 < len(marks) else len(text)
        out[mark.group(1)] = text[mark.end() + 1 : end]
    return out
