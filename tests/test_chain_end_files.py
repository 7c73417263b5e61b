"""What `cancel` and `resume` do to the files a chain keeps for its links.

The client's remote scripts run by local bash under stub Slurm commands (as in test_guard):
a cancelled chain's mode-600 secrets file goes once nothing of the chain is queued, and a
resume of a chain stopped on the consecutive-unknown-links cap resets that counter.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_guard import make_stubs, run_status, submitted_run

from remote_chain.core.models import ChainStateName, ResumePolicy
from remote_chain.execs.cancel import parse_cancel_output, render_cancel_script
from remote_chain.execs.resume import (
    ChainFacts,
    ResumeCaps,
    ResumeFacts,
    act_head,
    parse_resume_output,
    plan_resume,
    render_resume_script,
)
from remote_chain.job.script import (
    RETRIES_FILE,
    SECRETS_FILE,
    UNKNOWN_FILE,
    WALLTIME_FILE,
    JobSpec,
    render_job_script,
)


@pytest.fixture
def stubs(tmp_path: Path) -> Path:
    return make_stubs(tmp_path)


@pytest.fixture
def run_dir(tmp_path: Path, stubs: Path) -> Path:
    return submitted_run(tmp_path, stubs)


def _secrets(run_dir: Path, bench: str) -> Path:
    path = run_dir / bench / SECRETS_FILE
    path.write_text("export TOKEN=s3cret\n")
    path.chmod(0o600)
    return path


def test_cancel_with_nothing_queued_removes_the_secrets(run_dir: Path, stubs: Path) -> None:
    """No link left in the queue: the cancelled chain's secrets file goes, other chains' stay."""
    mine, other = _secrets(run_dir, "a"), _secrets(run_dir, "b")
    status, payload, stderr = run_status(render_cancel_script("rc-1", str(run_dir), ["a"]), stubs)
    assert status == 0, stderr
    assert not mine.exists()
    assert other.exists()
    assert "SECRETS_REMOVED\ta" in payload
    assert parse_cancel_output(payload, ["a"]).errors == ()


def test_cancel_keeps_the_secrets_while_a_link_is_left(run_dir: Path, stubs: Path) -> None:
    """A link still queued after every round (LEFT): the secrets stay, nothing is guessed."""
    mine = _secrets(run_dir, "a")
    (stubs / "squeue.out").write_text(f"7|RUNNING|{run_dir / 'a'}|rc-1:a\n")
    script = render_cancel_script("rc-1", str(run_dir), ["a"]).replace("round < 30;", "round < 2;")
    status, payload, stderr = run_status(script, stubs)
    assert status == 0, stderr
    assert "LEFT" in payload
    assert mine.exists()


def test_cancel_never_removes_through_a_symlink(run_dir: Path, stubs: Path, tmp_path: Path) -> None:
    """A symlinked secrets file is refused by the guard; its target is untouched."""
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (run_dir / "a" / SECRETS_FILE).unlink(missing_ok=True)
    (run_dir / "a" / SECRETS_FILE).symlink_to(victim)
    status, _, stderr = run_status(render_cancel_script("rc-1", str(run_dir), ["a"]), stubs)
    assert status == 77
    assert "is a symlink" in stderr
    assert victim.read_text() == "keep\n"


def _unknown_facts(unknown: str) -> ResumeFacts:
    chain = ChainFacts(
        benchmark="a",
        resumable=True,
        max_retries=1,
        chain="10\n11\n12\n13\n",
        events=(
            "100 10 decided start none none 0 0\n"
            "200 11 decided resume 10 none 0 0\n"
            "300 12 decided resume 11 none 0 0\n"
            "400 13 decided exit_error 12 none 0 0\n"
        ),
        walltime="0",
        retries="0",
        unknown=unknown,
        max_unknown_links=2,
    )
    return ResumeFacts({"a": chain}, sacct="")


def test_a_chain_stopped_on_the_unknown_cap_resumes_without_a_grant() -> None:
    """Over the unknown-links cap (no retry spent): resumed as is, the counter to be reset."""
    plan = plan_resume({"a": ChainStateName.FAILED}, _unknown_facts("3"), ResumeCaps())
    assert plan.refused == {}
    step = plan.steps["a"]
    assert (step.old_unknown, step.new_retries) == ("3", 0)
    assert step.to_json()["unknown_links_reset"] is True


def test_a_chain_failed_on_retries_still_needs_a_grant() -> None:
    """Under the unknown-links cap the failure was the runner's: retries must be granted."""
    plan = plan_resume({"a": ChainStateName.FAILED}, _unknown_facts("1"), ResumeCaps())
    assert "--max-retries N" in plan.refused["a"]


def test_corrupt_unknown_counter_is_refused() -> None:
    """A hand-edited counter that is no number is named, nothing written."""
    plan = plan_resume({"a": ChainStateName.FAILED}, _unknown_facts("x3"), ResumeCaps())
    assert UNKNOWN_FILE in plan.refused["a"]


def _counters(run_dir: Path, unknown: str) -> None:
    for name, value in ((WALLTIME_FILE, "0"), (RETRIES_FILE, "0"), (UNKNOWN_FILE, unknown)):
        (run_dir / "a" / name).write_text(value + "\n")


def test_resume_resets_the_unknown_counter(run_dir: Path, stubs: Path) -> None:
    """The act exec writes 0 into the counter before it queues job.sh again."""
    _counters(run_dir, "3")
    plan = plan_resume({"a": ChainStateName.FAILED}, _unknown_facts("3"), ResumeCaps())
    steps = act_head(list(plan.steps.values()), ["a"])
    script = render_resume_script("rc-1", str(run_dir), ["a"], steps=[*steps, "RC_RECORD=''"])
    status, payload, stderr = run_status(script, stubs)
    assert status == 0, stderr
    assert "SUBMITTED\ta" in payload, payload
    assert (run_dir / "a" / UNKNOWN_FILE).read_text() == "0\n"


def test_resume_sees_a_counter_changed_since_it_was_read(run_dir: Path, stubs: Path) -> None:
    """A counter that moved since the read (a link ran) stops that chain's resume: CHANGED."""
    _counters(run_dir, "4")
    plan = plan_resume({"a": ChainStateName.FAILED}, _unknown_facts("3"), ResumeCaps())
    steps = act_head(list(plan.steps.values()), ["a"])
    script = render_resume_script("rc-1", str(run_dir), ["a"], steps=[*steps, "RC_RECORD=''"])
    status, payload, _ = run_status(script, stubs)
    assert status == 0
    assert "CHANGED\ta" in payload
    assert (run_dir / "a" / UNKNOWN_FILE).read_text() == "4\n"


def _with_secrets(run_dir: Path, bench: str) -> None:
    """The benchmark's job.sh marked as a real one rendered with secrets is (checked here)."""
    spec = JobSpec(
        run_id="rc-1",
        cluster="c1",
        benchmark=bench,
        remote_dir=str(run_dir / bench),
        argv=("true",),
        secret_env_names=("TOKEN",),
        policy=ResumePolicy(),
    )
    assert "\nRC_SECRETS=1\n" in render_job_script(spec)
    job = run_dir / bench / "job.sh"
    job.write_text(job.read_text() + "RC_SECRETS=1\n")


def test_resume_refuses_a_chain_whose_secrets_are_gone(run_dir: Path, stubs: Path) -> None:
    """Submitted with secrets, removed when it ended: queued again it would run without them.
    Refused by name, nothing queued or written; a chain whose secrets are there resumes."""
    _with_secrets(run_dir, "a")
    _with_secrets(run_dir, "b")
    (run_dir / "a" / SECRETS_FILE).unlink()  # as the chain's end removed it
    _secrets(run_dir, "b")
    before = (run_dir / "a" / "job.sh").read_bytes()
    status, payload, stderr = run_status(
        render_resume_script("rc-1", str(run_dir), ["a", "b"]), stubs
    )
    assert status == 0, stderr
    answer = parse_resume_output(payload)
    assert "secrets were removed" in answer.refused["a"], answer
    assert list(answer.submitted) == ["b"], answer
    assert [c for c in (stubs / "calls").read_text().splitlines() if c.startswith("sbatch")] == [
        f"sbatch --parsable {run_dir / 'b' / 'job.sh'}"
    ]
    assert (run_dir / "a" / "job.sh").read_bytes() == before
