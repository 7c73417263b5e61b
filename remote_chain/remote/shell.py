"""A ``Remote`` that runs scripts over one persistent shell channel (issue 13, P8).

The agent wraps its ``SshRemote`` in a ``ShellRemote``: one long-lived session channel runs
the loop of ``shellframe`` and answers one request at a time (a lock), 1 RTT per command
instead of an exec's channel open + exec request. Whatever goes wrong with that channel, the
command does not fail because of it:

- a request while another holds the channel runs as an exec (the direct path's ``run``);
- a channel that is gone before the request's script started (the loop killed, the login
  shell exited, the connection dropped between commands) is discarded and opened again once;
  if that fails too the command runs as an exec, and after two failed openings the channel is
  no longer tried (a login shell that will not run the loop will not start to);
- a channel that dies after the script started is a ``ConnectError``, as a lost connection is
  on the direct path: the script may have run, so it is not run again here;
- a timeout is a ``RemoteTimeout`` as on the direct path, and the channel is closed and
  discarded: it is never reused with a reply still unread on it.

Output is capped at the endpoint's ``max_output_bytes`` as on the direct path (issue 14.4).
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Protocol

import anyio
import structlog

from remote_chain.errors import ConnectError, RemoteTimeout
from remote_chain.remote import ClosingContext, CommandResult, output_too_large, result_from_output
from remote_chain.remote.markers import BEGIN_MARKER, wrap
from remote_chain.remote.shellframe import (
    frame_request,
    ready_pid,
    shell_loop,
    split_reply,
    stderr_done,
    stdout_done,
)

if TYPE_CHECKING:
    from remote_chain.remote.ssh import SshRemote

_log = structlog.get_logger()

READ_CHUNK = 64 * 1024
MAX_OPEN_FAILURES = 2


class _Reader(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


class _Writer(Protocol):
    def write(self, data: bytes) -> None: ...


class ShellProcess(Protocol):
    """What ``SshRemote.start_shell`` returns (an asyncssh process), as far as we use it."""

    @property
    def stdin(self) -> _Writer: ...
    @property
    def stdout(self) -> _Reader: ...
    @property
    def stderr(self) -> _Reader: ...
    def close(self) -> None: ...


class _Gone(Exception):  # a signal between two methods, never raised out
    """The channel ended; ``started``: after this request's script had begun."""

    def __init__(self, started: bool) -> None:
        super().__init__("shell channel gone")
        self.started = started


class _Shell:
    """One open shell channel and what is buffered of its two streams."""

    def __init__(self, process: ShellProcess, pid: int, out: bytes) -> None:
        self.process, self.pid = process, pid
        self.out, self.err = bytearray(out), bytearray()

    async def fill(self, stream: _Reader, sink: bytearray, started: bool) -> None:
        try:
            chunk = await stream.read(READ_CHUNK)
        except Exception as exc:  # asyncssh's or the socket's: unusable
            raise _Gone(started) from exc
        if not chunk:
            raise _Gone(started)
        sink += chunk


class ShellRemote(ClosingContext):
    """``remote``'s commands over its persistent shell channel, or as execs when that fails."""

    def __init__(self, remote: SshRemote) -> None:
        self._remote = remote
        self._endpoint = remote.endpoint
        self._lock = anyio.Lock()
        self._shell: _Shell | None = None
        self._open_failures = 0

    @property
    def name(self) -> str:
        return self._remote.name

    @property
    def shell_pid(self) -> int | None:
        """The remote loop's PID while a channel is open (tests kill it by this)."""
        return None if self._shell is None else self._shell.pid

    async def warm(self) -> None:
        """Open the channel ahead of the first request (the agent does, once it is READY)."""
        async with self._lock:
            if self._shell is None and self._open_failures < MAX_OPEN_FAILURES:
                self._shell = await self._open()

    async def run(
        self, script: str, *, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        if self._lock.locked() or self._open_failures >= MAX_OPEN_FAILURES:
            return await self._remote.run(script, timeout=timeout, sensitive=sensitive)
        limit = self._endpoint.command_timeout if timeout is None else timeout
        async with self._lock:
            for _attempt in range(2):  # the channel as it is, then once reopened
                if self._shell is None:
                    self._shell = await self._open()
                if self._shell is None:
                    break
                try:
                    return await self._request(self._shell, script, limit)
                except _Gone as gone:
                    self._discard("gone")
                    if gone.started:
                        raise ConnectError(
                            "the persistent shell channel closed while running a command; "
                            "it may have run",
                            host=self.name,
                        ) from None
        return await self._remote.run(script, timeout=timeout, sensitive=sensitive)

    async def _open(self) -> _Shell | None:
        """A new channel running the loop, once its ready line came; None (logged) if not."""
        started = time.monotonic()
        ready_nonce = secrets.token_hex(16)
        process: ShellProcess | None = None
        out = bytearray()
        try:
            with anyio.fail_after(self._endpoint.command_timeout):
                process = await self._remote.start_shell()
                process.stdin.write(shell_loop(ready_nonce))
                while (found := ready_pid(bytes(out), ready_nonce)) is None:
                    if len(out) > self._endpoint.max_output_bytes:
                        raise _Gone(started=False)  # a login shell flooding stdout
                    chunk = await process.stdout.read(READ_CHUNK)
                    if not chunk:
                        raise _Gone(started=False)  # the login shell exited first
                    out += chunk
        except Exception as exc:  # any failure here means: use execs
            if process is not None:
                process.close()
            self._open_failures += 1
            _log.info("shell_channel_unavailable", cluster=self.name, reason=repr(exc)[:200])
            return None
        pid, rest = found
        _log.debug(
            "shell_channel_opened",
            cluster=self.name,
            pid=pid,
            seconds=round(time.monotonic() - started, 3),
        )
        # The login shell's noise (stdout and stderr) stays buffered: it is the first reply's
        # noise, as an exec's is.
        return _Shell(process, pid, rest)

    async def _request(self, shell: _Shell, script: str, limit: float) -> CommandResult:
        wrapped, nonce = wrap(script)
        started = time.monotonic()
        budget = self._endpoint.max_output_bytes
        try:
            shell.process.stdin.write(frame_request(wrapped, nonce))
        except Exception as exc:  # a closed channel refuses writes
            raise _Gone(started=False) from exc
        out: tuple[bytes, bytes] | None = None
        err: tuple[bytes, bytes] | None = None
        try:
            with anyio.fail_after(limit):
                while out is None:
                    out = split_reply(bytes(shell.out), stdout_done(bytes(shell.out), nonce))
                    if out is None:
                        if len(shell.out) + len(shell.err) > budget:
                            break
                        await shell.fill(shell.process.stdout, shell.out, _began(shell, nonce))
                while err is None and out is not None:
                    err = split_reply(bytes(shell.err), stderr_done(bytes(shell.err), nonce))
                    if err is None:
                        if len(shell.err) > budget:
                            break
                        await shell.fill(shell.process.stderr, shell.err, started=True)
        except TimeoutError:
            self._discard("timeout")  # never reused with the reply still unread
            raise RemoteTimeout(
                f"command on {self._where()} took longer than {limit:g} s", host=self.name
            ) from None
        if out is None or err is None:
            self._discard("output cap")
            raise output_too_large(self.name, budget)
        shell.out[:] = out[1]
        shell.err[:] = err[1]
        result = result_from_output(
            name=self.name,
            nonce=nonce,
            stdout=out[0].decode("utf-8", "replace"),
            stderr=err[0].decode("utf-8", "replace"),
            exit_status=0,
            lost=False,
        )
        _log.debug(
            "shell_command",
            cluster=self.name,
            seconds=round(time.monotonic() - started, 3),
            bytes=len(out[0]) + len(err[0]),
            exit_status=result.exit_status,
        )
        return result

    def _discard(self, why: str) -> None:
        if self._shell is not None:
            _log.info("shell_channel_discarded", cluster=self.name, reason=why)
            self._shell.process.close()
            self._shell = None

    def _where(self) -> str:
        e = self._endpoint
        return e.host if e.port is None else f"{e.host}:{e.port}"

    async def aclose(self) -> None:
        self._discard("closing")
        await self._remote.aclose()


def _began(shell: _Shell, nonce: str) -> bool:
    """Whether request ``nonce``'s script has started (its begin marker is on stdout)."""
    return f"\n{BEGIN_MARKER}{nonce}\n".encode() in shell.out
