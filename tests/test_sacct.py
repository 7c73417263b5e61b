"""sacct/squeue/sbatch parsers, fed literal recorded output (steps, arrays, noise, garbage)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remote_chain.core.models import JOB_ID_RE, JobId, SlurmState
from remote_chain.core.sacct import (
    QueuedJob,
    parse_sacct,
    parse_squeue,
    parse_state,
    parse_time_used,
)

# Recorded on the dev cluster (Slurm 22.05), -X --parsable2 --noheader with SACCT_FIELDS.
RECORDED = """\
Welcome to the remote-chain dev cluster (noise line)
17|TIMEOUT|78|0:0|TimeLimit|2026-11-29T20:01:02|2026-11-29T20:02:20
18|CANCELLED by 1001|3|0:15|None|2026-11-29T20:02:21|2026-11-29T20:02:24
19|COMPLETED|12|0:0|None|2026-11-29T20:02:30|2026-11-29T20:02:42
20|PENDING|0|0:0|Dependency|Unknown|Unknown
21_3|FAILED|1|1:0|NonZeroExitCode|2026-11-29T20:03:00|2026-11-29T20:03:01
22|OUT_OF_MEMORY|5|0:125|OutOfMemory|2026-11-29T20:03:00|2026-11-29T20:03:05
garbage|line
23|SOMETHING_NEW|5|0:0|None|x|y
"""


def test_parse_recorded_sacct() -> None:
    """Every recorded line parses; noise and garbage are skipped, never raised on."""
    recs = parse_sacct(RECORDED)
    assert list(recs) == ["17", "18", "19", "20", "21_3", "22", "23"]
    assert recs[JobId("17")].state is SlurmState.TIMEOUT
    assert recs[JobId("17")].elapsed_s == 78
    assert (recs[JobId("18")].state, recs[JobId("18")].cancelled_by) == (SlurmState.CANCELLED, 1001)
    assert recs[JobId("20")].reason == "Dependency"
    assert recs[JobId("22")].state is SlurmState.OUT_OF_MEMORY
    assert recs[JobId("23")].state is SlurmState.UNKNOWN


def test_requeued_job_last_line_wins() -> None:
    """With --duplicates a requeued job appears twice; the newest (last) line wins."""
    text = "30|REQUEUED|10|0:0|None|a|b\n30|RUNNING|2|0:0|None|c|Unknown\n"
    assert parse_sacct(text)[JobId("30")].state is SlurmState.RUNNING


def test_parse_state_keeps_the_uid() -> None:
    """'CANCELLED by N' keeps N; a plain state has no uid; junk is UNKNOWN."""
    assert parse_state("CANCELLED by 0") == (SlurmState.CANCELLED, 0)
    assert parse_state("CANCELLED") == (SlurmState.CANCELLED, None)
    assert parse_state("COMPLETED") == (SlurmState.COMPLETED, None)
    assert parse_state("") == (SlurmState.UNKNOWN, None)
    assert parse_state("RUNNING+") == (SlurmState.RUNNING, None)


def test_squeue_and_sbatch() -> None:
    """squeue's id|state|reason|start|used|workdir|name, each field where it belongs."""
    q = parse_squeue(
        "noise\n41|PENDING|Dependency|2026-12-01T10:00:00|0:00|/w/x|rc-x:gpqa\n"
        "42|RUNNING|None|2026-12-01T09:00:00|1-02:03:04|/w|rc-x:a|b\n"
        "43|RUNNING|None|N/A|INVALID|/w|rc-x:c\n"
    )
    # A pending job's %S is a forecast, not a start: as sacct's "Unknown", it is "".
    assert q[JobId("41")] == QueuedJob(SlurmState.PENDING, "Dependency", "/w/x", "rc-x:gpqa", "", 0)
    assert q[JobId("42")].name == "rc-x:a|b"
    assert q[JobId("42")].start == "2026-12-01T09:00:00"
    assert q[JobId("42")].elapsed_s == 93784
    assert q[JobId("43")].elapsed_s is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0:00", 0), ("5:07", 307), ("1:00:01", 3601), ("2-00:00:00", 172800), (" 59:59 ", 3599)],
)
def test_time_used(text: str, seconds: int) -> None:
    """squeue's %M, [days-][hours:]minutes:seconds, in seconds."""
    assert parse_time_used(text) == seconds


@pytest.mark.parametrize("text", ["", "N/A", "INVALID", "1:2", "1-2", "a:00", "1:00:00:00"])
def test_time_used_garbage(text: str) -> None:
    """Anything that is not a duration is None, never an error or a guess."""
    assert parse_time_used(text) is None


@given(st.text())
def test_parsers_never_raise(text: str) -> None:
    """Arbitrary text never crashes a parser."""
    parse_sacct(text)
    parse_squeue(text)
    assert isinstance(parse_state(text)[0], SlurmState)


@given(st.text(alphabet=st.sampled_from("0123456789_+ x\u0663\u00b2"), max_size=8))
def test_squeue_takes_exactly_the_job_ids_sacct_takes(job_id: str) -> None:
    """parse_squeue's shortcut for plain ids accepts what JOB_ID_RE accepts, and only that
    (not "٣" or "²", which str.isdigit calls digits)."""
    line = f"{job_id}|PENDING|None|N/A|0:00|/w|n"
    assert (JobId(job_id) in parse_squeue(line)) == bool(JOB_ID_RE.match(job_id))
    assert (JobId(job_id) in parse_sacct(f"{job_id}|FAILED|1|1:0|None|x|y")) == bool(
        JOB_ID_RE.match(job_id)
    )
