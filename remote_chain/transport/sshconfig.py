"""What the ssh config says about a host, read the way ``ssh -G`` reads it.

asyncssh parses OpenSSH's config format itself (``Host``, ``Match``, ``Include``, first
value wins, ``%`` tokens): :func:`lookup` runs that parser, with the profile's set fields
placed first so that they win exactly as ``ssh -p/-l`` do. On top of it this module decides
what asyncssh leaves to the caller:

- the route: the jump hosts (the profile's ``proxy_jump``, else the config's ``ProxyJump``),
  each looked up in the config like the target, then the target itself;
- the known_hosts files of every hop: the profile's ``known_hosts`` for all of them, else the
  hop's ``UserKnownHostsFile`` + ``GlobalKnownHostsFile``, else OpenSSH's defaults;
- refusing a config that turns host-key checking off (``StrictHostKeyChecking no``,
  ``UserKnownHostsFile none`` or ``/dev/null``): remote-chain always verifies, so a config
  asking otherwise is an error, never silently obeyed and never silently ignored.

No connection is made here; ``ssh.py`` connects hop by hop with what this returns.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from asyncssh.config import ConfigParseError, SSHClientConfig, SSHConfig

from remote_chain.errors import ConfigError
from remote_chain.transport.endpoint import DEFAULT_CONNECT_TIMEOUT, Endpoint

DEFAULT_PORT = 22
# OpenSSH's defaults when the config names no known_hosts file (ssh_config(5)).
DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
USER_CONFIG = Path("~/.ssh/config")
SYSTEM_CONFIG = Path("/etc/ssh/ssh_config")

# Values of StrictHostKeyChecking that would accept an unknown key without asking.
_UNCHECKED = frozenset({"no", "off", "false"})
_NO_FILE = frozenset({"none", "/dev/null"})
MAX_HOPS = 8
__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "Hop",
    "Route",
    "follow_jump",
    "resolve",
    "split_jump",
]  # a ProxyJump chain longer than this is surely a loop


class _Config(SSHClientConfig):
    """asyncssh's client config, also keeping ``StrictHostKeyChecking``, which it skips."""

    _handlers = {  # noqa: RUF012 - asyncssh's own (class-level, unannotated) attribute
        **SSHClientConfig._handlers,
        "stricthostkeychecking": ("StrictHostKeyChecking", SSHConfig._set_string),
    }


@dataclass(frozen=True)
class Hop:
    """One ssh connection of a route: a jump host, or the target (the last hop).

    ``alias`` is the name as written (profile or ProxyJump) and is what asyncssh looks up in
    the config again; ``host``/``port``/``user`` are what the config resolves it to, for
    messages. ``known_hosts`` lists existing files only; empty means none exists.
    """

    alias: str
    host: str
    port: int
    user: str | None
    port_set: int | None
    user_set: str | None
    known_hosts: tuple[Path, ...]
    known_hosts_wanted: tuple[Path, ...]
    connect_timeout: float
    keepalive_interval: float | None
    jump: bool = False

    @property
    def where(self) -> str:
        """``alias`` plus the address it resolves to when that differs, and ``jump host``
        before a jump host: what errors name."""
        address = self.host if self.port == DEFAULT_PORT else f"{self.host}:{self.port}"
        name = address if self.alias in (self.host, address) else f"{self.alias} ({address})"
        return f"jump host {name}" if self.jump else name


@dataclass(frozen=True)
class Route:
    """The hops to reach a cluster, jump hosts first, and the config files they came from."""

    hops: tuple[Hop, ...]
    config_files: tuple[Path, ...]

    @property
    def target(self) -> Hop:
        return self.hops[-1]


def lookup(
    alias: str, files: tuple[Path, ...], *, user: str | None = None, port: int | None = None
) -> SSHClientConfig:
    """asyncssh's reading of ``files`` for ``alias``; ``user``/``port`` win when given."""
    try:
        local_user = getpass.getuser()
    except (KeyError, OSError):
        local_user = "root" if os.getuid() == 0 else str(os.getuid())
    try:
        config = _Config.load(
            None,
            list(files),
            False,  # reload
            False,  # canonical
            False,  # final
            local_user,
            user if user is not None else (),
            alias,
            port if port is not None else (),
        )
    except ConfigParseError as exc:
        raise ConfigError(f"invalid ssh config: {exc}", source=_files_label(files)) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read ssh config: {exc.strerror or exc} ({exc.filename})",
            source=_files_label(files),
        ) from None
    return cast(SSHClientConfig, config)


def _files_label(files: tuple[Path, ...]) -> str:
    return ", ".join(str(f) for f in files) or "ssh config"


def split_jump(spec: str) -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` (or ``ssh://[user@]host[:port]``) -> (user, host, port)."""
    text = spec.removeprefix("ssh://")
    user: str | None = None
    if "@" in text:
        user, text = text.rsplit("@", 1)
    port: int | None = None
    if text.startswith("[") and "]" in text:  # [v6addr]:port
        inner, _, rest = text[1:].partition("]")
        text = inner
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
        if port_text.isdigit():
            text, port = host, int(port_text)
    return user or None, text, port


def _refuse_unchecked(config: SSHClientConfig, alias: str, what: str, files: str) -> None:
    strict = str(config.get("StrictHostKeyChecking", "") or "").lower()
    user_files = config.get("UserKnownHostsFile", ())
    problem = None
    if strict in _UNCHECKED:
        problem = f"StrictHostKeyChecking {strict}"
    elif user_files == [] or (
        isinstance(user_files, list) and any(f.lower() in _NO_FILE for f in user_files)
    ):
        problem = f"UserKnownHostsFile {' '.join(user_files) or 'none'}"
    if problem is not None:
        raise ConfigError(
            f"the ssh config turns host-key checking off for {what} {alias!r} ({problem}); "
            "remote-chain always verifies host keys, of jump hosts too: remove that line "
            "for this host, or name a real known_hosts file in the profile's `known_hosts`",
            source=files,
        )


def _known_hosts(
    config: SSHClientConfig, endpoint: Endpoint
) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(existing files, all files asked for) to verify one hop's host key against."""
    if endpoint.known_hosts is not None:
        wanted: list[str] = [str(endpoint.known_hosts)]
    else:
        user_files = config.get("UserKnownHostsFile", ())
        global_files = config.get("GlobalKnownHostsFile", ())
        wanted = [
            *(user_files if isinstance(user_files, list) else DEFAULT_USER_KNOWN_HOSTS),
            *(global_files if isinstance(global_files, list) else DEFAULT_GLOBAL_KNOWN_HOSTS),
        ]
    paths = tuple(Path(os.path.expandvars(w)).expanduser() for w in wanted)
    return tuple(p for p in paths if p.is_file()), paths


def _hop(
    alias: str,
    config: SSHClientConfig,
    endpoint: Endpoint,
    *,
    user: str | None,
    port: int | None,
    jump: bool = False,
) -> Hop:
    existing, wanted = _known_hosts(config, endpoint)
    timeout = endpoint.connect_timeout
    if timeout is None:
        configured = config.get("ConnectTimeout")
        timeout = float(configured) if isinstance(configured, int) else DEFAULT_CONNECT_TIMEOUT
    keepalive = config.get("ServerAliveInterval")
    resolved_user = config.get("User")
    return Hop(
        alias=alias,
        host=str(config.get("Hostname", alias)),
        port=int(config.get("Port", DEFAULT_PORT)),  # type: ignore[call-overload]
        user=str(resolved_user) if resolved_user else None,
        port_set=port,
        user_set=user,
        known_hosts=existing,
        known_hosts_wanted=wanted,
        connect_timeout=timeout,
        keepalive_interval=float(keepalive) if isinstance(keepalive, int) else None,
        jump=jump,
    )


def config_files(endpoint: Endpoint) -> tuple[Path, ...]:
    """The config files read, in order: ``ssh_config`` alone (``ssh -F``), else the user's
    and the system's that exist. A named file that is missing is a ``ConfigError``."""
    if endpoint.ssh_config is not None:
        path = endpoint.ssh_config.expanduser()
        if not path.is_file():
            raise ConfigError(
                f"ssh config file {path} does not exist",
                source=endpoint.name,
                field="ssh_config",
            )
        return (path,)
    return tuple(p for p in (USER_CONFIG.expanduser(), SYSTEM_CONFIG) if p.is_file())


def resolve(endpoint: Endpoint) -> Route:
    """The route to ``endpoint``: every hop looked up in the ssh config and checked.

    Raises ``ConfigError`` for an unreadable or invalid config, and for a config that turns
    host-key checking off for any hop.
    """
    files = config_files(endpoint)
    label = _files_label(files)
    target_config = lookup(endpoint.host, files, user=endpoint.user, port=endpoint.port)
    _refuse_unchecked(target_config, endpoint.host, "host", label)
    jump = endpoint.proxy_jump
    if jump is None:
        configured = target_config.get("ProxyJump")
        jump = str(configured) if configured else None
    hops = _jumps(jump, files, endpoint, label, seen=(endpoint.host,))
    target = _hop(endpoint.host, target_config, endpoint, user=endpoint.user, port=endpoint.port)
    return Route((*hops, target), files)


def follow_jump(seen: tuple[str, ...], alias: str, source: str) -> tuple[str, ...]:
    """``seen`` plus ``alias``, whose own ProxyJump is about to be followed; a ConfigError if
    that comes back to a host already on the chain or goes past ``MAX_HOPS`` (both
    transports: ``_jumps`` here, ``openssh._jump_specs``)."""
    if alias in seen:
        raise ConfigError(f"ProxyJump loop: {' -> '.join((*seen, alias))}", source=source)
    if len(seen) > MAX_HOPS:
        raise ConfigError(f"more than {MAX_HOPS} jump hosts before {alias}", source=source)
    return (*seen, alias)


def _jumps(
    jump: str | None,
    files: tuple[Path, ...],
    endpoint: Endpoint,
    label: str,
    *,
    seen: tuple[str, ...],
) -> list[Hop]:
    """The hops of one ProxyJump value, jump hosts first, each looked up and checked.

    The first jump host's own ``ProxyJump`` is followed, as OpenSSH does: it reaches that
    host with an ssh of its own (``ssh -W``) that reads the config for it; the later ones are
    reached through the hop before them, whatever their own Host block says (``-J`` on that
    ssh's command line wins). A bastion behind a bastion is common at sites; a chain that
    comes back to a host already on it, or grows past ``MAX_HOPS``, is a ConfigError.
    """
    if jump is None or jump.lower() == "none":
        return []
    specs = [part.strip() for part in jump.split(",") if part.strip()]
    hops: list[Hop] = []
    for index, spec in enumerate(specs):
        user, alias, port = split_jump(spec)
        hop_config = lookup(alias, files, user=user, port=port)
        _refuse_unchecked(hop_config, alias, "jump host", label)
        own = hop_config.get("ProxyJump")
        if index == 0 and own and str(own).lower() != "none":
            inner = follow_jump(seen, alias, label)
            hops += _jumps(str(own), files, endpoint, label, seen=inner)
        hops.append(_hop(alias, hop_config, endpoint, user=user, port=port, jump=True))
        if len(hops) > MAX_HOPS:
            raise ConfigError(f"more than {MAX_HOPS} jump hosts reaching {jump!r}", source=label)
    return hops
