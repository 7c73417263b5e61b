"""The warm launcher's wire (issue 13, P8): length-prefixed JSON, file descriptors beside it.

Stdlib only: the thin client (``launch.py``) speaks it before anything heavy is imported.
A message is a 4-byte big-endian length and that many bytes of ASCII JSON (``ensure_ascii``:
argv and environment values that are not UTF-8 travel as Python's surrogate escapes,
``\\udcXX``, and come back as the same bytes). The request carries the client's stdin,
stdout, stderr and working folder as file descriptors (``SCM_RIGHTS``) with its first byte.

Client -> server: one request (``op``: ``run``, ``ping`` or ``stop``), then for ``run``
``{"go": true}`` once the server said ``ready``, then any number of ``{"signal": N}``
(SIGINT, SIGTERM, SIGHUP relayed to the child).
Server -> client for ``run``: ``{"ready": true}`` (it would fork), then, after ``go``,
``{"pid": N}`` (forked) or ``{"dropped": true}`` (no ``go`` in time: not forked), then
``{"exit": N}`` or ``{"signal": N}``; or instead of ``ready`` one of ``{"mismatch": true}``
(another package, version or interpreter: run yourself, silently), ``{"busy": N}`` /
``{"refused": why}`` (run yourself, one log line).

Why ``ready``/``go``: a client that waits too long runs the command itself. With one reply
(the pid) there was a moment where the server had forked and the client had given up: the
command ran twice. Now the server forks only once the client said ``go``, and a client that
said ``go`` never runs the command itself: whichever way a delay falls, it runs once.
"""

from __future__ import annotations

import array
import json
import socket
import struct
import time
from typing import Any, NamedTuple

PROTOCOL = 2  # 2: ready/go before the fork
HEADER = struct.Struct(">I")
MAX_MESSAGE = 16 << 20  # an environment is at most a few MiB (ARG_MAX)
MAX_FDS = 4  # stdin, stdout, stderr, the working folder
STALE_AFTER_S = 3.0  # a run request older than this is refused unforked (the client gave up)


class WireError(ValueError):
    """A message that is not one: too long, not JSON, not an object, or a missing field."""


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    if len(body) > MAX_MESSAGE:
        raise WireError(f"message of {len(body)} bytes (at most {MAX_MESSAGE})")
    return HEADER.pack(len(body)) + body


class Decoder:
    """Bytes in, whole messages out (a stream may cut them anywhere)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        # Decoded, not yet returned by receive(): "pid" and "exit" may come in one read.
        self.queued: list[dict[str, Any]] = []

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buffer += data
        out = []
        while len(self._buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buffer)
            if size > MAX_MESSAGE:
                raise WireError(f"message of {size} bytes announced (at most {MAX_MESSAGE})")
            if len(self._buffer) < HEADER.size + size:
                break
            body = bytes(self._buffer[HEADER.size : HEADER.size + size])
            del self._buffer[: HEADER.size + size]
            out.append(_decode(body))
        return out


def _decode(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"not a JSON message: {exc}") from None
    if not isinstance(message, dict):
        raise WireError("a message is a JSON object")
    return message


def send(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    """One message; ``fds`` ride with its first byte."""
    data = encode(message)
    if fds:
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        sent = sock.sendmsg([data], rights)
        data = data[sent:]
    if data:  # not even an empty send: to a peer that answered and closed, it is EPIPE
        sock.sendall(data)


def receive(
    sock: socket.socket, decoder: Decoder, deadline: float | None = None
) -> tuple[dict[str, Any] | None, list[int]]:
    """The next message (None: the other end closed first) and any fds that came with it.

    ``deadline`` (``time.monotonic()``): for the whole message, not each piece, so a peer
    that trickles bytes cannot hold the reader (``TimeoutError``). Received fds are the
    caller's to close, also when the message is refused.
    """
    if decoder.queued:
        return decoder.queued.pop(0), []
    fds: list[int] = []
    room = socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no whole message in time")
            sock.settimeout(left)
        data, ancillary, _flags, _addr = sock.recvmsg(65536, room)
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(payload[: len(payload) - len(payload) % got.itemsize])
                fds += list(got)
        if not data:
            return None, fds
        messages = decoder.feed(data)
        if messages:
            # One request at a time: a client sends nothing more until it is answered,
            # except signals, which the server reads with its own decoder later. A server's
            # replies may come together (a command that ended before its pid was read).
            decoder.queued += messages[1:]
            return messages[0], fds


class Request(NamedTuple):  # not a dataclass: importing dataclasses costs the thin client 4 ms
    """What a client asks the fork server to run, as the child will run it."""

    identity: str
    argv: list[str]
    env: dict[str, str]
    umask: int
    streams: list[tuple[str, str]]  # (encoding, errors) of stdin, stdout, stderr
    sent_at: float  # time.monotonic() of the client (CLOCK_MONOTONIC: one clock per machine)

    def to_json(self) -> dict[str, Any]:
        return {
            "op": "run",
            "v": PROTOCOL,
            "identity": self.identity,
            "argv": self.argv,
            "env": self.env,
            "umask": self.umask,
            "streams": [list(s) for s in self.streams],
            "sent_at": self.sent_at,
        }


def parse_request(doc: dict[str, Any]) -> Request:
    """A ``run`` message as a Request; WireError names the first field that is wrong."""
    argv, env, streams = doc.get("argv"), doc.get("env"), doc.get("streams")
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise WireError("argv: a non-empty list of strings")
    if not (isinstance(env, dict) and all(_is_env_item(k, v) for k, v in env.items())):
        raise WireError("env: an object of strings")
    umask = doc.get("umask")
    if not (isinstance(umask, int) and 0 <= umask <= 0o777):
        raise WireError("umask: an integer 0-0o777")
    if not (
        isinstance(streams, list)
        and len(streams) == 3
        and all(
            isinstance(s, list) and len(s) == 2 and all(isinstance(x, str) for x in s)
            for s in streams
        )
    ):
        raise WireError("streams: three [encoding, errors] pairs")
    sent_at, identity = doc.get("sent_at"), doc.get("identity")
    if not isinstance(sent_at, int | float) or not isinstance(identity, str):
        raise WireError("sent_at and identity are required")
    return Request(
        identity, list(argv), dict(env), umask, [(s[0], s[1]) for s in streams], float(sent_at)
    )


def _is_env_item(key: object, value: object) -> bool:
    return isinstance(key, str) and isinstance(value, str) and "=" not in key and bool(key)
