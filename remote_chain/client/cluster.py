"""One cluster for one invocation: a connection, opened once, and each operation as one exec.

This is the imperative shell around the pure script builders and parsers of ``execs/``:
it sends a script through the ``Remote`` seam, reads the answer, and decides about retries.

- Every operation is a single remote exec; a whole status poll is one, whatever the count.
- Reads (status, logs, doctor) are retried on transient transport errors (tenacity).
- ``submit`` is never blindly retried: after a transport error it reconnects and *looks the
  run up* (the run folder is made atomically by the submit script); only a run folder that
  does not exist proves the script never ran, and only then is it sent again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import anyio
import structlog

from remote_chain.config import ClusterProfile
from remote_chain.config.settings import Settings
from remote_chain.core.durations import format_duration, parse_persist
from remote_chain.core.limits import fit_problems, parse_submit_limits
from remote_chain.core.runstatus import Polled, lagging, statuses
from remote_chain.errors import (
    CommandFailedError,
    ConfigError,
    RemoteError,
    StateError,
    SubmitError,
)
from remote_chain.execs.cancel import parse_cancel_output, render_cancel_script
from remote_chain.execs.doctor import read_doctor, render_doctor_script
from remote_chain.execs.logs import parse_logs_output, render_logs_script
from remote_chain.execs.resume import (
    ResumeAnswer,
    ResumeCaps,
    act_head,
    parse_resume_output,
    plan_resume,
    record_head,
    render_facts_script,
    render_resume_script,
    updated_record,
)
from remote_chain.execs.resume import parse_facts as parse_resume_facts
from remote_chain.execs.status import parse_status_output, render_status_script
from remote_chain.execs.submit import (
    parse_submit_output,
    render_lookup_script,
    render_submit_script,
)
from remote_chain.job.script import SECRETS_FILE
from remote_chain.protocol.guard import UNSAFE_EXIT
from remote_chain.retries import RetryPolicy, connect, lost_submit
from remote_chain.transport.base import CommandResult, Remote
from remote_chain.transport.connect import open_remote
from remote_chain.transport.endpoint import DEFAULT_CONNECT_TIMEOUT, Endpoint

if TYPE_CHECKING:
    from remote_chain.core.bundle import ClusterBundle
    from remote_chain.core.chainstatus import ChainStatus
    from remote_chain.core.models import ChainStateName
    from remote_chain.core.snapshot import Target
    from remote_chain.execs.cancel import CancelAnswer
    from remote_chain.execs.doctor import DoctorReport
    from remote_chain.execs.logs import LogChunk
    from remote_chain.execs.resume import Plan, ResumeAnswer, ResumeCaps
    from remote_chain.execs.submit import SubmitAnswer

log = structlog.get_logger("remote_chain")

# Seconds a submit's exec may take per chain beyond the command timeout: an sbatch is quick
# on a healthy controller and takes seconds on a loaded one; a hung exec is still
# abandoned, after a bound that grows with the work sent.
SUBMIT_S_PER_CHAIN = 1.0

Opener = Callable[[Endpoint], Awaitable[Remote]]


def endpoint_for(profile: ClusterProfile, settings: Settings) -> Endpoint:
    return Endpoint(
        name=profile.name,
        host=profile.host,
        port=profile.port,
        user=profile.user,
        identity_file=profile.identity_file,
        known_hosts=profile.known_hosts,
        proxy_jump=profile.proxy_jump,
        control_path=profile.control_path,
        ssh_config=profile.ssh_config or settings.ssh_config,
        transport=profile.transport,
        connect_timeout=settings.connect_timeout,
        command_timeout=settings.command_timeout,
        keepalive_interval=settings.keepalive_interval,
        max_channels=settings.max_channels,
        max_output_bytes=settings.max_output_bytes,
        persist=parse_persist(settings.persist) if settings.persist else profile.persist,
        agent_dir=settings.state_home() / "agent",
        watch=(profile.source,),
    )


class ClusterSession:
    """A cluster profile, its (lazily opened, reused) connection, and the operations on it."""

    def __init__(
        self,
        profile: ClusterProfile,
        settings: Settings,
        *,
        opener: Opener = open_remote,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.profile = profile
        self.settings = settings
        self._opener = opener
        self._remote: Remote | None = None
        # Reconnecting after a lost connection is retried; the first connection is not: an
        # unreachable or refusing host is reported within one connect timeout.
        self._connected_once = False
        self._lock = anyio.Lock()
        self.retry = retry or RetryPolicy(settings.sacct_attempts, settings.sacct_wait_max)
        self.submit_warnings: list[str] = []  # the last submit's: the run may not fit
        self.log = log.bind(cluster=profile.name)

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def connected_once(self) -> bool:
        """Whether this session ever reached the cluster (so it may have changed something)."""
        return self._connected_once

    async def remote(self) -> Remote:
        async with self._lock:
            if self._remote is None:
                self._remote = await self._first_connect()
                self._connected_once = True
            return self._remote

    async def _first_connect(self) -> Remote:
        """Connect, trying again after a transient failure, within a budget:

        - refused every time (nothing listens): ``connect_retry`` seconds from the first
          refusal (an sshd restarting for a second is survived, a dead host fails at once,
          as with ``ssh``);
        - reset or lost mid-handshake (a server that is there, e.g. restarting): one connect
          timeout from the start.

        A name that does not resolve, or a host that does not answer within the connect
        timeout, is not tried again: each try would cost the same.
        """
        endpoint = endpoint_for(self.profile, self.settings)
        # -v: which files decide where we connect and whom we trust. ./clusters/ comes before
        # ~/.config/remote-chain/clusters/ (a cloned repository's profiles win: README).
        self.log.info(
            "profile_used",
            profile=str(self.profile.source),
            host=endpoint.host,
            known_hosts=str(endpoint.known_hosts or "the ssh config's, else ~/.ssh/known_hosts"),
        )
        policy = connect(
            refused_s=self.settings.connect_retry,
            patience_s=self.settings.connect_timeout or DEFAULT_CONNECT_TIMEOUT,
            on_retry=lambda exc, left: self.log.info(
                "ssh_connect_retrying", error=str(exc), seconds_left=round(left, 1)
            ),
            sleep=self.retry.sleep,
        )
        return await policy(self._opener, endpoint)

    async def reconnect(self) -> None:
        async with self._lock:
            old, self._remote = self._remote, None
        if old is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await old.aclose()

    async def aclose(self) -> None:
        await self.reconnect()

    async def run(
        self, script: str, *, what: str, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        """One exec; a non-zero exit of our own script is a CommandFailedError."""
        remote = await self.remote()
        try:
            result = await remote.run(script, timeout=timeout, sensitive=sensitive)
        except RemoteError as exc:
            if exc.transient:
                await self.reconnect()
            raise
        if result.exit_status == UNSAFE_EXIT:
            # The ownership guard stopped the script before it trusted anything (guard.py).
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            reason = lines[-1] if lines else "remote-chain refused: an unsafe run folder"
            raise StateError(reason, path=f"{what} on cluster {self.name}")
        if result.exit_status != 0:
            raise CommandFailedError(
                f"{what} failed",
                host=self.name,
                command=what,
                exit_status=result.exit_status,
                stderr=result.stderr,
            )
        return result

    async def read(self, script: str, *, what: str, timeout: float | None = None) -> str:
        """An idempotent exec, retried on transient transport errors once we were connected."""
        policy = self.retry.transient_read(lambda: self._connected_once)
        result: CommandResult = await policy(self.run, script, what=what, timeout=timeout)
        return result.stdout

    # --- submit -------------------------------------------------------------------------------
    async def submit(self, bundle: ClusterBundle) -> SubmitAnswer:
        """Submit once; after a lost connection, look the run up before ever sending again."""

        script = render_submit_script(bundle)
        # No script travels in a command line; the flag marks a bundle holding secret values
        # for the Remote seam.
        sensitive = any(f.path.endswith(SECRETS_FILE) for f in bundle.files)
        await self.remote()  # a failure to connect at all: nothing was sent, nothing to look up
        # The exec runs one sbatch per chain: its time grows with them. Abandoned at the plain
        # command timeout, a big submit to a busy controller would read as a lost connection
        # while it was still queueing.
        timeout = self.settings.command_timeout + SUBMIT_S_PER_CHAIN * len(bundle.chains)
        tries = 0

        async def send() -> SubmitAnswer | None:
            nonlocal tries
            tries += 1
            try:
                result = await self.run(script, what="submit", timeout=timeout, sensitive=sensitive)
            except RemoteError as exc:
                if not exc.transient:
                    raise
                self.log.warning("submit_connection_lost", attempt=tries, error=str(exc))
                found = await self._lookup(bundle)
                # ABSENT: the script never ran; sending it again is safe (retries.lost_submit).
                return found if found.existed else None
            return self._submitted(bundle, result.stdout)

        policy = lost_submit(
            lambda: SubmitError(f"{self.name}: submit failed three times on a lost connection")
        )
        answer: SubmitAnswer = await policy(send)
        return answer

    def _submitted(self, bundle: ClusterBundle, stdout: str) -> SubmitAnswer:

        answer = parse_submit_output(stdout)
        self.submit_warnings = _limit_warnings(bundle, answer, stdout)
        for warning in self.submit_warnings:
            self.log.warning("run_may_not_fit", run_id=bundle.run_id, detail=warning)
        if answer.workdir_error:
            raise ConfigError(
                f"{answer.error} (on {self.profile.host})",
                source=str(self.profile.source),
                field="workdir",
            )
        if answer.error:
            raise SubmitError(f"{self.name}: {answer.error}")
        for sub in answer.submitted:
            self.log.info(
                "job_submitted",
                run_id=bundle.run_id,
                benchmark=sub.benchmark,
                job_id=sub.job_id,
            )
        return answer

    async def _lookup(self, bundle: ClusterBundle) -> SubmitAnswer:

        text = await self.read(render_lookup_script(bundle), what="submit lookup")
        answer = parse_submit_output(text)
        if answer.error:
            raise SubmitError(f"{self.name}: {answer.error}")
        return answer

    # --- status -------------------------------------------------------------------------------
    async def status(
        self, targets: Sequence[Target], *, retry_lag: bool = True
    ) -> list[ChainStatus]:
        """One status exec for all targets, every chain derived once per poll; the poll is
        retried (bounded) while accounting lags."""

        script = render_status_script(targets, executor=self.profile.executor)

        async def poll() -> Polled:
            text = await self.read(script, what="status")
            snap = parse_status_output(text, targets)
            return Polled(snap, statuses(self.name, snap, self.profile.executor))

        if not retry_lag:
            return (await poll()).chains
        policy = self.retry.accounting_lag(
            lambda polled: lagging(polled, self.profile.executor),
            on_retry=lambda attempt: self.log.info("sacct_retrying", attempt=attempt),
            on_give_up=lambda: self.log.warning("sacct_lagging", detail="some chains stay unknown"),
        )
        polled: Polled = await policy(poll)
        return polled.chains

    # --- cancel, resume, logs, doctor ----------------------------------------------------------
    async def cancel(self, run_id: str, run_dir: str, benchmarks: Sequence[str]) -> CancelAnswer:

        # Not retried blindly either: it is idempotent (marker, scancel), so a rerun is safe.
        script = render_cancel_script(run_id, run_dir, benchmarks, executor=self.profile.executor)
        text = await self.read(script, what="cancel", timeout=self.settings.command_timeout + 60)
        answer = parse_cancel_output(text, benchmarks)
        self.log.info("chain_cancelled", run_id=run_id, jobs=answer.cancelled)
        return answer

    async def resume(
        self,
        run_id: str,
        run_dir: str,
        states: dict[str, ChainStateName],
        caps: ResumeCaps | None = None,
    ) -> tuple[ResumeAnswer, Plan]:
        """Read the chains' caps and state, plan (pure), then one exec that acts on the plan."""

        benchmarks = list(states)
        facts_text = await self.read(render_facts_script(run_dir, benchmarks), what="resume")
        facts = parse_resume_facts(facts_text)
        plan = plan_resume(states, facts, caps or ResumeCaps())
        go = [b for b in benchmarks if b in plan.steps or b in plan.plain]
        if not go:
            return ResumeAnswer(), plan
        steps = [plan.steps[b] for b in go if b in plan.steps]
        record = updated_record(facts.record, steps, at=dt.datetime.now(dt.UTC).isoformat())
        head = [*act_head(steps, go), *record_head(record, facts.record_sum)]
        script = render_resume_script(run_id, run_dir, go, steps=head)
        answer = parse_resume_output((await self.run(script, what="resume")).stdout)
        for step in steps:
            self.log.info("resume_caps", run_id=run_id, **step.to_json())
        return answer, plan

    async def logs(
        self, run_dir: str, benchmark: str, *, job_id: str | None, offset: int
    ) -> LogChunk:

        script = render_logs_script(
            run_dir, benchmark, job_id=job_id, offset=offset, executor=self.profile.executor
        )
        return parse_logs_output(await self.read(script, what="logs"))

    async def doctor(self) -> DoctorReport:

        script = render_doctor_script(
            workdir=self.profile.workdir,
            partition=self.profile.slurm.partition,
            executor=self.profile.executor,
            sbatch_args=profile_sbatch_args(self.profile),
        )
        text = await self.read(script, what="doctor")
        return read_doctor(text, executor=self.profile.executor)


def profile_sbatch_args(profile: ClusterProfile) -> list[str]:
    """The profile's own sbatch options, as every link of a chain is submitted with them."""
    s = profile.slurm
    args = [f"--{k}={v}" for k, v in (("partition", s.partition), ("account", s.account)) if v]
    args += [f"--qos={s.qos}"] if s.qos else []
    args += [f"--time={format_duration(s.time)}"] if s.time is not None else []
    return [*args, *s.extra_args]


def _limit_warnings(bundle: ClusterBundle, answer: SubmitAnswer, stdout: str) -> list[str]:
    """Why the run cannot fit under the user's reported job limits, if it cannot."""

    found = parse_submit_limits(stdout)
    if found is None or answer.existed:
        return []
    limits, queued_after = found
    submitted = sum(1 for s in answer.submitted if s.job_id is not None)
    queued = max(0, (queued_after or 0) - submitted)
    return fit_problems(
        limits,
        benchmarks=len(bundle.chains),
        resumable=sum(1 for c in bundle.chains if c.resumable),
        queued=queued,
    )
