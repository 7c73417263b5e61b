"""The agent process of the persistent connection (``agent.py`` says what it is for and
how clients reach it): ``python -m remote_chain.transport.agentd``, one per endpoint. It
connects as the direct path does, says READY, then serves its private socket until idle,
stopped, or stale (a changed profile, ssh config or known_hosts)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import SocketAttribute, SocketStream

from remote_chain.errors import RemoteChainError
from remote_chain.logconfig import configure_logging
from remote_chain.transport.agent import (
    PROTOCOL,
    READY,
    WATCH_PERIOD,
    endpoint_from_json,
    fingerprint,
    receive_message,
    send_message,
    unlink_socket,
)
from remote_chain.transport.base import Remote
from remote_chain.transport.endpoint import Endpoint
from remote_chain.transport.privsock import peer_uid, private_folder
from remote_chain.transport.shell import ShellRemote
from remote_chain.transport.ssh import SshRemote

_log = structlog.get_logger()


class _Agent:
    def __init__(self, endpoint: Endpoint, path: Path, remote: Remote) -> None:
        self.endpoint, self.path, self.remote = endpoint, path, remote
        self.fingerprint = fingerprint(endpoint)
        self.last = time.monotonic()
        self.busy = 0
        self.stop = anyio.Event()

    async def handle(self, stream: SocketStream) -> None:
        """One peer; whatever it sends, the agent itself never goes down with it."""
        try:
            await self._handle(stream)
        except (OSError, ValueError, KeyError, TypeError, anyio.BrokenResourceError) as exc:
            _log.warning("agent_request_dropped", error=repr(exc)[:200])

    async def _handle(self, stream: SocketStream) -> None:
        async with stream:
            raw = stream.extra(SocketAttribute.raw_socket)  # noqa: S610 - anyio, not Django
            if peer_uid(raw) != os.getuid():
                _log.warning("agent_peer_refused", uid=peer_uid(raw))
                return
            message = await receive_message(stream)
            if message is None or message.get("v") != PROTOCOL:
                return
            op = message.get("op")
            if op == "ping":  # not activity: `agent status` does not keep the agent alive
                idle_left = self.endpoint.persist - (time.monotonic() - self.last)
                shell_pid = getattr(self.remote, "shell_pid", None)  # a ShellRemote's loop
                await send_message(
                    stream,
                    {
                        "pid": os.getpid(),
                        "cluster": self.endpoint.name,
                        "idle_left": idle_left,
                        "shell_pid": shell_pid,
                    },
                )
                return
            self.last = time.monotonic()
            if op == "stop":
                await send_message(stream, {"stopped": os.getpid()})
                self.stop.set()
            elif op == "run":
                if message.get("fingerprint") != self.fingerprint:
                    await send_message(stream, {"stale": True})
                    self.stop.set()
                    return
                self.busy += 1
                try:
                    reply = await self._run(message)
                finally:
                    self.busy -= 1
                    self.last = time.monotonic()
                await send_message(stream, reply)

    async def _run(self, message: dict[str, Any]) -> dict[str, Any]:
        timeout = message.get("timeout")
        try:
            result = await self.remote.run(
                str(message["script"]),
                timeout=float(timeout) if timeout is not None else None,
                sensitive=bool(message.get("sensitive")),
            )
        except RemoteChainError as exc:
            return {"error": {"kind": type(exc).__name__, "message": str(exc)}}
        return {"ok": dataclasses.asdict(result)}

    async def watch(self) -> None:
        """Exit when idle too long, or when known_hosts or the profile changed."""
        while not self.stop.is_set():
            await anyio.sleep(WATCH_PERIOD)
            idle = time.monotonic() - self.last
            changed = fingerprint(self.endpoint) != self.fingerprint
            if changed or (not self.busy and idle > self.endpoint.persist):
                self.stop.set()


async def serve(
    endpoint: Endpoint,
    path: Path,
    opener: Callable[[Endpoint], Awaitable[Remote]] | None = None,
    *,
    ready: Callable[[str], None] = lambda line: print(line, flush=True),
) -> None:
    """Connect, say READY, serve until idle, stopped or stale. ``opener``: a test seam."""
    if opener is None:
        opener = _open_with_shell
    private_folder(path.parent)
    try:
        remote = await opener(endpoint)
    except RemoteChainError as exc:
        ready(f"ERROR {type(exc).__name__}: {exc}")
        return
    old = os.umask(0o177)  # the socket is created mode 600
    try:
        unlink_socket(path)
        listener = await anyio.create_unix_listener(path)
    finally:
        os.umask(old)
    inode = _private_socket(path)
    agent = _Agent(endpoint, path, remote)
    ready(READY)
    async with remote, listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, agent.handle)
        tg.start_soon(agent.watch)

        if isinstance(remote, ShellRemote):
            tg.start_soon(remote.warm)  # the shell channel, ahead of the first request
        await agent.stop.wait()
        tg.cancel_scope.cancel()
    unlink_socket(path, inode)


async def _open_with_shell(endpoint: Endpoint) -> Remote:
    """The direct path's connection, its commands served over a persistent shell channel."""

    return ShellRemote(await SshRemote.open(endpoint))


def _private_socket(path: Path) -> int:
    path.chmod(0o600)
    return path.stat().st_ino


def main() -> None:
    """``python -m remote_chain.transport.agentd``: one JSON line on stdin names what to serve."""

    configure_logging("json", 0)
    doc = json.loads(sys.stdin.readline())

    def ready(line: str) -> None:
        print(line, flush=True)
        with contextlib.suppress(OSError):
            os.close(1)  # nobody reads further: the starting command is gone

    endpoint, path = endpoint_from_json(doc["endpoint"]), Path(doc["socket"])
    anyio.run(functools.partial(serve, endpoint, path, ready=ready), backend="asyncio")


if __name__ == "__main__":
    main()
