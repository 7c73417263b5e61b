"""Multi-cluster flows: submit, status, wait, cancel, resume, logs and doctor, as awaitables.

This is the Python API the CLI itself uses (and a CI driver or a notebook can embed)::

    async with Orchestrator(settings) as rc:
        result = await rc.submit(Path("eval.yaml"), clusters=["eos", "dgx"])
        final = await rc.wait(result.run_id)

Every flow fans out over clusters in one anyio task group; a failing cluster is recorded with
its error and never stops the others. Each cluster is one ``ClusterSession``: one connection
for the whole invocation, one exec per operation.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import structlog

from remote_chain.actions import Check
from remote_chain.bundle import ClusterBundle
from remote_chain.chainstatus import ChainStateName
from remote_chain.cluster import ClusterSession, Opener, RetryPolicy
from remote_chain.config import (
    ClusterProfile,
    SubmitConfig,
    check_for_cluster,
    default_clusters_dirs,
    find_profile,
    load_submit_config,
)
from remote_chain.errors import ConfigError, RemoteChainError, RemoteError
from remote_chain.index import IndexedCluster, IndexedRun, RunIndex
from remote_chain.jobscripts import RENDER_RUN_ID
from remote_chain.plan import (
    build_bundle,
    check_run_id,
    job_spec,
    new_run_id,
    read_uploads,
    run_dir,
    select_benchmarks,
)
from remote_chain.reachability import Outages
from remote_chain.remote import ClosingContext, open_remote
from remote_chain.results import (
    CancelEntry,
    CancelResult,
    ClusterFailure,
    DoctorResult,
    RenderedScript,
    ResumeEntry,
    ResumeResult,
    StatusResult,
    Submission,
    SubmitResult,
)
from remote_chain.resumecaps import ResumeCaps
from remote_chain.runs import note_status
from remote_chain.script import render_job_script
from remote_chain.settings import Settings
from remote_chain.snapshot import Target

log = structlog.get_logger("remote_chain")
T = TypeVar("T")

# The result records live in results.py; imported from here too, as they always were.
__all__ = [
    "CancelEntry",
    "CancelResult",
    "ClusterFailure",
    "DoctorResult",
    "Orchestrator",
    "RenderedScript",
    "ResumeEntry",
    "ResumeResult",
    "StatusResult",
    "Submission",
    "SubmitResult",
    "WaitTimeout",
]


class WaitTimeout(RemoteChainError):
    """``wait`` gave up after its ``--timeout``; exit 4 (interface.md §4)."""

    exit_code = 4

    def __init__(self, result: StatusResult):
        self.result = result
        super().__init__("timed out before every chain ended")


RESUMABLE_STATES = frozenset({ChainStateName.FAILED, ChainStateName.STOPPED})


class Orchestrator(ClosingContext):
    """The whole client: profiles, sessions (one per cluster), the local index, the flows.

    Use it as ``async with Orchestrator() as rc:`` so every connection is closed at the end.
    Wherever a cluster is named, a profile name (``clusters/<name>.toml``) or a
    ``ClusterProfile`` object may be given. Flows never raise for one failing cluster: they
    list it in the result's ``failures``; they raise ``ConfigError`` for what is wrong before
    anything is sent, and ``WaitTimeout`` (``wait``) at its timeout.
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
        """The one session (connection, opened lazily) of a cluster for this Orchestrator.

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
                # debug only: the command reports each failure once, itself (issue 11 §2).
                log.debug("cluster_failed", cluster=name, error=str(exc))
                failures.append(ClusterFailure(name, exc))

        async with anyio.create_task_group() as tg:
            for name in dict.fromkeys(clusters):
                tg.start_soon(one, name)
        return results, sorted(failures, key=lambda f: f.cluster)

    # --- submit -------------------------------------------------------------------------------
    async def submit(
        self,
        config: SubmitConfig | Path,
        clusters: Sequence[str | ClusterProfile],
        *,
        benchmarks: Sequence[str] = (),
        run_id: str | None = None,
        dry_run: bool = False,
    ) -> SubmitResult:
        """Upload and submit a run on every cluster: one exec per cluster, concurrently.

        ``config`` is a loaded (or built) ``SubmitConfig`` or the path of a YAML file;
        ``clusters`` are profile names or ``ClusterProfile`` objects. Everything local is
        checked before any connection. A cluster that fails is listed in the result's
        ``failures``, never raised. A run that queued nothing anywhere is not kept in the
        local index.

        Raises ``ConfigError`` (bad config, unknown cluster, invalid run id, unreadable
        upload or key file) before anything is sent.
        """
        clusters = self._cluster_names(clusters)
        if not clusters:
            raise ConfigError(
                "name at least one cluster", source="<command line>", field="--cluster"
            )
        cfg = config if isinstance(config, SubmitConfig) else load_submit_config(config)
        names = select_benchmarks(cfg, benchmarks)
        run_id = check_run_id(run_id) if run_id else new_run_id()
        created = dt.datetime.now(dt.UTC)
        # Every local check before any connection: profiles, executors, uploads.
        profiles = [self.profile(c) for c in dict.fromkeys(clusters)]
        for p in profiles:
            check_for_cluster(cfg, p)
            p.check_local_files()
        uploads = read_uploads(cfg, max_bytes=self.settings.max_upload_bytes)
        bundles = {
            p.name: build_bundle(
                cfg,
                p,
                names,
                uploads,
                run_id=run_id,
                created=created,
                lookup_timeout_s=self.settings.lookup_timeout,
                max_unknown_links=self.settings.max_unknown_links,
            )
            for p in profiles
        }
        if dry_run:
            subs = tuple(
                Submission(p.name, c.benchmark, None, c.remote_dir, None)
                for p in profiles
                for c in bundles[p.name].chains
            )
            return SubmitResult(run_id, subs, dry_run=True, bundles=tuple(bundles.values()))
        self._remember(run_id, created, profiles, names)
        log.info("run_submitting", run_id=run_id, clusters=[p.name for p in profiles])
        answers, failures = await self._fan_out(
            [p.name for p in profiles], lambda name: self.session(name).submit(bundles[name])
        )
        subs_list: list[Submission] = []
        for p in profiles:
            answer = answers.get(p.name)
            if answer is None:
                continue
            bundle = bundles[p.name]
            if answer.existed:
                subs_list += _existing(p.name, bundle, answer.record)
                continue
            by_bench = {s.benchmark: s for s in answer.submitted}
            for chain in bundle.chains:
                s = by_bench.get(chain.benchmark)
                subs_list.append(
                    Submission(
                        p.name,
                        chain.benchmark,
                        s.job_id if s else None,
                        chain.remote_dir,
                        (s.error if s else "no answer for this benchmark"),
                    )
                )
        self._settle_index(run_id, subs_list, failures)
        # Only sessions that were made: a cluster whose session failed has no warnings.
        sessions = [self._sessions[p.name] for p in profiles if p.name in self._sessions]
        warnings = tuple(f"{s.name}: {w}" for s in sessions for w in s.submit_warnings)
        return SubmitResult(run_id, tuple(subs_list), tuple(failures), warnings=warnings)

    def _settle_index(
        self, run_id: str, subs: Sequence[Submission], failures: Sequence[ClusterFailure]
    ) -> None:
        """Keep in the index only the clusters where the run may exist (interface.md §4).

        The entry is written before connecting, so a crash mid-submit still leaves the run
        findable. Afterwards a cluster that certainly queued nothing (no job id, and either it
        answered or it was never reached) is dropped; with none left the entry goes: a submit
        that queued nothing anywhere is not a run.
        """
        keep = {s.cluster for s in subs if s.job_id is not None or s.existing}
        # A cluster that failed after it was once connected (a dropped reply, a timeout
        # mid-exec) may have queued jobs: keep it. One never reached (dead host, auth, host
        # key, bad profile) certainly did not.
        keep |= {f.cluster for f in failures if self._was_connected(f.cluster)}
        entry = self.index.load(run_id)
        if entry is None or keep == set(entry.clusters):
            return
        try:
            if keep:
                clusters = {k: v for k, v in entry.clusters.items() if k in keep}
                self.index.save(IndexedRun(entry.run_id, entry.created, clusters))
            else:
                self.index.forget(run_id)
                log.info("run_not_recorded", run_id=run_id, reason="nothing was queued")
        except OSError as exc:
            log.warning("index_write_failed", error=str(exc))

    def _was_connected(self, name: str) -> bool:
        session = self._sessions.get(name)
        return session is not None and session.connected_once

    def _remember(
        self,
        run_id: str,
        created: dt.datetime,
        profiles: Sequence[ClusterProfile],
        names: list[str],
    ) -> None:
        clusters = {
            p.name: IndexedCluster(run_dir(p, run_id), tuple(names), p.executor) for p in profiles
        }
        try:
            self.index.save(IndexedRun(run_id, created.isoformat(), clusters))
        except OSError as exc:  # the index is a convenience: never fail a submit on it
            log.warning("index_write_failed", error=str(exc))

    # --- render -------------------------------------------------------------------------------
    def render(
        self,
        config: SubmitConfig | Path,
        clusters: Sequence[str | ClusterProfile],
        *,
        benchmarks: Sequence[str] = (),
        run_id: str = RENDER_RUN_ID,
    ) -> list[RenderedScript]:
        """Each job script submit would send, per cluster and benchmark; locally, no SSH.

        The text is byte for byte the uploaded ``job.sh`` (the same ``build_bundle`` code path
        renders it); secret env values never appear in it (job.sh sources them from a
        separate mode-600 file). ``run_id`` defaults to the placeholder ``rc-RENDER``.

        Raises ``ConfigError`` for a bad config, an unknown cluster, an invalid run id, an
        unknown benchmark, or a config the cluster's executor cannot run.
        """
        names = self._cluster_names(clusters)
        if not names:
            raise ConfigError(
                "name at least one cluster", source="<command line>", field="--cluster"
            )
        cfg = config if isinstance(config, SubmitConfig) else load_submit_config(config)
        wanted = select_benchmarks(cfg, benchmarks)
        check_run_id(run_id)
        out = []
        for name in dict.fromkeys(names):
            profile = self.profile(name)
            check_for_cluster(cfg, profile)
            for bench in wanted:
                spec = job_spec(
                    cfg,
                    profile,
                    bench,
                    run_id=run_id,
                    lookup_timeout_s=self.settings.lookup_timeout,
                    max_unknown_links=self.settings.max_unknown_links,
                )
                out.append(RenderedScript(profile.name, bench, render_job_script(spec)))
        return out

    # --- status / wait --------------------------------------------------------------------------
    def _targets(
        self, run_id: str, clusters: Sequence[str | ClusterProfile], benchmarks: Sequence[str]
    ) -> dict[str, Target]:
        """Which folder to read on which cluster: --cluster wins, else the local index."""
        check_run_id(run_id)
        clusters = self._cluster_names(clusters)
        if clusters:
            return {
                c: Target(run_id, run_dir(self.profile(c), run_id), tuple(benchmarks))
                for c in dict.fromkeys(clusters)
            }
        entry = self.index.load(run_id)
        if entry is None:
            raise ConfigError(
                f"run {run_id} is not in the local index ({self.index.folder}); "
                "name its cluster(s) with --cluster",
                source="<command line>",
                field="RUN_ID",
            )
        return {
            name: Target(run_id, c.run_dir, tuple(benchmarks)) for name, c in entry.clusters.items()
        }

    async def status(
        self,
        run_id: str,
        *,
        clusters: Sequence[str | ClusterProfile] = (),
        benchmarks: Sequence[str] = (),
        retry_lag: bool = True,
    ) -> StatusResult:
        """Every chain of the run: one exec (one sacct, one squeue) per cluster.

        ``clusters`` (names or ``ClusterProfile`` objects) name where to read; without them
        the local index says. Unreachable clusters are listed in ``failures``, not raised.
        The states read are kept in the local index (``remote-chain runs``).

        Raises ``ConfigError`` for an invalid run id, an unknown cluster, or a run that is
        not in the index when no cluster is named.
        """
        targets = self._targets(run_id, clusters, benchmarks)
        results, failures = await self._fan_out(
            list(targets),
            lambda name: self.session(name).status([targets[name]], retry_lag=retry_lag),
        )
        chains = [c for name in targets for c in results.get(name, [])]
        missing = [
            ClusterFailure(name, RemoteChainError(f"no run {run_id} under {targets[name].run_dir}"))
            for name in targets
            if name in results and not results[name]
        ]
        result = StatusResult(run_id, tuple(chains), tuple(failures + missing))
        note_status(self.index, [result])
        return result

    async def status_recent(
        self,
        *,
        limit: int = 10,
        clusters: Sequence[str | ClusterProfile] = (),
        run_ids: Sequence[str] = (),
    ) -> list[StatusResult]:
        """``status`` with no run id: the recent runs of the local index, one exec per cluster.

        ``run_ids`` picks index entries instead of the ``limit`` newest. Failures are listed
        per run, never raised; the states read are kept in the index.
        """
        if run_ids:
            runs = [r for r in (self.index.load(i) for i in run_ids) if r is not None]
        else:
            runs = self.index.recent(limit)
        clusters = self._cluster_names(clusters)
        per_cluster: dict[str, list[Target]] = {}
        for run in runs:
            for name, c in run.clusters.items():
                if not clusters or name in clusters:
                    per_cluster.setdefault(name, []).append(Target(run.run_id, c.run_dir))
        results, failures = await self._fan_out(
            list(per_cluster), lambda name: self.session(name).status(per_cluster[name])
        )
        out = []
        for run in runs:
            chains = tuple(
                c for name in run.clusters for c in results.get(name, []) if c.run_id == run.run_id
            )
            fails = tuple(f for f in failures if f.cluster in run.clusters)
            out.append(StatusResult(run.run_id, chains, fails))
        note_status(self.index, out)
        return out

    async def wait(
        self,
        run_id: str,
        *,
        clusters: Sequence[str | ClusterProfile] = (),
        benchmarks: Sequence[str] = (),
        timeout: float | None = None,
        first_interval: float = 2.0,
        on_poll: Callable[[StatusResult], None] | None = None,
    ) -> StatusResult:
        """Block until every chain ended; poll quickly first, then settle at poll_interval.

        ``on_poll`` sees every poll's result (the CLI redraws with it). A cluster that cannot
        be reached for a moment is polled again.

        Raises ``WaitTimeout`` (holding the last result) after ``timeout`` seconds,
        ``ConfigError`` as ``status`` does, and a non-transient ``RemoteError``
        (authentication, host key) at once.
        """
        interval = first_interval
        deadline = None if timeout is None else anyio.current_time() + timeout
        outages = Outages(self.settings.wait_unreachable)
        while True:
            result = await self.status(
                run_id, clusters=clusters, benchmarks=benchmarks, retry_lag=False
            )
            if on_poll is not None:
                on_poll(result)
            if result.chains and result.ended:
                return result
            # Config, auth and host-key errors end the wait at once; an unreachable cluster
            # is polled again (the session reconnects) until it was down too long.
            now = anyio.current_time()
            outages.check(self._targets(run_id, clusters, benchmarks), result.failures, now)
            if deadline is not None and now >= deadline:
                raise WaitTimeout(result)
            pause = interval if deadline is None else min(interval, max(0.0, deadline - now))
            await anyio.sleep(pause)
            interval = min(interval * 2, self.settings.poll_interval)

    # --- cancel / resume ------------------------------------------------------------------------
    async def cancel(
        self,
        run_id: str,
        *,
        clusters: Sequence[str | ClusterProfile] = (),
        benchmarks: Sequence[str] = (),
    ) -> CancelResult:
        """Marker first, pending jobs, then running ones, until nothing of the chain is queued.

        Failures per cluster or benchmark are in the result. Raises ``ConfigError`` as
        ``status`` does.
        """
        targets = self._targets(run_id, clusters, benchmarks)
        answers, failures = await self._fan_out(
            list(targets),
            lambda name: self.session(name).cancel(run_id, targets[name].run_dir, benchmarks),
        )
        entries = []
        for name, answer in answers.items():
            err = "; ".join(answer.errors) or None
            if answer.left:
                err = (err + "; " if err else "") + "jobs were still queued when cancel gave up"
            if not answer.cancelled and err:
                entries.append(CancelEntry(name, "", (), err))
            entries += [
                CancelEntry(name, bench, tuple(ids), err) for bench, ids in answer.cancelled.items()
            ]
            entries += [
                CancelEntry(name, bench, (), "no such benchmark in this run")
                for bench in answer.missing
            ]
        return CancelResult(run_id, tuple(entries), tuple(failures))

    async def resume(
        self,
        run_id: str,
        *,
        clusters: Sequence[str | ClusterProfile] = (),
        benchmarks: Sequence[str] = (),
        caps: ResumeCaps | None = None,
    ) -> ResumeResult:
        """Queue the next job of chains that ended failed or stopped; refuse live ones.

        The caps are kept (resumecaps.py): the walltime of every job not yet counted is
        counted first; a stopped chain needs ``caps.max_walltime_s`` above the walltime
        used, a failed resumable one granted retries; new caps go into job.sh and the record.
        Refusals and failures are in the result. Raises ``ConfigError`` as ``status`` does.
        """
        status = await self.status(run_id, clusters=clusters, benchmarks=benchmarks)
        targets = self._targets(run_id, clusters, benchmarks)
        wanted: dict[str, dict[str, ChainStateName]] = {}
        entries: list[ResumeEntry] = []
        for chain in status.chains:
            if chain.state in RESUMABLE_STATES:
                wanted.setdefault(chain.cluster, {})[chain.benchmark] = chain.state
            else:
                why = f"chain is {chain.state.value}; only failed or stopped chains resume"
                entries.append(ResumeEntry(chain.cluster, chain.benchmark, None, why))
        answers, failures = await self._fan_out(
            list(wanted),
            lambda name: self.session(name).resume(
                run_id, targets[name].run_dir, wanted[name], caps
            ),
        )
        for name, (answer, plan) in answers.items():
            steps = plan.steps
            entries += [
                ResumeEntry(name, b, j, None, steps[b].to_json() if b in steps else None)
                for b, j in answer.submitted.items()
            ]
            refused = {**plan.refused, **answer.refused}
            entries += [ResumeEntry(name, b, None, why) for b, why in refused.items()]
            for warning in answer.warnings:
                log.warning("resume_record_not_updated", cluster=name, detail=warning)
        return ResumeResult(run_id, tuple(entries), tuple(list(status.failures) + failures))

    # --- logs / doctor --------------------------------------------------------------------------
    async def logs(
        self,
        run_id: str,
        benchmark: str,
        *,
        cluster: str | ClusterProfile | None = None,
        job_id: str | None = None,
        follow: bool = False,
        write: Callable[[str], None],
        interval: float = 2.0,
    ) -> None:
        """Pass a chain's job log (the newest job's, or ``job_id``'s) to ``write``.

        With ``follow``, keep polling every ``interval`` seconds while the job runs.

        Raises ``ConfigError`` (unknown run, or a run on several clusters without
        ``cluster``), ``RemoteError`` when the cluster cannot be reached, and
        ``RemoteChainError`` when the log cannot be read there.
        """
        targets = self._targets(run_id, [cluster] if cluster else [], [benchmark])
        if len(targets) != 1:
            raise ConfigError(
                f"run {run_id} is on {len(targets)} clusters; pick one with --cluster",
                source="<command line>",
                field="--cluster",
            )
        ((name, target),) = targets.items()
        session = self.session(name)
        offset, current = 0, job_id
        while True:
            chunk = await session.logs(target.run_dir, benchmark, job_id=current, offset=offset)
            if chunk.problem:
                raise RemoteChainError(f"{name}: {chunk.problem}")
            if current is None and chunk.job_id is not None and follow:
                current = chunk.job_id  # follow one job's file; a new link prints its own
            if chunk.data:
                write(chunk.data)
                offset += len(chunk.data.encode("utf-8", "replace"))
            if not follow or (not chunk.live and offset >= chunk.size):
                return
            await anyio.sleep(interval)

    async def doctor(self, clusters: Sequence[str | ClusterProfile]) -> list[DoctorResult]:
        """Check each cluster: ssh, Slurm, accounting, partition, workdir; each with a fix.

        Every problem is a failed check in the result, including an unreachable cluster.
        Raises ``ConfigError`` for an unknown profile.
        """
        clusters = self._cluster_names(clusters)

        async def one(name: str) -> DoctorResult:
            session = self.session(name)
            try:
                await session.remote()
            except RemoteError as exc:
                return DoctorResult(name, (Check("ssh", False, str(exc), _ssh_hint(exc)),))
            report = await session.doctor()
            ssh = Check("ssh", True, "connected and authenticated")
            return DoctorResult(name, (ssh, *report.checks), report.facts)

        results, failures = await self._fan_out(clusters, one)
        for f in failures:  # the profile's or ssh config's fault: exit 2, not a failed ssh
            if isinstance(f.error, ConfigError):
                raise f.error
        out = [results[c] for c in dict.fromkeys(clusters) if c in results]
        out += [DoctorResult(f.cluster, (Check("ssh", False, str(f.error)),)) for f in failures]
        return out


def _ssh_hint(exc: RemoteError) -> str:
    kind = type(exc).__name__
    return {
        "HostKeyError": "add the host key to known_hosts (ssh-keyscan, checked by hand)",
        "AuthenticationError": "check identity_file / your ssh-agent, or open a ControlMaster",
        "ConnectError": "check host, port and proxy_jump; is the cluster reachable?",
        "RefusedError": "nothing listens there: check host and port (profile or ssh config)",
        "HostNotFoundError": "the name does not resolve: check host (or HostName in ssh config)",
        "RemoteTimeout": "the host did not answer in time; check the network or raise the timeout",
    }.get(kind, "")


def _existing(
    cluster: str, bundle: ClusterBundle, record: dict[str, object] | None
) -> list[Submission]:
    """A submit that found the run already there reports that run's jobs, never a second."""
    chains = record.get("chains") if record else None
    if not isinstance(chains, list):
        return [
            Submission(
                cluster,
                c.benchmark,
                None,
                c.remote_dir,
                "run already exists here but its record is incomplete (submit in progress?)",
                existing=True,
            )
            for c in bundle.chains
        ]
    out = []
    for c in chains:
        if isinstance(c, dict):
            job = c.get("first_job_id")
            err = c.get("error")
            out.append(
                Submission(
                    cluster,
                    str(c.get("benchmark")),
                    str(job) if job else None,
                    str(c.get("remote_dir")),
                    str(err) if err else None,
                    existing=True,
                )
            )
    return out
