"""The usual ways of submitting the same run, written as a reasonable person would.

Both send exactly the files remote-chain's bundle carries (the uploads and each rendered
``job.sh``) to a run folder of their own, and run one ``sbatch`` per benchmark:

(a) ``naive_asyncssh``: one asyncssh connection; one ``mkdir -p`` for every folder, an SFTP
    session with one ``put`` per file, then one ``sbatch`` exec per benchmark, each awaited.
(b) ``naive_openssh``: OpenSSH commands as typed at a prompt, a new connection each:
    ``ssh host mkdir -p ...``, ``scp`` per file, ``ssh host sbatch ...`` per benchmark.
(c) ``careful_openssh``: as (b), but the way a careful person types it: one
    ``ssh host mkdir -p``, one ``scp -r`` of the whole folder of job files, then one
    ``ssh host sbatch`` per benchmark (6 connections for 4 benchmarks).

Host keys are verified in both, against the same known_hosts as remote-chain.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import asyncssh

COMMAND_TIMEOUT = 60.0


@dataclass(frozen=True)
class SshTarget:
    host: str
    port: int
    user: str
    identity_file: Path
    known_hosts: Path


@dataclass(frozen=True)
class Plan:
    """One run on one cluster: where it goes, which files (already on local disk), which jobs."""

    run_dir: str
    local_dir: Path  # the files, at the same relative paths as under run_dir
    files: tuple[str, ...]  # relative paths, e.g. "files/runner.sh", "b0/job.sh"
    benchmarks: tuple[str, ...]

    def folders(self) -> list[str]:
        parents = {f"{self.run_dir}/{f.rsplit('/', 1)[0]}" for f in self.files if "/" in f}
        logs = {f"{self.run_dir}/{b}/logs" for b in self.benchmarks}  # sbatch --output needs it
        return sorted(parents | logs)


def _job_id(stdout: str) -> str:
    # sbatch --parsable prints "id" or "id;cluster".
    return stdout.strip().splitlines()[-1].split(";")[0]


async def naive_asyncssh(target: SshTarget, plan: Plan) -> list[str]:
    async with asyncssh.connect(
        target.host,
        port=target.port,
        username=target.user,
        client_keys=[str(target.identity_file)],
        known_hosts=str(target.known_hosts),
    ) as conn:
        mkdir = "mkdir -p " + " ".join(shlex.quote(d) for d in plan.folders())
        await conn.run(mkdir, check=True, timeout=COMMAND_TIMEOUT)
        async with conn.start_sftp_client() as sftp:
            for rel in plan.files:
                await sftp.put(str(plan.local_dir / rel), f"{plan.run_dir}/{rel}")
        ids = []
        for bench in plan.benchmarks:
            job = shlex.quote(f"{plan.run_dir}/{bench}/job.sh")
            result = await conn.run(f"sbatch --parsable {job}", check=True, timeout=COMMAND_TIMEOUT)
            ids.append(_job_id(str(result.stdout)))
    return ids


def _ssh_options(target: SshTarget) -> list[str]:
    return [
        "-F",
        "/dev/null",  # the person's own ~/.ssh/config is not part of the measurement
        "-i",
        str(target.identity_file),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        f"UserKnownHostsFile={target.known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
    ]


def _run(argv: list[str]) -> str:
    result = subprocess.run(
        argv, capture_output=True, text=True, check=False, timeout=COMMAND_TIMEOUT, stdin=None
    )
    if result.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {result.returncode}: {result.stderr.strip()[-300:]}")
    return result.stdout


def naive_openssh(target: SshTarget, plan: Plan) -> list[str]:
    opts = _ssh_options(target)
    where = f"{target.user}@{target.host}"
    ssh = ["ssh", "-n", *opts, "-p", str(target.port), where]
    _run([*ssh, "mkdir -p " + " ".join(shlex.quote(d) for d in plan.folders())])
    for rel in plan.files:
        remote = f"{where}:{plan.run_dir}/{rel}"
        _run(["scp", "-q", *opts, "-P", str(target.port), str(plan.local_dir / rel), remote])
    ids = []
    for bench in plan.benchmarks:
        job = shlex.quote(f"{plan.run_dir}/{bench}/job.sh")
        ids.append(_job_id(_run([*ssh, f"sbatch --parsable {job}"])))
    return ids


def careful_openssh(target: SshTarget, plan: Plan) -> list[str]:
    opts = _ssh_options(target)
    where = f"{target.user}@{target.host}"
    ssh = ["ssh", "-n", *opts, "-p", str(target.port), where]
    parent, _, name = plan.run_dir.rpartition("/")
    _run([*ssh, "mkdir -p " + shlex.quote(parent)])
    # One scp of the folder holding every file (job scripts and uploads), named as the run
    # folder, so that it lands as it (see ``cold.staged``).
    if plan.local_dir.name != name:
        raise ValueError(f"{plan.local_dir} must be named {name!r} to be copied as {plan.run_dir}")
    _run(
        [
            "scp",
            "-q",
            "-r",
            *opts,
            "-P",
            str(target.port),
            str(plan.local_dir),
            f"{where}:{parent}/",
        ]
    )
    # sbatch --output needs each logs/ folder; a careful person folds that into the sbatch call.
    ids = []
    for bench in plan.benchmarks:
        job = shlex.quote(f"{plan.run_dir}/{bench}/job.sh")
        logs = shlex.quote(f"{plan.run_dir}/{bench}/logs")
        ids.append(_job_id(_run([*ssh, f"mkdir -p {logs} && sbatch --parsable {job}"])))
    return ids
