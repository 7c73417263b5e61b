"""A ``Remote`` that runs scripts over one persistent shell channel.

The agent wraps its ``SshRemote`` in a ``ShellRemote``: one long-lived session channel runs
the loop of ``shellframe`` and answers one request at a time (a lock), 1 RTT per command
instead of an exec's channel open + exec request. Whatever goes wrong with that channel, the
command does not fail because of it:

- a request while another holds the channel runs as an exec (the direct path's ``run``);
- a channel found ended when a request comes (the loop killed, the connection dropped
  between commands) is discarded and opened again once; if no loop starts (a login shell
  that exits first) the command runs as an exec, and after two failed openings the channel
  is no longer tried (a login shell that will not run the loop will not start to);
- a channel that ends after a request was sent is a ``ConnectError``, as a lost connection
  is on the direct path: the script may have run, so it is not run again here;
- a timeout is a ``RemoteTimeout`` as on the direct path, and the channel is closed and
  discarded, as after a cancellation: it is never reused with a reply still unread on it.

The channel holds one of the server's sessions (``MaxSessions``, 10 by default) for the
agent's life, next to the ``max_channels`` (6 by default) its execs may use.

Output is capped at the endpoint's ``max_output_bytes`` as on the direct path.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

import anyio
import structlog

from remote_chain.errors import ConnectError, RemoteTimeout
from remote_chain.protocol.markers import wrap
from remote_chain.transport.base import (
    ClosingContext,
    CommandResult,
    output_too_large,
    result_from_output,
)
from remote_chain.transport.shellframe import (
    DONE_MARKER,
    frame_request,
    parse_reply,
    ready_pid,
    shell_loop,
)

if TYPE_CHECKING:
    from remote_chain.transport.ssh import SshRemote

_log = structlog.get_logger()

T = TypeVar("T")
READ_CHUNK = 64 * 1024
MAX_OPEN_FAILURES = 2


class _Reader(Protocol):
    async def read(self, n: int = -1) -> bytes: ...
    def at_eof(self) -> bool: ...


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
    """The channel ended; ``started``: the request may have run."""

    def __init__(self, started: bool) -> None:
        super().__init__("shell channel gone")
        self.started = started


class _Shell:
    """One open shell channel and what is buffered of its two streams.

    Replies come on stdout only; stderr carries nothing but the login shell's noise (and
    bash's own complaints), drained while a request waits so that it cannot fill the
    channel's window, and handed to the next reply as noise.
    """

    def __init__(self, process: ShellProcess, pid: int, out: bytes) -> None:
        self.process, self.pid = process, pid
        self.out, self.err = bytearray(out), bytearray()

    async def fill(self, started: bool) -> None:
        try:
            chunk = await self.process.stdout.read(READ_CHUNK)
        except Exception as exc:  # asyncssh's or the socket's: the channel is unusable
            raise _Gone(started) from exc
        if not chunk:
            raise _Gone(started)
        self.out += chunk

    async def drain_stderr(self, budget: int) -> None:
        """Read stderr until cancelled (or its end: stdout then sees the end too)."""
        try:
            while chunk := await self.process.stderr.read(READ_CHUNK):
                if len(self.err) < budget:
                    self.err += chunk
        except Exception:  # noqa: S110 - the stdout side reports a broken channel
            pass

    async def wait_for(
        self, done: Callable[[], T | None], budget: int, *, started: bool
    ) -> T | None:
        """Read stdout until ``done()`` gives a value; None once past ``budget`` bytes.

        Drains stderr meanwhile. ``_Gone`` if the channel ends first (raised outside the
        task group, so that it is not wrapped in an ExceptionGroup).
        """
        result: T | None = None
        gone: _Gone | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(self.drain_stderr, budget)
            try:
                while (result := done()) is None and len(self.out) <= budget:
                    await self.fill(started)
            except _Gone as exc:
                gone = exc
            group.cancel_scope.cancel()
        if gone is not None:
            raise gone
        return result

    def at_eof(self) -> bool:
        return self.process.stdout.at_eof()


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
                except BaseException:  # cancelled, or any error: a reply may be half read
                    self._discard("interrupted")
                    raise
        return await self._remote.run(script, timeout=timeout, sensitive=sensitive)

    async def _open(self) -> _Shell | None:
        """A new channel running the loop, once its ready line came; None (logged) if not."""
        started = time.monotonic()
        ready_nonce = secrets.token_hex(16)
        process: ShellProcess | None = None
        try:
            with anyio.fail_after(self._endpoint.command_timeout):
                process = await self._remote.start_shell()
                process.stdin.write(shell_loop(ready_nonce))
                shell = _Shell(process, 0, b"")
                # _Gone: the login shell exited before the loop ran; None: it floods stdout.
                found = await shell.wait_for(
                    lambda: ready_pid(bytes(shell.out), ready_nonce),
                    self._endpoint.max_output_bytes,
                    started=False,
                )
                if found is None:
                    raise _Gone(started=False)
        except Exception as exc:  # any failure here means: use execs
            if process is not None:
                process.close()
            self._open_failures += 1
            _log.info("shell_channel_unavailable", cluster=self.name, reason=repr(exc)[:200])
            return None
        shell.pid, rest = found
        shell.out[:] = rest
        _log.debug(
            "shell_channel_opened",
            cluster=self.name,
            pid=shell.pid,
            seconds=round(time.monotonic() - started, 3),
        )
        # The login shell's noise (stdout and stderr) stays buffered: it is the first reply's
        # noise, as an exec's is.
        return shell

    async def _request(self, shell: _Shell, script: str, limit: float) -> CommandResult:
        wrapped, nonce = wrap(script)
        started = time.monotonic()
        budget = self._endpoint.max_output_bytes
        if shell.at_eof():  # the loop ended since the last request (killed, logged out)
            raise _Gone(started=False)
        try:
            shell.process.stdin.write(frame_request(wrapped, nonce))
        except Exception as exc:  # a closed channel refuses writes
            raise _Gone(started=False) from exc
        searched, done_line = 0, f"\n{DONE_MARKER}{nonce} ".encode()

        def parsed() -> tuple[bytes, bytes, bytes] | None:
            # Each byte searched about once, however many chunks a big reply comes in.
            nonlocal searched
            at = shell.out.find(done_line, searched)
            if at < 0:
                searched = max(0, len(shell.out) - len(done_line))
                return None
            searched = at  # found: wait there for the stderr bytes it announces
            return parse_reply(shell.out, nonce, at)

        try:
            with anyio.fail_after(limit):
                reply = await shell.wait_for(parsed, budget, started=True)
        except TimeoutError:
            self._discard("timeout")  # never reused with the reply still unread
            raise RemoteTimeout(
                f"command on {self._where()} took longer than {limit:g} s", host=self.name
            ) from None
        if reply is None:
            self._discard("output cap")
            raise output_too_large(self.name, budget)
        out, err, rest = reply
        noise, shell.out[:], shell.err[:] = bytes(shell.err), rest, b""
        result = result_from_output(
            name=self.name,
            nonce=nonce,
            stdout=out.decode("utf-8", "replace"),
            stderr=(noise + err).decode("utf-8", "replace"),
            exit_status=0,
            lost=False,
        )
        _log.debug(
            "shell_command",
            cluster=self.name,
            seconds=round(time.monotonic() - started, 3),
            bytes=len(out) + len(err),
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
