"""Connect while the command line imports (issue 13, P9): the handshake overlaps start-up.

A cold ``status``/``submit`` spends ~0.3 s importing (typer, pydantic, the orchestrator,
asyncssh) before its first byte leaves, then waits ~7 round trips for TCP, the key exchange
and authentication. ``start`` (called by ``cli.main`` before anything heavy is imported)
reads the clusters named with ``-c`` and, in a daemon thread:

1. opens a non-blocking TCP connection to each profile's ``host``/``port`` at once (only when
   nothing in the top-level ssh config files could send it elsewhere), so TCP's handshake
   and the server's banner arrive during the imports;
2. builds each cluster's ``Endpoint`` with the very code the orchestrator uses
   (``load_settings``, ``find_profile``, ``endpoint_for``) and runs the ordinary
   ``ssh._connect`` on an event loop of its own. asyncssh mostly waits on the network, so
   the GIL lets the main thread go on importing meanwhile.

``take`` (called by ``open_remote`` just before a direct asyncssh connection) hands over a
connection only for an ``Endpoint`` equal to the one it was opened for; the command then
drives it through ``_Bridged``, which runs each call on the connection's own loop. Anything
else (another endpoint, jump hosts, the openssh transport, an agent, ``persist``, ``--help``,
any error while guessing) leaves today's path untouched: the preconnected connection is
dropped unused. Errors are the ordinary path's own: ``_connect`` raised them, with the same
host names and timeouts (a connect timeout counts from the earlier start, so never later).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import socket
import threading
import tomllib
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from remote_chain.remote import ClosingContext, CommandResult

if TYPE_CHECKING:
    from collections.abc import Coroutine, Sequence

    from remote_chain.remote.endpoint import Endpoint
    from remote_chain.remote.ssh import Connection, SshRemote

# Commands that connect to the clusters named with -c (interface.md §4).
_CONNECTING = frozenset({"status", "wait", "submit", "cancel", "resume", "logs"})
_GLOBAL_WITH_VALUE = frozenset({"--clusters-dir", "--log-format"})
MAX_EARLY = 8  # clusters preconnected at most; the rest connect as usual
# ssh config keywords that can change where (or how) the target is reached: with any of them
# in a top-level config file, no raw TCP connection is opened ahead (step 1); the route
# check in ``ssh._connect`` is what guarantees correctness either way.
_REROUTING = frozenset(
    {
        "hostname",
        "port",
        "proxyjump",
        "proxycommand",
        "bindaddress",
        "bindinterface",
        "addressfamily",
        "canonicalizehostname",
        "match",
    }
)

T = TypeVar("T")
_started = False
_early: dict[str, tuple[Endpoint, Future[Connection]]] = {}
_loop: asyncio.AbstractEventLoop | None = None


def start(argv: Sequence[str]) -> None:
    """Start connecting to the clusters named in ``argv`` (the CLI's own arguments).

    TCP connects are begun at once; asyncssh is then imported here, in the main thread,
    before the rest of the command line: the imports are CPU and the GIL serialises them,
    so a handshake can only start once asyncssh is in, and the sooner it starts, the more
    of its round trips pass while typer, pydantic and the orchestrator import.
    """
    global _started, _loop  # noqa: PLW0603 - one preconnection per process
    if _started or os.environ.get("REMOTE_CHAIN_PRECONNECT", "1") == "0":
        return
    parsed = _parse(argv)
    if parsed is None:
        return
    names, clusters_dir = parsed
    guesses = [g for g in (_guess(name, clusters_dir) for name in names) if g is not None]
    if not guesses:
        return
    _started = True
    socks = {endpoint.name: _raw_connect(endpoint) for endpoint in guesses}
    import remote_chain.logconfig  # noqa: F401, PLC0415 - structlog without rich, first
    from remote_chain.remote import ssh  # noqa: PLC0415 - asyncssh

    loop = asyncio.new_event_loop()
    for endpoint in guesses:
        coro = ssh.connect_early(endpoint, socks[endpoint.name])
        _early[endpoint.name] = (endpoint, asyncio.run_coroutine_threadsafe(coro, loop))
    threading.Thread(target=loop.run_forever, name="remote-chain-preconnect", daemon=True).start()
    _loop = loop


def _parse(argv: Sequence[str]) -> tuple[list[str], Path | None] | None:
    """(cluster names, --clusters-dir) of a connecting command; None for anything else."""
    if any(a in ("-h", "--help", "--version") for a in argv):
        return None
    clusters_dir: Path | None = None
    i = 0
    while i < len(argv) and argv[i].startswith("-"):  # global options, before the command
        arg = argv[i]
        if arg in _GLOBAL_WITH_VALUE and i + 1 < len(argv):
            if arg == "--clusters-dir":
                clusters_dir = Path(argv[i + 1])
            i += 2
            continue
        if arg.startswith("--clusters-dir="):
            clusters_dir = Path(arg.partition("=")[2])
        i += 1
    if i >= len(argv) or argv[i] not in _CONNECTING:
        return None
    names: list[str] = []
    rest = argv[i + 1 :]
    for j, arg in enumerate(rest):
        if arg == "--":
            break
        if arg in ("-c", "--cluster") and j + 1 < len(rest):
            names.append(rest[j + 1])
        elif arg.startswith("--cluster="):
            names.append(arg.partition("=")[2])
        elif arg.startswith("-c") and len(arg) > 2 and not arg.startswith("--"):
            names.append(arg[2:])
    names = list(dict.fromkeys(n for n in names if n))
    return (names, clusters_dir) if 0 < len(names) <= MAX_EARLY else None


def _guess(name: str, clusters_dir: Path | None) -> Endpoint | None:
    """The Endpoint ``cluster.endpoint_for`` will build, read cheaply (TOML, environment).

    Only a guess: ``take`` compares it with the real one, field by field, and a connection
    opened for a wrong guess is never used. None when the direct asyncssh path is not the
    one the command will take (openssh transport, persist) or the profile is unreadable.
    """
    from remote_chain.remote.endpoint import Endpoint  # noqa: PLC0415 - a small module

    try:
        profile = _profile_file(name, clusters_dir)
        if profile is None:
            return None
        with profile.open("rb") as f:
            doc = tomllib.load(f)
        env = os.environ
        if doc.get("transport", "asyncssh") != "asyncssh" or doc.get("persist"):
            return None
        if env.get("REMOTE_CHAIN_PERSIST", "0") not in ("", "0"):
            return None
        base = profile.absolute().parent
        timeout = env.get("REMOTE_CHAIN_CONNECT_TIMEOUT", "")
        keepalive = env.get("REMOTE_CHAIN_KEEPALIVE_INTERVAL", "")
        ssh_config = env.get("REMOTE_CHAIN_SSH_CONFIG", "")
        host, port = doc["host"], doc.get("port")
        if not isinstance(host, str) or not (port is None or type(port) is int):
            return None  # the command reports the invalid profile itself
        return Endpoint(
            name=name,
            host=host,
            port=port,
            user=_text(doc, "user"),
            identity_file=_local(_text(doc, "identity_file"), base),
            known_hosts=_local(_text(doc, "known_hosts"), base),
            proxy_jump=_text(doc, "proxy_jump"),
            ssh_config=_local(_text(doc, "ssh_config"), base)
            or (Path(ssh_config) if ssh_config else None),
            connect_timeout=float(timeout) if timeout else None,
            keepalive_interval=float(keepalive) if keepalive else 15,
        )
    except (OSError, ValueError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return None


def _text(doc: dict[str, object], key: str) -> str | None:
    value = doc.get(key)
    if value is None or isinstance(value, str):
        return value
    raise TypeError(key)  # an invalid profile: no guess


def _local(value: str | None, base: Path) -> Path | None:
    """A profile path as ``config.profile.LocalPath`` reads it: relative to the profile."""
    return None if value is None else base / Path(value).expanduser()


def _raw_connect(endpoint: Endpoint) -> tuple[socket.socket, tuple[str, int]] | None:
    """A non-blocking TCP connect to the endpoint's host and port, begun now; None if unsure
    whether that is where ssh goes (see _REROUTING) or if the name does not resolve."""
    if endpoint.proxy_jump:
        return None
    config = endpoint.ssh_config
    files = [config] if config else [Path("~/.ssh/config"), Path("/etc/ssh/ssh_config")]
    try:
        if any(_reroutes(f.expanduser()) for f in files):
            return None
        port = endpoint.port or 22
        family, kind, proto, _, address = socket.getaddrinfo(
            endpoint.host, port, type=socket.SOCK_STREAM
        )[0]
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        sock.connect_ex(address)  # EINPROGRESS: the kernel finishes it while we import
    except (OSError, UnicodeError):
        return None
    return sock, (endpoint.host, port)


def _profile_file(name: str, clusters_dir: Path | None) -> Path | None:
    """The first ``<name>.toml`` in the folders ``config.lookup`` searches (the check is
    the Endpoint comparison in ``take``: a wrong guess only wastes this connection)."""
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        return None
    folders = [clusters_dir] if clusters_dir else []
    env = os.environ.get("REMOTE_CHAIN_CLUSTERS_DIR", "")
    folders += [Path(p) for p in env.split(os.pathsep) if p]
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    home = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    folders += [Path("clusters"), home / "remote-chain" / "clusters"]
    for folder in folders:
        candidate = folder.expanduser() / f"{name}.toml"
        if candidate.is_file():
            return candidate
    return None


def _reroutes(path: Path) -> bool:
    """Whether an ssh config file has a line that could change the route (see _REROUTING)."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return False
    for line in text.splitlines():
        words = line.strip().replace("=", " ").split()
        if words and words[0].lower() in _REROUTING:
            return True
    return False


# Endpoint fields that only matter once connected: the real endpoint's are used for them.
_AFTER_CONNECT = (
    "command_timeout",
    "max_channels",
    "max_output_bytes",
    "persist",
    "agent_dir",
    "watch",
    "control_path",
)


async def take(endpoint: Endpoint) -> _Bridged | None:
    """The connection opened ahead for ``endpoint``, or None: connect as usual.

    Raises what the connection attempt raised (``ssh._connect``'s own errors).
    """
    if not _started:
        return None
    found = _early.pop(endpoint.name, None)
    loop = _loop
    if found is None or loop is None:
        return None
    guessed, future = found
    kept = {field: getattr(endpoint, field) for field in _AFTER_CONNECT}
    if dataclasses.replace(guessed, **kept) != endpoint:  # the guess was wrong: not this one
        future.add_done_callback(functools.partial(_discard, loop))
        return None
    connection = await asyncio.wrap_future(future)
    from remote_chain.remote.ssh import SshRemote  # noqa: PLC0415 - imported by now

    async def wrap() -> SshRemote:  # on the connection's loop: anyio's primitives bind there
        return SshRemote(endpoint, connection)

    remote = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(wrap(), loop))
    import structlog  # noqa: PLC0415 - configured by now (not in the thread: stdout is JSON's)

    structlog.get_logger().debug("ssh_connected", cluster=endpoint.name, preconnected=True)
    return _Bridged(remote, loop)


def _discard(loop: asyncio.AbstractEventLoop, future: Future[Connection]) -> None:
    if not future.cancelled() and future.exception() is None:
        loop.call_soon_threadsafe(future.result().close)


class _Bridged(ClosingContext):
    """An ``SshRemote`` living on the preconnect thread's loop, driven from the command's.

    Each call runs on the connection's own loop; cancelling the caller cancels it there too
    (``asyncio.wrap_future`` chains the cancellation).
    """

    def __init__(self, remote: SshRemote, loop: asyncio.AbstractEventLoop) -> None:
        self._remote = remote
        self._loop = loop

    @property
    def name(self) -> str:
        return self._remote.name

    async def run(
        self, script: str, *, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        return await self._call(self._remote.run(script, timeout=timeout, sensitive=sensitive))

    async def aclose(self) -> None:
        await self._call(self._remote.aclose())

    async def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))
