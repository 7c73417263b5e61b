"""PURE: summaries of timed samples, RTT-equivalents, round trips seen at the proxy, the table.

No I/O here, so the arithmetic the verdicts rest on can be read (and tested) on its own.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

RTT_S = 0.050
"""The emulated round-trip time: 25 ms each way through the delaying proxy."""


@dataclass(frozen=True)
class Summary:
    """Median, min and max of ``n`` samples (seconds unless a row says otherwise)."""

    n: int
    median: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Summary:
        vals = sorted(values)
        if not vals:
            raise ValueError("no samples")
        return cls(len(vals), statistics.median(vals), vals[0], vals[-1])

    def to_json(self) -> dict[str, object]:
        return {"n": self.n, "median": self.median, "min": self.min, "max": self.max}


def rtt_equivalents(t_delayed: float, t_plain: float, rtt: float = RTT_S) -> float:
    """(t_50 - t_0) / 50 ms: how many round trips a flow waits for."""
    return (t_delayed - t_plain) / rtt


def paired_rtt_equivalents(
    delayed: Sequence[float], plain: Sequence[float], rtt: float = RTT_S
) -> Summary:
    """RTT-equivalents of samples taken in interleaved pairs (0 ms, 50 ms, 0 ms, 50 ms, ...).

    The median of per-pair differences cancels slow drifts of the shared machine's load (other
    engineers run tests on the same dev cluster), which a difference of medians would not.
    """
    n = min(len(delayed), len(plain))
    return Summary.of((delayed[i] - plain[i]) / rtt for i in range(n))


@dataclass(frozen=True)
class Chunk:
    """One read by the proxy: when (CLOCK_MONOTONIC), on which connection, which way, how much."""

    t: float
    conn: int
    up: bool  # client -> server
    size: int


def client_flights(chunks: Sequence[Chunk], rtt: float = RTT_S) -> int:
    """Client flights the server answered: the round trips a flow paid for, counted.

    Per connection, a client->server chunk starts a new flight when the server has said
    something since the client's last chunk and the client's previous flight began at least
    0.8 RTT earlier (a reply cannot come back sooner through the delaying proxy, so chunks
    closer together were sent without waiting). A flight counts when a server chunk follows
    it: the client's last goodbye (channel close, disconnect) waits for nothing.
    """
    answered = 0
    by_conn: dict[int, list[Chunk]] = {}
    for c in sorted(chunks, key=lambda c: c.t):
        by_conn.setdefault(c.conn, []).append(c)
    for seq in by_conn.values():
        last_flight: float | None = None
        heard = True
        pending = False  # the current flight has not been answered yet
        for c in seq:
            if not c.up:
                heard = True
                if pending:
                    answered += 1
                    pending = False
                continue
            if heard and (last_flight is None or c.t - last_flight >= 0.8 * rtt):
                last_flight = c.t
                pending = True
            heard = False
    return answered


@dataclass(frozen=True)
class Row:
    """One line of the table: a figure, what it is compared with, and the target it serves."""

    key: str
    figure: str
    value: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    met: bool | None = None  # None: informational, no target on this row
    data: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "figure": self.figure,
            "value": self.value,
            "baseline": self.baseline,
            "ratio": self.ratio,
            "target": self.target,
            "met": self.met,
            "data": self.data,
        }


RETIRED = "retired (reported)"
"""The word of a target the design no longer aims at: its figure is still measured and shown."""


@dataclass(frozen=True)
class Verdict:
    """The final line of one target: met or NOT met, with the evidence in one sentence.

    A retired target (``retired=True``) keeps its line and its figure, judged by nothing: its
    ``met`` is None and its word says so, so every line that reads met or NOT met is a target
    the design still aims at.
    """

    target: str
    met: bool | None  # None: could not be measured (the reason is in ``detail``), or retired
    detail: str
    retired: bool = False

    @classmethod
    def reported(cls, target: str, detail: str) -> Verdict:
        """The line of a retired target: its figure, no judgement."""
        return cls(target, None, detail, retired=True)

    @property
    def word(self) -> str:
        if self.retired:
            return RETIRED
        return {True: "met", False: "NOT met", None: "NOT measured"}[self.met]

    def to_json(self) -> dict[str, object]:
        return {
            "target": self.target,
            "met": self.met,
            "verdict": self.word,
            "retired": self.retired,
            "detail": self.detail,
        }


def seconds(s: Summary) -> str:
    """``0.612 s [0.598-0.640]``: median, then min-max."""
    return f"{s.median:.3f} s [{s.min:.3f}-{s.max:.3f}]"


def plain(s: Summary, unit: str = "", digits: int = 2) -> str:
    return f"{s.median:.{digits}f}{unit} [{s.min:.{digits}f}-{s.max:.{digits}f}]"


def times(x: float) -> str:
    return f"{x:.2f}x"


def render_table(rows: Sequence[Row], verdicts: Sequence[Verdict]) -> str:
    """A plain-text table (fixed-width columns) and one verdict line per target."""
    head = ("figure", "value (median [min-max])", "baseline", "ratio", "target", "")
    cells = [head] + [
        (
            r.figure,
            r.value,
            r.baseline,
            r.ratio,
            r.target,
            _verdict(r.met),
        )
        for r in rows
    ]
    lines = _columns(cells)
    lines.append("")
    width = max([14, *(len(v.word) + 2 for v in verdicts)])
    lines += [f"{v.word:<{width}}{v.target}: {v.detail}" for v in verdicts]
    return "\n".join(lines)


@dataclass(frozen=True)
class Compared:
    """One figure of the before/after mode: the old code's and the new code's, side by side.

    ``ratio`` is new / old of the paired rounds (a median of per-round ratios where the figure
    has rounds), so a value above 1 means the new code takes more.
    """

    key: str
    figure: str
    old: str
    new: str
    ratio: str = ""
    target: str = ""
    met: bool | None = None  # None: reported, no target on this figure
    data: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "figure": self.figure,
            "old": self.old,
            "new": self.new,
            "ratio_new_over_old": self.ratio,
            "target": self.target,
            "met": self.met,
            "data": self.data,
        }


def render_comparison(rev: str, rows: Sequence[Compared]) -> str:
    """The before/after table: one line per figure, the old code's value beside the new's."""
    head = ("figure", f"old ({rev})", "new", "new/old", "target", "")
    cells = [head] + [
        (
            r.figure,
            r.old,
            r.new,
            r.ratio,
            r.target,
            _verdict(r.met),
        )
        for r in rows
    ]
    lines = _columns(cells)
    return "\n".join(lines)


def _verdict(met: bool | None) -> str:
    return "" if met is None else ("met" if met else "NOT met")


def _columns(cells: Sequence[tuple[str, ...]]) -> list[str]:
    """Rows of cells as aligned text columns, a rule of dashes under the first (the head)."""
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    lines = []
    for i, c in enumerate(cells):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(c, widths, strict=True)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines
