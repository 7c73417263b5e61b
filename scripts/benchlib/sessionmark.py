#!/usr/bin/env python3
"""Run a checkout's console entry point, noting when each SSH session (channel) is opened.

    RC_BENCH_MARKS=FILE python3 sessionmark.py MODULE:FUNCTION ARGS...

Appends one CLOCK_MONOTONIC line to ``FILE`` each time the command asks asyncssh for a new
session (``SSHClientConnection.create_session``, which ``create_process`` and ``run`` go
through): the first line is where the connection is up (key exchange and authentication
done), and the count is the execs the command ran. The delaying proxy logs on the same
clock, so the bench splits the command's round trips into the connection's and the
operation's. The checkout's own code runs unchanged (the PYTHONPATH the bench gives picks
which checkout); only asyncssh's public method is wrapped, in this process.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from typing import Any


def main() -> None:
    entry = sys.argv.pop(1)
    # Opened once, appended with os.write: the line is written even when the command
    # leaves through os._exit, and nothing blocks the event loop for longer than a write.
    marks = os.open(os.environ.pop("RC_BENCH_MARKS"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    import asyncssh  # noqa: PLC0415 - after the arguments: nothing else runs before the CLI

    original = asyncssh.SSHClientConnection.create_session

    async def noted(self: asyncssh.SSHClientConnection, *args: Any, **kwargs: Any) -> Any:
        os.write(marks, f"{time.monotonic():.6f}\n".encode())
        return await original(self, *args, **kwargs)

    asyncssh.SSHClientConnection.create_session = noted  # type: ignore[method-assign]
    module, _, function = entry.partition(":")
    sys.argv[0] = "remote-chain"
    getattr(importlib.import_module(module), function)()


if __name__ == "__main__":
    main()
