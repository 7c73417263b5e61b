"""The local dev cluster (``scripts/dev-cluster``) as seen from test code.

Standard library only, so any test layer can import it. ``load()`` describes the running cluster
(or raises telling you to start it); ``slurm()`` runs an admin Slurm command as root against one
of its Slurm clusters (with that cluster's own Slurm: the 24.11 tree's for ``local24``);
``dev_cluster()`` runs one of the script's subcommands (``dbd-stop``, ...).

All names and paths come from ``scripts/dev-cluster env``, the one source of truth.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "dev-cluster"
"""The script that starts and stops the cluster."""

UP_HINT = "run scripts/dev-cluster up (as root) to start the dev cluster"


@dataclass(frozen=True)
class ShellUser:
    """A user of the 24.11 tree whose login shell is not bash (docs/dev-cluster.md)."""

    user: str
    shell: str
    """The login shell, e.g. ``/usr/bin/tcsh``."""
    rc_file: str
    """The rc file the shell reads for ``ssh host command``, which alone puts Slurm on PATH."""
    cluster: str


@dataclass(frozen=True)
class DevCluster:
    """Where everything of the running dev cluster is, and how to reach each Slurm cluster."""

    state_dir: Path
    clusters_dir: Path
    """Folder of the cluster profiles ``<cluster>.toml`` and the shell users' profiles."""
    test_user: str
    test_uid: int
    ssh_port: Mapping[str, int]
    """Cluster name -> sshd port on 127.0.0.1 that leads to it."""
    slurm_conf: Mapping[str, Path]
    """Cluster name -> its slurm.conf, for admin commands run locally as root."""
    identity_file: Path
    known_hosts: Path
    workdir: Path
    slurm_version: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Cluster name -> Slurm release, ``"22.05"`` or ``"24.11"``."""
    accounting: frozenset[str] = frozenset()
    """The clusters that record to a slurmdbd (``localnoacct`` does not)."""
    tree_clusters: frozenset[str] = frozenset()
    """The clusters run in the trixie tree: admin commands go through ``tree-run``."""
    shell_profiles: Mapping[str, ShellUser] = field(default_factory=lambda: MappingProxyType({}))
    """Profile name (``local24-tcsh``...) -> its login-shell user."""
    bench_users: tuple[str, ...] = ()
    """The 10,000-chain poll bench's login users, one per endpoint (each with the client's key)."""
    bench_workdirs: Path | None = None
    """The folder of the bench users' workdirs, ``<bench_workdirs>/<user>``."""
    host: str = "127.0.0.1"

    @property
    def clusters(self) -> tuple[str, ...]:
        """The cluster names, e.g. ``("local", "local2", "localnoacct", "local24")``."""
        return tuple(self.ssh_port)

    def profile(self, cluster: str) -> Path:
        """The TOML profile of one cluster, or of a shell user (``local24-tcsh``)."""
        if cluster not in self.shell_profiles:
            self._check(cluster)
        return self.clusters_dir / f"{cluster}.toml"

    def ssh_argv(self, cluster: str, command: str, *, user: str | None = None) -> list[str]:
        """An OpenSSH command line that runs ``command`` as the test user (or ``user``) on
        ``cluster``."""
        self._check(cluster)
        return [
            "ssh", "-n", "-i", str(self.identity_file), "-o", "IdentitiesOnly=yes",
            "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=5",
            "-p", str(self.ssh_port[cluster]), f"{user or self.test_user}@{self.host}", command,
        ]  # fmt: skip

    def _check(self, cluster: str) -> None:
        if cluster not in self.ssh_port:
            raise ValueError(f"unknown dev cluster {cluster!r}; known: {', '.join(self.clusters)}")


def dev_cluster(*subcommand: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run ``scripts/dev-cluster SUBCOMMAND`` (e.g. ``dbd-stop``), capturing its output."""
    return subprocess.run(
        [str(SCRIPT), *subcommand], capture_output=True, text=True, check=False, timeout=timeout
    )


@functools.cache
def _describe() -> DevCluster:
    """Read the paths from ``scripts/dev-cluster env``; no check that anything runs."""
    result = dev_cluster("env", timeout=30.0)
    if result.returncode != 0:
        raise RuntimeError(f"scripts/dev-cluster env failed: {result.stderr.strip()}; {UP_HINT}")
    env = _parse_exports(result.stdout)
    try:
        names = env["REMOTE_CHAIN_DEV_CLUSTERS"].split()
        uid = env["REMOTE_CHAIN_DEV_UID"]
        if not uid:
            raise RuntimeError(
                f"the test user {env['REMOTE_CHAIN_DEV_USER']} does not exist; {UP_HINT}"
            )
        return DevCluster(
            state_dir=Path(env["REMOTE_CHAIN_DEV_DIR"]),
            clusters_dir=Path(env["REMOTE_CHAIN_CLUSTERS_DIR"]),
            test_user=env["REMOTE_CHAIN_DEV_USER"],
            test_uid=int(uid),
            ssh_port=MappingProxyType(
                {n: int(env[f"REMOTE_CHAIN_DEV_SSH_PORT_{n.upper()}"]) for n in names}
            ),
            slurm_conf=MappingProxyType(
                {n: Path(env[f"REMOTE_CHAIN_DEV_SLURM_CONF_{n.upper()}"]) for n in names}
            ),
            identity_file=Path(env["REMOTE_CHAIN_DEV_IDENTITY_FILE"]),
            known_hosts=Path(env["REMOTE_CHAIN_DEV_KNOWN_HOSTS"]),
            workdir=Path(env["REMOTE_CHAIN_DEV_WORKDIR"]),
            slurm_version=MappingProxyType(
                {n: env[f"REMOTE_CHAIN_DEV_SLURM_VERSION_{n.upper()}"] for n in names}
            ),
            accounting=frozenset(env["REMOTE_CHAIN_DEV_ACCOUNTING_CLUSTERS"].split()),
            tree_clusters=frozenset(env["REMOTE_CHAIN_DEV_TREE_CLUSTERS"].split()),
            shell_profiles=MappingProxyType(
                {
                    p: ShellUser(*_var(env, "SHELL", p).split(":"))
                    for p in env["REMOTE_CHAIN_DEV_SHELL_PROFILES"].split()
                }
            ),
            bench_users=tuple(env["REMOTE_CHAIN_DEV_BENCH_USERS"].split()),
            bench_workdirs=Path(env["REMOTE_CHAIN_DEV_BENCH_WORKDIRS"]),
        )
    except KeyError as exc:
        raise RuntimeError(
            f"scripts/dev-cluster env did not print {exc}; is the script current?"
        ) from exc


def _var(env: Mapping[str, str], kind: str, name: str) -> str:
    return env[f"REMOTE_CHAIN_DEV_{kind}_{name.upper().replace('-', '_')}"]


def _parse_exports(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            key, _, value = words[1].partition("=")
            env[key] = value
    return env


def load() -> DevCluster:
    """Describe the dev cluster; raise RuntimeError (how to start it) unless all of it runs."""
    cluster = _describe()
    status = dev_cluster("status", timeout=30.0)
    if status.returncode != 0:
        raise RuntimeError(
            f"the dev cluster is not (fully) up; {UP_HINT}\n{status.stdout.rstrip()}"
        )
    needed = [cluster.identity_file, cluster.known_hosts, *map(cluster.profile, cluster.clusters)]
    missing = [path for path in needed if not path.exists()]
    if missing:
        raise RuntimeError(f"missing {', '.join(map(str, missing))}; {UP_HINT}")
    return cluster


def slurm(
    cluster: str, *argv: str, check: bool = False, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run a Slurm command (``scontrol``, ``scancel``, ``sacct``...) locally, as the calling user
    (root in CI), against ``cluster`` (or a shell profile's cluster): e.g.
    ``slurm("local", "scontrol", "requeue", job_id)``.

    Works while parts of the cluster are stopped (it does not call ``load()``'s liveness check).
    """
    if not argv:
        raise ValueError("slurm() needs a command, e.g. slurm('local', 'sinfo')")
    described = _describe()
    if cluster in described.shell_profiles:  # a login-shell user's profile: its cluster
        cluster = described.shell_profiles[cluster].cluster
    conf = described.slurm_conf.get(cluster)
    if conf is None:
        raise ValueError(f"unknown dev cluster {cluster!r}")
    # A 22.05 client cannot talk to a 24.11 slurmctld (Slurm speaks to two older releases
    # only): local24's admin commands run in the tree, with its own Slurm.
    prefix = [str(SCRIPT), "tree-run"] if cluster in described.tree_clusters else []
    return subprocess.run(
        [*prefix, *argv],
        env={**os.environ, "SLURM_CONF": str(conf)},
        capture_output=True,
        text=True,
        check=check,
        timeout=timeout,
    )
