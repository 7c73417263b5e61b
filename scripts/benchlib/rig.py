"""The bench rig on the dev cluster: delaying proxies (one process each), profiles and a
known_hosts that point at them, root-side Slurm helpers, logging shims, and cleanup.

Host keys stay verified: each proxy port gets a known_hosts line carrying the key recorded
for the port it forwards to, in a temporary copy of the dev cluster's known_hosts.
Everything the rig starts is stopped by its own PID; everything it creates on the cluster
(run folders, jobs) is tracked and removed or cancelled at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.stats import Chunk
from tests import devcluster  # stdlib only; the repo root is on sys.path (bench.py)

REPO = Path(__file__).resolve().parent.parent.parent

FLIGHTPROXY = Path(__file__).resolve().parent / "flightproxy.py"
SLURM_TOOLS = ("sacct", "squeue", "sbatch", "scancel", "scontrol")
PROXY_START_TIMEOUT = 10.0


@dataclass
class Proxy:
    process: subprocess.Popen[str]
    port: int
    target_port: int
    delay_ms: float
    events: Path


@dataclass
class Rig:
    dev: devcluster.DevCluster
    tmp: Path
    known_hosts: Path
    proxies: list[Proxy] = field(default_factory=list)
    run_ids: set[str] = field(default_factory=set)
    job_ids: dict[str, set[str]] = field(default_factory=dict)  # slurm cluster -> ids
    shim_dirs: list[Path] = field(default_factory=list)
    masters: list[tuple[Path, int]] = field(default_factory=list)  # (ControlPath, port)

    @classmethod
    def create(cls, wait_s: float = 180.0) -> Rig:
        """The rig; waits (bounded) while part of the dev cluster is down, since other people's
        tests stop slurmdbd or sshd for a while on purpose."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                dev = devcluster.load()  # raises telling how to start it when it is down
                break
            except RuntimeError as exc:
                if time.monotonic() >= deadline:
                    raise
                first = str(exc).splitlines()[0]
                print(f"bench: waiting for the dev cluster: {first}", file=sys.stderr, flush=True)
                time.sleep(5)
        tmp = Path(tempfile.mkdtemp(prefix="remote-chain-bench-"))
        known_hosts = tmp / "known_hosts"
        shutil.copyfile(dev.known_hosts, known_hosts)
        return cls(dev, tmp, known_hosts)

    # --- where things are ---------------------------------------------------------------------
    def workdir(self, user: str | None = None) -> Path:
        """The workdir of the test user (None) or of a bench user."""
        if user is None:
            return self.dev.workdir
        if user not in self.dev.bench_users or self.dev.bench_workdirs is None:
            raise RuntimeError(f"{user}: no bench user of the dev cluster (scripts/dev-cluster up)")
        return self.dev.bench_workdirs / user

    def slurm_cluster(self, ssh_port: int) -> str:
        """The Slurm cluster an sshd port leads to (2222 -> local, 2223 -> local2)."""
        for name, port in self.dev.ssh_port.items():
            if port == ssh_port:
                return name
        raise ValueError(f"no dev cluster behind port {ssh_port}")

    def _host_key(self, port: int) -> str:
        wanted = f"[{self.dev.host}]:{port}"
        for line in self.dev.known_hosts.read_text().splitlines():
            words = line.split(None, 1)
            if len(words) == 2 and wanted in words[0].split(","):
                return words[1]
        raise RuntimeError(f"no host key for {wanted} in {self.dev.known_hosts}")

    # --- proxies ------------------------------------------------------------------------------
    def start_proxy(self, target_port: int, delay_ms: float) -> Proxy:
        """A delaying proxy process in front of one sshd port; its port gets the same host key."""
        events = self.tmp / f"events-{len(self.proxies)}.log"
        process = subprocess.Popen(
            [
                sys.executable,
                str(FLIGHTPROXY),
                "--target",
                f"{self.dev.host}:{target_port}",
                "--delay-ms",
                str(delay_ms),
                "--events",
                str(events),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        line = process.stdout.readline()  # "PORT n", printed once listening
        if not line.startswith("PORT "):
            process.kill()
            raise RuntimeError(f"proxy did not start: {line!r}")
        proxy = Proxy(process, int(line.split()[1]), target_port, delay_ms, events)
        self.proxies.append(proxy)
        with self.known_hosts.open("a") as f:
            f.write(f"[{self.dev.host}]:{proxy.port} {self._host_key(target_port)}\n")
        return proxy

    def chunks(self, proxy: Proxy, t0: float, t1: float) -> list[Chunk]:
        """What the proxy read between two CLOCK_MONOTONIC instants."""
        out = []
        with contextlib.suppress(FileNotFoundError), proxy.events.open() as f:
            for line in f:
                words = line.split()
                if len(words) == 4:
                    t = float(words[0])
                    if t0 <= t <= t1:
                        out.append(Chunk(t, int(words[1]), words[2] == "u", int(words[3])))
        return out

    def write_profile(
        self,
        folder: Path,
        name: str,
        port: int,
        *,
        control_path: Path | None = None,
        user: str | None = None,
    ) -> Path:
        """``<folder>/<name>.toml`` for the dev cluster reached through ``port`` (with
        ``control_path``: the openssh transport over that ControlMaster), as the test user or
        as one of the bench users (``user``, with its own workdir)."""
        workdir = self.workdir(user)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name}.toml"
        transport = (
            f'transport = "openssh"\ncontrol_path = "{control_path}"\n' if control_path else ""
        )
        path.write_text(
            transport + f'host = "{self.dev.host}"\n'
            f"port = {port}\n"
            f'user = "{user or self.dev.test_user}"\n'
            f'identity_file = "{self.dev.identity_file}"\n'
            f'known_hosts = "{self.known_hosts}"\n'
            f'workdir = "{workdir}"\n'
            "[slurm]\n"
            'partition = "debug"\n'
            'time = "00:10:00"\n'
        )
        return path

    def _ssh_target(self, port: int, control_path: Path) -> list[str]:
        return [
            "-o", f"ControlPath={control_path}",
            "-p", str(port),
            "-l", self.dev.test_user,
            "-i", str(self.dev.identity_file),
            "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "BatchMode=yes",
        ]  # fmt: skip

    def master_alive(self, port: int, control_path: Path) -> bool:
        check = subprocess.run(
            ["ssh", *self._ssh_target(port, control_path), "-O", "check", self.dev.host],
            check=False,
            timeout=30,
            capture_output=True,
        )
        return check.returncode == 0

    def restart_master(self, port: int, control_path: Path) -> None:
        """Start the master again (an sshd restart by someone else's test may have cut it):
        ask the old one to exit, drop its socket, start a new one, check that it runs."""
        subprocess.run(
            ["ssh", *self._ssh_target(port, control_path), "-O", "exit", self.dev.host],
            check=False,
            timeout=30,
            capture_output=True,
        )
        if (control_path, port) in self.masters:
            self.masters.remove((control_path, port))
        control_path.unlink(missing_ok=True)  # a stale socket would disable the new master
        self.start_master(port)
        if not self.master_alive(port, control_path):
            raise RuntimeError(f"the ControlMaster at {control_path} did not stay up")

    def start_master(self, port: int) -> Path:
        """An OpenSSH ControlMaster to ``port`` (what a user keeps open for the openssh
        transport); stopped in ``cleanup`` with ``ssh -O exit``."""
        control_path = self.tmp / f"cm-{port}"
        subprocess.run(
            ["ssh", "-fNM", *self._ssh_target(port, control_path), self.dev.host],
            check=True,
            timeout=60,
            # -f keeps the master's stdio open (daemon(1, 1)): pipes would never see EOF.
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.masters.append((control_path, port))
        return control_path

    # --- Slurm as root, locally (never through the measured path) -----------------------------
    def track(self, cluster: str, ids: list[str]) -> None:
        self.job_ids.setdefault(cluster, set()).update(ids)

    def scancel(self, cluster: str, ids: list[str]) -> None:
        if ids:
            devcluster.slurm(cluster, "scancel", *ids, timeout=60)

    def sacct(self, cluster: str, ids: list[str], fields: str) -> list[list[str]]:
        """``sacct -X`` rows for the ids (as root, every user); [] when accounting is down."""
        if not ids:
            return []
        result = devcluster.slurm(
            cluster,
            "sacct",
            "-X",
            "--parsable2",
            "--noheader",
            "--starttime",
            "now-1days",
            f"--format={fields}",
            "--jobs",
            ",".join(ids),
            timeout=60,
        )
        return [line.split("|") for line in result.stdout.splitlines() if line]

    # --- logging shims ------------------------------------------------------------------------
    def make_shims(self) -> Path:
        """A folder of sacct/squeue/... wrappers that log each call, then exec the real tool.

        Owned by the test user, who runs them; each log line is ``<epoch> <SLURM_JOB_ID or ->
        <RC_BENCH_TAG or -> <tool>``. The folder is put first on PATH by the bench's probe
        (an ``export PATH=...`` before each script it sends), so the submit exec's ``sbatch``
        hands that PATH to the job (sbatch's default ``--export=ALL``) and every successor
        inherits it: no dotfile of the test user is touched.
        """
        shims = Path(tempfile.mkdtemp(prefix="remote-chain-bench-shims-", dir="/var/tmp"))
        self.shim_dirs.append(shims)
        log = shims / "calls.log"
        log.touch()
        for tool in SLURM_TOOLS:
            real = shutil.which(tool)
            if real is None:
                raise RuntimeError(f"{tool} not found on this machine")
            path = shims / tool
            path.write_text(
                "#!/bin/bash\n"
                f'printf \'%s %s %s %s\\n\' "$EPOCHREALTIME" "${{SLURM_JOB_ID:--}}" '
                f'"${{RC_BENCH_TAG:--}}" {tool} >> {log}\n'
                f'exec {real} "$@"\n'
            )
            path.chmod(0o755)
        uid, gid = self.dev.test_uid, _gid(self.dev.test_user)
        for p in (shims, log, *(shims / t for t in SLURM_TOOLS)):
            os.chown(p, uid, gid)
        shims.chmod(0o755)
        return shims

    # --- cleanup ------------------------------------------------------------------------------
    def stop_proxies(self) -> None:
        for proxy in self.proxies:
            if proxy.process.poll() is None:
                proxy.process.terminate()  # by its own PID, nothing else
        for proxy in self.proxies:
            try:
                proxy.process.wait(5)
            except subprocess.TimeoutExpired:
                proxy.process.kill()
                proxy.process.wait(5)
        self.proxies.clear()

    def cleanup(self) -> None:
        """Stop masters and proxies, cancel every job still queued, remove our run folders."""
        for control_path, port in self.masters:
            subprocess.run(
                ["ssh", *self._ssh_target(port, control_path), "-O", "exit", self.dev.host],
                check=False,
                timeout=30,
                capture_output=True,
            )
        self.stop_proxies()
        for cluster, ids in self.job_ids.items():
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self.scancel(cluster, sorted(ids))
        self._cancel_runs_jobs()
        workdirs = [self.dev.workdir, *(self.workdir(u) for u in self.dev.bench_users)]
        for run_id in self.run_ids:
            for workdir in workdirs:
                shutil.rmtree(workdir / run_id, ignore_errors=True)
        for folder in [self.tmp, *self.shim_dirs]:
            shutil.rmtree(folder, ignore_errors=True)

    def _cancel_runs_jobs(self) -> None:
        """Cancel, on every Slurm cluster of the dev cluster, any job still queued whose name is
        one of the bench's run ids (``<run_id>:<benchmark>``): the jobs of a submit that never
        returned its ids (a sample taken again after an outage, a Ctrl-C) are not tracked,
        and 10,000 held ones would stay in both controllers."""
        prefixes = tuple(f"{r}:" for r in self.run_ids)
        if not prefixes:
            return
        for cluster in self.dev.clusters:
            with contextlib.suppress(subprocess.SubprocessError, OSError, RuntimeError):
                listing = devcluster.slurm(cluster, "squeue", "--noheader", "--format=%i|%j")
                ids = [
                    line.split("|", 1)[0]
                    for line in listing.stdout.splitlines()
                    if line.partition("|")[2].startswith(prefixes)
                ]
                for at in range(0, len(ids), 1000):  # argv stays short
                    self.scancel(cluster, ids[at : at + 1000])


def cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of every core since boot, from /proc/stat's first line."""
    with open("/proc/stat") as f:
        words = f.readline().split()
    values = [int(w) for w in words[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values) - idle, sum(values)


def busy_fraction(before: tuple[int, int], after: tuple[int, int]) -> float:
    """Share of the machine's CPU time (all cores) that was busy between two readings."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total else 0.0


def _gid(user: str) -> int:
    import pwd  # noqa: PLC0415  (POSIX only, like the rest of the rig)

    return pwd.getpwnam(user).pw_gid
