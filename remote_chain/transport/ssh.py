"""The asyncssh transport (with ``sshconnect``, which opens its connection, and
``sshconfig``, which reads the ssh config: the only modules that import asyncssh).

One connection per cluster per invocation, reused by every ``run``; a capacity limiter keeps
concurrent channels under the server's ``MaxSessions``. Every asyncssh (and socket) exception
is translated to a ``remote_chain.errors`` class by ``sshconnect.translate``.
"""

from __future__ import annotations

import logging
import time

import anyio
import asyncssh
import structlog

from remote_chain.errors import (
    RemoteError,
)
from remote_chain.protocol.markers import (
    BEGIN_MARKER,
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
from remote_chain.transport.sshconnect import connect, translated

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
        return cls(endpoint, await connect(endpoint))

    async def run(
        self, script: str, *, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        """Run ``script`` in a remote login shell; a non-zero exit is in the result.

        Every script that runs travels once: in an env request sent with the exec, or on
        stdin when it is ``sensitive`` or large (``markers.script_env``); a server that refuses
        the env request runs nothing of that exec, and the script goes again on stdin
        (``_run_once``). The exec request carries only the fixed ``EXEC_COMMAND``.
        """
        wrapped, nonce = wrap(script)
        limit = self._endpoint.command_timeout if timeout is None else timeout
        async with self._limiter:
            started = time.monotonic()
            # The timeout starts once a channel slot is ours: waiting for a slot is bounded
            # by the other commands' own timeouts.
            with translated(self._endpoint, "command", limit), anyio.fail_after(limit):
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
        script = wrapped.encode()
        if not env[SCRIPT_ENV]:
            return _without_ask(*await self._exec(connection, env, script))
        out, err, status = await self._exec(connection, env, b"")
        if _ASK in err and BEGIN_MARKER.encode() not in out:
            # The server refused the env request: the command asked for the script on a
            # stdin that had already ended, so it ran nothing (eval of nothing). Once more,
            # the script on stdin, and so for the rest of this connection.
            self._env_refused = True
            out, err, status = await self._exec(connection, {SCRIPT_ENV: ""}, script)
        return _without_ask(out, err, status)

    async def _exec(
        self, connection: asyncssh.SSHClientConnection, env: dict[str, str], stdin: bytes
    ) -> tuple[bytes, bytes, int | None]:
        """One exec of ``EXEC_COMMAND``: ``stdin`` written and ended at once (a login file
        that reads stdin never waits), both streams read within one output budget."""
        # No pty: the script's stdout and stderr stay apart and no \r\n translation.
        process = await connection.create_process(EXEC_COMMAND, env=env, encoding=None)
        try:
            try:
                process.stdin.write(stdin)
                process.stdin.write_eof()
            except BrokenPipeError:
                # The session ended before its stdin could leave (the command could not
                # start: E2BIG, or exited). Its output and exit status say which; it is not a
                # connect error, which a caller may retry.
                pass
            # Both streams share one budget; past it the channel is closed.
            budget = [self._endpoint.max_output_bytes]
            out, err = bytearray(), bytearray()
            failures: list[Exception] = []
            async with anyio.create_task_group() as group:
                group.start_soon(_drain, process.stdout, out, budget, process, failures)
                group.start_soon(_drain, process.stderr, err, budget, process, failures)
            if failures:  # raised here, not in the group: translated sees the bare error
                raise failures[0]
            if budget[0] < 0:
                raise output_too_large(self.name, self._endpoint.max_output_bytes)
            await process.wait_closed()
            return bytes(out), bytes(err), process.exit_status
        finally:
            process.close()

    async def start_shell(self) -> asyncssh.SSHClientProcess[bytes]:
        """A session channel running ``REMOTE_COMMAND`` as every exec does, left open: the
        agent's persistent shell channel (``shell.py``) feeds it requests on stdin."""
        with translated(self._endpoint, "command", self._endpoint.command_timeout):
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
                self._connection = await connect(self._endpoint)
        return self._connection

    async def aclose(self) -> None:
        self._closed = True
        self._connection.close()
        with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
            await self._connection.wait_closed()


# The line EXEC_COMMAND prints on stderr when the env request did not carry the script.
_ASK = (STDIN_WANTED + "\n").encode()


def _without_ask(out: bytes, err: bytes, status: int | None) -> tuple[bytes, bytes, int | None]:
    """The answer without EXEC_COMMAND's request line: it is ours, not the login shell's."""
    return out, err.replace(_ASK, b"", 1), status


async def _drain(
    stream: asyncssh.SSHReader[bytes],
    sink: bytearray,
    budget: list[int],
    process: asyncssh.SSHClientProcess[bytes],
    failures: list[Exception],
) -> None:
    """Read ``stream`` to its end into ``sink``; past the budget, close the channel instead.

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
    except asyncssh.DisconnectError:
        return  # the exit status stays None: result_from_output reports a lost connection
    except (asyncssh.Error, OSError) as exc:
        failures.append(exc)
