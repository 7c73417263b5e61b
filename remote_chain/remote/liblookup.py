"""asyncssh's import-time library lookup, without the C compiler (issue 13, P9).

Importing asyncssh imports ``asyncssh.crypto.pq``, which looks liboqs up (post-quantum key
exchange) with ``ctypes.util.find_library("oqs")``, then ``("liboqs")``. On Linux each call
runs ``ldconfig -p``, then, finding nothing, ``gcc`` (a throw-away link) and then ``ld``: two
compiler runs on every cold command where gcc is installed, 20-35 ms of a status here and the
single largest import cost that is not Python.

The compiler adds next to nothing a command can use: asyncssh hands the name found to
``dlopen``, which searches ``LD_LIBRARY_PATH``, the ``ldconfig`` cache and the system folders,
not the compiler's own search path (``/usr/local/lib`` uncached, ``LIBRARY_PATH``). So while
asyncssh is imported, ``find_library`` asks the cache, then (only if ``LD_LIBRARY_PATH`` is
set) ``ld`` with it, as the stdlib's last step does. What only the compiler finds is a library
dlopen cannot load by that name, or one in a system folder whose cache is stale (package
managers run ``ldconfig``). Outside that import ``find_library`` is the stdlib's own.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import os
import sys
from collections.abc import Callable, Iterator

# The stdlib's Linux steps (CPython 3.8-3.13 ``ctypes/util.py``); absent elsewhere.
_STDLIB = ctypes.util.find_library
_LDCONFIG: Callable[[str], str | None] | None = getattr(ctypes.util, "_findSoname_ldconfig", None)
_LD: Callable[[str], str | None] | None = getattr(ctypes.util, "_findLib_ld", None)
_SONAME: Callable[[str | None], str | None] | None = getattr(ctypes.util, "_get_soname", None)


def find_library(name: str) -> str | None:
    """``ctypes.util.find_library`` on Linux without its ``gcc`` step (the stdlib's own where
    its steps are not there to call)."""
    if _LDCONFIG is None or _LD is None or _SONAME is None:
        return _STDLIB(name)
    found = _LDCONFIG(name)
    if found is None and os.environ.get("LD_LIBRARY_PATH"):
        found = _SONAME(_LD(name))
    return found


@contextlib.contextmanager
def without_compiler() -> Iterator[None]:
    """``find_library`` is ours for the duration (on Linux; elsewhere a no-op)."""
    if sys.platform != "linux":
        yield
        return
    stdlib = ctypes.util.find_library
    ctypes.util.find_library = find_library
    try:
        yield
    finally:
        ctypes.util.find_library = stdlib
