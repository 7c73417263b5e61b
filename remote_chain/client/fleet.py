"""The clusters of one invocation: profiles by name, one session each, and the fan-out.

``Orchestrator`` (the flows) builds on ``Fleet``: every flow names its clusters, gets each
one's ``ClusterSession`` (one connection for the whole invocation, opened lazily) and runs
its work on all of them at once with ``fan_out``, where a failing cluster is recorded with
its error and never stops the others.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio
import structlog

from remote_chain.client.cluster import ClusterSession, Opener
from remote_chain.client.index import RunIndex
from remote_chain.client.plan import check_run_id, new_run_id, run_dir, select_benchmarks
from remote_chain.config import (
    COMMAND_LINE,
    ClusterProfile,
    SubmitConfig,
    check_for_cluster,
    default_clusters_dirs,
    find_profile,
    load_submit_config,
)
from remote_chain.config.settings import Settings
from remote_chain.core.results import ClusterFailure
from remote_chain.core.snapshot import Target
from remote_chain.errors import ConfigError, RemoteChainError
from remote_chain.retries import RetryPolicy
from remote_chain.transport.base import ClosingContext
from remote_chain.transport.connect import open_remote

if TYPE_CHECKING:  # status's and cancel's: a submit never imports the status exec's modules
    from remote_chain.core.snapshot import Target

log = structlog.get_logger("remote_chain")
T = TypeVar("T")


class Fleet(ClosingContext):
    """Profiles, sessions (one per cluster) and the local index of one invocation.

    Use it (as ``Orchestrator``) as ``async with`` so every connection is closed at the end.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        clusters_dir: Path | None = None,
        opener: Opener = open_remote,
        retry: RetryPolicy | None = None,
        index: RunIndex | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.clusters_dirs = default_clusters_dirs(clusters_dir, self.settings)
        self.index = index or RunIndex(self.settings.index_dir())
        self._opener = opener
        self._retry = retry
        self._sessions: dict[str, ClusterSession] = {}
        # Profiles given as objects (``clusters=[ClusterProfile(...)]``) win over files.
        self._given: dict[str, ClusterProfile] = {}

    async def aclose(self) -> None:
        """Close every connection opened (shielded: runs even when cancelled). Never raises."""
        with anyio.CancelScope(shield=True):
            for session in self._sessions.values():
                await session.aclose()

    def profile(self, name: str) -> ClusterProfile:
        """The profile of this name: one given as an object, else ``<name>.toml``.

        Raises ``ConfigError`` for an unknown name or an invalid profile file.
        """
        if name in self._given:
            return self._given[name]
        return find_profile(name, clusters_dirs=self.clusters_dirs)

    def _cluster_names(self, clusters: Sequence[str | ClusterProfile]) -> list[str]:
        """Names for ``clusters``; a ``ClusterProfile`` object is remembered under its name.

        Raises ``ConfigError`` if two different profile objects share one name (the name is
        part of every remote path, so it must say which cluster is meant).
        """
        names = []
        for cluster in clusters:
            if isinstance(cluster, ClusterProfile):
                known = self._given.get(cluster.name)
                if known is not None and known != cluster:
                    raise ConfigError(
                        f"two different profiles named {cluster.name!r}",
                        source="<python>",
                        field="clusters",
                    )
                self._given[cluster.name] = cluster
                names.append(cluster.name)
            else:
                names.append(cluster)
        return names

    def session(self, name: str) -> ClusterSession:
        """The one session (connection, opened lazily) of a cluster for this invocation.

        Raises ``ConfigError`` for an unknown profile, or an unreadable key / known_hosts file.
        """
        if name not in self._sessions:
            profile = self.profile(name)
            # A missing key or known_hosts is the profile's fault: say so (exit 2), not a
            # network error after retries.
            profile.check_local_files()
            self._sessions[name] = ClusterSession(
                profile, self.settings, opener=self._opener, retry=self._retry
            )
        return self._sessions[name]

    async def _fan_out(
        self, clusters: Sequence[str], work: Callable[[str], Awaitable[T]]
    ) -> tuple[dict[str, T], list[ClusterFailure]]:
        """Run ``work`` per cluster concurrently; each failure is kept with its cluster."""
        results: dict[str, T] = {}
        failures: list[ClusterFailure] = []

        async def one(name: str) -> None:
            try:
                results[name] = await work(name)
            except RemoteChainError as exc:
                # debug only: the command reports each failure once, itself.
                log.debug("cluster_failed", cluster=name, error=str(exc))
                failures.append(ClusterFailure(name, exc))

        async with anyio.create_task_group() as tg:
            for name in dict.fromkeys(clusters):
                tg.start_soon(one, name)
        return results, sorted(failures, key=lambda f: f.cluster)

    def _targets(
        self, run_id: str, clusters: Sequence[str | ClusterProfile], benchmarks: Sequence[str]
    ) -> dict[str, Target]:
        """Which folder to read on which cluster: --cluster wins, else the local index."""

        check_run_id(run_id)
        clusters = self._cluster_names(clusters)
        entry = self.index.load(run_id)
        wanted, now = tuple(benchmarks), dt.datetime.now(dt.UTC)
        if clusters:
            out = {}
            for c in dict.fromkeys(clusters):
                folder = run_dir(self.profile(c), run_id)
                known = entry.clusters.get(c) if entry is not None else None
                # What the index knows of the same folder only (a profile's workdir changed).
                if entry is not None and known is not None and known.run_dir == folder:
                    final = entry.final_of(c, wanted, now)
                    out[c] = Target(run_id, folder, wanted, final, known.time_limits)
                else:
                    out[c] = Target(run_id, folder, wanted)
            return out
        if entry is None:
            raise ConfigError(
                f"run {run_id} is not in the local index ({self.index.folder}); "
                "name its cluster(s) with --cluster",
                source="<command line>",
                field="RUN_ID",
            )
        return {
            name: Target(
                run_id, c.run_dir, wanted, entry.final_of(name, wanted, now), c.time_limits
            )
            for name, c in entry.clusters.items()
        }

    def _plan(
        self,
        config: SubmitConfig | Path,
        clusters: Sequence[str | ClusterProfile],
        benchmarks: Sequence[str],
        run_id: str | None,
    ) -> tuple[SubmitConfig, list[str], str, list[ClusterProfile]]:
        """The config, its benchmarks, the run id (a new one for None) and the profiles.

        Every check that needs no connection, for submit and render alike. Raises
        ``ConfigError`` for no cluster, a bad config, an unknown benchmark or cluster, an
        invalid run id, or a config the cluster's executor cannot run.
        """
        names = self._cluster_names(clusters)
        if not names:
            raise ConfigError("name at least one cluster", source=COMMAND_LINE, field="--cluster")
        cfg = config if isinstance(config, SubmitConfig) else load_submit_config(config)
        wanted = select_benchmarks(cfg, benchmarks)
        run_id = check_run_id(run_id) if run_id is not None else new_run_id()
        profiles = [self.profile(c) for c in dict.fromkeys(names)]
        for p in profiles:
            check_for_cluster(cfg, p)
        return cfg, wanted, run_id, profiles

    def _was_connected(self, name: str) -> bool:
        session = self._sessions.get(name)
        return session is not None and session.connected_once
