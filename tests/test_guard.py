"""The ownership guard of the client's remote scripts, run by local bash with stub Slurm.

Every case plants what a neighbour on a shared login node could: the script
must stop with ``UNSAFE_EXIT`` before it reads, writes or runs anything, naming the path.
Cases that need a second user (a folder owned by someone else) run against the dev cluster
in tests/faults/test_neighbour.py.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from test_bundle import QUERY, SBATCH, bundle, run

from remote_chain.core.snapshot import Target
from remote_chain.execs.cancel import render_cancel_script
from remote_chain.execs.logs import render_logs_script
from remote_chain.execs.resume import render_resume_script
from remote_chain.execs.status import render_status_script
from remote_chain.execs.submit import RECORD_FILE, render_lookup_script, render_submit_script
from remote_chain.job.script import CANCEL_MARKER, CHAIN_FILE
from remote_chain.protocol.guard import UNSAFE_EXIT
from remote_chain.protocol.markers import unwrap, wrap


def run_status(script: str, stub_dir: Path) -> tuple[int, str, str]:
    """(exit status, payload, stderr) of a wrapped script run by local bash."""
    wrapped, nonce = wrap(script)
    env = {**os.environ, "PATH": f"{stub_dir}:{os.environ['PATH']}", "STUB_DIR": str(stub_dir)}
    proc = subprocess.run(
        ["bash", "-s"], input=wrapped, env=env, capture_output=True, text=True, timeout=60
    )
    payload, status, _ = unwrap(proc.stdout, nonce)
    return status, payload, proc.stderr


def make_stubs(tmp_path: Path) -> Path:
    """sbatch, sacct, squeue and scancel stubs that log their calls (as in test_bundle)."""
    d = tmp_path / "stubs"
    d.mkdir()
    (d / "sbatch").write_text(SBATCH)
    for name in ("sacct", "squeue", "scancel"):
        (d / name).write_text(QUERY)
    for f in d.iterdir():
        f.chmod(0o755)
    (d / "squeue.out").write_text("")  # an empty queue: cancel's loop ends at once
    return d


def submitted_run(tmp_path: Path, stubs: Path) -> Path:
    """A run submitted by us, with two benchmarks a and b; the stubs' call log emptied."""
    b = bundle(tmp_path)
    run(render_submit_script(b), stubs)
    (stubs / "calls").unlink()
    return Path(b.run_dir)


@pytest.fixture
def stubs(tmp_path: Path) -> Path:
    return make_stubs(tmp_path)


@pytest.fixture
def run_dir(tmp_path: Path, stubs: Path) -> Path:
    return submitted_run(tmp_path, stubs)


def _scripts(run_dir: Path) -> dict[str, str]:
    cluster = run_dir.parent.name
    del cluster
    return {
        "status": render_status_script([Target("rc-1", str(run_dir))]),
        "cancel": render_cancel_script("rc-1", str(run_dir), ["a", "b"]),
        "resume": render_resume_script("rc-1", str(run_dir), ["a", "b"]),
        "logs": render_logs_script(str(run_dir), "a", job_id=None, offset=0, executor="slurm"),
    }


def _group_writable(run_dir: Path, victim: Path) -> Path:
    path = run_dir / "a"
    path.chmod(0o770)
    return path


def _other_writable_job(run_dir: Path, victim: Path) -> Path:
    path = run_dir / "a" / "job.sh"
    path.chmod(0o757)
    return path


def _symlinked_chain(run_dir: Path, victim: Path) -> Path:
    path = run_dir / "a" / CHAIN_FILE
    path.symlink_to(victim)
    return path


def _symlinked_marker(run_dir: Path, victim: Path) -> Path:
    path = run_dir / "a" / CANCEL_MARKER
    path.symlink_to(victim)
    return path


def _symlinked_bench(run_dir: Path, victim: Path) -> Path:
    real = run_dir.parent / "elsewhere"
    (run_dir / "a").rename(real)
    (run_dir / "a").symlink_to(real)
    return run_dir / "a"


def _group_writable_run(run_dir: Path, victim: Path) -> Path:
    run_dir.chmod(0o775)
    return run_dir


def _group_writable_parent(run_dir: Path, victim: Path) -> Path:
    run_dir.parent.chmod(0o770)
    return run_dir.parent


PLANTS: dict[str, Callable[[Path, Path], Path]] = {
    "group-writable-bench": _group_writable,
    "other-writable-job": _other_writable_job,
    "symlinked-chain-file": _symlinked_chain,
    "symlinked-cancel-marker": _symlinked_marker,
    "symlinked-bench-folder": _symlinked_bench,
    "group-writable-run": _group_writable_run,
    "group-writable-run-parent": _group_writable_parent,
}


CASES = [
    (plant, command)
    for plant in sorted(PLANTS)
    for command in ("status", "cancel", "resume", "logs")
]


@pytest.mark.parametrize(("plant", "command"), CASES)
def test_a_planted_folder_or_file_stops_every_script(
    run_dir: Path,
    stubs: Path,
    tmp_path: Path,
    plant: str,
    command: str,
) -> None:
    """Each script refuses with the path named, calls no Slurm command, changes nothing."""
    victim = tmp_path / "victim.txt"
    victim.write_text("the victim's data\n")
    path = PLANTS[plant](run_dir, victim)
    status, payload, stderr = run_status(_scripts(run_dir)[command], stubs)
    assert status == UNSAFE_EXIT, (payload, stderr)
    assert f"remote-chain refused: {path}" in stderr
    assert not (stubs / "calls").exists()  # no sbatch, squeue, scancel or sacct
    assert victim.read_text() == "the victim's data\n"


@pytest.mark.parametrize("mode", ["submit", "lookup"])
def test_an_existing_run_is_adopted_only_when_it_is_safe(
    tmp_path: Path,
    stubs: Path,
    mode: str,
) -> None:
    """A group-writable run folder is an error, never "existing"; nothing is submitted."""
    b = bundle(tmp_path)
    run(render_submit_script(b), stubs)
    (stubs / "calls").unlink()
    Path(b.run_dir).chmod(0o777)
    render = render_submit_script if mode == "submit" else render_lookup_script
    status, payload, stderr = run_status(render(b), stubs)
    assert status == UNSAFE_EXIT
    assert "EXISTS" not in payload
    assert f"{b.run_dir} is writable by group or others" in stderr
    assert not (stubs / "calls").exists()


def test_a_symlinked_record_is_refused(tmp_path: Path, stubs: Path) -> None:
    """The run record is read only when it is a regular file of ours."""
    b = bundle(tmp_path)
    run(render_submit_script(b), stubs)
    record = Path(b.run_dir) / RECORD_FILE
    forged = tmp_path / "forged.json"
    forged.write_text(record.read_text())
    record.unlink()
    record.symlink_to(forged)
    status, _, stderr = run_status(render_lookup_script(b), stubs)
    assert status == UNSAFE_EXIT
    assert f"{record} is a symlink" in stderr


def test_cancel_creates_its_marker_and_keeps_an_existing_one(
    run_dir: Path,
    stubs: Path,
) -> None:
    """The marker is made with O_EXCL; a second cancel finds it and goes on."""
    for _ in range(2):
        status, payload, _ = run_status(render_cancel_script("rc-1", str(run_dir), ["a"]), stubs)
        assert status == 0
        assert "NOMARK" not in payload
        assert (run_dir / "a" / CANCEL_MARKER).is_file()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a file another user owns")
def test_a_folder_of_another_user_names_its_owner(run_dir: Path, stubs: Path) -> None:
    """A benchmark folder owned by someone else is refused, the owner named."""
    os.chown(run_dir / "b", 65534, 65534)
    status, _, stderr = run_status(render_status_script([Target("rc-1", str(run_dir))]), stubs)
    assert status == UNSAFE_EXIT
    assert f"{run_dir / 'b'} is owned by nobody, not by you" in stderr


def test_cancel_makes_its_marker_private_under_a_group_umask(run_dir: Path, stubs: Path) -> None:
    """A login umask of 002 does not make the marker group-writable (status would refuse it)."""
    script = "umask 002\n" + render_cancel_script("rc-1", str(run_dir), ["a"])
    status, _, _ = run_status(script, stubs)
    assert status == 0
    assert (run_dir / "a" / CANCEL_MARKER).stat().st_mode & 0o777 == 0o600
    status, _, stderr = run_status(render_status_script([Target("rc-1", str(run_dir))]), stubs)
    assert status == 0, stderr


def test_the_guard_checks_paths_beyond_one_command_line(run_dir: Path, stubs: Path) -> None:
    """Many chains' paths exceed ARG_MAX: stat still sees every one (xargs cuts the list), so
    an unsafe file in the last benchmark is refused, not passed because stat could not run."""
    arg_max = os.sysconf("SC_ARG_MAX")
    name = "x" * 200
    count = arg_max // (13 * (len(str(run_dir)) + len(name) + 30)) + 50
    for i in range(count):
        bench = run_dir / f"{name}{i:05d}"
        bench.mkdir()
        (bench / "job.sh").write_text("#!/bin/bash\n")
    last = run_dir / f"{name}{count - 1:05d}" / "job.sh"
    last.chmod(0o664)
    status, payload, stderr = run_status(
        render_status_script([Target("rc-1", str(run_dir))]), stubs
    )
    assert status == UNSAFE_EXIT, (payload[-300:], stderr)
    assert f"remote-chain refused: {last} is writable by group or others" in stderr
    assert not (stubs / "calls").exists()


@pytest.mark.parametrize(("tool", "code"), [("xargs", 127), ("stat", 127), ("stat", 2)])
def test_the_guard_refuses_when_stat_cannot_run(
    run_dir: Path, stubs: Path, tool: str, code: int
) -> None:
    """If the ownership check itself cannot run, nothing is trusted (it never fails open):
    xargs (many paths) or stat (a few: the run's own, stat called directly) missing or
    failing otherwise than on a missing path (stat's 1)."""
    (stubs / tool).write_text(f"#!/bin/sh\nexit {code}\n")
    (stubs / tool).chmod(0o755)
    status, _, stderr = run_status(render_status_script([Target("rc-1", str(run_dir))]), stubs)
    assert status == UNSAFE_EXIT
    assert f"stat did not run (status {code})" in stderr
    assert not (stubs / "calls").exists()


@pytest.mark.parametrize(
    "plant",
    [
        "group-writable-bench",
        "other-writable-job",
        "symlinked-chain-file",
        "symlinked-cancel-marker",
        "symlinked-bench-folder",
    ],
)
def test_many_benchmarks_are_checked_by_one_find(
    run_dir: Path, stubs: Path, tmp_path: Path, plant: str
) -> None:
    """Past 8 folders, rc_guard_bench asks one find for the suspects: a planted file in any of
    20 benchmarks is still refused by name (status, cancel and resume all guard this way)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("the victim's data\n")
    for i in range(18):
        bench = run_dir / f"m{i:02d}"
        bench.mkdir()
        (bench / "job.sh").write_text("#!/bin/bash\n")
        (bench / CHAIN_FILE).write_text("1\n")
    path = PLANTS[plant](run_dir, victim)
    benches = ["a", "b", *(f"m{i:02d}" for i in range(18))]
    scripts = {
        "status": render_status_script([Target("rc-1", str(run_dir))]),
        "cancel": render_cancel_script("rc-1", str(run_dir), benches),
        "resume": render_resume_script("rc-1", str(run_dir), benches),
    }
    for command, script in scripts.items():
        status, payload, stderr = run_status(script, stubs)
        assert status == UNSAFE_EXIT, (command, payload, stderr)
        assert f"remote-chain refused: {path}" in stderr, command
    assert not (stubs / "calls").exists()
    assert victim.read_text() == "the victim's data\n"
