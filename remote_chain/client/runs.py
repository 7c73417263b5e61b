"""The local run index as something users manage: list, forget, prune, last known states.

``remote-chain runs`` lists the index without SSH (each entry keeps the chain states that the
last ``status``/``wait`` saw); ``--refresh`` reads them again first. ``runs forget`` and
``runs prune`` remove entries of this machine's index only: nothing on any cluster is touched.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import structlog

from remote_chain.client.index import ISO_UTC, IndexedRun, RunIndex
from remote_chain.client.plan import check_run_id
from remote_chain.core.chainstatus import final_lines
from remote_chain.core.durations import parse_duration
from remote_chain.core.models import ChainStateName
from remote_chain.errors import ConfigError

if TYPE_CHECKING:
    from remote_chain.core.results import StatusResult

log = structlog.get_logger("remote_chain")

COMMAND_LINE = "<command line>"
NEVER_CHECKED = "not checked"
_STATE_TEXT = {state: state.value for state in ChainStateName}
_AGE = re.compile(r"([0-9]{1,9})([smhdw])")
_AGE_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str, *, field: str = "--older-than") -> float:
    """Seconds in an age: ``30d``, ``12h``, ``90m``, ``2w``, ``45s``, or a Slurm duration."""
    match = _AGE.fullmatch(text.strip())
    if match:
        return float(int(match.group(1)) * _AGE_UNIT_S[match.group(2)])
    try:
        return float(parse_duration(text))
    except ValueError as exc:
        raise ConfigError(
            f"{exc}; or a number with a unit: 45s, 90m, 12h, 30d, 2w",
            source=COMMAND_LINE,
            field=field,
        ) from None


def created_at(run: IndexedRun) -> dt.datetime | None:
    """When the run was submitted (the index's ISO 8601 ``created``), None if unreadable."""
    try:
        when = dt.datetime.fromisoformat(run.created.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def last_state(run: IndexedRun) -> str:
    """One word when every chain was last seen in one state, else counts: ``1 running, 2 ...``."""
    if not run.states:
        return NEVER_CHECKED
    counts: dict[str, int] = {}
    for state in run.states.values():
        counts[state] = counts.get(state, 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))


def run_json(run: IndexedRun) -> dict[str, object]:
    """One row of ``runs --json``."""
    return {
        "run_id": run.run_id,
        "created": run.created,
        "clusters": sorted(run.clusters),
        "benchmarks": sorted({b for c in run.clusters.values() for b in c.benchmarks}),
        "state": last_state(run),
        "states": dict(run.states),
        "checked": run.checked or None,
    }


def note_status(index: RunIndex, results: Iterable[StatusResult]) -> None:
    """Keep the chain states just read in the index entries they belong to, and each chain's
    final sacct lines (the next poll asks sacct of none of those jobs).

    Only runs already in the index are updated (a ``--cluster`` status of a run submitted
    elsewhere adds nothing); an unreadable cluster keeps its previous states. A failed write
    is a warning: the index is a convenience, never the reason a command fails.
    """

    when = dt.datetime.now(dt.UTC)
    now = when.strftime(ISO_UTC)
    for result in results:
        run = index.load(result.run_id)
        if run is None or not result.chains:
            continue
        # One pass over the chains, the state's text by lookup (an enum's .value is a
        # descriptor call): this runs for every chain after a poll's last reply.
        states, text = dict(run.states), _STATE_TEXT
        final, read, fresh = dict(run.final), dict(run.final_read), run.fresh(when)
        for c in result.chains:
            key = f"{c.cluster}/{c.benchmark}"
            states[key] = text[c.state]
            lines = final_lines(c)
            if not lines:
                final.pop(key, None)
                read.pop(key, None)
                continue
            # Lines this poll took from the index keep their time; any others (new ones, or
            # stale ones that were not sent, so sacct gave them again) are sacct's of now.
            if final.get(key) != lines or key not in fresh:
                read[key] = now
            final[key] = lines
        try:
            index.save(replace(run, states=states, checked=now, final=final, final_read=read))
        except OSError as exc:
            log.warning("index_write_failed", run_id=result.run_id, error=str(exc))


def remember(index: RunIndex, run: IndexedRun) -> None:
    """Enter a run being submitted, before connecting: a crash mid-submit leaves it findable."""
    try:
        index.save(run)
    except OSError as exc:  # the index is a convenience: never fail a submit on it
        log.warning("index_write_failed", error=str(exc))


def settle(index: RunIndex, run_id: str, keep: set[str]) -> None:
    """Keep in the index only the clusters where the run may exist (interface.md §4).

    ``keep`` names them; a cluster that certainly queued nothing (no job id, and either it
    answered or it was never reached) is dropped; with none left the entry goes: a submit
    that queued nothing anywhere is not a run.
    """
    entry = index.load(run_id)
    if entry is None or keep == set(entry.clusters):
        return
    try:
        if keep:
            clusters = {k: v for k, v in entry.clusters.items() if k in keep}
            index.save(IndexedRun(entry.run_id, entry.created, clusters))
        else:
            index.forget(run_id)
            log.info("run_not_recorded", run_id=run_id, reason="nothing was queued")
    except OSError as exc:
        log.warning("index_write_failed", error=str(exc))


def forget(index: RunIndex, run_ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """Remove these runs from the index: (forgotten, not found). Invalid ids are a ConfigError."""
    for run_id in run_ids:
        check_run_id(run_id)
    gone: list[str] = []
    unknown: list[str] = []
    for run_id in dict.fromkeys(run_ids):
        (gone if index.forget(run_id) else unknown).append(run_id)
    return gone, unknown


def prune(
    index: RunIndex, older_than_s: float, *, now: dt.datetime | None = None
) -> list[IndexedRun]:
    """Forget every run submitted more than ``older_than_s`` ago; the runs forgotten.

    A run whose submit time cannot be read is kept: nothing is removed on a guess.
    """
    now = now or dt.datetime.now(dt.UTC)
    cutoff = now - dt.timedelta(seconds=older_than_s)
    removed = []
    for run in index.recent(None):
        when = created_at(run)
        if when is not None and when < cutoff and index.forget(run.run_id):
            removed.append(run)
    return removed
