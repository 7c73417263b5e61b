"""Connecting with asyncssh: hop by hop (jump hosts first), every host key checked, keys
only; and ``translate``, the one place that maps asyncssh's (and the socket's) exceptions
to ``remote_chain.errors`` classes. ``ssh.py`` runs commands over what this opens."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import asyncssh
import structlog

from remote_chain.errors import (
    AuthenticationError,
    ConfigError,
    ConnectError,
    HostKeyError,
    HostNotFoundError,
    RefusedError,
    RemoteChainError,
    RemoteError,
    RemoteTimeout,
)
from remote_chain.transport.endpoint import Endpoint
from remote_chain.transport.sshconfig import Hop, Route, resolve

_log = structlog.get_logger()

_SSH_CONFIG = "~/.ssh/config"

_Doing = Literal["connect", "command"]


def translate(
    exc: Exception, endpoint: Endpoint, doing: _Doing, timeout: float, hop: Hop | None = None
) -> RemoteChainError:
    """Map an asyncssh or socket exception to ours; the only place that knows their types.

    ``hop`` is the connection being made (a jump host or the target): errors name it.
    """
    name = endpoint.name
    where = _where(endpoint) if hop is None else hop.where
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        files = ", ".join(str(p) for p in hop.known_hosts) if hop else _known_hosts_path(endpoint)
        return HostKeyError(
            f"host key of {where} not verified against {files}: "
            f"{exc.reason}. Host keys are always checked; if the key is new or changed "
            "on purpose, connect once with `ssh` to record it.",
            host=name,
        )
    if isinstance(exc, asyncssh.PermissionDenied):
        return AuthenticationError(
            f"{where} refused our keys ({exc.reason}); "
            f"tried {endpoint.identity_file or 'ssh-agent, ssh config and default keys'}",
            host=name,
        )
    if isinstance(exc, asyncssh.KeyImportError | asyncssh.KeyEncryptionError):
        return AuthenticationError(
            f"cannot use identity file {endpoint.identity_file}: {exc}. "
            "An encrypted key must be loaded into ssh-agent; remote-chain never prompts.",
            host=name,
        )
    if isinstance(exc, asyncssh.ConfigParseError):
        return ConfigError(str(exc), source=_SSH_CONFIG)
    if isinstance(exc, asyncssh.ChannelOpenError):
        if doing == "connect":  # a jump host could not reach the next hop
            return ConnectError(f"cannot reach {where}: {exc.reason}", host=name)
        return ConnectError(
            f"{where} refused to open a channel ({exc.reason}); if this repeats under load, "
            f"its MaxSessions may be below max_channels={endpoint.max_channels}",
            host=name,
        )
    if isinstance(exc, asyncssh.DisconnectError):
        return ConnectError(f"connection to {where} lost: {exc.reason}", host=name)
    if isinstance(exc, TimeoutError):  # before OSError: TimeoutError is an OSError
        fix = (
            " (REMOTE_CHAIN_CONNECT_TIMEOUT or ConnectTimeout sets it)"
            if doing == "connect"
            else ""
        )
        return RemoteTimeout(f"{doing} on {where} took longer than {timeout:g} s{fix}", host=name)
    if isinstance(exc, socket.gaierror):  # before OSError: a name that does not resolve
        return HostNotFoundError(
            f"cannot resolve host name of {where}: {exc.strerror or exc}; check `host` in the "
            "profile (or HostName in the ssh config)",
            host=name,
        )
    if isinstance(exc, ConnectionRefusedError):
        return RefusedError(
            f"cannot connect to {where}: connection refused (no sshd listening there?); "
            "check the host and port (profile `port`, or Port in the ssh config)",
            host=name,
        )
    if isinstance(exc, OSError):
        # asyncio's "Connect call failed (addr)" hides the cause in errno.
        cause = os.strerror(exc.errno) if exc.errno else (exc.strerror or str(exc))
        return ConnectError(f"cannot connect to {where}: {cause}", host=name)
    if isinstance(exc, asyncssh.Error):
        return RemoteError(f"ssh error with {where}: {exc.reason}", host=name)
    return RemoteError(f"ssh error with {where}: {exc!r}", host=name)


@contextlib.contextmanager
def translated(
    endpoint: Endpoint, doing: _Doing, timeout: float, hop: Hop | None = None
) -> Iterator[None]:
    try:
        yield
    except (
        asyncssh.Error,
        asyncssh.KeyImportError,
        asyncssh.KeyEncryptionError,
        asyncssh.ConfigParseError,
        OSError,  # includes TimeoutError, raised by anyio.fail_after and connect_timeout
    ) as exc:
        raise translate(exc, endpoint, doing, timeout, hop) from exc


def _where(endpoint: Endpoint) -> str:
    return endpoint.host if endpoint.port is None else f"{endpoint.host}:{endpoint.port}"


def _known_hosts_path(endpoint: Endpoint) -> Path:
    return (endpoint.known_hosts or Path("~/.ssh/known_hosts")).expanduser()


def _existing_known_hosts(endpoint: Endpoint, hop: Hop) -> list[str]:
    """The known_hosts files to verify ``hop`` against; asyncssh never gets ``None`` (no check)."""
    if not hop.known_hosts:
        # Checked here because asyncssh would report a missing file as an OSError, which
        # would read as a reachability problem and be retried.
        wanted = ", ".join(str(p) for p in hop.known_hosts_wanted)
        raise HostKeyError(
            f"no known_hosts file exists ({wanted}); host keys are always verified: "
            f"connect to {hop.where} once with `ssh` to record its key",
            host=endpoint.name,
        )
    return [str(p) for p in hop.known_hosts]


async def _connect_hop(
    endpoint: Endpoint,
    route: Route,
    hop: Hop,
    tunnel: asyncssh.SSHClientConnection | None,
) -> asyncssh.SSHClientConnection:
    """One hop, verified against the profile's (or its config's) known_hosts; never prompts."""
    known_hosts = _existing_known_hosts(endpoint, hop)
    identity = endpoint.identity_file
    with translated(endpoint, "connect", hop.connect_timeout, hop):
        # asyncssh reads the same config files for the rest (HostName, IdentityFile,
        # IdentitiesOnly, CertificateFile, IdentityAgent, HostKeyAlias, ...); `()` is its
        # "not given". Host keys, the route and the timeout are ours, for every hop alike.
        return await asyncssh.connect(
            hop.alias,
            port=hop.port_set if hop.port_set is not None else (),
            username=hop.user_set if hop.user_set is not None else (),
            config=[str(f) for f in route.config_files],
            client_keys=[str(identity.expanduser())] if identity is not None else (),
            known_hosts=known_hosts,
            # Our own tunnel, never asyncssh's: it would open the jump hosts with the
            # config's known_hosts and without the profile's key.
            tunnel=tunnel,
            proxy_command=None if tunnel is not None else (),
            keepalive_interval=hop.keepalive_interval or endpoint.keepalive_interval,
            connect_timeout=hop.connect_timeout,
            # Keys only (agent, identity file, ssh config): a password or MFA prompt would
            # hang a CI job; MFA sites use the openssh transport instead.
            password_auth=False,
            kbdint_auth=False,
        )


async def connect(endpoint: Endpoint) -> asyncssh.SSHClientConnection:
    """Connect hop by hop (jump hosts first) and authenticate, verifying every host key."""
    started = time.monotonic()
    tunnel: asyncssh.SSHClientConnection | None = None
    try:
        route = resolve(endpoint)
        for hop in route.hops:
            connection = await _connect_hop(endpoint, route, hop, tunnel)
            # Closing the target then closes the jump hosts too, as asyncssh's own tunnels do.
            connection.set_tunnel(tunnel)
            tunnel = connection
    except BaseException:
        if tunnel is not None:  # close the jump hosts already open
            tunnel.close()
        raise
    if tunnel is None:  # pragma: no cover - a route always ends with the target
        raise RemoteError("empty ssh route", host=endpoint.name)
    seconds = round(time.monotonic() - started, 3)
    _log.debug(
        "ssh_connected",
        cluster=endpoint.name,
        host=route.target.host,
        hops=len(route.hops),
        seconds=seconds,
    )
    return tunnel
