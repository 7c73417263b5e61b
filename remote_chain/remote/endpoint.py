"""Where and how to reach one cluster: a frozen value built by the config layer. PURE."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Transport = Literal["asyncssh", "openssh"]


@dataclass(frozen=True)
class Endpoint:
    """One cluster's SSH coordinates and limits.

    ``name`` is the cluster's name and is what every error names; ``host`` may be an
    ``~/.ssh/config`` alias. ``None`` means "leave it to ssh config, then the defaults".
    """

    name: str
    host: str
    port: int | None = None
    user: str | None = None
    identity_file: Path | None = None
    known_hosts: Path | None = None
    proxy_jump: str | None = None
    control_path: str | None = None
    transport: Transport = "asyncssh"
    connect_timeout: float = 15
    command_timeout: float = 120
    keepalive_interval: float = 15
    # OpenSSH's MaxSessions defaults to 10 and the server counts a channel until its close
    # is fully processed: 8 concurrent channels were measured to still race it, 6 never did.
    max_channels: int = 6
