#!/usr/bin/env python3
"""The team's delaying proxy (``scripts/netproxy.py``) that also logs every chunk it reads.

One line per read, ``<CLOCK_MONOTONIC s> <connection> <u|d> <bytes>``, appended to
``--events``: the bench reads the lines of a time window (the client's clock is the same
CLOCK_MONOTONIC, shared by every process on the machine) and counts the client flights that
waited for the server (``stats.client_flights``): round trips counted, not inferred from time.

    python3 scripts/benchlib/flightproxy.py --target 127.0.0.1:2222 --delay-ms 25 --events F

prints ``PORT <n>`` once listening and runs until SIGTERM/SIGINT, like netproxy.py.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from netproxy import ByteReader, DelayProxy, serve_until_signalled


class _LoggingReader:
    """A StreamReader stand-in that logs each chunk read before the proxy delays it."""

    def __init__(self, reader: ByteReader, log: Callable[[bool, int], None], up: bool) -> None:
        self._reader = reader
        self._log = log
        self._up = up

    async def read(self, n: int = -1) -> bytes:
        chunk = await self._reader.read(n)
        if chunk:
            self._log(self._up, len(chunk))
        return chunk


class FlightProxy(DelayProxy):
    """DelayProxy whose two pipes per connection log what they read."""

    def __init__(self, *args: object, events: IO[str], **kwargs: object) -> None:
        # DelayProxy's own arguments, forwarded as they are (one list of them, in netproxy).
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._events = events
        self._ids = itertools.count(1)
        # id(pair) -> [connection number, live pipes]; dropped when both pipes end, so a
        # recycled id() never merges two connections.
        self._conn_of: dict[int, list[int]] = {}

    async def _pipe(
        self,
        reader: ByteReader,
        writer: asyncio.StreamWriter,
        pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter],
        on_bytes: Callable[[int], None] | None,
    ) -> None:
        # netproxy gives the client->server pipe the byte-count callback, the other None.
        up = on_bytes is not None
        entry = self._conn_of.setdefault(id(pair), [next(self._ids), 0])
        entry[1] += 1
        conn = entry[0]

        def log(is_up: bool, size: int) -> None:
            self._events.write(f"{time.monotonic():.6f} {conn} {'u' if is_up else 'd'} {size}\n")
            self._events.flush()

        wrapped = _LoggingReader(reader, log, up)
        try:
            await super()._pipe(wrapped, writer, pair, on_bytes)
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                self._conn_of.pop(id(pair), None)


async def _main(args: argparse.Namespace, events: IO[str]) -> None:
    host, _, port = args.target.rpartition(":")
    await serve_until_signalled(FlightProxy(host, int(port), delay_ms=args.delay_ms, events=events))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="HOST:PORT (loopback only)")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay")
    parser.add_argument("--events", required=True, help="file to append chunk lines to")
    a = parser.parse_args()
    if not a.target.startswith(("127.", "localhost:", "[::1]:")):
        sys.exit("flightproxy: only loopback targets are allowed")
    with open(a.events, "a", encoding="ascii") as f:
        asyncio.run(_main(a, f))
