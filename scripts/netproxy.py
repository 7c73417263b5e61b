#!/usr/bin/env python3
"""A small TCP proxy on loopback that delays and can cut connections (bench and fault tooling).

``tc netem`` is not available on this kernel, so latency is emulated here: every chunk read
from one side is released to the other ``delay_ms`` later, in order, in both directions, with
TCP_NODELAY on both legs. An RTT of 50 ms is ``--delay-ms 25``.

For fault injection, ``cut_after_upstream_bytes`` aborts a connection (both legs, RST) once
that many client->server bytes have been forwarded, and ``cut_all()`` aborts every live one.

As a program (one per endpoint, so it runs on its own core):
    python3 scripts/netproxy.py --target 127.0.0.1:2222 --delay-ms 25 [--listen-port 0]
prints ``PORT <n>`` once listening and runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import Protocol


class ByteReader(Protocol):
    """What a pipe reads from: an ``asyncio.StreamReader``, or a stand-in wrapping one."""

    async def read(self, n: int = -1) -> bytes: ...


class DelayProxy:
    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        delay_ms: float = 0.0,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        cut_after_upstream_bytes: int | None = None,
    ) -> None:
        self.target = (target_host, target_port)
        self.delay = delay_ms / 1000.0
        self.listen = (listen_host, listen_port)
        self.cut_after_upstream_bytes = cut_after_upstream_bytes
        self.accepted = 0
        self.cuts = 0
        self._server: asyncio.base_events.Server | None = None
        self._live: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, *self.listen)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self.cut_all()
            # Aborted sockets end every handler by themselves; wait for them (bounded).
            if self._tasks:
                await asyncio.wait(set(self._tasks), timeout=2)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def cut_all(self) -> None:
        """Abort every live connection at once (RST on both legs)."""
        for w in list(self._live):
            self._abort(w)

    def _abort(self, writer: asyncio.StreamWriter) -> None:
        self._live.discard(writer)
        transport = writer.transport
        with contextlib.suppress(Exception):
            sock = transport.get_extra_info("socket")
            if sock is not None:  # SO_LINGER 0: close with RST, like a dropped link
                sock.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
        transport.abort()

    async def _handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            s_reader, s_writer = await asyncio.open_connection(*self.target)
        except OSError:
            self._abort(c_writer)
            return
        for w in (c_writer, s_writer):
            sock = w.transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._live.add(w)
        pair = (c_writer, s_writer)
        counted = [0]

        def cut_check(n: int) -> None:
            counted[0] += n
            limit = self.cut_after_upstream_bytes
            if limit is not None and counted[0] >= limit:
                self.cuts += 1
                for w in pair:
                    self._abort(w)

        await asyncio.gather(
            self._pipe(c_reader, s_writer, pair, cut_check),
            self._pipe(s_reader, c_writer, pair, None),
            return_exceptions=True,
        )
        for w in pair:
            self._live.discard(w)
            with contextlib.suppress(Exception):
                w.close()

    async def _pipe(
        self,
        reader: ByteReader,
        writer: asyncio.StreamWriter,
        pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
        on_bytes: Callable[[int], None] | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def release() -> None:
            while True:
                due, chunk = await queue.get()
                if not chunk:
                    with contextlib.suppress(Exception):
                        writer.write_eof()
                    return
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(chunk)
                await writer.drain()
                if on_bytes is not None:
                    on_bytes(len(chunk))

        releaser = asyncio.create_task(release())
        try:
            while True:
                chunk = await reader.read(65536)
                queue.put_nowait((loop.time() + self.delay, chunk))
                if not chunk:
                    break
            await releaser
        except (ConnectionError, OSError):
            for w in pair:
                self._abort(w)
        finally:
            releaser.cancel()


class ThreadedProxy:
    """A DelayProxy on its own event loop in a daemon thread (for tests)."""

    def __init__(self, target_host: str, target_port: int, **kwargs: object) -> None:
        # kwargs are DelayProxy's keyword options, forwarded as they are; spelling them out
        # again here would be a second list to keep in step.
        self.proxy = DelayProxy(target_host, target_port, **kwargs)  # type: ignore[arg-type]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> ThreadedProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self._loop).result(5)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    @property
    def port(self) -> int:
        return self.proxy.port

    def cut_all(self) -> None:
        self._loop.call_soon_threadsafe(self.proxy.cut_all)


async def serve_until_signalled(proxy: DelayProxy) -> None:
    """Start ``proxy``, print ``PORT <n>``, and serve until SIGTERM or SIGINT."""
    await proxy.start()
    print(f"PORT {proxy.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await proxy.stop()


async def _main(args: argparse.Namespace) -> None:
    host, _, port = args.target.rpartition(":")
    proxy = DelayProxy(host, int(port), delay_ms=args.delay_ms, listen_port=args.listen_port)
    await serve_until_signalled(proxy)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="HOST:PORT (loopback only)")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay")
    parser.add_argument("--listen-port", type=int, default=0)
    a = parser.parse_args()
    if not a.target.startswith(("127.", "localhost:", "[::1]:")):
        sys.exit("netproxy: only loopback targets are allowed")
    asyncio.run(_main(a))
