"""resume keeps the caps: which jobs are not yet counted, their walltime over every
run, and when a chain is refused: pure, from literal event and sacct lines."""

from __future__ import annotations

import subprocess

import pytest

from remote_chain.core.chainstatus import parse_events
from remote_chain.core.models import ChainStateName, JobId
from remote_chain.execs.resume import (
    ChainFacts,
    ResumeCaps,
    ResumeFacts,
    act_head,
    elapsed_by_job,
    parse_facts,
    plan_resume,
    uncounted_jobs,
    updated_record,
)
from remote_chain.protocol.wire import encode

STOPPED, FAILED = ChainStateName.STOPPED, ChainStateName.FAILED
# sacct -X --duplicates --parsable2 --noheader --format=JobIDRaw,State,ElapsedRaw,ExitCode,
# Reason,Start,End: job 11 was requeued once (its first run shows REQUEUED, 22.05 and 24.11).
SACCT = """\
10|TIMEOUT|100|0:0|None|2026-01-01T00:00:00|2026-01-01T00:01:40
11|REQUEUED|40|0:0|None|2026-01-01T00:02:00|2026-01-01T00:02:40
11|TIMEOUT|70|0:0|None|2026-01-01T00:03:00|2026-01-01T00:04:10
garbage line
"""


def ids(*values: str) -> list[JobId]:
    return [JobId(v) for v in values]


def test_each_link_counts_its_predecessor_so_the_last_is_uncounted() -> None:
    """A link's decided event names the predecessor it counted; the last link is left."""
    events = parse_events(
        "1 10 decided start none none 0 0\n2 11 decided resume 10 TIMEOUT 100 0\n"
    )
    assert uncounted_jobs(ids("10", "11"), events) == ["11"]


def test_budget_kill_and_earlier_resume_count_a_job() -> None:
    """A link killed at the budget counted itself; a resume's counted_by_resume counts a job."""
    text = (
        "1 10 decided start none none 0 0\n"
        "2 11 decided resume 10 TIMEOUT 100 0\n"
        "3 11 decided stop_walltime budget 10 160 0\n"
        "4 12 counted_by_resume 5\n"
    )
    assert uncounted_jobs(ids("10", "11", "12", "13"), parse_events(text)) == ["13"]


def test_a_yielding_link_counts_nothing() -> None:
    """A link that yields to a requeued predecessor counted nothing (it is not in the chain)."""
    events = parse_events("1 10 decided start none none 0 0\n2 12 decided yield 10 none\n")
    assert uncounted_jobs(ids("10"), events) == ["10"]


def test_walltime_sums_every_run_of_a_requeued_job() -> None:
    """--duplicates rows of one id add up: a requeue never grants a fresh budget."""
    assert elapsed_by_job(SACCT) == {"10": 100, "11": 110}


def facts(**over: object) -> ResumeFacts:
    base = {
        "benchmark": "b",
        "resumable": True,
        "max_retries": 1,
        "max_walltime_s": 300,
        "chain": "10\n11\n",
        "events": "100 10 decided start none none 0 0\n200 11 decided resume 10 TIMEOUT 100 0\n",
        "walltime": "100",
        "retries": "0",
    }
    # ChainFacts fields by keyword, one override per test; typing them would need a TypedDict
    # kept in step with ChainFacts by hand.
    return ResumeFacts({"b": ChainFacts(**{**base, **over})}, sacct=SACCT)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("state", "caps", "over", "refusal"),
    [
        pytest.param(STOPPED, ResumeCaps(), {}, "--max-walltime DURATION", id="stopped-no-cap"),
        pytest.param(
            STOPPED, ResumeCaps(max_walltime_s=210), {}, "used (210s", id="stopped-cap-reached"
        ),
        pytest.param(FAILED, ResumeCaps(), {}, "--max-retries N", id="failed-no-grant"),
        pytest.param(
            FAILED,
            ResumeCaps(max_retries=2),
            {"retries": "2"},
            "grants nothing",
            id="failed-grant-too-small",
        ),
        pytest.param(
            FAILED,
            ResumeCaps(reset_retries=True),
            {"max_walltime_s": 200},
            "already reaches max_walltime 200s",
            id="failed-walltime-reached",
        ),
        pytest.param(
            FAILED, ResumeCaps(reset_retries=True), {"walltime": "08x"}, "corrupt", id="corrupt"
        ),
        pytest.param(
            FAILED,
            ResumeCaps(max_retries=3),
            {"resumable": False},
            "resumable benchmarks only",
            id="caps-on-plain",
        ),
    ],
)
def test_refusals(
    state: ChainStateName, caps: ResumeCaps, over: dict[str, object], refusal: str
) -> None:
    """Each way a resume would overrun a cap is refused with a message saying what to give."""
    plan = plan_resume({"b": state}, facts(**over), caps)
    assert plan.steps == {}
    assert refusal in plan.refused["b"]


def test_a_granted_resume_counts_the_last_link() -> None:
    """Resuming a stopped chain with a raised cap counts job 11's two runs (110 s)."""
    plan = plan_resume({"b": STOPPED}, facts(), ResumeCaps(max_walltime_s=600))
    step = plan.steps["b"]
    assert step.counted == (("11", 110),)
    assert (step.new_walltime, step.new_retries, step.cap_walltime_s) == (210, 0, 600)


def test_without_accounting_the_events_span_is_counted() -> None:
    """No sacct row: the job's own events give a lower bound of its run time."""
    plain = facts()
    no_sacct = ResumeFacts(plain.chains, sacct=None)
    step = plan_resume({"b": STOPPED}, no_sacct, ResumeCaps(max_walltime_s=600)).steps["b"]
    assert step.counted == (("11", 0),)  # one event of job 11: a span of 0 s
    with_runner = facts(events=plain.chains["b"].events + "260 11 runner_exit 0\n")
    step = plan_resume(
        {"b": STOPPED}, ResumeFacts(with_runner.chains), ResumeCaps(max_walltime_s=600)
    ).steps["b"]
    assert step.counted == (("11", 60),)


def test_a_plain_chain_resumes_as_before() -> None:
    """A non-resumable chain has no caps: it is queued again without writes."""
    plan = plan_resume({"b": FAILED}, facts(resumable=False), ResumeCaps())
    assert plan.plain == ("b",)
    assert plan.steps == {}


def test_record_gets_the_resume_appended() -> None:
    """The run's record keeps every resume's caps under `resumes`; a broken record is left."""
    step = plan_resume({"b": STOPPED}, facts(), ResumeCaps(max_walltime_s=600)).steps["b"]
    record = updated_record('{"run_id": "r", "chains": []}', [step], at="T")
    assert record is not None
    assert '"resumes": [{"at": "T", "chains": [{"benchmark": "b"' in record
    assert updated_record("{broken", [step], at="T") is None


RECORD = '{"run_id": "r"}'
CHAIN = "10\n11\n"
WALLTIME = "100\r\n"


def test_parse_facts_reads_caps_files_sacct_and_record() -> None:
    """The read exec's lines: job.sh caps, state files (blanks dropped), sacct, the record."""
    text = "\n".join(
        [
            "Welcome (noise line)",
            encode("RECORD", "123-45", RECORD.encode()).rstrip(),
            "CAPS\tb\tRC_RESUMABLE=1 RC_MAX_RETRIES=2 RC_MAX_WALLTIME='' ",
            encode("FILE", "b", "chain", CHAIN.encode()).rstrip(),
            encode("FILE", "b", "walltime", WALLTIME.encode()).rstrip(),
            "NOBENCH\tgone",
            encode("SACCT", "ok", SACCT).rstrip(),
            "DONE",
        ]
    )
    facts = parse_facts(text)
    assert facts.record == '{"run_id": "r"}'
    assert facts.record_sum == "123-45"
    assert facts.missing == ("gone",)
    assert facts.sacct == SACCT
    chain = facts.chains["b"]
    assert (chain.resumable, chain.max_retries, chain.max_walltime_s) == (True, 2, None)
    assert (chain.chain, chain.walltime, chain.retries) == ("10\n11\n", "100", "")


def test_act_head_is_bash_arrays_in_benchmark_order() -> None:
    """The act exec's per-benchmark arrays: a plain chain has empty cells and step `plain`."""
    step = plan_resume({"b": STOPPED}, facts(), ResumeCaps(max_walltime_s=600)).steps["b"]
    head = "\n".join(act_head([step], ["p", "b"]))
    out = subprocess.run(
        ["bash", "-c", head + '\nprintf "%s|" "${RC_STEP[@]}" "${RC_NEW_WALLTIME[@]}" '
         '"${RC_COUNTED[@]}" "${RC_CAP_WALLTIME[@]}" "${RC_CAP_RETRIES[@]}"'],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert out == "plain|caps||210||11:110||600||keep|"
