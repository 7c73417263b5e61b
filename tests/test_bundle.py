"""The single-exec submit and status scripts, run by local bash with stub Slurm commands."""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
from pathlib import Path

import pytest

from remote_chain.core.bundle import BundleFile, ChainPlan, ClusterBundle
from remote_chain.core.models import JobId
from remote_chain.core.snapshot import Target
from remote_chain.execs.status import parse_status_output, render_status_script
from remote_chain.execs.submit import (
    FIRST_JOB_FILE,
    RECORD_FILE,
    parse_submit_output,
    render_lookup_script,
    render_submit_script,
)
from remote_chain.protocol.markers import wrap

SBATCH = """#!/bin/bash
exec 9>>"$STUB_DIR/lock"; flock 9  # submit runs sbatch calls concurrently
n=$(( $(cat "$STUB_DIR/next" 2>/dev/null || echo 100) + 1 )); echo "$n" > "$STUB_DIR/next"
printf 'sbatch %s\\n' "$*" >> "$STUB_DIR/calls"
case "$*" in
  *bad/job.sh*) echo "sbatch: error: invalid partition specified: nope" >&2; exit 1;;
esac
# What Slurm would show for the job: its id and name (<run_id>:<benchmark> from the path).
job=${*: -1}; bench_dir=${job%/job.sh}; cluster_dir=${bench_dir%/*}; run_dir=${cluster_dir%/*}
echo "$n|${run_dir##*/}:${bench_dir##*/}" >> "$STUB_DIR/jobs"
echo "$n"
"""
QUERY = """#!/bin/bash
printf '%s %s\\n' "$(basename "$0")" "$*" >> "$STUB_DIR/calls"
# submit's confirmation of its job ids: what sbatch really queued.
if [[ $* == *'%i|%j'* || $* == *JobIDRaw,JobName* ]]; then
  cat "$STUB_DIR/jobs" 2>/dev/null; exit 0
fi
cat "$STUB_DIR/$(basename "$0").out" 2>/dev/null
"""


@pytest.fixture
def stubs(tmp_path: Path) -> Path:
    d = tmp_path / "stubs"
    d.mkdir()
    (d / "sbatch").write_text(SBATCH)
    for name in ("sacct", "squeue", "scontrol"):
        (d / name).write_text(QUERY)
    for f in d.iterdir():
        f.chmod(0o755)
    return d


def run(script: str, stubs: Path) -> str:
    wrapped, _ = wrap(script)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STUB_DIR": str(stubs)}
    proc = subprocess.run(
        ["bash", "-s"], input=wrapped, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def bundle(tmp_path: Path, benches: tuple[str, ...] = ("a", "b")) -> ClusterBundle:
    run_dir = tmp_path / "work" / "rc-1" / "c1"
    files = [BundleFile("files/tool.py", b"print(1)\n", 0o700)]
    files += [BundleFile(f"{b}/job.sh", b"#!/bin/bash\necho hi\n", 0o700) for b in benches]
    files += [BundleFile("a/.remote_chain_secrets", b"TOKEN='s'\n", 0o600)]
    chains = tuple(ChainPlan(b, f"{run_dir}/{b}", f"rc-1:{b}", True) for b in benches)
    return ClusterBundle(
        "rc-1", "c1", str(run_dir), "2026-11-29T00:00:00Z", "slurm", chains, tuple(files)
    )


def test_submit_unpacks_submits_and_records(tmp_path: Path, stubs: Path) -> None:
    """One exec lays out the run folder, sbatches each job, and writes the record."""
    b = bundle(tmp_path)
    out = run(render_submit_script(b), stubs)
    answer = parse_submit_output(out)
    assert not answer.existed
    # sbatch runs concurrently: which benchmark gets which id is not fixed.
    assert sorted((s.benchmark, s.error) for s in answer.submitted) == [("a", None), ("b", None)]
    ids = {s.benchmark: s.job_id for s in answer.submitted}
    assert sorted(ids.values(), key=str) == ["101", "102"]  # key: a JobId may be None
    run_dir = Path(b.run_dir)
    assert (run_dir / "files" / "tool.py").read_text() == "print(1)\n"
    assert (run_dir / "a" / FIRST_JOB_FILE).read_text() == f"{ids['a']}\n"
    assert (run_dir / "a" / "logs").is_dir()
    # Secrets mode 600, run folders 700 (umask 077 and the tarball's modes).
    assert stat.S_IMODE((run_dir / "a" / ".remote_chain_secrets").stat().st_mode) == 0o600
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    record = json.loads((run_dir / RECORD_FILE).read_text())
    assert record["run_id"] == "rc-1"
    assert [(c["benchmark"], c["first_job_id"], c["error"]) for c in record["chains"]] == [
        ("a", ids["a"], None),
        ("b", ids["b"], None),
    ]
    calls = sorted((stubs / "calls").read_text().splitlines())
    assert calls[:4] == [
        f"sbatch --parsable {run_dir}/a/job.sh",
        f"sbatch --parsable {run_dir}/b/job.sh",
        # The user's job limits from slurmctld's cache (limits.py), and the queue.
        f"scontrol -o show assoc_mgr users={pwd.getpwuid(os.getuid()).pw_name} flags=assoc,qos",
        "squeue --noheader --me --format=%i",
    ]
    assert "LIMITS\t" in out
    # And one squeue confirms both ids (any order) before they are reported.
    assert len(calls) == 5
    assert calls[4].startswith("squeue --noheader --states=all --jobs=")
    assert calls[4].endswith(" --format=%i|%j")


def test_second_submit_of_the_same_run_reports_the_first(tmp_path: Path, stubs: Path) -> None:
    """The run folder is made atomically: a retry finds the record and submits nothing."""
    b = bundle(tmp_path)
    run(render_submit_script(b), stubs)
    again = parse_submit_output(run(render_submit_script(b), stubs))
    assert again.existed
    assert again.record is not None
    chains = again.record["chains"]
    assert isinstance(chains, list)
    assert sorted(c["first_job_id"] for c in chains) == ["101", "102"]
    assert len([c for c in (stubs / "calls").read_text().splitlines() if "sbatch" in c]) == 2


def test_lookup_before_and_after(tmp_path: Path, stubs: Path) -> None:
    """The lookup says ABSENT before a submit ran, and returns the record after."""
    b = bundle(tmp_path)
    assert parse_submit_output(run(render_lookup_script(b), stubs)).existed is False
    run(render_submit_script(b), stubs)
    found = parse_submit_output(run(render_lookup_script(b), stubs))
    assert found.existed
    assert found.record is not None


def test_a_refused_benchmark_is_reported_and_the_others_go_on(tmp_path: Path, stubs: Path) -> None:
    """sbatch refusing one benchmark is that benchmark's error, not the run's."""
    b = bundle(tmp_path, ("a", "bad", "c"))
    answer = parse_submit_output(run(render_submit_script(b), stubs))
    by = {s.benchmark: s for s in answer.submitted}
    assert by["a"].job_id is not None
    assert by["bad"].job_id is None
    assert "invalid partition" in (by["bad"].error or "")
    assert by["c"].job_id is not None
    record = json.loads((Path(b.run_dir) / RECORD_FILE).read_text())
    assert "invalid partition" in record["chains"][1]["error"]


def test_unwritable_workdir_is_a_clear_error(tmp_path: Path, stubs: Path) -> None:
    """A workdir that cannot be made is reported with its path, nothing submitted."""
    blocker = tmp_path / "work"
    blocker.write_text("a file where the workdir should be")
    answer = parse_submit_output(run(render_submit_script(bundle(tmp_path)), stubs))
    assert answer.error is not None
    assert str(blocker) in answer.error
    assert not (stubs / "calls").exists()


def test_status_is_one_sacct_and_one_squeue_for_all_chains(tmp_path: Path, stubs: Path) -> None:
    """However many chains, the status exec calls sacct once and squeue once."""
    b = bundle(tmp_path, tuple(f"b{i}" for i in range(30)))
    run(render_submit_script(b), stubs)
    (stubs / "calls").unlink()
    (stubs / "sacct.out").write_text("101|COMPLETED|3|0:0|None|s|e\n")
    (stubs / "squeue.out").write_text(
        f"102|RUNNING|None|2026-01-01T00:00:00|1:05|{b.run_dir}/b1|rc-1:b1\n"
    )
    targets = [Target("rc-1", b.run_dir)]
    snap = parse_status_output(run(render_status_script(targets), stubs), targets)
    calls = (stubs / "calls").read_text().splitlines()
    # One of each: squeue first, then sacct for the 29 jobs squeue does not show.
    assert [c.split()[0] for c in calls] == ["squeue", "sacct"]
    assert "102" not in calls[1].split("--jobs ")[1].split(",")
    assert len(snap.runs[0].chains) == 30
    assert snap.sacct[JobId("101")].state.value == "COMPLETED"
    assert snap.squeue[JobId("102")].state.value == "RUNNING"
    first = {c.benchmark: c.files["first"].content.strip() for c in snap.runs[0].chains}
    assert sorted(first.values()) == [str(i) for i in range(101, 131)]


LYING_SBATCH = """#!/bin/bash
echo 31337
"""


def test_a_job_id_slurm_does_not_know_is_not_reported(tmp_path: Path, stubs: Path) -> None:
    """An sbatch that answers an id without queuing anything (a lying shell) is a failure."""
    (stubs / "sbatch").write_text(LYING_SBATCH)
    b = bundle(tmp_path)
    answer = parse_submit_output(run(render_submit_script(b), stubs))
    assert [s.job_id for s in answer.submitted] == [None, None]
    for sub in answer.submitted:
        assert sub.error is not None
        assert "Slurm shows no job 31337" in sub.error
    record = json.loads((Path(b.run_dir) / RECORD_FILE).read_text())
    assert [c["first_job_id"] for c in record["chains"]] == [None, None]
    assert not (Path(b.run_dir) / "a" / FIRST_JOB_FILE).exists()
