"""Where and how to reach one cluster: a frozen value built by the config layer. PURE."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from remote_chain.core.models import Transport

# Without REMOTE_CHAIN_CONNECT_TIMEOUT or the ssh config's ConnectTimeout.
DEFAULT_CONNECT_TIMEOUT = 15.0


@dataclass(frozen=True)
class Endpoint:
    """One cluster's SSH coordinates and limits.

    ``name`` is the cluster's name and is what every error names; ``host`` may be an
    ``~/.ssh/config`` alias. ``None`` means "leave it to ssh config, then the defaults": a
    field set here overrides the ssh config, as ``ssh -p/-l/-i/-J/-F`` do.
    ``ssh_config`` replaces ``~/.ssh/config`` and ``/etc/ssh/ssh_config`` (``ssh -F``).
    ``known_hosts``, when set, is used for every hop, jump hosts included.
    """

    name: str
    host: str
    port: int | None = None
    user: str | None = None
    identity_file: Path | None = None
    known_hosts: Path | None = None
    proxy_jump: str | None = None
    control_path: str | None = None
    ssh_config: Path | None = None
    transport: Transport = "asyncssh"
    connect_timeout: float | None = None  # None: ssh config's ConnectTimeout, else 15 s
    command_timeout: float = 120
    keepalive_interval: float = 15
    # OpenSSH's MaxSessions defaults to 10 and the server counts a channel until its close
    # is fully processed: a margin below it keeps a new channel from racing a closing one.
    max_channels: int = 6
    # Most bytes one command may print (stdout and stderr together): a login shell that floods
    # (an rc file printing endless output) must fail the command, not take the client's memory.
    max_output_bytes: int = 64 * 1024 * 1024
    # The persistent connection: seconds an agent keeps it idle, 0 for none,
    # and the per-user folder for its socket when $XDG_RUNTIME_DIR is unset.
    persist: float = 0
    agent_dir: Path | None = None
    # Files whose change retires an agent: the profile (the known_hosts file is always watched).
    watch: tuple[Path, ...] = ()
