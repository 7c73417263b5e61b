"""Process-wide settings from ``REMOTE_CHAIN_*`` environment variables and ``.env``.

Precedence (pydantic-settings): keyword arguments, then the environment, then ``.env`` in the
current folder, then the defaults below. ``.env.example`` lists every field; a test keeps the
two in step. Per-cluster settings live in the cluster profiles, not here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from remote_chain.core.durations import parse_persist
from remote_chain.errors import ConfigError

ENV_PREFIX = "REMOTE_CHAIN_"


def _valid_persist(value: str) -> str:
    parse_persist(value)  # raises ValueError, which names the value and the accepted forms
    return value


class Settings(BaseSettings):
    """Tunables of the client; every one can be set as ``REMOTE_CHAIN_<FIELD>``."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=".env",
        env_file_encoding="utf-8",
        env_ignore_empty=True,  # `REMOTE_CHAIN_STATE_DIR=` means unset, not Path("") == "."
        extra="ignore",  # .env is shared with other tools
        frozen=True,
    )

    # Extra folders of cluster profiles, os.pathsep-separated, searched after --clusters-dir.
    clusters_dir: str | None = None
    # Local state (the run index); default $XDG_STATE_HOME/remote-chain, see state_home().
    state_dir: Path | None = None
    log_format: Literal["console", "json"] | None = None
    # None: the ssh config's ConnectTimeout for the host, else DEFAULT_CONNECT_TIMEOUT
    # (transport/endpoint.py): an explicit setting beats the ssh config, as with `ssh -o`.
    connect_timeout: float | None = Field(default=None, gt=0)
    # A refused connection is tried again for this long (an sshd restarting), no longer:
    # a dead host fails within a few seconds, as with `ssh`.
    connect_retry: float = Field(default=2, ge=0, le=300)
    # `wait` gives up (exit 3) after a cluster was unreachable this long without a break.
    wait_unreachable: float = Field(default=15 * 60, gt=0)
    # The ssh config file to read instead of ~/.ssh/config and /etc/ssh/ssh_config (ssh -F);
    # a profile's own `ssh_config` wins over this.
    ssh_config: Path | None = None
    command_timeout: float = Field(default=120, gt=0)
    keepalive_interval: float = Field(default=15, gt=0)
    # Concurrent channels per connection: below OpenSSH's default MaxSessions of 10, leaving
    # room for the user's own ControlMaster sessions.
    max_channels: int = Field(default=6, ge=1, le=64)
    sacct_attempts: int = Field(default=5, ge=1, le=100)
    sacct_wait_max: float = Field(default=8, gt=0)
    # The prologue's accounting-lag window (spec: "retries the lookup for about a minute").
    lookup_timeout: int = Field(default=60, ge=1, le=3600)
    # Links in a row whose predecessor no source knew (sacct, slurmctld, its own end record)
    # before the chain stops with an error: bounds a runaway when accounting is off.
    max_unknown_links: int = Field(default=3, ge=1, le=1000)
    poll_interval: float = Field(default=30, gt=0)
    # Overrides every profile's `persist` ("10m", "0" for off): the persistent connection.
    persist: Annotated[str, AfterValidator(_valid_persist)] | None = None
    max_upload_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    # Most bytes one remote command may print, login-shell noise included.
    max_output_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)

    def clusters_dirs(self) -> list[Path]:
        """The folders named in ``clusters_dir``, in order, ``~`` expanded, empty parts skipped."""
        if not self.clusters_dir:
            return []
        return [Path(part).expanduser() for part in self.clusters_dir.split(os.pathsep) if part]

    def state_home(self, environ: Mapping[str, str] | None = None) -> Path:
        """``state_dir``, else ``$XDG_STATE_HOME/remote-chain``, else ``~/.local/state/...``."""
        if self.state_dir is not None:
            return self.state_dir.expanduser()
        env = os.environ if environ is None else environ
        xdg = env.get("XDG_STATE_HOME", "")
        # The XDG spec says relative values are invalid and must be ignored.
        base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
        return base / "remote-chain"

    def index_dir(self, environ: Mapping[str, str] | None = None) -> Path:
        """The local run index: ``<state_home>/runs/`` (interface.md section 4)."""
        return self.state_home(environ) / "runs"


def load_settings(*, env_file: Path | None = Path(".env")) -> Settings:
    """``Settings()`` with any invalid value reported as a ``ConfigError`` naming the variable."""
    try:
        return Settings(_env_file=env_file)
    except ValidationError as exc:
        problems = [
            (f"{ENV_PREFIX}{'.'.join(str(p) for p in err['loc']).upper()}", err["msg"])
            for err in exc.errors(include_url=False)
        ]
        field, message = problems[0]
        if len(problems) > 1:
            message = "; ".join(f"{name}: {msg}" for name, msg in problems)
        source = f"environment or {env_file}" if env_file is not None else "environment"
        raise ConfigError(message, source=source, field=field) from None
