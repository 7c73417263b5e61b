"""Looking at a real run on the dev cluster: the CI summary, the timeline, the runs list.

One quick chain on the real Slurm; the CLI runs as a subprocess, as a user or CI runs it. The
summary's Mermaid gantt is parsed back and must equal the jobs sacct reports (Start/End).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import devcluster
import pytest

from remote_chain.cli.summary import parse_gantt

from .conftest import REPO, Client, write_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def _cli(
    dev: devcluster.DevCluster, state: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable, "-c", "from remote_chain.cli import main; main()",
        "--clusters-dir", str(dev.clusters_dir), *args,
    ]  # fmt: skip
    environ = {**os.environ, "REMOTE_CHAIN_STATE_DIR": str(state), **env}
    return subprocess.run(argv, cwd=REPO, env=environ, capture_output=True, text=True, timeout=200)


def test_summary_timeline_and_runs_of_a_real_run(
    dev: devcluster.DevCluster, tmp_path: Path
) -> None:
    """wait writes a summary whose gantt equals sacct's jobs; timeline fits 80; runs lists it."""
    state = tmp_path / "state"
    client = Client(dev.clusters_dir, state)
    config = write_config(
        tmp_path / "cfg",
        {"quick": {"resumable": True, "run": {"items": 2, "sleep": 1}, "slurm": {"time": "5"}}},
    )
    run_id = client.submit(config, ["local"]).run_id
    step = tmp_path / "step.md"
    waited = _cli(
        dev, state, "wait", run_id, "--timeout", "180s", "--summary", str(tmp_path / "s.md"),
        GITHUB_STEP_SUMMARY=str(step),
    )  # fmt: skip
    assert waited.returncode == 0, waited.stderr
    status = json.loads(_cli(dev, state, "status", run_id, "--json").stdout)
    (chain,) = status["chains"]
    assert chain["time_limit_s"] == 300
    jobs = {j["job_id"]: j for j in chain["jobs"]}
    assert all(j["start"] and j["end"] for j in jobs.values()), jobs
    for summary in (tmp_path / "s.md", step):
        tasks = parse_gantt(summary.read_text())
        assert {t.name.split()[0]: (t.start, t.end) for t in tasks} == {
            job_id: (dt.datetime.fromisoformat(j["start"]), dt.datetime.fromisoformat(j["end"]))
            for job_id, j in jobs.items()
        }
        assert all(t.section == "local/quick" for t in tasks)
    timeline = _cli(dev, state, "status", run_id, "--timeline", COLUMNS="80")
    assert timeline.returncode == 0, timeline.stderr
    lines = timeline.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), timeline.stdout
    assert any("local/quick" in line and "completed" in line for line in lines), timeline.stdout
    runs = json.loads(_cli(dev, state, "runs", "--json").stdout)["runs"]
    assert [(r["run_id"], r["state"]) for r in runs] == [(run_id, "completed")]
