"""Slurm durations: every accepted form, every rejected one, and the round trip."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remote_chain.core.durations import (
    DURATION_FORMS,
    MAX_DURATION_S,
    format_duration,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        # MM: minutes, unbounded as in Slurm ("120" is two hours)
        ("0", 0),
        ("5", 300),
        ("120", 7200),
        # MM:SS
        ("1:30", 90),
        ("90:00", 5400),
        ("00:59", 59),
        # HH:MM:SS, hours unbounded (the spec's own example is 48:00:00)
        ("04:00:00", 14400),
        ("48:00:00", 172800),
        ("0:00:01", 1),
        # D-HH
        ("2-12", 2 * 86400 + 12 * 3600),
        ("0-23", 23 * 3600),
        # D-HH:MM
        ("1-02:03", 86400 + 2 * 3600 + 3 * 60),
        # D-HH:MM:SS
        ("1-02:03:04", 86400 + 2 * 3600 + 3 * 60 + 4),
        ("365-00:00:00", MAX_DURATION_S),
    ],
)
def test_parse_accepts_every_slurm_form(text: str, seconds: int) -> None:
    """Each of Slurm's six time forms parses to the seconds Slurm would give it."""
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("minutes", "seconds"), [(0, 0), (1, 60), (240, 14400)])
def test_parse_reads_an_int_as_minutes(minutes: int, seconds: int) -> None:
    """A bare int means minutes, as `sbatch --time=240` does."""
    assert parse_duration(minutes) == seconds


BAD: list[object] = [
    "",
    " ",
    "-1",
    "-5:00",
    "abc",
    "1h",
    "4 hours",
    " 5",
    "5 ",
    "5\n",
    "1.5",
    "1e3",
    "0x10",
    "1_000",
    "\u0661\u0662",  # Arabic-Indic digits: int() would take them
    "\uff11\uff12",  # fullwidth digits
    "1:",
    ":30",
    "1::30",
    "1:2:3:4",
    "10:99",  # MM:SS seconds >= 60
    "1:60:00",  # HH:MM:SS minutes >= 60
    "1:00:60",  # HH:MM:SS seconds >= 60
    "1-24",  # D-HH hours >= 24
    "1-00:60",
    "1-00:00:60",
    "1-",
    "-1-00",
    "1-2-3",
    "1:00-00",
    "366-00",  # beyond a year
    "365-00:00:01",
    "9999999999",
    "UNLIMITED",  # Slurm takes it; a config should not
    "infinite",
    -1,
    MAX_DURATION_S // 60 + 1,
    True,
    False,
    None,
    1.5,
    b"10",
    ["10"],
]


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_parse_rejects_everything_else(value: object) -> None:
    """Other forms, out-of-range fields and non-str/int values: ValueError listing the forms."""
    with pytest.raises(ValueError, match="MM:SS") as info:
        # Deliberately outside the annotation (YAML/env hand it anything): refused at runtime.
        parse_duration(value)  # type: ignore[arg-type]
    assert DURATION_FORMS in str(info.value)


def test_parse_error_names_the_field() -> None:
    """The field given by the caller leads the message."""
    with pytest.raises(ValueError, match=r"^slurm\.time: invalid duration '10:99'"):
        parse_duration("10:99", field="slurm.time")


def test_parse_error_truncates_a_huge_value() -> None:
    """A megabyte of garbage is not echoed back whole."""
    with pytest.raises(ValueError, match=r"\.\.\.") as info:
        parse_duration("x" * 1_000_000)
    assert len(str(info.value)) < 300


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "00:00:00"),
        (59, "00:00:59"),
        (3600, "01:00:00"),
        (86399, "23:59:59"),
        (86400, "1-00:00:00"),
        (172800 + 61, "2-00:01:01"),
        (MAX_DURATION_S, "365-00:00:00"),
    ],
)
def test_format_renders_slurm_time(seconds: int, text: str) -> None:
    """HH:MM:SS under a day, D-HH:MM:SS from a day on."""
    assert format_duration(seconds) == text


@pytest.mark.parametrize("value", [-1, True, 1.5, "60"], ids=repr)
def test_format_rejects_non_durations(value: object) -> None:
    """Negative numbers, bools, floats and strings are not durations in seconds."""
    with pytest.raises(ValueError, match="non-negative"):
        # Deliberately outside the annotation: the runtime refusal is what is tested.
        format_duration(value)  # type: ignore[arg-type]


@given(st.integers(min_value=0, max_value=MAX_DURATION_S))
def test_format_then_parse_round_trips(seconds: int) -> None:
    """parse(format(s)) == s for every duration up to a year."""
    assert parse_duration(format_duration(seconds)) == seconds


@given(
    st.integers(0, 364),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
)
def test_parse_matches_clock_arithmetic(days: int, hours: int, minutes: int, secs: int) -> None:
    """D-HH:MM:SS means days*86400 + hours*3600 + minutes*60 + seconds."""
    text = f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    assert parse_duration(text) == days * 86400 + hours * 3600 + minutes * 60 + secs


_DURATIONISH = st.text(alphabet="0123456789:- \n+.x", max_size=16)


@given(st.one_of(st.text(), _DURATIONISH, st.integers(), st.none(), st.floats(), st.booleans()))
def test_parse_raises_only_value_error(value: object) -> None:
    """Whatever it is fed, parse_duration returns seconds in range or raises ValueError."""
    try:
        # Any value on purpose, not only the annotated str | int: totality is the property.
        seconds = parse_duration(value)  # type: ignore[arg-type]
    except ValueError:
        return
    assert 0 <= seconds <= MAX_DURATION_S


def test_pure_modules_import_no_io_libraries() -> None:
    """durations and yamlload stay pure: no anyio, asyncssh, structlog or tenacity."""
    code = (
        "import sys, remote_chain.core.durations, remote_chain.config.yamlload;"
        "bad = {'anyio', 'asyncssh', 'structlog', 'tenacity'} & set(sys.modules);"
        "print(sorted(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
