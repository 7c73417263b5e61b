"""The local run index: which clusters and remote folders a run went to.

One JSON file per run under ``$XDG_STATE_HOME/remote-chain/runs/`` (interface.md §4), so that
``status``/``cancel``/``logs`` need only the run id on the machine that submitted; with
``--cluster`` they work without it (e.g. from CI), reading ``<workdir>/<run_id>/<cluster>``.
Writes are atomic (tmp + rename); an unreadable entry is skipped with a warning, never fatal.

Users manage it (``remote-chain runs``, ``runs forget``, ``runs prune``): each entry also keeps
the chain states last seen by ``status``/``wait`` (``states``, ``checked``), so the list needs
no SSH. Entries written before those fields existed read as "never checked".
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from remote_chain.core.models import Executor
from remote_chain.core.records import indented_json

log = structlog.get_logger("remote_chain")

ISO_UTC = "%Y-%m-%dT%H:%M:%SZ"
# How long a chain's final sacct lines stand in for sacct. They are final: nothing but a job
# requeued by hand after its end (and ended again before any poll saw it queued) changes them,
# and then for at most this long; once an hour a run's ended jobs cost one sacct again.
FINAL_TTL = dt.timedelta(hours=1)
_ISO_UTC_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


@dataclass(frozen=True)
class IndexedCluster:
    run_dir: str
    benchmarks: tuple[str, ...]
    executor: Executor = "slurm"
    # Each link's walltime by benchmark (layout.compact_limits), as submit recorded it: status
    # then need not fetch the run record, which holds them for every chain (and would be
    # gzipped, base64-ed and parsed on every poll). None for entries of before the field, or
    # hand-edited past reading: the record is read as before.
    time_limits: dict[str, int] | None = None


@dataclass(frozen=True)
class IndexedRun:
    run_id: str
    created: str
    clusters: dict[str, IndexedCluster] = field(default_factory=dict)
    # "<cluster>/<benchmark>" -> chain state last seen, and when (ISO 8601 UTC); {} and ""
    # until a status has been read.
    states: dict[str, str] = field(default_factory=dict)
    checked: str = ""
    # "<cluster>/<benchmark>" -> the sacct lines of the chain's jobs whose record is final
    # (chainstatus.final_lines), and when sacct gave them (ISO 8601 UTC): later polls do not
    # ask sacct of them (status.Target.final) for FINAL_TTL, then once again.
    final: dict[str, str] = field(default_factory=dict)
    final_read: dict[str, str] = field(default_factory=dict)

    def fresh(self, now: dt.datetime) -> set[str]:
        """The chains whose final lines sacct gave less than FINAL_TTL before ``now``.

        The times are compared as the strings they are (ISO_UTC sorts as it reads), with no
        strptime per ended chain. A time in the future (a clock set back) or not of that form
        counts as stale: sacct is asked again.
        """
        low, high = (now - FINAL_TTL).strftime(ISO_UTC), now.strftime(ISO_UTC)
        return {
            key
            for key, read in self.final_read.items()
            if low < read <= high and _ISO_UTC_RE.fullmatch(read)
        }

    def final_of(self, cluster: str, benchmarks: tuple[str, ...], now: dt.datetime) -> str:
        """The fresh final lines of ``cluster``'s chains (of ``benchmarks`` only, when named)."""
        fresh = self.fresh(now)
        return "\n".join(
            lines
            for key, lines in self.final.items()
            if key in fresh
            and key.partition("/")[0] == cluster
            and (not benchmarks or key.partition("/")[2] in benchmarks)
        )

    def to_json(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "created": self.created,
            "states": dict(self.states),
            "checked": self.checked,
            "final": dict(self.final),
            "final_read": dict(self.final_read),
            "clusters": {
                name: {
                    "run_dir": c.run_dir,
                    "benchmarks": list(c.benchmarks),
                    "executor": c.executor,
                    **({} if c.time_limits is None else {"time_limits": dict(c.time_limits)}),
                }
                for name, c in self.clusters.items()
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> IndexedRun:
        clusters_raw = data.get("clusters")
        clusters: dict[str, IndexedCluster] = {}
        if isinstance(clusters_raw, dict):
            for name, c in clusters_raw.items():
                if isinstance(c, dict):
                    clusters[str(name)] = IndexedCluster(
                        str(c.get("run_dir", "")),
                        tuple(str(b) for b in c.get("benchmarks", []) or []),
                        # A closed set: anything but "shell" is an entry of before the field.
                        "shell" if c.get("executor") == "shell" else "slurm",
                        _limits(c.get("time_limits")),
                    )
        states_raw = data.get("states")
        states = (
            {str(k): str(v) for k, v in states_raw.items()} if isinstance(states_raw, dict) else {}
        )
        final, final_read = _str_dict(data.get("final")), _str_dict(data.get("final_read"))
        return cls(
            str(data["run_id"]),
            str(data.get("created", "")),
            clusters,
            states,
            str(data.get("checked", "") or ""),
            final,
            final_read,
        )


def _limits(raw: object) -> dict[str, int] | None:
    """An entry's time_limits, or None (read the run record instead) unless every value is a
    positive whole number: a hand edit never shows a wrong limit, only costs the record."""
    if not isinstance(raw, dict):
        return None
    limits = {str(k): v for k, v in raw.items()}
    ok = all(type(v) is int and v > 0 for v in limits.values())
    return limits if ok else None


def _str_dict(raw: object) -> dict[str, str]:
    """A hand-edited or older entry's field: its string values only, else nothing."""
    if not isinstance(raw, dict):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, str)}


# What an entry's file is, as fstat says: the same folder entry (device, inode) with the same
# size and modification time holds the same text. An edit in place changes the time, a
# rename (an editor's save, another process's save) the inode.
_Stamp = tuple[int, int, int, int]


def _stamp(st: os.stat_result) -> _Stamp:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class RunIndex:
    """The entries of one folder. An entry read or written is kept with its file's stamp and
    given again while the file is unchanged: a status poll reads its run's entry to know where
    to look and again to keep what it saw, and a big run's entry is not parsed again for
    nothing (a ``wait`` reads it every poll). Entries are shared: never mutate one.
    At most KEPT entries are kept (the latest read or written): ``runs`` reads them all, and
    a long-lived caller should not hold every run it ever listed."""

    KEPT = 8

    def __init__(self, folder: Path):
        self.folder = folder
        self._read: dict[str, tuple[_Stamp, IndexedRun]] = {}

    def _path(self, run_id: str) -> Path:
        return self.folder / f"{run_id}.json"

    def save(self, run: IndexedRun) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
        self._read.pop(run.run_id, None)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(indented_json(run.to_json()))
            f.flush()
            # Stamped before the rename, from our own descriptor: another process's save in
            # between is another inode, read afresh.
            stamp = _stamp(os.fstat(fd))
        os.replace(tmp, self._path(run.run_id))
        self._keep(run.run_id, stamp, run)

    def load(self, run_id: str) -> IndexedRun | None:
        try:
            with self._path(run_id).open("rb") as f:
                stamp = _stamp(os.fstat(f.fileno()))
                kept = self._read.get(run_id)
                if kept is not None and kept[0] == stamp:
                    return kept[1]
                data = json.loads(f.read().decode("utf-8"))
            run = IndexedRun.from_json(data)
        except FileNotFoundError:
            self._read.pop(run_id, None)
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("index_entry_unreadable", run_id=run_id, error=str(exc))
            return None
        self._keep(run_id, stamp, run)
        return run

    def _keep(self, run_id: str, stamp: _Stamp, run: IndexedRun) -> None:
        self._read.pop(run_id, None)
        self._read[run_id] = (stamp, run)  # the newest last: a dict keeps insertion order
        while len(self._read) > self.KEPT:
            del self._read[next(iter(self._read))]

    def recent(self, limit: int | None = 10) -> list[IndexedRun]:
        """The newest ``limit`` runs (all with None): generated ids newest first, then others."""
        if not self.folder.is_dir():
            return []
        paths = sorted(self.folder.glob("rc-*.json"), reverse=True)
        paths += sorted(
            p for p in self.folder.glob("*.json") if not p.name.startswith(("rc-", "."))
        )
        runs = []
        for path in paths if limit is None else paths[:limit]:
            run = self.load(path.stem)
            if run is not None:
                runs.append(run)
        return runs

    def forget(self, run_id: str) -> bool:
        """Remove a run's entry (local only: nothing on any cluster); False if there was none."""
        self._read.pop(run_id, None)
        try:
            self._path(run_id).unlink()
        except FileNotFoundError:
            return False
        return True
