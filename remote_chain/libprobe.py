"""asyncssh's search for liboqs, started early in a thread beside the imports (issue 13, P9).

``import asyncssh`` imports ``asyncssh.crypto.pq``, which looks liboqs up (for the
post-quantum ``sntrup761`` key exchange) with ``ctypes.util.find_library("oqs")``, then
``"liboqs"``. On Linux each lookup runs ``ldconfig -p`` and, when that finds nothing (the
common case), ``gcc`` and ``ld``: 25-50 ms of a cold command's wall time here, spent waiting
on child processes while nothing else happens. ``start`` runs the same lookups, with the
same function, in a daemon thread as soon as argv names a command that may connect, so they
overlap the CLI's own imports (parsing, settings, the orchestrator: ~150 ms). Until asyncssh
asks, ``ctypes.util.find_library`` is wrapped: for these two names it waits for the thread
and returns its answer (the answer the original would give in this process: same
environment, same files, moments apart); any other name goes straight to the original, which
is put back once asyncssh has had its answers. Nothing else changes: if the thread has not
finished, asyncssh waits for it rather than starting a second lookup.

Not started when asyncssh is imported already (the warm launcher's children), for help or
version, or for commands that never connect.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence

# asyncssh.crypto.pq's lookups, in its order: it stops at the first one found.
NAMES = ("oqs", "liboqs")
# The commands that may open an SSH connection (interface.md §4); the others never import
# asyncssh, and a lookup for them would only be work thrown away.
CONNECTING = frozenset({"submit", "status", "wait", "cancel", "resume", "logs", "doctor"})
_QUICK = frozenset({"-h", "--help", "--version"})


class _Probe:
    def __init__(self, original: Callable[[str], str | None]) -> None:
        self.original = original
        self.found: dict[str, str | None] = {}
        self.asked: set[str] = set()
        self.thread = threading.Thread(target=self._look, name="remote-chain-libprobe")
        self.thread.daemon = True  # never holds the exit up (main() ends with os._exit)

    def _look(self) -> None:
        for name in NAMES:
            self.found[name] = self.original(name)
            if self.found[name]:
                return

    def find_library(self, name: str) -> str | None:
        if name not in NAMES:
            return self.original(name)
        self.thread.join()
        self.asked.add(name)
        answer = self.found[name] if name in self.found else self.original(name)
        if answer or self.asked == set(NAMES):  # asyncssh asks nothing more: put it back
            import ctypes.util  # noqa: PLC0415 - imported by start already

            ctypes.util.find_library = self.original  # type: ignore[assignment]  # the function it was
        return answer


def start(command: str | None, args: Sequence[str]) -> bool:
    """Start the lookups for a command about to run; True if started."""
    if command not in CONNECTING or "asyncssh" in sys.modules or _QUICK.intersection(args):
        return False
    import ctypes.util  # noqa: PLC0415 - only for a command that connects (asyncssh imports it)

    current = ctypes.util.find_library
    if isinstance(getattr(current, "__self__", None), _Probe):
        return False  # started already in this process
    probe = _Probe(current)
    ctypes.util.find_library = probe.find_library
    probe.thread.start()
    return True
