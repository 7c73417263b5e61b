"""The script in the exec's env request (markers.EXEC_COMMAND) on the real dev cluster: bash,
tcsh and zsh login shells, on Slurm 22.05 and 24.11, for a script from the env request (the
sshd accepts ``LC_*``, as Debian's does) and for one on stdin only (a secret one, and every one
on an sshd without ``AcceptEnv``): the same result, and the variable never reaches the
script's environment, so sbatch'd jobs cannot inherit it."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import devcluster  # tests/ is on sys.path: pytest's rootdir-relative import, as in conftest.py
import pytest

from remote_chain.client.cluster import endpoint_for
from remote_chain.config import find_profile
from remote_chain.config.settings import Settings
from remote_chain.transport.connect import open_remote

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

# 1 when this bash was started with the script in its environment; then whether the script
# (and so anything it starts) still sees the variable; then the login shell's Slurm.
PROBE = """
tr '\\0' '\\n' </proc/$$/environ | grep -c '^LC_REMOTE_CHAIN=.' || true
env | grep -c '^LC_REMOTE_CHAIN=' || true
command -v sbatch
"""


def _started_at(pid: int) -> float:
    """A process's start, in seconds since the epoch (proc(5): field 22 of stat, in ticks)."""
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    boot = next(
        float(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime ")
    )
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _accepts_lc(dev: devcluster.DevCluster, cluster: str) -> bool | None:
    """Whether the sshd behind ``cluster`` accepts ``LC_*`` (its rendered sshd_config says
    so); ``None`` when the file was rendered after that sshd started (`up` re-renders but
    keeps a running sshd), so the running one may have read an older version."""
    tree = cluster in dev.tree_clusters
    config = dev.state_dir / ("local24" if tree else "") / "ssh" / "sshd_config"
    pid_file = dev.state_dir / "run" / ("sshd-local24.pid" if tree else "sshd.pid")
    if config.stat().st_mtime > _started_at(int(pid_file.read_text())):
        return None
    return any(
        line.split()[:1] == ["AcceptEnv"] and "LC_*" in line.split()
        for line in config.read_text().splitlines()
    )


@pytest.mark.parametrize("sensitive", [False, True])
def test_every_login_shell_runs_the_script_from_env_or_stdin(
    dev: devcluster.DevCluster, tmp_path: Path, sensitive: bool
) -> None:
    """Each login shell (bash, tcsh, zsh, on both releases) runs the script with Slurm on its PATH,
    from the env request when the sshd accepts ``LC_*`` and the script is not secret, else from
    stdin, and the variable never reaches the script's environment."""
    names = ["local", "local24", *dev.shell_profiles]
    assert len(names) >= 4, "the dev cluster has no tcsh/zsh users"

    async def probe(name: str) -> tuple[int | None, str]:
        profile = find_profile(name, clusters_dirs=[dev.clusters_dir])
        endpoint = endpoint_for(profile, Settings(state_dir=tmp_path / "state"))
        async with await open_remote(endpoint) as remote:
            result = await remote.run(PROBE, sensitive=sensitive)
        return result.exit_status, result.stdout

    for name in names:
        cluster = dev.shell_profiles[name].cluster if name in dev.shell_profiles else name
        accepts = _accepts_lc(dev, cluster)
        via_env = {"0"} if sensitive or accepts is False else {"1"} if accepts else {"0", "1"}
        status, stdout = anyio.run(probe, name, backend="asyncio")
        lines = stdout.splitlines()
        assert (status, lines[0] in via_env, lines[1]) == (0, True, "0"), (name, stdout)
        assert lines[2].endswith("/sbatch"), (name, stdout)
