"""The asyncssh transport: the only module in remote-chain that imports asyncssh.

One connection per cluster per invocation, reused by every ``run``; a capacity limiter keeps
concurrent channels under the server's ``MaxSessions``. Every asyncssh (and socket) exception
is translated to a ``remote_chain.errors`` class in ``_translate``, the one place that knows
asyncssh's exception types.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Literal

import anyio
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
from remote_chain.protocol.markers import (
    EXEC_COMMAND,
    REMOTE_COMMAND,
    SCRIPT_ENV,
    STDIN_WANTED,
    env_cap,
    script_env,
    wrap,
)
from remote_chain.retries import channel_refused
from remote_chain.transport.base import (
    ClosingContext,
    CommandResult,
    output_too_large,
    result_from_output,
)
from remote_chain.transport.endpoint import Endpoint
from remote_chain.transport.sshconfig import Hop, Route, resolve

_log = structlog.get_logger()

# asyncssh logs every connection and channel at INFO. Quiet by default; the CLI routes it
# through structlog and may lower this with -v. A level set before this import is kept.
if logging.getLogger("asyncssh").level == logging.NOTSET:
    logging.getLogger("asyncssh").setLevel(logging.WARNING)


def _hide_script_env(record: logging.LogRecord) -> bool:
    """asyncssh logs each env request's value at DEBUG (-vv): the script's env is shortened."""
    args, msg = record.args, record.msg  # msg: "[conn=1, chan=0]   Env: %s=%s"
    if (
        isinstance(msg, str)
        and msg.endswith(" Env: %s=%s")
        and isinstance(args, tuple)
        and args[:1] == (SCRIPT_ENV,)
    ):
        record.args = (SCRIPT_ENV, f"<the wrapped script, {len(str(args[1]))} characters>")
    return True


logging.getLogger("asyncssh").addFilter(_hide_script_env)

CLOSE_TIMEOUT = 5.0
READ_CHUNK = 64 * 1024
_SSH_CONFIG = "~/.ssh/config"

_Doing = Literal["connect", "command"]


def _translate(
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
def _translated(
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
        raise _translate(exc, endpoint, doing, timeout, hop) from exc


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
    with _translated(endpoint, "connect", hop.connect_timeout, hop):
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
            # config's known_hosts and without the profile's key (issue 14.3).
            tunnel=tunnel,
            proxy_command=None if tunnel is not None else (),
            keepalive_interval=hop.keepalive_interval or endpoint.keepalive_interval,
            connect_timeout=hop.connect_timeout,
            # Keys only (agent, identity file, ssh config): a password or MFA prompt would
            # hang a CI job; MFA sites use the openssh transport instead.
            password_auth=False,
            kbdint_auth=False,
        )


async def _connect(endpoint: Endpoint) -> asyncssh.SSHClientConnection:
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


class SshRemote(ClosingContext):
    """A ``Remote`` over one asyncssh connection; create it with ``await SshRemote.open()``."""

    def __init__(self, endpoint: Endpoint, connection: asyncssh.SSHClientConnection) -> None:
        self._endpoint = endpoint
        self._connection = connection
        self._limiter = anyio.CapacityLimiter(endpoint.max_channels)
        self._reconnect_lock = anyio.Lock()
        self._closed = False
        self._env_refused = False

    @property
    def name(self) -> str:
        return self._endpoint.name

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    @classmethod
    async def open(cls, endpoint: Endpoint) -> SshRemote:
        """Connect and authenticate, verifying the host key; never prompts."""
        return cls(endpoint, await _connect(endpoint))

    async def run(
        self, script: str, *, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        """Run ``script`` in a remote login shell; a non-zero exit is in the result.

        Every script travels once: in an env request sent with the exec, or on stdin when it
        is ``sensitive`` or large or the server refuses the env request (``markers.script_env``,
        ``_StdinFeed``). The exec request carries only the fixed ``EXEC_COMMAND``.
        """
        wrapped, nonce = wrap(script)
        limit = self._endpoint.command_timeout if timeout is None else timeout
        async with self._limiter:
            started = time.monotonic()
            # The timeout starts once a channel slot is ours: waiting for a slot is bounded
            # by the other commands' own timeouts.
            with _translated(self._endpoint, "command", limit), anyio.fail_after(limit):
                stdout_bytes, stderr_bytes, exit_status = await self._run_wrapped(
                    wrapped, sensitive
                )
        stdout = stdout_bytes.decode("utf-8", "replace")
        stderr = stderr_bytes.decode("utf-8", "replace")
        result = result_from_output(
            name=self.name,
            nonce=nonce,
            stdout=stdout,
            stderr=stderr,
            exit_status=exit_status,
            lost=exit_status is None,
        )
        _log.debug(
            "ssh_command",
            cluster=self.name,
            seconds=round(time.monotonic() - started, 3),
            bytes=len(stdout_bytes) + len(stderr_bytes),
            exit_status=result.exit_status,
        )
        return result

    async def _run_wrapped(self, wrapped: str, sensitive: bool) -> tuple[bytes, bytes, int | None]:
        # Even under the channel cap, a server may refuse a channel while it still tears
        # down one we closed: retried briefly (retries.channel_refused).
        retrying = channel_refused(asyncssh.ChannelOpenError)
        result: tuple[bytes, bytes, int | None] = await retrying(self._run_once, wrapped, sensitive)
        return result

    async def _run_once(self, wrapped: str, sensitive: bool) -> tuple[bytes, bytes, int | None]:
        connection = await self._live_connection()
        # How big a script may ride in the env request depends on the server (markers.env_cap);
        # a server that refused the env request once gets the script on stdin from then on.
        server = str(connection.get_extra_info("server_version") or "")
        env = script_env(wrapped, sensitive=sensitive or self._env_refused, cap=env_cap(server))
        # No pty: the script's stdout and stderr stay apart and no \r\n translation.
        process = await connection.create_process(EXEC_COMMAND, env=env, encoding=None)
        feed = _StdinFeed(process, wrapped.encode())
        try:
            if not env[SCRIPT_ENV]:
                feed.send()
            # Both streams share one budget; past it the channel is closed.
            budget = [self._endpoint.max_output_bytes]
            out, err = bytearray(), bytearray()
            failures: list[Exception] = []
            async with anyio.create_task_group() as group:
                group.start_soon(_drain, process.stdout, out, budget, process, failures)
                group.start_soon(
                    partial(_drain, feed=feed), process.stderr, err, budget, process, failures
                )
            if failures:  # raised here, not in the group: _translated sees the bare error
                raise failures[0]
            if budget[0] < 0:
                raise output_too_large(self.name, self._endpoint.max_output_bytes)
            await process.wait_closed()
            if feed.asked:
                self._env_refused = True
            return bytes(out), feed.strip(bytes(err)), process.exit_status
        finally:
            process.close()

    async def start_shell(self) -> asyncssh.SSHClientProcess[bytes]:
        """A session channel running ``REMOTE_COMMAND`` as every exec does, left open: the
        agent's persistent shell channel (``remote/shell.py``) feeds it requests on stdin."""
        with _translated(self._endpoint, "command", self._endpoint.command_timeout):
            connection = await self._live_connection()
            return await connection.create_process(REMOTE_COMMAND, encoding=None)

    async def _live_connection(self) -> asyncssh.SSHClientConnection:
        """The connection, opened again if it died (network blip, keepalive, server restart).

        ``wait`` polls for hours: without this, one lost connection would fail every later
        command, since every retry would reuse the dead connection. A command that was
        running when the connection died is never re-run here; its caller gets ConnectError.
        """
        async with self._reconnect_lock:
            if self._closed:
                raise RemoteError("used after aclose()", host=self.name)
            if self._connection.is_closed():
                _log.info("ssh_reconnecting", cluster=self.name, host=self._endpoint.host)
                self._connection = await _connect(self._endpoint)
        return self._connection

    async def aclose(self) -> None:
        self._closed = True
        self._connection.close()
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            await self._connection.wait_closed()


class _StdinFeed:
    """The wrapped script on the command's stdin: at once when the env request does not carry
    it, else only when the server asks (``markers.STDIN_WANTED`` on stderr: it refused the env
    request), so the script travels once."""

    _ASK = (STDIN_WANTED + "\n").encode()

    def __init__(self, process: asyncssh.SSHClientProcess[bytes], script: bytes) -> None:
        self._process, self._script = process, script
        self.sent = self.asked = False

    def send(self) -> None:
        if self.sent:
            return
        self.sent = True
        try:
            self._process.stdin.write(self._script)
            self._process.stdin.write_eof()
        except BrokenPipeError:
            # The session ended before its stdin could leave (the command could not start:
            # E2BIG, or exited). Its output and exit status say which; it is not a connect
            # error, which a caller may retry.
            pass

    def seen(self, stderr: bytes | bytearray) -> None:
        """Send the script if the server asked for it in ``stderr`` (what came so far)."""
        if not self.sent and self._ASK in stderr:
            self.asked = True
            self.send()

    def strip(self, stderr: bytes) -> bytes:
        """``stderr`` without the request line: it is ours, not the login shell's noise."""
        return stderr.replace(self._ASK, b"", 1) if self.asked or self.sent else stderr


async def _drain(
    stream: asyncssh.SSHReader[bytes],
    sink: bytearray,
    budget: list[int],
    process: asyncssh.SSHClientProcess[bytes],
    failures: list[Exception],
    *,
    feed: _StdinFeed | None = None,
) -> None:
    """Read ``stream`` to its end into ``sink``; past the budget, close the channel instead.
    ``feed``: shown what came so far (stderr), to send the script when the server asks.

    Never holds more than the budget plus one chunk: asyncssh stops opening the channel's
    window while we do not read, so a flooding server is held back by flow control.
    """
    try:
        while chunk := await stream.read(READ_CHUNK):
            budget[0] -= len(chunk)
            if budget[0] < 0:
                process.close()  # the other stream then ends too
                return
            sink += chunk
            if feed is not None:
                feed.seen(sink)
    except asyncssh.DisconnectError:
        return  # the exit status stays None: result_from_output reports a lost connection
    except (asyncssh.Error, OSError) as exc:
        failures.append(exc)
