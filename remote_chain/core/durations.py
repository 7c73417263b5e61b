"""PURE: Slurm time strings, parsed to seconds and rendered back.

Slurm's ``--time`` accepts exactly six forms (sbatch(1), "-t, --time"): ``MM``, ``MM:SS``,
``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``. A bare number is minutes, which is also
what an ``int`` means here. Slurm itself is lenient about out-of-range fields (``10:99`` is
quietly 11 minutes 39 seconds); we are not, because a config that says ``10:99`` is a typo.

Only ``ValueError`` ever leaves ``parse_duration``: config validation turns it into a
``ConfigError`` naming the field.
"""

from __future__ import annotations

import contextlib
import re

# A year is far beyond any partition's MaxTime; anything larger is a typo (or an attempt to
# make the walltime arithmetic overflow a bash integer on the cluster).
MAX_DURATION_S = 365 * 24 * 3600

DURATION_FORMS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (a bare number is minutes)"

# ASCII digits only: ``\d`` and ``int()`` would also take "١٢" or "1_000".
_NUM = r"([0-9]{1,9})"
_FORMS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(rf"{_NUM}"), ("minutes",)),
    (re.compile(rf"{_NUM}:{_NUM}"), ("minutes", "seconds")),
    (re.compile(rf"{_NUM}:{_NUM}:{_NUM}"), ("hours", "minutes", "seconds")),
    (re.compile(rf"{_NUM}-{_NUM}"), ("days", "hours")),
    (re.compile(rf"{_NUM}-{_NUM}:{_NUM}"), ("days", "hours", "minutes")),
    (re.compile(rf"{_NUM}-{_NUM}:{_NUM}:{_NUM}"), ("days", "hours", "minutes", "seconds")),
)
_UNIT_S = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}


def _fail(value: object, field: str, why: str = "") -> ValueError:
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    prefix = f"{field}: " if field else ""
    reason = f" ({why})" if why else ""
    return ValueError(
        f"{prefix}invalid duration {shown}{reason}; expected {DURATION_FORMS}, at most 365 days"
    )


def parse_duration(value: str | int, *, field: str = "") -> int:
    """Seconds in a Slurm time string (or an int of minutes); ``ValueError`` for anything else."""
    # bool is an int subclass; `time: true` is a mistake, not one minute.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _fail(value, field, f"a {type(value).__name__}, not a string or whole minutes")
    if isinstance(value, int):
        if value < 0:
            raise _fail(value, field, "negative")
        if value > MAX_DURATION_S // 60:
            raise _fail(value, field, "longer than 365 days")
        return value * 60
    for pattern, units in _FORMS:
        match = pattern.fullmatch(value)
        if match is None:
            continue
        parts = dict(zip(units, (int(group) for group in match.groups()), strict=True))
        # The leading field may be large (Slurm reads "120" as 2 hours, "48:00:00" as 2 days);
        # every field after it is bounded by its unit, as on a clock.
        if len(units) > 1 and parts.get("seconds", 0) >= 60:
            raise _fail(value, field, "seconds must be below 60")
        if units[0] != "minutes" and parts.get("minutes", 0) >= 60:
            raise _fail(value, field, "minutes must be below 60")
        if "days" in parts and parts["hours"] >= 24:
            raise _fail(value, field, "hours must be below 24 after a day count")
        seconds = sum(_UNIT_S[unit] * amount for unit, amount in parts.items())
        if seconds > MAX_DURATION_S:
            raise _fail(value, field, "longer than 365 days")
        return seconds
    raise _fail(value, field)


def format_duration(seconds: int) -> str:
    """Slurm's ``D-HH:MM:SS``, or ``HH:MM:SS`` under a day; ``parse_duration`` reads it back."""
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 0:
        raise ValueError(f"a duration is a non-negative number of seconds, not {seconds!r}")
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


_PERSIST_RE = re.compile(r"([0-9]{1,7})([smhd])")
_PERSIST_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
PERSIST_FORMS = '"90s", "10m", "2h", "1d", a Slurm duration, or "0"/"off" for none'


def parse_persist(value: object) -> int:
    """Seconds the persistent connection (``persist``) lives idle; 0 is off.

    ``90s``, ``10m``, ``2h``, ``1d``, or any Slurm form (a bare number is minutes).
    """
    if isinstance(value, str):
        text = value.strip().lower()
        if text in {"0", "off", "no", "false", ""}:
            return 0
        match = _PERSIST_RE.fullmatch(text)
        if match:
            seconds = int(match.group(1)) * _PERSIST_UNIT_S[match.group(2)]
            if seconds > MAX_DURATION_S:
                raise ValueError(f"{value!r} is longer than a year")
            return seconds
    if isinstance(value, str | int) and not isinstance(value, bool):
        with contextlib.suppress(ValueError):
            return parse_duration(value)
    raise ValueError(f"{value!r} is not a duration: use {PERSIST_FORMS}")
