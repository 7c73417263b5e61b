"""The prologue at the edges real sites reach, run by bash under stub Slurm commands.

One test (or property) per class: hand-edited state files, the runner lease and requeue,
checkpoint signals, secrets kept from Slurm, bounded Slurm calls, full disks, recycled ids and
per-user limits, and the trust checks. The rows of the decision table these
classes touch are in tests/test_prologue.py's differential cases against decide().
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_prologue import (
    PRED,
    SELF,
    Case,
    decided_action,
    run_prologue,
    sbatch_calls,
    setup_prologue,
    stub_calls,
)

import remote_chain
from remote_chain.core.models import ResumePolicy
from remote_chain.execs.templates import render_template
from remote_chain.job.script import (
    CHAIN_FILE,
    EVENTS_FILE,
    LEASE_FILE,
    RETRIES_FILE,
    SECRETS_FILE,
    UNKNOWN_FILE,
    WALLTIME_FILE,
    JobSpec,
    SlurmDirectives,
    render_job_script,
)


def events(bench: Path) -> list[list[str]]:
    path = bench / EVENTS_FILE
    return [ln.split() for ln in path.read_text().splitlines()] if path.is_file() else []


def scancels(stubs: Path) -> list[str]:
    return [c for c in stub_calls(stubs) if c.startswith("scancel")]


def set_const(name: str, value: str) -> Callable[[str], str]:
    """An edit of the rendered job.sh: one constant changed (shorter timeouts for tests)."""
    return lambda text: re.sub(rf"^{name}=.*$", f"{name}={value}", text, count=1, flags=re.M)


def chain_left_no_live_successor(stubs: Path) -> bool:
    """Either no successor was queued, or the one queued was withdrawn."""
    return sbatch_calls(stubs) == [] or scancels(stubs) == ["scancel 43"]


# --- Class 1: hand-edited state files ---------------------------------------------------------
def expected_int(content: str) -> int | None:
    """What a state file holds, by the rule: a decimal after blanks/CR, else corrupt."""
    text = content.replace("\0", "#").rstrip("\n").strip(" \t\r")
    if not re.fullmatch(r"[0-9]+", text, flags=re.ASCII):
        return None
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) <= 15 else None


CONTENTS = st.one_of(
    st.text(alphabet="0123456789 \t\r\n-+e.x\0٣", max_size=12),
    st.from_regex(r"\A[ \t]*0*[0-9]{1,17}[ \t]*\r?\n?\Z"),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=st.sampled_from([WALLTIME_FILE, RETRIES_FILE, UNKNOWN_FILE]), content=CONTENTS)
def test_state_file_is_read_exactly_or_refused(
    tmp_path_factory: pytest.TempPathFactory, name: str, content: str
) -> None:
    """Any content: the exact decimal value is used, or the link exits 65 leaving no successor."""
    tmp = tmp_path_factory.mktemp("st")
    value = expected_int(content)

    def prepare(bench: Path, _stubs: Path) -> None:
        (bench / name).write_bytes(content.encode("utf-8", "surrogatepass"))

    # TIMEOUT adds the predecessor's 100 s to the walltime; nothing else moves on that row.
    proc, bench, stubs = run_prologue(tmp, Case("TIMEOUT"), prepare=prepare)
    log = proc.stderr
    if value is None:
        assert proc.returncode == 65, log
        assert not (bench / "runner_started").exists()
        assert chain_left_no_live_successor(stubs), stub_calls(stubs)
        assert "corrupt_state" in (bench / EVENTS_FILE).read_text()
        return
    assert proc.returncode == 0, (content, log)
    written = int((bench / name).read_text()) if (bench / name).exists() else 0
    if name == WALLTIME_FILE:
        assert written == value + 100, content
    elif name == RETRIES_FILE:
        assert written == value, content
    else:
        assert written == 0, content  # a known predecessor ends a streak of unknown ones


def write(name: str, content: str, mode: int | None = None) -> Callable[[Path, Path], None]:
    """A ``prepare`` hook: one file of the benchmark folder written (and chmod-ed) last."""

    def prepare(bench: Path, _stubs: Path) -> None:
        (bench / name).write_text(content)
        if mode is not None:
            (bench / name).chmod(mode)

    return prepare


def test_octal_looking_values_are_decimal(tmp_path: Path) -> None:
    """`08` and `010` are eight and ten, never an arithmetic error or octal eight."""
    case = Case("FAILED", policy=ResumePolicy(max_retries=20))
    proc, bench, _ = run_prologue(tmp_path, case, prepare=write(RETRIES_FILE, "08\r\n"))
    assert proc.returncode == 0, proc.stderr
    assert (bench / RETRIES_FILE).read_text() == "9\n"


def test_an_error_after_queuing_withdraws_the_successor(tmp_path: Path) -> None:
    """Any error before the runner (here `set -u` on an unset name) leaves no live successor."""

    def edit(text: str) -> str:
        return text.replace("    rc_take_lease\n", '    rc_take_lease\n    : "$RC_NO_SUCH_NAME"\n')

    proc, bench, stubs = run_prologue(tmp_path, Case("TIMEOUT"), edit=edit)
    assert proc.returncode != 0
    assert len(sbatch_calls(stubs)) == 1
    assert scancels(stubs) == ["scancel 43"], proc.stderr
    assert not (bench / "runner_started").exists()
    assert not (bench / LEASE_FILE).exists()


# --- Class 8: a full disk ---------------------------------------------------------------------
def test_a_link_that_cannot_record_stops_and_withdraws(tmp_path: Path) -> None:
    """The events file cannot be appended to: exit 74, successor withdrawn, reason logged."""

    def prepare(bench: Path, _stubs: Path) -> None:
        (bench / EVENTS_FILE).mkdir()  # appending fails as on a full disk

    proc, bench, stubs = run_prologue(tmp_path, Case("TIMEOUT"), prepare=prepare)
    assert proc.returncode == 74, proc.stderr
    assert "cannot write" in proc.stderr
    assert scancels(stubs) == ["scancel 43"]
    assert not (bench / "runner_started").exists()


# --- Class 2: requeue ---------------------------------------------------------------------------
def _spec(bench: Path, **slurm: object) -> JobSpec:
    return JobSpec(
        run_id="rc-x",
        cluster="c",
        benchmark="b",
        remote_dir=str(bench),
        argv=("true",),
        policy=ResumePolicy(),
        # SlurmDirectives fields by keyword, as each test names them; a TypedDict mirror of
        # the dataclass would be a second list to keep in step.
        slurm=SlurmDirectives(**slurm),  # type: ignore[arg-type]
    )


def test_links_are_not_requeued_unless_the_profile_says_so(tmp_path: Path) -> None:
    """`#SBATCH --no-requeue` by default; `[slurm] requeue = true` gives `--requeue`."""
    default = render_job_script(_spec(tmp_path)).splitlines()
    opted = render_job_script(_spec(tmp_path, requeue=True)).splitlines()
    assert "#SBATCH --no-requeue" in default
    assert "#SBATCH --requeue" not in default
    assert "#SBATCH --requeue" in opted
    assert "#SBATCH --no-requeue" not in opted


def test_a_dead_owners_lease_is_broken_by_rename(tmp_path: Path) -> None:
    """A lease whose owner Slurm no longer lists is broken (event), taken, then released."""
    proc, bench, _ = run_prologue(tmp_path, Case("TIMEOUT", lease_owner="40"))
    assert proc.returncode == 0, proc.stderr
    assert ["lease_broken", "40"] in [e[2:] for e in events(bench)]
    assert (bench / "runner_started").exists()
    leftovers = [p.name for p in bench.iterdir() if p.name.startswith(LEASE_FILE)]
    assert leftovers == []


def _break_folder(age_s: float) -> Callable[[Path, Path], None]:
    """A ``prepare`` hook: the dead owner 40's lease being broken by someone, ``age_s`` ago."""

    def prepare(bench: Path, _stubs: Path) -> None:
        folder = bench / f"{LEASE_FILE}.break.40"
        folder.mkdir()
        then = time.time() - age_s
        os.utime(folder, (then, then))

    return prepare


def test_a_dead_breakers_folder_is_removed_and_the_lease_broken(tmp_path: Path) -> None:
    """A break folder 11 minutes old is a breaker killed mid-break: removed, the lease broken."""
    case = Case("TIMEOUT", lease_owner="40")
    proc, bench, _ = run_prologue(tmp_path, case, prepare=_break_folder(11 * 60))
    assert proc.returncode == 0, proc.stderr
    assert "removed the runner lease's break folder of job 40" in proc.stderr
    assert ["lease_broken", "40"] in [e[2:] for e in events(bench)]
    assert (bench / "runner_started").exists()
    assert [p.name for p in bench.iterdir() if p.name.startswith(LEASE_FILE)] == []


def test_a_break_in_progress_is_waited_for_without_spinning(tmp_path: Path) -> None:
    """A fresh break folder (another link mid-break that never finishes here): the link waits
    its lookup window, asking squeue once per interval (it once asked without pause), and
    yields."""
    case = Case("TIMEOUT", lease_owner="40")
    edit = lambda text: set_const("RC_LOOKUP_INTERVAL", "1")(  # noqa: E731
        set_const("RC_LOOKUP_TIMEOUT", "3")(text)
    )
    proc, bench, stubs = run_prologue(tmp_path, case, prepare=_break_folder(5), edit=edit)
    assert proc.returncode == 0, proc.stderr
    assert decided_action(bench) == "yield"
    asked = [c for c in stub_calls(stubs) if c.startswith("squeue") and " 40" in c]
    assert 1 <= len(asked) <= 6, asked
    assert (bench / f"{LEASE_FILE}.break.40").is_dir()  # another's, left alone
    assert (bench / LEASE_FILE).read_text() == "40\n"


def test_a_live_owner_keeps_the_chain(tmp_path: Path) -> None:
    """A link finding the lease held by a running link withdraws its successor and exits 0."""
    case = Case("TIMEOUT", lease_owner="40", lease_owner_state="RUNNING")
    proc, bench, stubs = run_prologue(tmp_path, case)
    assert proc.returncode == 0
    assert decided_action(bench) == "yield"
    assert "holds the runner lease" in proc.stderr
    assert scancels(stubs) == ["scancel 43"]
    assert (bench / LEASE_FILE).read_text() == "40\n"  # never touched
    assert (bench / CHAIN_FILE).read_text() == f"{PRED}\n"


def test_squeue_filters_in_the_users_environment_hide_no_lease_owner(tmp_path: Path) -> None:
    """sbatch hands the job the login shell's environment (--export=ALL): SQUEUE_STATES from
    a user's rc file would hide the running lease owner, the lease be broken and a second
    runner start beside the first. The prologue's own queries drop squeue's filters."""
    case = Case("TIMEOUT", lease_owner="40", lease_owner_state="RUNNING")
    proc, bench, _ = run_prologue(tmp_path, case, env={"SQUEUE_STATES": "PENDING"})
    assert proc.returncode == 0, proc.stderr
    assert decided_action(bench) == "yield", proc.stderr
    assert not (bench / "runner_started").exists()
    assert (bench / LEASE_FILE).read_text() == "40\n"


# --- Class 3: checkpoint signals --------------------------------------------------------------
CHECKPOINTER = (
    "sh",
    "-c",
    "trap 'echo USR1 >> got; exit 3' USR1; trap 'echo TERM >> got; exit 4' TERM; "
    "touch runner_started; i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done",
)


def _start(tmp: Path, case: Case, argv: tuple[str, ...]) -> tuple[subprocess.Popen[str], Path]:
    """Run the prologue in the background and return once its runner is running."""
    cmd, env, bench, _ = setup_prologue(tmp, case, argv=argv)
    popen = subprocess.Popen(
        cmd, cwd=bench, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 20
    while not (bench / "runner_started").exists():
        assert time.monotonic() < deadline, "the runner never started"
        time.sleep(0.05)
    time.sleep(0.3)  # the prologue is now waiting on the runner
    return popen, bench


def test_batch_warning_signal_reaches_the_runner_once(tmp_path: Path) -> None:
    """`--signal=B:USR1`: forwarded once; the runner checkpoints; the link ends `signalled`."""
    popen, bench = _start(tmp_path, Case("TIMEOUT"), CHECKPOINTER)
    popen.send_signal(signal.SIGUSR1)
    time.sleep(0.3)
    popen.send_signal(signal.SIGUSR1)  # a second copy is not forwarded again
    _, err = popen.communicate(timeout=30)
    assert popen.returncode == 3, err
    assert (bench / "got").read_text() == "USR1\n"
    ends = [e[3:] for e in events(bench) if e[2] == "end"]
    assert ends[-1][0] == "signalled", ends
    assert ends[-1][1] == "3"
    assert ends[-1][-1] == "USR1"
    calls = (bench.parent / "stubs" / "calls").read_text()
    assert "scancel" not in calls  # the successor stays: the chain resumes (TIMEOUT row)


def test_slurms_own_term_is_not_sent_twice(tmp_path: Path) -> None:
    """At the time limit (this job COMPLETING) Slurm TERMs every process: not forwarded."""
    case = Case("TIMEOUT", queued=((SELF, "COMPLETING"),))
    popen, bench = _start(tmp_path, case, CHECKPOINTER)
    popen.send_signal(signal.SIGTERM)
    _, err = popen.communicate(timeout=30)
    assert "not forwarded again" in err
    assert not (bench / "got").exists()  # the runner heard nothing from the shell
    assert any(e[2:4] == ["end", "signalled"] for e in events(bench)), events(bench)


def test_batch_term_is_forwarded(tmp_path: Path) -> None:
    """`--signal=B:TERM` (the job still RUNNING) reaches the runner, once."""
    case = Case("TIMEOUT", queued=((SELF, "RUNNING"),))
    popen, bench = _start(tmp_path, case, CHECKPOINTER)
    popen.send_signal(signal.SIGTERM)
    _, err = popen.communicate(timeout=30)
    assert popen.returncode == 4, err
    assert (bench / "got").read_text() == "TERM\n"


def test_budget_kill_of_a_runner_ignoring_term_is_a_walltime_stop(tmp_path: Path) -> None:
    """The walltime budget runs out, the runner ignores TERM, is KILLed: a walltime stop."""
    case = Case("TIMEOUT", elapsed=98, policy=ResumePolicy(max_walltime_s=100))
    argv = ("sh", "-c", "trap '' TERM; touch runner_started; sleep 60")
    started = time.monotonic()
    proc, bench, stubs = run_prologue(
        tmp_path, case, argv=argv, edit=set_const("RC_KILL_AFTER", "1")
    )
    assert time.monotonic() - started < 20
    assert proc.returncode == 0, proc.stderr
    decided = [e[3] for e in events(bench) if e[2] == "decided"]
    assert decided == ["resume", "stop_walltime"]
    assert scancels(stubs) == ["scancel 43"]


# --- Class 4: secrets -------------------------------------------------------------------------
SECRET = "s3cr3t-VALUE-9"  # noqa: S105 - a test value whose leaks are searched for


def _with_secret(
    tmp: Path, runner_rc: int, *, resumable: bool = True
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    argv = ("sh", "-c", 'printf %s "$TOKEN" > runner_saw; touch runner_started; exit "$RUNNER_RC"')
    changes: dict[str, object] = {"secret_env_names": ("TOKEN",)}
    if not resumable:
        changes["policy"] = None
    return run_prologue(
        tmp,
        Case("TIMEOUT"),
        argv=argv,
        runner_rc=runner_rc,
        spec_changes=changes,
        prepare=write(SECRETS_FILE, f"TOKEN={SECRET}\n", 0o600),
    )


def test_secrets_reach_the_runner_but_never_sbatch(tmp_path: Path) -> None:
    """The runner sees the secret; sbatch's environment, job.sh and the log never do."""
    proc, bench, stubs = _with_secret(tmp_path, runner_rc=0)
    assert proc.returncode == 0, proc.stderr
    assert (bench / "runner_saw").read_text() == SECRET
    assert SECRET not in (stubs / "sbatch.env").read_text()
    assert SECRET not in (bench / "job.sh").read_text()
    assert SECRET not in proc.stderr + proc.stdout
    assert not (bench / SECRETS_FILE).exists()  # the chain completed: the file is gone


def test_secrets_file_stays_while_the_chain_goes_on(tmp_path: Path) -> None:
    """A link that failed leaves the secrets file for its successor."""
    proc, bench, _ = _with_secret(tmp_path, runner_rc=2)
    assert proc.returncode == 2
    assert (bench / SECRETS_FILE).exists()


def test_a_non_resumable_link_that_fails_removes_the_secrets(tmp_path: Path) -> None:
    """No successor carries a non-resumable chain: its end, failed too, removes the file."""
    proc, bench, stubs = _with_secret(tmp_path, runner_rc=2, resumable=False)
    assert proc.returncode == 2
    assert (bench / "runner_saw").read_text() == SECRET
    assert sbatch_calls(stubs) == []
    assert not (bench / SECRETS_FILE).exists()


# --- Class 5: bounded Slurm calls -------------------------------------------------------------
def test_a_hung_sacct_is_bounded(tmp_path: Path) -> None:
    """sacct that never answers: the lookup ends within its window plus a few seconds."""
    edit = set_const("RC_QUERY_TIMEOUT", "1")
    started = time.monotonic()
    proc, bench, _ = run_prologue(
        tmp_path, Case("TIMEOUT"), edit=edit, env={"STUB_SLEEP": "sacct:60"}
    )
    assert time.monotonic() - started < 15
    assert proc.returncode == 0, proc.stderr
    assert decided_action(bench) == "resume"  # not visible: no retry spent


def test_a_timed_out_sbatch_that_queued_is_found(tmp_path: Path) -> None:
    """sbatch times out after queuing: the link finds its successor in squeue, never loses it."""

    def prepare(bench: Path, stubs: Path) -> None:
        (stubs / "sbatch.out").write_text("")
        (stubs / "squeue.out").write_text(f"43|afternotok:{SELF}(unfulfilled)|{bench}\n")

    edit = set_const("RC_SBATCH_TIMEOUT", "1")
    proc, bench, _ = run_prologue(
        tmp_path, Case("TIMEOUT"), edit=edit, prepare=prepare, env={"STUB_SLEEP": "sbatch:30"}
    )
    assert proc.returncode == 0, proc.stderr
    assert "sbatch timed out but queued successor 43" in proc.stderr
    assert [e[3] for e in events(bench) if e[2] == "successor"] == ["43"]
    assert "successor_failed" not in (bench / EVENTS_FILE).read_text()


def test_a_per_user_limit_is_named(tmp_path: Path) -> None:
    """sbatch refused by a QOS limit: the warning event names the limit."""
    limit = (
        "sbatch: error: QOSMaxSubmitJobPerUserLimit\n"
        "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy\n"
    )

    def prepare(_bench: Path, stubs: Path) -> None:
        (stubs / "sbatch.out").write_text(limit)

    again, bench, _ = run_prologue(tmp_path, Case("TIMEOUT"), sbatch_rc=1, prepare=prepare)
    assert again.returncode == 0, again.stderr
    failed = [e for e in events(bench) if e[2] == "successor_failed"]
    assert failed, again.stderr
    assert failed[0][3] == "limit=QOSMaxSubmitJobPerUserLimit"
    assert "Chain will NOT continue on failure" in again.stderr


# --- Trust ---------------------------------------------------------------------------------------
def test_group_writable_state_is_refused(tmp_path: Path) -> None:
    """A state file others can write is refused before anything is read or run."""
    prepare = write(WALLTIME_FILE, "5\n", 0o664)
    again, bench, stubs = run_prologue(tmp_path, Case("TIMEOUT"), prepare=prepare)
    assert again.returncode == 77, again.stderr
    assert "writable by group or others" in again.stderr
    assert stub_calls(stubs) == []
    assert not (bench / "runner_started").exists()


def test_symlinked_state_file_is_refused(tmp_path: Path) -> None:
    """A state file that is a symlink is refused, never followed or written through."""
    target = tmp_path / "victim"
    target.write_text("precious\n")

    def prepare(bench: Path, _stubs: Path) -> None:
        (bench / RETRIES_FILE).unlink()
        (bench / RETRIES_FILE).symlink_to(target)

    again, _, stubs = run_prologue(tmp_path, Case("TIMEOUT"), prepare=prepare)
    assert again.returncode == 77, again.stderr
    assert "is a symlink" in again.stderr
    assert target.read_text() == "precious\n"
    assert stub_calls(stubs) == []


@pytest.mark.parametrize("name", [UNKNOWN_FILE, LEASE_FILE, SECRETS_FILE, "job.sh"])
def test_every_trusted_file_is_guarded(tmp_path: Path, name: str) -> None:
    """The lease, unknown-links, secrets files and job.sh are refused when others can write."""
    target = tmp_path / "bench" / name

    def prepare(bench: Path, _stubs: Path) -> None:
        if not target.exists():
            target.write_text("1\n")
        target.chmod(0o666 if name != "job.sh" else 0o777)

    again, bench, stubs = run_prologue(tmp_path, Case("TIMEOUT"), prepare=prepare)
    assert again.returncode == 77, again.stderr
    assert f"{target} is writable by group or others" in again.stderr
    assert stub_calls(stubs) == []
    assert not (bench / EVENTS_FILE).exists()


def test_cluster_folder_is_guarded(tmp_path: Path) -> None:
    """A cluster folder others can write (where the sacct window file lives) is refused."""

    def prepare(bench: Path, _stubs: Path) -> None:
        bench.parent.chmod(0o777)

    try:
        again, bench, stubs = run_prologue(tmp_path, Case("TIMEOUT"), prepare=prepare)
    finally:
        tmp_path.chmod(0o700)
    assert again.returncode == 77, again.stderr
    assert "writable by group or others" in again.stderr
    assert stub_calls(stubs) == []
    assert not (bench / EVENTS_FILE).exists()


def test_prologue_uses_the_one_guard() -> None:
    """The prologue includes guard.bash's check (one owner of the rule), no copy of its own."""
    text = render_job_script(JobSpec(run_id="r", cluster="c", benchmark="b", remote_dir="/w/b"))
    guard = render_template("guard.bash", {})
    first = guard.splitlines()[0]
    assert text.count(first) == 1
    assert text.count("stat -c") == guard.count("stat -c")  # only the guard stats
    assert "rc_check_trust() {\n  rc_bench_paths" in text


def test_slurm_commands_cannot_be_replaced_by_shell_functions(tmp_path: Path) -> None:
    """An exported `sbatch` function (a lying login environment) is not what the link calls."""
    fake = {
        "BASH_FUNC_sbatch%%": "() { echo 31337; }",
        "BASH_FUNC_squeue%%": "() { echo RUNNING; }",
    }
    proc, bench, stubs = run_prologue(tmp_path, Case("TIMEOUT"), env=fake)
    assert proc.returncode == 0, proc.stderr
    assert [e[3] for e in events(bench) if e[2] == "successor"] == ["43"]
    assert len(sbatch_calls(stubs)) == 1


def test_a_requeued_link_gets_no_fresh_budget(tmp_path: Path) -> None:
    """A requeued link's earlier run counts against the cap: its time limit is the rest only."""
    case = Case("FAILED", chain=(PRED, SELF), walltime=50, policy=ResumePolicy(max_walltime_s=1000))

    def prepare(bench: Path, stubs: Path) -> None:
        rows = [f"{SELF}|REQUEUED|900|rc-test:b|{bench}", f"{SELF}|RUNNING|3|rc-test:b|{bench}"]
        (stubs / f"sacct.{SELF}.out").write_text("\n".join(rows) + "\n")

    proc, bench, stubs = run_prologue(tmp_path, case, prepare=prepare)
    assert proc.returncode == 0, proc.stderr
    assert decided_action(bench) == "restart"
    # 1000 - 50 - 900 = 50 s left: the limit is lowered to its floor, one minute.
    assert f"scontrol update JobId={SELF} TimeLimit=1" in stub_calls(stubs)
    assert (bench / WALLTIME_FILE).read_text() == "50\n"  # counted by the successor, not here


# --- One copy of the rules -----------------------------------------------------------------------
def test_the_template_holds_no_rule_of_its_own() -> None:
    """prologue.bash only does I/O: no action is chosen, no counter moved, no cap compared there."""
    template = (Path(remote_chain.__file__).parent / "job" / "prologue.bash").read_text()
    for forbidden in (
        "action=__",
        "retries=$((",
        "unknown=$((",
        "RC_MAX_RETRIES",
        "RC_MAX_UNKNOWN",
    ):
        assert forbidden not in template, forbidden
    # Every Slurm command line comes from sacct.py by substitution.
    assert "--format=" not in template
    assert "--parsable2" not in template


def test_the_whole_lookup_ends_within_its_window_when_every_sacct_hangs(tmp_path: Path) -> None:
    """A 3 s window and a sacct that never answers: each query gets what is left of the window."""
    started = time.monotonic()
    proc, bench, _ = run_prologue(
        tmp_path,
        Case("TIMEOUT"),
        spec_changes={"lookup_timeout_s": 3, "lookup_interval_s": 1},
        env={"STUB_SLEEP": "sacct:60"},
    )
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert took < 3 + 2 + 4, took  # window + the last query's 2 s + bash and stubs
    assert decided_action(bench) == "resume"
