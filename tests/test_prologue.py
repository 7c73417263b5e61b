"""The rendered prologue, run by real bash under stub Slurm commands, agrees with decide().

This is the differential proof that the bash on the cluster and the Python table are one
rule set: for every Slurm state (and "never visible"), several chain states and policies, the
prologue's decision, exit status, dot-files, runner start and successor ``sbatch`` call are
compared with what ``chain.decide()`` says.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remote_chain.core.models import (
    LEASE_LIVE_STATES,
    NON_TERMINAL_STATES,
    QUEUED_STATES,
    Action,
    ChainState,
    Decision,
    EndRecord,
    JobId,
    Outcome,
    Predecessor,
    ResumePolicy,
    SlurmState,
)
from remote_chain.core.rules import STATE_OUTCOMES, decide
from remote_chain.core.sacct import PROLOGUE_SACCT_FIELDS, parse_state
from remote_chain.execs.templates import CHAIN_WARNING
from remote_chain.job.script import (
    CANCEL_MARKER,
    CHAIN_FILE,
    EVENTS_FILE,
    LEASE_FILE,
    RETRIES_FILE,
    UNKNOWN_FILE,
    WALLTIME_FILE,
    JobSpec,
    SlurmDirectives,
    render_job_script,
)

SELF = "42"
PRED = "41"
JOB_NAME = "rc-test:b"
# Each stub records its call and prints $STUB_DIR/<name>.<job id>.out (the id after --jobs, or
# scontrol's last word) if that exists, else <name>.out; it exits $STUB_<NAME>_RC.
STUB = """#!/bin/bash
printf '%s\\n' "$(basename "$0") $*" >> "$STUB_DIR/calls"
name=$(basename "$0")
[[ $name == sbatch ]] && env > "$STUB_DIR/sbatch.env"
jobs="" prev=""
for a in "$@"; do [[ $prev == --jobs ]] && jobs=$a; prev=$a; done
[[ $name == scontrol && ${1:-} == show ]] && jobs=${!#}
[[ -n ${STUB_SLEEP:-} && $name == "${STUB_SLEEP%%:*}" ]] && sleep "${STUB_SLEEP#*:}"
file=""
if [[ -n $jobs && -f "$STUB_DIR/$name.$jobs.out" ]]; then file="$STUB_DIR/$name.$jobs.out"
elif [[ -f "$STUB_DIR/$name.out" ]]; then file="$STUB_DIR/$name.out"; fi
# As the real squeue: SQUEUE_STATES in the environment is a --states filter.
if [[ -n $file && $name == squeue && -n ${SQUEUE_STATES:-} ]]; then
  grep -iE "(^|[| ])(${SQUEUE_STATES//,/|})([| ]|$)" "$file" || true
elif [[ -n $file ]]; then cat "$file"; fi
rc_var="STUB_${name^^}_RC"
exit "${!rc_var:-0}"
"""


@dataclass
class Case:
    """One prologue run: what Slurm's commands answer and what the dot-files hold before."""

    sacct_state: str | None  # the State column, e.g. "CANCELLED by 0"; None: not in sacct
    elapsed: int = 100
    earlier_runs: tuple[int, ...] = ()  # elapsed of earlier runs (requeued: --duplicates)
    sacct_name: str = JOB_NAME  # another name: a recycled id of another chain
    chain: tuple[str, ...] = (PRED,)
    walltime: int = 0
    retries: int = 0
    unknown: int = 0
    policy: ResumePolicy = field(default_factory=ResumePolicy)
    marker: bool = False
    squeue_pred: str = ""  # squeue's %T for the predecessor
    first: bool = False  # no $1
    ctld_state: str = "TIMEOUT"  # slurmctld's JobState (used only with ctld_elapsed)
    ctld_elapsed: int | None = None  # slurmctld's RunTime when sacct never shows the job
    end: EndRecord | None = None  # the predecessor's own end record in the events file
    end_elapsed: int = 55
    lease_owner: str | None = None  # a lease left in the folder by this job id...
    lease_owner_state: str = ""  # ...which squeue shows in this state ("": gone)
    queued: tuple[tuple[str, str], ...] = ()  # other jobs squeue shows: (id, state)


RUNNER = ("sh", "-c", 'touch runner_started; exit "$RUNNER_RC"')


def _stubs(stubs: Path) -> None:
    stubs.mkdir()
    for name in ("sacct", "sbatch", "squeue", "scontrol", "scancel"):
        (stubs / name).write_text(STUB)
        (stubs / name).chmod(0o755)


def _sacct_row(job: str, state: str, elapsed: int, name: str, workdir: Path) -> str:
    row = [job, state, str(elapsed), name, str(workdir)]
    assert len(row) == len(PROLOGUE_SACCT_FIELDS)
    return "|".join(row) + "\n"


def _env(stubs: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "STUB_DIR": str(stubs),
        "SLURM_JOB_ID": SELF,
        "RUNNER_RC": "0",
        **extra,
    }


Prepare = Callable[[Path, Path], None]


def run_prologue(
    tmp: Path,
    case: Case,
    **knobs: Any,
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """Lay out a benchmark folder and stubs for ``case``, run job.sh to its end."""
    cmd, env, bench, stubs = setup_prologue(tmp, case, **knobs)
    proc = subprocess.run(cmd, cwd=bench, env=env, capture_output=True, text=True, timeout=90)
    return proc, bench, stubs


def setup_prologue(
    tmp: Path,
    case: Case,
    *,
    runner_rc: int = 0,
    sbatch_rc: int = 0,
    argv: tuple[str, ...] = RUNNER,
    existing: bool = False,
    spec_changes: dict[str, object] | None = None,
    edit: Callable[[str], str] | None = None,
    env: dict[str, str] | None = None,
    prepare: Prepare | None = None,
) -> tuple[list[str], dict[str, str], Path, Path]:
    """The folder, stubs and job.sh of a case; ``prepare(bench, stubs)`` edits them last."""
    bench, stubs = tmp / "bench", tmp / "stubs"
    bench.mkdir(exist_ok=existing)
    _stubs(stubs)
    if case.sacct_state is not None:
        rows = [_sacct_row(PRED, "REQUEUED", e, case.sacct_name, bench) for e in case.earlier_runs]
        rows.append(_sacct_row(PRED, case.sacct_state, case.elapsed, case.sacct_name, bench))
        (stubs / "sacct.out").write_text("".join(rows))
    (stubs / f"squeue.{PRED}.out").write_text(f"{case.squeue_pred}\n" if case.squeue_pred else "")
    if case.ctld_elapsed is not None:
        h, rest = divmod(case.ctld_elapsed, 3600)
        run_time = f"{h // 24}-{h % 24:02d}:{rest // 60:02d}:{rest % 60:02d}"
        (stubs / "scontrol.out").write_text(
            f"JobId={PRED} JobName={JOB_NAME} JobState={case.ctld_state} RunTime={run_time}\n"
        )
    (stubs / "sbatch.out").write_text("43\n" if sbatch_rc == 0 else "sbatch: error: bad\n")
    if case.chain:
        (bench / CHAIN_FILE).write_text("".join(f"{j}\n" for j in case.chain))
    (bench / WALLTIME_FILE).write_text(f"{case.walltime}\n")
    (bench / RETRIES_FILE).write_text(f"{case.retries}\n")
    if case.unknown:
        (bench / UNKNOWN_FILE).write_text(f"{case.unknown}\n")
    if case.end is not None:
        with (bench / EVENTS_FILE).open("a") as f:
            f.write(f"1 {PRED} end {case.end.value} 3 {case.end_elapsed} USR1\n")
    if case.lease_owner is not None:
        (bench / LEASE_FILE).write_text(f"{case.lease_owner}\n")
        state = case.lease_owner_state
        (stubs / f"squeue.{case.lease_owner}.out").write_text(f"{state}\n" if state else "")
    for job_id, state in case.queued:
        (stubs / f"squeue.{job_id}.out").write_text(f"{state}\n")
    if case.marker:
        (bench / CANCEL_MARKER).write_text("")
    spec = JobSpec(
        run_id="rc-test",
        cluster="c1",
        benchmark="b",
        remote_dir=str(bench),
        argv=argv,
        policy=case.policy,
        slurm=SlurmDirectives(time_s=3600),
        lookup_timeout_s=0,
        lookup_interval_s=0,
        max_unknown_links=case.policy.max_unknown_links,
    )
    if spec_changes:
        # JobSpec fields by keyword from the caller; dataclasses.replace names each one.
        spec = dataclasses.replace(spec, **spec_changes)  # type: ignore[arg-type]
    text = render_job_script(spec)
    job = bench / "job.sh"
    job.write_text(edit(text) if edit else text)
    if prepare is not None:
        prepare(bench, stubs)
    full_env = _env(stubs, RUNNER_RC=str(runner_rc), STUB_SBATCH_RC=str(sbatch_rc), **(env or {}))
    cmd = ["bash", str(job)] + ([] if case.first else [PRED])
    return cmd, full_env, bench, stubs


def _ctld_final(case: Case) -> bool:
    outcome = STATE_OUTCOMES[SlurmState.parse(case.ctld_state)]
    return case.ctld_elapsed is not None and outcome is not Outcome.NOT_VISIBLE


def expected_decision(case: Case) -> Decision:
    p = None
    if not case.first:
        seen = case.sacct_state is not None and case.sacct_name == JOB_NAME
        state, by = parse_state(case.sacct_state) if seen and case.sacct_state else (None, None)
        elapsed: int | None = case.elapsed + sum(case.earlier_runs) if state else None
        stale = state is None or state in NON_TERMINAL_STATES
        in_queue = stale and SlurmState.parse(case.squeue_pred) in QUEUED_STATES
        if stale and not in_queue:
            # At the end of the window: slurmctld's final state, else nothing (the end record
            # is decide()'s own input).
            state, by, elapsed = None, None, None
            if _ctld_final(case):
                state, elapsed = SlurmState.parse(case.ctld_state), case.ctld_elapsed
            elif case.end is not None:
                elapsed = case.end_elapsed
        p = Predecessor(JobId(PRED), state, by, elapsed, in_queue, case.end)
    lease_held = (
        case.lease_owner not in (None, SELF)
        and SlurmState.parse(case.lease_owner_state) in LEASE_LIVE_STATES
        and bool(case.lease_owner_state)
    )
    chain = ChainState(
        job_ids=tuple(JobId(j) for j in case.chain),
        accumulated_walltime_s=case.walltime,
        infra_retries=case.retries,
        cancel_requested=case.marker,
        self_job_id=JobId(SELF),
        uid=os.getuid(),
        lease_held=lease_held and case.policy is not None,
        unknown_links=case.unknown,
    )
    return decide(p, chain, case.policy)


def expected(case: Case) -> tuple[Action, int, int]:
    d = expected_decision(case)
    return d.action, d.accumulated_walltime_s, d.infra_retries


def decided_action(bench: Path) -> str:
    lines = [ln.split() for ln in (bench / EVENTS_FILE).read_text().splitlines()]
    return next(parts[3] for parts in lines if parts[2] == "decided")


def stub_calls(stubs: Path) -> list[str]:
    return (stubs / "calls").read_text().splitlines() if (stubs / "calls").exists() else []


def sbatch_calls(stubs: Path) -> list[str]:
    return [c for c in stub_calls(stubs) if c.startswith("sbatch ")]


CAP = ResumePolicy(max_retries=3, max_walltime_s=1000)
ADMIN_PREEMPT = ResumePolicy(admin_cancel="preempt")
CASES: list[Case] = [
    *(Case(s.value) for s in SlurmState),
    Case(None),
    Case(None, ctld_elapsed=90061, walltime=5),
    Case(None, ctld_elapsed=300, ctld_state="RUNNING"),
    Case("RUNNING", ctld_elapsed=300),
    Case(None, ctld_elapsed=20, ctld_state="FAILED", retries=3),
    Case(None, first=True, chain=()),
    Case("CANCELLED by 0"),
    Case("CANCELLED by 0", policy=ADMIN_PREEMPT),
    Case("CANCELLED by 12345", policy=ADMIN_PREEMPT),
    Case("TIMEOUT", walltime=950, policy=CAP),
    Case("TIMEOUT", walltime=850, policy=CAP),
    Case("PREEMPTED", walltime=2000, policy=CAP),
    Case("FAILED", retries=3),
    Case("FAILED", retries=2),
    Case("OUT_OF_MEMORY", retries=3, policy=ResumePolicy(max_retries=5)),
    Case("FAILED", walltime=990, policy=CAP),
    Case(None, walltime=1000, policy=CAP),
    Case(None, first=True, chain=(), policy=ResumePolicy(max_walltime_s=60)),
    Case("TIMEOUT", marker=True),
    Case(None, marker=True, first=True, chain=()),
    Case("RUNNING", squeue_pred="RUNNING"),
    Case("REQUEUED", squeue_pred="RUNNING"),
    Case("RUNNING", squeue_pred="COMPLETED"),
    Case("RUNNING", squeue_pred="COMPLETING"),
    # Every squeue state that means "still in the queue".
    *(Case("RUNNING", squeue_pred=s.value) for s in sorted(QUEUED_STATES)),
    Case("FAILED", chain=(PRED, SELF), retries=1, walltime=77),
    # Class 2: every run of a requeued predecessor is counted (sacct --duplicates).
    Case("TIMEOUT", earlier_runs=(300, 200), walltime=10),
    Case("PREEMPTED", earlier_runs=(900,), walltime=50, policy=CAP),
    # Class 9: a recycled id (another chain's job of that id) is never taken for ours.
    Case("COMPLETED", sacct_name="rc-other:b"),
    # Class 3: a predecessor that ended on a signal (its own record) is the TIMEOUT row.
    Case("FAILED", end=EndRecord.SIGNALLED, retries=3),
    Case("COMPLETED", end=EndRecord.SIGNALLED),
    # Class 6: no sacct, no slurmctld: the end record decides; with none, "not visible",
    # capped in a row.
    Case(None, end=EndRecord.SIGNALLED, walltime=5),
    Case(None, end=EndRecord.ERROR, retries=3),
    Case(None, end=EndRecord.OK),
    Case(None, unknown=2),
    Case(None, unknown=3),
    Case("TIMEOUT", unknown=3),
    Case(None, unknown=1, policy=ResumePolicy(max_unknown_links=1)),
    # Class 2: the runner lease.
    Case("TIMEOUT", lease_owner="40", lease_owner_state="RUNNING"),
    Case("TIMEOUT", lease_owner="40", lease_owner_state="COMPLETING"),
    Case("TIMEOUT", lease_owner="40", lease_owner_state="PENDING"),
    Case("TIMEOUT", lease_owner="40"),
    Case("TIMEOUT", lease_owner=SELF),
    Case("FAILED", chain=(PRED, SELF), lease_owner="43", lease_owner_state="RUNNING"),
]


def _case_id(case: Case) -> str:
    parts = [case.sacct_state or ("first" if case.first else "invisible")]
    parts += [f"wt{case.walltime}"] if case.walltime else []
    parts += [f"r{case.retries}"] if case.retries else []
    parts += [f"u{case.unknown}"] if case.unknown else []
    parts += ["marker"] if case.marker else []
    parts += [f"sq-{case.squeue_pred}"] if case.squeue_pred else []
    parts += ["requeued"] if SELF in case.chain else []
    parts += [case.policy.admin_cancel] if case.policy.admin_cancel != "stop" else []
    parts += [f"cap{case.policy.max_walltime_s}"] if case.policy.max_walltime_s else []
    parts += [f"ucap{case.policy.max_unknown_links}"] if case.policy.max_unknown_links != 3 else []
    parts += [f"ctld{case.ctld_state}{case.ctld_elapsed}"] if case.ctld_elapsed is not None else []
    parts += [f"runs{'+'.join(map(str, case.earlier_runs))}"] if case.earlier_runs else []
    parts += [f"name-{case.sacct_name}"] if case.sacct_name != JOB_NAME else []
    parts += [f"end-{case.end.value}"] if case.end else []
    if case.lease_owner is not None:
        parts += [f"lease{case.lease_owner}-{case.lease_owner_state or 'gone'}"]
    return "-".join(parts).replace(" ", "_")


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_prologue_agrees_with_decide(tmp_path: Path, case: Case) -> None:
    """Bash and decide() agree on action, exit status, dot-files, runner and successor."""
    check_agreement(tmp_path, case)


STATE_WORDS = [*(s.value for s in SlurmState), "CANCELLED by 0", "CANCELLED by 12345", "BOGUS"]
GENERATED = st.builds(
    Case,
    sacct_state=st.one_of(st.none(), st.sampled_from(STATE_WORDS)),
    elapsed=st.integers(0, 10**6),
    earlier_runs=st.lists(st.integers(0, 10**5), max_size=2).map(tuple),
    sacct_name=st.sampled_from([JOB_NAME, JOB_NAME, "rc-other:b"]),
    walltime=st.integers(0, 10**6),
    retries=st.integers(0, 6),
    unknown=st.integers(0, 4),
    policy=st.builds(
        ResumePolicy,
        max_retries=st.integers(0, 5),
        max_walltime_s=st.one_of(st.none(), st.integers(1, 2 * 10**6)),
        admin_cancel=st.sampled_from(["stop", "preempt"]),
        max_unknown_links=st.integers(1, 4),
    ),
    squeue_pred=st.sampled_from(["", "", *(s.value for s in SlurmState)]),
    ctld_state=st.sampled_from([s.value for s in SlurmState]),
    ctld_elapsed=st.one_of(st.none(), st.integers(0, 10**6)),
    end=st.one_of(st.none(), st.sampled_from(list(EndRecord))),
    lease_owner=st.sampled_from([None, None, "40", SELF]),
    lease_owner_state=st.sampled_from(["", "RUNNING", "PENDING", "COMPLETING"]),
)


@settings(
    max_examples=int(os.environ.get("RC_PROLOGUE_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=GENERATED)
def test_prologue_agrees_with_decide_on_generated_answers(
    tmp_path_factory: pytest.TempPathFactory, case: Case
) -> None:
    """Generated sacct/squeue/scontrol answers, end records and files: bash agrees with decide()."""
    check_agreement(tmp_path_factory.mktemp("gen"), case)


def check_agreement(tmp_path: Path, case: Case) -> None:
    d = expected_decision(case)
    action = d.action
    proc, bench, stubs = run_prologue(tmp_path, case)
    log = proc.stdout + proc.stderr
    assert decided_action(bench) == action.value, log
    assert proc.returncode == (0 if action.runs else action.exit_status), log
    assert (bench / "runner_started").exists() == action.runs, log
    if d.outcome is None:
        # A guard decided (marker, lease, requeue): nothing re-counted, the files as they were.
        assert (bench / WALLTIME_FILE).read_text() == f"{case.walltime}\n"
        assert (bench / RETRIES_FILE).read_text() == f"{case.retries}\n"
        assert (bench / CHAIN_FILE).exists() == bool(case.chain)
        if case.chain:
            assert (bench / CHAIN_FILE).read_text().splitlines() == list(case.chain)
    else:
        assert int((bench / WALLTIME_FILE).read_text()) == d.accumulated_walltime_s, log
        assert int((bench / RETRIES_FILE).read_text()) == d.infra_retries, log
        unknown = bench / UNKNOWN_FILE
        assert (int(unknown.read_text()) if unknown.exists() else 0) == d.unknown_links, log
        assert (bench / CHAIN_FILE).read_text().splitlines() == [*case.chain, SELF]
    calls = sbatch_calls(stubs)
    scancels = [c for c in stub_calls(stubs) if c.startswith("scancel")]
    job = bench / "job.sh"
    dependency = f"--dependency=afternotok:{SELF} --kill-on-invalid-dep=yes"
    if case.marker:  # the marker is read first: nothing queued at all
        assert calls == [], log
    else:
        # Queued before the lookup, so a link killed in its prologue keeps the chain going...
        assert calls == [f"sbatch --parsable {dependency} {job} {SELF}"], log
    if not action.runs and not case.marker:
        # ...and withdrawn again when the job decides not to run (an error exit would fire it).
        assert scancels == ["scancel 43"], log
    if action.runs:
        # The runner ran under the lease, released when it ended.
        assert not (bench / LEASE_FILE).exists(), log


def test_every_state_is_exercised() -> None:
    """The case list covers every Slurm state and every action but nothing is left out."""
    states = {parse_state(c.sacct_state)[0] for c in CASES if c.sacct_state}
    assert states == set(SlurmState)
    assert {expected(c)[0] for c in CASES} == set(Action)
    assert {expected_decision(c).outcome for c in CASES} == {*Outcome, None}
    assert set(SlurmState) > NON_TERMINAL_STATES


def test_successor_failure_warns_and_carries_on(tmp_path: Path) -> None:
    """If sbatch refuses the successor, the job warns and still runs its work."""
    proc, bench, _ = run_prologue(tmp_path, Case("TIMEOUT"), sbatch_rc=1)
    assert proc.returncode == 0
    assert CHAIN_WARNING in proc.stderr
    assert (bench / "runner_started").exists()
    assert "successor_failed" in (bench / EVENTS_FILE).read_text()


def test_success_cancels_own_successor(tmp_path: Path) -> None:
    """When the runner succeeds, the job scancels the successor it queued."""
    proc, _, stubs = run_prologue(tmp_path, Case("TIMEOUT"))
    assert proc.returncode == 0
    assert "scancel 43" in (stubs / "calls").read_text().splitlines()


def test_runner_failure_keeps_successor_and_exits_non_zero(tmp_path: Path) -> None:
    """A failing runner exits with its status and leaves the successor to run."""
    proc, _, stubs = run_prologue(tmp_path, Case("TIMEOUT"), runner_rc=3)
    assert proc.returncode == 3
    assert not any(c.startswith("scancel") for c in (stubs / "calls").read_text().splitlines())


def test_walltime_budget_lowers_time_limit(tmp_path: Path) -> None:
    """After resuming under a cap, the job lowers its own limit to the budget left."""
    case = Case("TIMEOUT", elapsed=600, walltime=0, policy=ResumePolicy(max_walltime_s=1800))
    proc, _, stubs = run_prologue(tmp_path, case)
    assert proc.returncode == 0
    assert f"scontrol update JobId={SELF} TimeLimit=20" in (stubs / "calls").read_text()


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        (WALLTIME_FILE, "12abc\n", "not a whole number"),
        (RETRIES_FILE, "\n", "not a whole number"),
        (CHAIN_FILE, "41\n4", "truncated"),
        (CHAIN_FILE, "41\nxyz\n", "bad line"),
    ],
)
def test_corrupt_state_fails_safe(tmp_path: Path, name: str, content: str, problem: str) -> None:
    """A corrupt dot-file stops the job loudly: no successor, no runner, no reset."""
    bench = tmp_path / "pre"
    bench.mkdir()
    case = Case("TIMEOUT")
    proc, bench, stubs = _run_with_file(tmp_path, case, name, content)
    assert proc.returncode == 65
    assert problem in proc.stderr
    assert not (bench / "runner_started").exists()
    assert sbatch_calls(stubs) == []
    assert (bench / name).read_text() == content  # left for a human to look at


def _run_with_file(
    tmp: Path, case: Case, name: str, content: str
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    # Run once to lay out the folder, then corrupt the file and run the same job again.
    proc, bench, stubs = run_prologue(tmp, case)
    assert proc.returncode == 0
    for leftover in ("runner_started", EVENTS_FILE, "calls"):
        (bench / leftover).unlink(missing_ok=True)
        (stubs / leftover).unlink(missing_ok=True)
    (bench / CHAIN_FILE).write_text(f"{PRED}\n")
    (bench / name).write_text(content)
    env = {
        **os.environ,
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "STUB_DIR": str(stubs),
        "SLURM_JOB_ID": SELF,
        "RUNNER_RC": "0",
    }
    proc = subprocess.run(
        ["bash", str(bench / "job.sh"), PRED], cwd=bench, env=env, capture_output=True, text=True
    )
    return proc, bench, stubs


def test_runner_arguments_stay_literal(tmp_path: Path) -> None:
    """Shell metacharacters in runner arguments and env values are carried literally."""
    bench = tmp_path / "b"
    bench.mkdir()
    evil = "$(touch " + str(tmp_path / "pwned") + ")"
    spec = JobSpec(
        run_id="rc-x",
        cluster="c",
        benchmark="b",
        remote_dir=str(bench),
        argv=("printf", "%s\\n", evil, "a b", "'q'", '"dq"', "`id`"),
        env=(("EVIL", evil),),
    )
    (bench / "job.sh").write_text(render_job_script(spec))
    proc = subprocess.run(
        ["bash", str(bench / "job.sh")], cwd=bench, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [evil, "a b", "'q'", '"dq"', "`id`"]
    assert not (tmp_path / "pwned").exists()


def test_rendered_script_is_shellcheck_clean(tmp_path: Path) -> None:
    """shellcheck finds nothing in a rendered job script (CI installs shellcheck)."""
    spec = JobSpec(
        run_id="rc-x",
        cluster="c",
        benchmark="b",
        remote_dir="/w/rc-x/c/b",
        argv=("python3", "x.py", "+a=1"),
        env=(("A", "1"),),
        secret_env_names=("TOKEN",),
        policy=ResumePolicy(max_walltime_s=3600),
        slurm=SlurmDirectives(partition="p", time_s=600, extra_args=("--gpus=1",)),
    )
    path = tmp_path / "job.sh"
    path.write_text(render_job_script(spec))
    proc = subprocess.run(["shellcheck", "-x", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_walltime_cap_is_enforced_to_the_second(tmp_path: Path) -> None:
    """A runner still going when the budget runs out is stopped; the chain stops (exit 0)."""
    case = Case("TIMEOUT", elapsed=97, walltime=0, policy=ResumePolicy(max_walltime_s=100))
    argv = ("sh", "-c", "touch runner_started; sleep 30")
    proc, bench, stubs = run_prologue(tmp_path, case, argv=argv)
    assert proc.returncode == 0, proc.stderr
    assert (bench / "runner_started").exists()
    decided = [
        e.split()[3] for e in (bench / EVENTS_FILE).read_text().splitlines() if " decided " in e
    ]
    assert decided == ["resume", "stop_walltime"]
    assert int((bench / WALLTIME_FILE).read_text()) >= 100
    assert "scancel 43" in (stubs / "calls").read_text().splitlines()


def test_requeued_job_keeps_its_earlier_successor(tmp_path: Path) -> None:
    """A requeued job whose successor is still queued queues no second one."""
    case = Case("FAILED", chain=(PRED, SELF), queued=(("43", "PENDING"),))
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / EVENTS_FILE).write_text(f"1 {SELF} successor 43\n")
    proc, bench, stubs = run_prologue(tmp_path, case, existing=True)
    assert proc.returncode == 0, proc.stderr
    assert sbatch_calls(stubs) == []
    assert (bench / "runner_started").exists()
    assert "successor from before the requeue is still queued" in proc.stderr
