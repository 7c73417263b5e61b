"""Private Unix sockets: the checks of the agent's socket and of its clients.

A socket of ours lives in a folder of mode 700 owned by us (``lstat``: no symlink),
is itself mode 600 and ours, and every peer's uid is read with ``SO_PEERCRED``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
from typing import TYPE_CHECKING, TypeVar

from remote_chain.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path  # not imported at run time: the thin client skips pathlib

_P = TypeVar("_P", str, "Path")


def private_folder(folder: _P) -> _P:
    """Create ``folder`` (mode 700) if missing; refuse it unless ours, a real folder, 700."""
    with contextlib.suppress(FileExistsError):
        os.makedirs(os.path.dirname(folder), mode=0o700, exist_ok=True)
        os.mkdir(folder, mode=0o700)
    problem = folder_problem(folder)
    if problem is not None:
        raise ConfigError(problem, field="persist")
    return folder


def folder_problem(folder: str | Path) -> str | None:
    """Why ``folder`` is not private (None: it is ours, a real folder, mode 700)."""
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        return f"{folder} is not a folder (a symlink?): refusing it"
    if info.st_uid != os.getuid():
        return f"{folder} belongs to uid {info.st_uid}, not us"
    if info.st_mode & 0o077:
        return f"{folder} has mode {stat.S_IMODE(info.st_mode):03o}; it must be 700"
    return None


def socket_problem(path: str | Path) -> str | None:
    """Why the socket at ``path`` is not ours to use (its folder checked too); None: it is.

    ``FileNotFoundError`` propagates: no socket is not a problem, only an absence.
    """
    info = os.lstat(path)
    if not stat.S_ISSOCK(info.st_mode):
        return f"{path} is not a socket"
    if info.st_uid != os.getuid():
        return f"{path} belongs to uid {info.st_uid}, not us"
    if info.st_mode & 0o077:
        return f"{path} has mode {stat.S_IMODE(info.st_mode):03o}; it must be 600"
    return folder_problem(os.path.dirname(path))


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    return peer_credentials(sock)[1]


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """pid, uid, gid of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    size = struct.calcsize("3i")
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size)
    pid, uid, gid = struct.unpack("3i", creds)
    return int(pid), int(uid), int(gid)
