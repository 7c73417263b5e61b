"""Multi-cluster flows: submit, status, wait, cancel, resume, logs and doctor, as awaitables.

This is the Python API the CLI itself uses (and a CI driver or a notebook can embed)::

    async with Orchestrator(settings) as rc:
        result = await rc.submit(Path("eval.yaml"), clusters=["eos", "dgx"])
        final = await rc.wait(result.run_id)

Every flow fans out over clusters in one anyio task group (``fleet.Fleet``); a failing
cluster is recorded with its error and never stops the others. Each cluster is one
``ClusterSession``: one connection for the whole invocation, one exec per operation. The
answers become records (``results.py``) in ``outcomes.py``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog

from remote_chain.client.fleet import Fleet
from remote_chain.client.index import IndexedCluster, IndexedRun
from remote_chain.client.outcomes import (
    cancel_entries,
    per_run,
    planned,
    recent_targets,
    resumable,
    resume_entries,
    submissions,
)
from remote_chain.client.plan import build_bundle, read_uploads, render_scripts, run_dir
from remote_chain.client.reachability import Outages
from remote_chain.client.runs import note_status, remember, settle
from remote_chain.config import ClusterProfile, SubmitConfig
from remote_chain.core.results import (
    CancelResult,
    Check,
    ClusterFailure,
    DoctorResult,
    RenderedScript,
    ResumeResult,
    StatusResult,
    SubmitResult,
)
from remote_chain.errors import ConfigError, NotFoundError, RemoteError, WaitTimeout
from remote_chain.protocol.layout import RENDER_RUN_ID, compact_limits
from remote_chain.retries import poll_backoff

if TYPE_CHECKING:
    from remote_chain.execs.resume import ResumeCaps

log = structlog.get_logger("remote_chain")


class Orchestrator(Fleet):
    """The whole client: profiles, sessions (one per cluster), the local index, the flows.

    Use it as ``async with Orchestrator() as rc:`` so every connection is closed at the end.
    Wherever a cluster is named, a profile name (``clusters/<name>.toml``) or a
    ``ClusterProfile`` object may be given. Flows never raise for one failing cluster: they
    list it in the result's ``failures``; they raise ``ConfigError`` for what is wrong before
    anything is sent, and ``WaitTimeout`` (``wait``) at its timeout.
    """

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
        cfg, names, run_id, profiles = self._plan(config, clusters, benchmarks, run_id or None)
        created = dt.datetime.now(dt.UTC)
        for p in profiles:  # a missing key is the profile's fault (exit 2), before connecting
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
            subs = tuple(s for p in profiles for s in planned(p.name, bundles[p.name]))
            return SubmitResult(run_id, subs, dry_run=True, bundles=tuple(bundles.values()))
        entry = {
            p.name: IndexedCluster(
                run_dir(p, run_id),
                tuple(names),
                p.executor,
                compact_limits({c.benchmark: c.time_limit_s for c in bundles[p.name].chains}),
            )
            for p in profiles
        }
        remember(self.index, IndexedRun(run_id, created.isoformat(), entry))
        log.info("run_submitting", run_id=run_id, clusters=[p.name for p in profiles])
        answers, failures = await self._fan_out(
            [p.name for p in profiles], lambda name: self.session(name).submit(bundles[name])
        )
        subs_list = [
            s
            for p in profiles
            if p.name in answers
            for s in submissions(p.name, bundles[p.name], answers[p.name])
        ]
        # Kept only where the run may exist: a job id, an existing run, or a cluster that
        # failed after it was once connected (a dropped reply may hide queued jobs).
        keep = {s.cluster for s in subs_list if s.job_id is not None or s.existing}
        keep |= {f.cluster for f in failures if self._was_connected(f.cluster)}
        settle(self.index, run_id, keep)
        # Only sessions that were made: a cluster whose session failed has no warnings.
        sessions = [self._sessions[p.name] for p in profiles if p.name in self._sessions]
        warnings = tuple(f"{s.name}: {w}" for s in sessions for w in s.submit_warnings)
        return SubmitResult(run_id, tuple(subs_list), tuple(failures), warnings=warnings)

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
        cfg, wanted, run_id, profiles = self._plan(config, clusters, benchmarks, run_id)
        return render_scripts(
            cfg,
            profiles,
            wanted,
            run_id=run_id,
            lookup_timeout_s=self.settings.lookup_timeout,
            max_unknown_links=self.settings.max_unknown_links,
        )

    # --- status / wait --------------------------------------------------------------------------
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
            ClusterFailure(name, NotFoundError(f"no run {run_id} under {targets[name].run_dir}"))
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
        per_cluster = recent_targets(runs, self._cluster_names(clusters), dt.datetime.now(dt.UTC))
        results, failures = await self._fan_out(
            list(per_cluster), lambda name: self.session(name).status(per_cluster[name])
        )
        out = per_run(runs, results, failures)
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
        deadline = None if timeout is None else anyio.current_time() + timeout
        outages = Outages(self.settings.wait_unreachable)

        def ended(result: StatusResult) -> bool:
            return bool(result.chains) and result.ended

        async def poll() -> StatusResult:
            result = await self.status(
                run_id, clusters=clusters, benchmarks=benchmarks, retry_lag=False
            )
            if on_poll is not None:
                on_poll(result)
            if ended(result):
                return result
            # Config, auth and host-key errors end the wait at once; an unreachable cluster
            # is polled again (the session reconnects) until it was down too long.
            now = anyio.current_time()
            outages.check(self._targets(run_id, clusters, benchmarks), result.failures, now)
            if deadline is not None and now >= deadline:
                raise WaitTimeout(result)
            return result

        policy = poll_backoff(
            first_s=first_interval,
            cap_s=self.settings.poll_interval,
            deadline=deadline,
            ended=ended,
        )
        final: StatusResult = await policy(poll)
        return final

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
        entries = [e for name, answer in answers.items() for e in cancel_entries(name, answer)]
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

        The caps are kept (execs/resume.py): the walltime of every job not yet counted is
        counted first; a stopped chain needs ``caps.max_walltime_s`` above the walltime
        used, a failed resumable one granted retries; new caps go into job.sh and the record.
        Refusals and failures are in the result. Raises ``ConfigError`` as ``status`` does.
        """
        status = await self.status(run_id, clusters=clusters, benchmarks=benchmarks)
        targets = self._targets(run_id, clusters, benchmarks)
        wanted, entries = resumable(status.chains)
        answers, failures = await self._fan_out(
            list(wanted),
            lambda name: self.session(name).resume(
                run_id, targets[name].run_dir, wanted[name], caps
            ),
        )
        for name, (answer, plan) in answers.items():
            entries += resume_entries(name, answer, plan)
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
                raise NotFoundError(f"{name}: {chunk.problem}")
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
                return DoctorResult(name, (Check("ssh", False, str(exc), exc.hint),))
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
