"""P10: how long a dead host takes to fail, the whole CLI process, as users see it.

Three ways a cluster is dead, each timed as ``remote-chain status RUN --cluster dead``
in a new process (import, config, connect, report, exit 3):

- refused: nothing listens on the port. Retried for ``REMOTE_CHAIN_CONNECT_RETRY`` (2 s,
  an sshd restarting) and no longer: target <= 3 s.
- unresolvable: the name does not resolve (``*.invalid``, RFC 2606). Not retried: <= 1 s.
- blackholed: the port accepts TCP (the kernel's backlog) and never says a word, so only the
  connect timeout ends it; measured with ``REMOTE_CHAIN_CONNECT_TIMEOUT=3``: <= 4 s.

Loopback only, no dev cluster needed: the profiles point at nothing.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from benchlib.common import Ctx
from benchlib.rig import REPO
from benchlib.stats import Row, Summary, Verdict, plain

BLACKHOLE_TIMEOUT_S = 3
TARGETS_S = {"refused": 3.0, "unresolvable": 1.0, "blackholed": BLACKHOLE_TIMEOUT_S + 1.0}
EXIT_UNREACHABLE = 3


def _profile(folder: Path, host: str, port: int, known_hosts: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dead.toml").write_text(
        f'host = "{host}"\nport = {port}\nknown_hosts = "{known_hosts}"\nworkdir = "/tmp/dead"\n'
    )


def _time_cli(folder: Path, env: dict[str, str]) -> float:
    argv = [sys.executable, "-c", "from remote_chain.cli import main; main()"]
    argv += ["--clusters-dir", str(folder), "status", "rc-bench-dead", "--cluster", "dead"]
    started = time.monotonic()
    done = subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=folder, timeout=120, check=False
    )
    seconds = time.monotonic() - started
    if done.returncode != EXIT_UNREACHABLE:
        raise RuntimeError(f"expected exit 3, got {done.returncode}: {done.stderr[-300:]}")
    return seconds


def p10_dead_host(ctx: Ctx) -> None:
    known_hosts = ctx.tmp / "p10_known_hosts"
    known_hosts.write_text("")  # exists, so the connection is attempted (and fails)
    ssh_config = ctx.tmp / "p10_ssh_config"
    ssh_config.write_text("")  # nothing of the user's ~/.ssh/config
    base = {k: v for k, v in os.environ.items() if not k.startswith("REMOTE_CHAIN_")}
    base |= {"PYTHONPATH": str(REPO), "REMOTE_CHAIN_SSH_CONFIG": str(ssh_config)}
    base["XDG_STATE_HOME"] = str(ctx.tmp / "p10_state")
    with socket.socket() as silent, socket.socket() as closed:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        cases = {
            "refused": ("127.0.0.1", closed.getsockname()[1], {}),
            "unresolvable": ("no-such-cluster.invalid", 22, {}),
            "blackholed": (
                "127.0.0.1",
                silent.getsockname()[1],
                {"REMOTE_CHAIN_CONNECT_TIMEOUT": str(BLACKHOLE_TIMEOUT_S)},
            ),
        }
        for name, (host, port, extra) in cases.items():
            ctx.progress(f"P10 dead host: {name}")
            folder = ctx.tmp / f"p10_{name}"
            _profile(folder, host, port, known_hosts)
            runs = min(ctx.runs, 3) if name == "blackholed" else ctx.runs
            samples = [_time_cli(folder, base | extra) for _ in range(runs)]
            s = Summary.of(samples)
            target = TARGETS_S[name]
            met = s.max <= target
            ctx.rows.append(
                Row(
                    f"p10.{name}",
                    f"P10 dead host ({name}): `status` exits 3",
                    plain(s, " s", 2),
                    target=f"<= {target:g} s",
                    met=met,
                    data=s.to_json(),
                )
            )
            ctx.verdicts.append(
                Verdict(
                    f"P10 dead host ({name}) fails within {target:g} s",
                    met,
                    f"slowest {s.max:.2f} s of {s.n}, median {s.median:.2f} s",
                )
            )
