"""From a submit config and a cluster profile to what is sent: job specs and the bundle.

Everything here is pure except ``read_uploads``, which reads the local files named in
``driver.upload`` (bounded by ``max_upload_bytes``, so a huge entry is refused before any
connection is made).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from remote_chain.config import ClusterProfile, SubmitConfig, check_for_cluster, effective_slurm
from remote_chain.core.bundle import BundleFile, ChainPlan, ClusterBundle
from remote_chain.core.models import NAME_RE, ResumePolicy
from remote_chain.core.results import RenderedScript
from remote_chain.errors import ConfigError
from remote_chain.job.script import (
    SECRETS_FILE,
    JobSpec,
    SlurmDirectives,
    job_name,
    render_job_script,
    runner_argv,
)
from remote_chain.protocol.layout import JOB_SCRIPT, UPLOADS_DIR
from remote_chain.version import __version__

if TYPE_CHECKING:
    from remote_chain.core.bundle import BundleFile, ClusterBundle
    from remote_chain.job.script import JobSpec

# The bundle and the job script are imported by the functions that make them: the fleet
# imports run ids and folders from here for every command, and status makes neither.

RUN_ID_FORMAT = "rc-%Y%m%dT%H%M%SZ"


def new_run_id(now: dt.datetime | None = None) -> str:
    """``rc-<UTC yyyymmddThhmmssZ>-<6 hex>`` (interface.md §3), made before anything is sent."""
    now = now or dt.datetime.now(dt.UTC)
    return f"{now.strftime(RUN_ID_FORMAT)}-{secrets.token_hex(3)}"


def check_run_id(run_id: str) -> str:
    if not NAME_RE.match(run_id) or run_id in {".", ".."} or len(run_id) > 100:
        raise ConfigError(
            f"invalid run id {run_id!r}: use letters, digits, '.', '_' and '-' only",
            source="<command line>",
            field="--run-id",
        )
    return run_id


def select_benchmarks(config: SubmitConfig, wanted: Sequence[str]) -> list[str]:
    names = list(config.driver.benchmarks)
    unknown = [b for b in wanted if b not in config.driver.benchmarks]
    if unknown:
        raise ConfigError(
            f"unknown benchmark(s) {', '.join(unknown)}; the config has {', '.join(names)}",
            source=str(config.source),
            field="--benchmark",
        )
    return [b for b in names if not wanted or b in wanted]


def render_scripts(
    config: SubmitConfig,
    profiles: Sequence[ClusterProfile],
    benchmarks: Sequence[str],
    *,
    run_id: str,
    lookup_timeout_s: int,
    max_unknown_links: int,
) -> list[RenderedScript]:
    """Each benchmark's ``job.sh`` for each profile, as submit renders it (``render``)."""
    return [
        RenderedScript(
            profile.name,
            bench,
            render_job_script(
                job_spec(
                    config,
                    profile,
                    bench,
                    run_id=run_id,
                    lookup_timeout_s=lookup_timeout_s,
                    max_unknown_links=max_unknown_links,
                )
            ),
        )
        for profile in profiles
        for bench in benchmarks
    ]


def job_spec(
    config: SubmitConfig,
    profile: ClusterProfile,
    benchmark: str,
    *,
    run_id: str,
    lookup_timeout_s: int = 60,
    max_unknown_links: int = 3,
) -> JobSpec:

    bench = config.driver.benchmarks[benchmark]
    resume = bench.resume
    slurm = effective_slurm(profile, bench)
    policy = (
        ResumePolicy(
            max_retries=resume.max_retries,
            max_walltime_s=resume.max_walltime,
            admin_cancel=slurm.admin_cancel,
        )
        if resume is not None
        else None
    )
    env = config.driver.env
    return JobSpec(
        run_id=run_id,
        cluster=profile.name,
        benchmark=benchmark,
        remote_dir=f"{run_dir(profile, run_id)}/{benchmark}",
        argv=()
        if bench.command is not None
        else runner_argv(config.driver.runner, bench.run, resumable=resume is not None),
        command=bench.command,
        env=tuple((e.name, e.value) for e in env if not e.secret),
        secret_env_names=tuple(e.name for e in env if e.secret),
        policy=policy,
        slurm=SlurmDirectives(
            partition=slurm.partition,
            account=slurm.account,
            qos=slurm.qos,
            time_s=slurm.time,
            extra_args=slurm.extra_args,
            requeue=slurm.requeue,
        ),
        lookup_timeout_s=lookup_timeout_s,
        max_unknown_links=max_unknown_links,
        executor=profile.executor,
    )


def run_dir(profile: ClusterProfile, run_id: str) -> str:
    """``<workdir>/<run_id>/<cluster>``: clusters sharing a filesystem never share a folder."""
    return f"{profile.workdir.rstrip('/')}/{run_id}/{profile.name}"


def secrets_file(config: SubmitConfig) -> bytes | None:
    """``NAME='value'`` lines for the secret env values, sourced by job.sh (mode 600)."""
    lines = [
        f"{e.name}='" + e.value.replace("'", "'\"'\"'") + "'" for e in config.driver.env if e.secret
    ]
    return ("\n".join(lines) + "\n").encode() if lines else None


def _folder_files(entry: Path, config: SubmitConfig) -> list[Path]:
    """Every file in an uploaded folder, sorted; what cannot be uploaded is an error, not skipped.

    A symlink inside the folder is followed only when it names a regular file inside the
    folder (its bytes are copied); one leading out of it (a private key "uploaded" as
    README.md), a symlinked folder, a dangling link and a special file (fifo, socket, device)
    are refused with their path. The entry itself may be a symlink: the user
    named it.
    """
    root = entry.resolve()
    files: list[Path] = []

    def refuse(path: Path, why: str) -> ConfigError:
        return ConfigError(
            f"cannot upload {path}: {why}", source=str(config.source), field="driver.upload"
        )

    for folder, dirnames, filenames in os.walk(entry, onerror=None, followlinks=False):
        here = Path(folder)
        for name in sorted(dirnames):
            if (here / name).is_symlink():
                raise refuse(here / name, "a symlinked folder is not followed; upload its target")
        for name in filenames:
            path = here / name
            if path.is_symlink():
                try:
                    target = path.resolve(strict=True)
                except (OSError, RuntimeError):
                    raise refuse(path, "a dangling or looping symlink") from None
                if not target.is_relative_to(root):
                    raise refuse(path, f"a symlink out of the uploaded folder (to {target})")
            if not path.is_file():
                raise refuse(path, "not a regular file")
            files.append(path)
    return sorted(files)


def read_uploads(config: SubmitConfig, *, max_bytes: int) -> list[BundleFile]:
    """The ``driver.upload`` entries as files under ``files/`` (folders recursively)."""

    out: list[BundleFile] = []
    total = 0
    for entry in config.driver.upload:
        paths = _folder_files(entry, config) if entry.is_dir() else [entry]
        for path in paths:
            rel = path.name if path == entry else f"{entry.name}/{path.relative_to(entry)}"
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise ConfigError(
                    f"cannot read upload {path}: {exc.strerror}",
                    source=str(config.source),
                    field="driver.upload",
                ) from exc
            total += len(data)
            if total > max_bytes:
                raise ConfigError(
                    f"uploads exceed {max_bytes} bytes at {path} (REMOTE_CHAIN_MAX_UPLOAD_BYTES)",
                    source=str(config.source),
                    field="driver.upload",
                )
            mode = 0o700 if path.stat().st_mode & 0o100 else 0o600
            out.append(BundleFile(f"{UPLOADS_DIR}/{rel}", data, mode))
    return out


def build_bundle(
    config: SubmitConfig,
    profile: ClusterProfile,
    benchmarks: Sequence[str],
    uploads: Sequence[BundleFile],
    *,
    run_id: str,
    created: dt.datetime,
    lookup_timeout_s: int = 60,
    max_unknown_links: int = 3,
) -> ClusterBundle:
    """Everything one cluster receives: uploads, each job.sh, the secrets, the chain plans."""

    check_for_cluster(config, profile)
    files = list(uploads)
    chains = []
    secret = secrets_file(config)
    for name in benchmarks:
        spec = job_spec(
            config,
            profile,
            name,
            run_id=run_id,
            lookup_timeout_s=lookup_timeout_s,
            max_unknown_links=max_unknown_links,
        )
        files.append(BundleFile(f"{name}/{JOB_SCRIPT}", render_job_script(spec).encode(), 0o700))
        if secret is not None:
            files.append(BundleFile(f"{name}/{SECRETS_FILE}", secret, 0o600))
        chains.append(
            ChainPlan(
                benchmark=name,
                remote_dir=spec.remote_dir,
                job_name=job_name(run_id, name),
                resumable=spec.policy is not None,
                time_limit_s=spec.slurm.time_s,
            )
        )
    return ClusterBundle(
        run_id=run_id,
        cluster=profile.name,
        run_dir=run_dir(profile, run_id),
        created=created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        executor=profile.executor,
        chains=tuple(chains),
        files=tuple(files),
    )


def describe_bundle(bundle: ClusterBundle) -> str:
    """A dry-run summary: what would be sent, without secrets."""
    return json.dumps(
        {
            "cluster": bundle.cluster,
            "run_dir": bundle.run_dir,
            "files": [f"{f.path} ({len(f.data)} bytes, {oct(f.mode)})" for f in bundle.files],
            "client": f"remote-chain {__version__}",
        },
        indent=2,
    )
