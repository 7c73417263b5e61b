"""The bench's arithmetic (scripts/benchlib/stats.py): what its verdicts rest on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parent.parent / "scripts"))

from benchlib.stats import (  # scripts/ is not a package: found through sys.path above
    RETIRED,
    Chunk,
    Compared,
    Row,
    Summary,
    Verdict,
    client_flights,
    paired_rtt_equivalents,
    render_comparison,
    render_table,
    rtt_equivalents,
)

RTT = 0.050


def test_summary_is_median_min_max() -> None:
    """A summary holds the median and the extremes of its samples."""
    s = Summary.of([3.0, 1.0, 2.0, 10.0])
    assert (s.n, s.median, s.min, s.max) == (4, 2.5, 1.0, 10.0)


def test_summary_of_nothing_is_an_error() -> None:
    """No samples is a bug in the bench, not a zero."""
    with pytest.raises(ValueError, match="no samples"):
        Summary.of([])


def test_rtt_equivalents_follow_the_issue_definition() -> None:
    """(t_50 - t_0) / 50 ms."""
    assert rtt_equivalents(0.45, 0.15) == pytest.approx(6.0)


def test_paired_rtt_equivalents_cancel_a_drift() -> None:
    """Pairs taken under the same load give the same answer whatever the load did."""
    plain = [0.1, 0.5, 0.3]  # the machine got busier and calmer again
    delayed = [p + 2 * RTT for p in plain]
    assert paired_rtt_equivalents(delayed, plain).median == pytest.approx(2.0)


def _exchange(*steps: tuple[float, bool], conn: int = 1) -> list[Chunk]:
    return [Chunk(t, conn, up, 10) for t, up in steps]


def test_each_answered_flight_is_one_round_trip() -> None:
    """Three request/answer exchanges spaced by an RTT are three round trips."""
    chunks = _exchange(
        (0.000, True), (0.025, False), (0.050, True), (0.075, False), (0.100, True), (0.125, False)
    )
    assert client_flights(chunks) == 3


def test_pipelined_chunks_are_one_flight() -> None:
    """Chunks sent back to back, before any answer could come back, are one round trip."""
    chunks = _exchange((0.000, True), (0.001, True), (0.030, False), (0.031, False))
    assert client_flights(chunks) == 1


def test_a_goodbye_nobody_answers_is_not_a_round_trip() -> None:
    """The client's last channel close waits for nothing."""
    chunks = _exchange((0.000, True), (0.025, False), (0.050, True))
    assert client_flights(chunks) == 1


def test_a_chunk_sooner_than_a_reply_could_come_is_no_new_flight() -> None:
    """An answer to something else (the server spoke first) does not start a round trip."""
    chunks = _exchange((0.000, True), (0.005, False), (0.010, True), (0.030, False))
    assert client_flights(chunks) == 1


def test_connections_are_counted_apart() -> None:
    """Round trips of two connections add up; interleaving does not merge them."""
    a = _exchange((0.000, True), (0.025, False), (0.050, True), (0.075, False), conn=1)
    b = _exchange((0.010, True), (0.035, False), conn=2)
    assert client_flights(a + b) == 3


def test_the_table_ends_with_one_verdict_line_per_target() -> None:
    """Every target gets a final met / NOT met / NOT measured line."""
    rows = [Row("k", "P9 something", "1.000 s [1.000-1.000]", "2.000 s", "2.00x", ">= 2x", True)]
    verdicts = [
        Verdict("P9 fast", True, "2x"),
        Verdict("P9 slow", False, "1x"),
        Verdict("P9 absent", None, "no CLI"),
    ]
    lines = render_table(rows, verdicts).splitlines()
    assert lines[0].split()[0] == "figure"
    assert "P9 something" in lines[2]
    assert lines[2].rstrip().endswith("met")
    assert [line.split("  ")[0].strip() for line in lines[-3:]] == [
        "met",
        "NOT met",
        "NOT measured",
    ]


def test_a_retired_target_is_reported_never_judged() -> None:
    """A retired target keeps its line and figure, and reads neither met nor NOT met."""
    retired = Verdict.reported("P9 cold status <= 1.4x a bare ssh", "1.80x")
    assert retired.met is None
    assert retired.word == RETIRED
    assert retired.to_json()["verdict"] == RETIRED
    lines = render_table([], [Verdict("P1 fast", True, "6x"), retired]).splitlines()
    assert lines[-2].startswith("met ")
    assert lines[-1].startswith(RETIRED)
    assert lines[-1].endswith("P9 cold status <= 1.4x a bare ssh: 1.80x")


def test_the_comparison_puts_the_old_code_beside_the_new() -> None:
    """The before/after table names the old revision and shows old, new, ratio and verdict."""
    rows = [
        Compared("ab.p7.wall", "P7 wall", "1.000 s", "1.100 s", "1.10", "new <= 1.25x old", True),
        Compared("ab.local.status", "local time", "0.200 s", "0.300 s", "+0.100 s"),
    ]
    lines = render_comparison("b50087e", rows).splitlines()
    assert lines[0].split()[:3] == ["figure", "old", "(b50087e)"]
    assert lines[2].split() == [
        "P7",
        "wall",
        "1.000",
        "s",
        "1.100",
        "s",
        "1.10",
        "new",
        "<=",
        "1.25x",
        "old",
        "met",
    ]
    assert lines[3].rstrip().endswith("+0.100 s")
    assert rows[0].to_json()["ratio_new_over_old"] == "1.10"
