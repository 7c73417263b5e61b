"""A cold command's TCP connection, begun before asyncssh is imported (issue 13, P9). STDLIB.

A new process loads asyncssh and cryptography (~60 ms of CPU here) before it can send a
byte; the TCP handshake, then the version lines' exchange (sshd answers ours with its key
exchange offer) waited behind that: a round trip and more. ``begin`` starts them in a worker
thread instead (the name lookup and the connect block): it connects to the profile's host and
sends asyncssh's own version line (RFC 4253 s4.2: either side may speak first) while the
import runs, so at 50 ms RTT sshd's banner and KEXINIT are already in when asyncssh starts.

It is a guess, checked before anything more is sent: the socket goes to asyncssh only when the
route the ssh config really resolves to (``sshconfig.resolve``, which needs asyncssh's parser,
so after the import) is one hop, reached by plain TCP, to this same host and port (``Hop.direct``,
``EarlyTcp.reaches``), and asyncssh lets its version line be taken over
(``fastauth.VERSION_AHEAD``: the connection is told of its owner before it would send one).
Otherwise it is closed unused (sshd logs a connection closed before the key exchange) and
asyncssh connects as it always did; a guess that failed to connect is dropped the same way,
so every connect error still comes from the connect asyncssh makes, worded as before.

To keep such unused connections rare, ``begin`` guesses only for a host written as an IP
address or a dotted name (ssh aliases are short names), and only when no line of the ssh
config files that could apply to it says where or how to connect or which host keys to trust
(``_identity_files``: a plain reading of ``Host`` blocks and ``Include``; a ``Match`` block
counts as applying). Bad input is refused before anything reaches the network
(tests/faults/test_bad_input.py), and the transport checks some of it only after its import
(the keys, the known_hosts files): so a key that is not a plain private key, or a missing
known_hosts file, means no guess either (``_inputs_plain``). An ssh config asyncssh cannot
parse is the one bad input left that costs a connection opened and closed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fnmatch
import functools
import glob
import importlib.util
import ipaddress
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from remote_chain.errors import ConfigError
from remote_chain.remote.endpoint import DEFAULT_CONNECT_TIMEOUT, Endpoint

# ssh_config(5) keywords that change the address, port, route or socket of a connection, and
# (last four) those whose values sshconfig.resolve may refuse, that move the known_hosts files,
# or that name a certificate asyncssh loads (and refuses) only after the import: where one may
# apply, no guess.
REROUTING = frozenset(
    {
        "hostname",
        "port",
        "proxyjump",
        "proxycommand",
        "bindaddress",
        "bindinterface",
        "addressfamily",
        "canonicalizehostname",
        "canonicaldomains",
        "stricthostkeychecking",
        "userknownhostsfile",
        "globalknownhostsfile",
        "certificatefile",
    }
)
DEFAULT_PORT = 22
# OpenSSH's defaults when the config names no known_hosts file (ssh_config(5)).
DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
USER_CONFIG = Path("~/.ssh/config")
SYSTEM_CONFIG = Path("/etc/ssh/ssh_config")
_MAX_INCLUDE_DEPTH = 16  # OpenSSH's READCONF_MAX_DEPTH
_WORDS = re.compile(r"\s*=\s*|\s+")
_MAX_KEY_BYTES = 64 * 1024
_OPENSSH_KEY_BEGIN = "-----BEGIN OPENSSH PRIVATE KEY-----"
_OPENSSH_KEY_END = "-----END OPENSSH PRIVATE KEY-----"
_PEM_KEY = re.compile(r"-----BEGIN (?:RSA |EC |DSA )?PRIVATE KEY-----")
_VERSION = re.compile(r"__version__\s*=\s*['\"]([0-9A-Za-z.+-]+)['\"]")


@dataclass
class EarlyTcp:
    """A TCP connect to ``host``:``port`` under way, the version line naming ``software``
    sent on it once connected; ``close`` it whenever it goes unused."""

    host: str
    port: int
    software: str
    started: float
    _future: asyncio.Future[socket.socket] = field(repr=False)
    handed_over: bool = False  # the socket is the caller's (``connected``)
    _closed: bool = False

    def reaches(self, host: str, port: int) -> bool:
        return (host, port) == (self.host, self.port)

    async def connected(self) -> socket.socket | None:
        """The connected socket, our version line sent on it (now the caller's), or None if
        this connect failed: the caller then connects the usual way. The caller bounds it.
        A name that does not resolve is raised (``socket.gaierror``): asyncssh would ask the
        resolver the same question again (P10: a dead host's error at once)."""
        try:
            # Shielded: a timeout here must not cancel the future, or the socket the thread
            # returns after it would never be closed (close() closes it when it comes).
            sock = await asyncio.shield(self._future)
        except socket.gaierror:
            raise
        except OSError:
            return None
        self.handed_over = True
        return sock

    def close(self) -> None:
        """Close the socket unless it was handed over; safe while the connect is still under
        way (then it is closed when the worker thread returns it) and safe to call twice."""
        if self.handed_over or self._closed:
            return
        self._closed = True
        self._future.add_done_callback(_close_result)


def _close_result(future: asyncio.Future[socket.socket]) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().close()


def config_files(endpoint: Endpoint) -> tuple[Path, ...]:
    """The config files read, in order: ``ssh_config`` alone (``ssh -F``), else the user's
    and the system's that exist. A named file that is missing is a ``ConfigError``. (Here,
    not in sshconfig.py: ``begin`` runs before asyncssh is imported.)"""
    if endpoint.ssh_config is not None:
        path = endpoint.ssh_config.expanduser()
        if not path.is_file():
            raise ConfigError(
                f"ssh config file {path} does not exist",
                source=endpoint.name,
                field="ssh_config",
            )
        return (path,)
    return tuple(p for p in (USER_CONFIG.expanduser(), SYSTEM_CONFIG) if p.is_file())


def begin(endpoint: Endpoint) -> EarlyTcp | None:
    """Start connecting to the endpoint's host if that is surely where asyncssh will connect
    (the module's docstring); None when it may not be."""
    host, port = endpoint.host, endpoint.port if endpoint.port is not None else DEFAULT_PORT
    if endpoint.proxy_jump is not None or not _plain_address(host):
        return None
    try:
        files = config_files(endpoint)
    except ConfigError:
        return None  # sshconfig.resolve raises it, after the import, as before
    identities = _identity_files(host, files)
    if identities is None or not _inputs_plain(endpoint, identities):
        return None
    software = asyncssh_software()
    timeout = endpoint.connect_timeout or DEFAULT_CONNECT_TIMEOUT
    loop = asyncio.get_running_loop()
    future: asyncio.Future[socket.socket] = loop.create_future()
    # A thread of its own, not the loop's executor: that pool has cpu + 4 workers, and the
    # guesses at hosts that never answer must not hold up those at the others (a fan-out).
    threading.Thread(
        target=_connect_in_thread,
        args=(loop, future, functools.partial(_start_connect, host, port, timeout, software)),
        name=f"remote-chain connect {host}",
        daemon=True,
    ).start()
    return EarlyTcp(host, port, software, time.monotonic(), future)


def _connect_in_thread(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[socket.socket],
    connect: Callable[[], socket.socket],
) -> None:
    sock: socket.socket | None = None
    error: BaseException | None = None
    try:
        sock = connect()
    except Exception as exc:  # handed to the waiting coroutine as it is
        error = exc
    try:
        loop.call_soon_threadsafe(_settle, future, sock, error)
    except RuntimeError:  # the loop is closed: no one will take it
        if sock is not None:
            sock.close()


def _settle(
    future: asyncio.Future[socket.socket], sock: socket.socket | None, error: BaseException | None
) -> None:
    if future.done():  # cancelled: no one will take it
        if sock is not None:
            sock.close()
    elif sock is not None:
        future.set_result(sock)
    else:
        future.set_exception(error or OSError("connect failed"))


def _inputs_plain(endpoint: Endpoint, config_identities: list[str]) -> bool:
    """Whether the files the transport checks after its import look usable: bad input must
    be refused before anything reaches the network (tests/faults/test_bad_input.py), so a
    key that is not a plain private key (not one, encrypted, missing), or a known_hosts file
    that is missing, means no guess: asyncssh then refuses it before connecting, as always.
    The keys: the profile's identity file, else the config's IdentityFile lines (asyncssh
    loads them all; one with ``%`` tokens is not guessed at)."""
    if endpoint.known_hosts is not None:
        known_hosts: tuple[Path, ...] = (endpoint.known_hosts,)
    else:  # the config names none (those keywords reroute): OpenSSH's defaults
        known_hosts = tuple(
            Path(p) for p in (*DEFAULT_USER_KNOWN_HOSTS, *DEFAULT_GLOBAL_KNOWN_HOSTS)
        )
    if not any(p.expanduser().is_file() for p in known_hosts):
        return False
    if endpoint.identity_file is not None:
        return _plain_private_key(endpoint.identity_file.expanduser())
    return all("%" not in k and _plain_private_key(Path(k).expanduser()) for k in config_identities)


def _plain_private_key(path: Path) -> bool:
    """An unencrypted private key in OpenSSH's format or in PEM (PKCS#1 or #8)."""
    try:
        with path.open("rb") as handle:
            text = handle.read(_MAX_KEY_BYTES).decode("ascii")
    except (OSError, UnicodeDecodeError):
        return False
    if _OPENSSH_KEY_BEGIN in text and _OPENSSH_KEY_END in text:
        body = text.split(_OPENSSH_KEY_BEGIN, 1)[1].split(_OPENSSH_KEY_END, 1)[0]
        try:
            blob = base64.b64decode("".join(body.split()), validate=True)
        except ValueError:
            return False
        # "openssh-key-v1\0", then the cipher's name as an SSH string: "none" if unencrypted.
        magic = b"openssh-key-v1\0"
        return blob.startswith(magic) and blob[len(magic) : len(magic) + 8] == b"\0\0\0\x04none"
    pem = _PEM_KEY.search(text)
    return pem is not None and "ENCRYPTED" not in text


def _plain_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return "." in host and not host.endswith(".")
    return True


def asyncssh_software() -> str:
    """The name asyncssh puts in its version line (``AsyncSSH_<version>``), read from its
    ``version.py`` without importing it; plain ``AsyncSSH`` if that cannot be read."""
    with contextlib.suppress(ImportError, OSError, ValueError):
        spec = importlib.util.find_spec("asyncssh")
        if spec is not None and spec.submodule_search_locations:
            text = Path(spec.submodule_search_locations[0], "version.py").read_text("utf-8")
            found = _VERSION.search(text)
            if found:
                return f"AsyncSSH_{found.group(1)}"
    return "AsyncSSH"


def _start_connect(host: str, port: int, timeout: float, software: str) -> socket.socket:
    """In a worker thread: connect to the first address asyncio's create_connection would
    try, and send the version line."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.settimeout(timeout)
        sock.connect(address)
        sock.sendall(f"SSH-2.0-{software}\r\n".encode("ascii"))
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _identity_files(alias: str, files: tuple[Path, ...]) -> list[str] | None:
    """The ``IdentityFile`` values of ``files`` that may apply to ``alias``, or None when a
    line that may apply names a ``REROUTING`` keyword (an unreadable file or an Include too
    deep: assumed so)."""
    found: list[str] = []
    try:
        for f in files:
            if _scan(alias, f, f.parent, 0, found):
                return None
    except (OSError, UnicodeDecodeError, RecursionError):
        return None
    return found


def _scan(alias: str, path: Path, base: Path, depth: int, identities: list[str]) -> bool:
    """True if a line of ``path`` that may apply to ``alias`` reroutes; its IdentityFile
    values are added to ``identities``."""
    if depth > _MAX_INCLUDE_DEPTH:
        raise RecursionError(f"ssh config Include deeper than {_MAX_INCLUDE_DEPTH}")
    applies = True  # lines before the first Host or Match apply to every host
    for raw in path.read_text("utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = _WORDS.split(line, maxsplit=1)
        key, value = words[0].lower(), words[1].strip('"') if len(words) > 1 else ""
        if key == "host":
            applies = _host_matches(alias, value.replace('"', "").split())
        elif key == "match":
            applies = True  # Match conditions are asyncssh's to evaluate: assume they hold
        elif not applies:
            continue
        elif key in REROUTING:
            return True
        elif key == "identityfile":
            identities.append(value)
        elif key == "include":
            for pattern in value.split():
                name = Path(pattern).expanduser()
                full = name if name.is_absolute() else base / name
                for included in sorted(glob.glob(str(full))):
                    if _scan(alias, Path(included), base, depth + 1, identities):
                        return True
    return False


def _host_matches(alias: str, patterns: list[str]) -> bool:
    """OpenSSH's ``Host`` list: some pattern matches and no negated one does (ssh_config(5));
    ``*`` and ``?`` only, without case."""
    host = alias.lower()
    matched = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob_text = pattern.removeprefix("!").lower().replace("[", "[[]")
        with contextlib.suppress(re.error):
            if fnmatch.fnmatchcase(host, glob_text):
                if negated:
                    return False
                matched = True
    return matched
