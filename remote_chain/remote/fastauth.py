"""One authentication flight instead of three on the asyncssh transport (issue 13: P1, P9).

Stock asyncssh authenticates in three flights after the service request: ``none`` (to learn
the server's methods), a public-key query (has-signature FALSE) answered by PK_OK, then the
signed request. RFC 4252 allows both shortcuts taken here, 2 round trips off every connection:

- s5: the client may start with any method. We start with ``publickey``; a USERAUTH_FAILURE
  lists the server's methods and asyncssh's own failure handling goes on from there exactly as
  after ``none`` (a banner is handled by asyncssh whatever request it precedes).
- s7: the first key's signature may be sent "directly without first verifying whether the key
  is acceptable". Only the first key, and only one read from a file (an agent's or a token's
  may ask the user: ``_costs_the_user``): later keys keep the query-first flow, so a person with 8
  agent keys does not sign 8 times (sshd's MaxAuthTries counts a rejected query and a rejected
  signature alike, so the order of tries and their count stay as stock).

Only connections owned by ``FastAuthClient`` (passed as ``client_factory`` by remote/ssh.py)
take it; any other asyncssh connection in the process stays stock. The seam is one entry of
asyncssh's client-auth registry, the one for ``none``, the method every connection starts
with: our handler sends the first key's signed ``publickey`` request, then hands every later
step back to asyncssh's own classes through its method list.

The first request also leaves a round trip sooner: stock asyncssh sends SERVICE_REQUEST
(``ssh-userauth``) and waits for SERVICE_ACCEPT before its first USERAUTH_REQUEST. OpenSSH's
sshd reads the two in order (``input_service_request`` installs the userauth handler, then
the next packet is read), and a server that refuses the service must disconnect (RFC 4253
s10), so for an OpenSSH server our first request follows the service request at once: as
soon as the server's EXT_INFO is in (it comes with the server's NEWKEYS, in the key
exchange's last flight, and carries ``server-sig-algs``, which an RSA key's signature needs).
The accept, when it comes, is checked as stock does and starts nothing twice. Other servers,
or no EXT_INFO, wait for the accept as stock does.

Written against asyncssh 2.24.1. It uses private names (``auth._client_auth_handlers``, the
connection's ``_packet_handlers``, ``_auth_methods``, ``_client_keys``, ``_saved_rsa_key``,
``_preferred_auth``, ``_choose_signature_alg``, ``_next_service``, ``_server_version``, the
auth flags): when they are not there, stock asyncssh runs, with a debug line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import asyncssh
import structlog
from asyncssh import auth as _auth
from asyncssh import connection as _connection
from asyncssh.constants import MSG_EXT_INFO, MSG_SERVICE_ACCEPT
from asyncssh.packet import Boolean, SSHPacket, String
from asyncssh.public_key import SSHLocalKeyPair

if TYPE_CHECKING:
    from asyncssh.connection import SSHClientConnection

_log = structlog.get_logger()

_PUBLICKEY = b"publickey"
_NONE = b"none"
_RSA_CERT = b"ssh-rsa-cert-v01@openssh.com"
_USERAUTH = b"ssh-userauth"
_OPENSSH = b"SSH-2.0-OpenSSH_"
_CONN_SHAPE = (
    "_auth_methods",
    "_client_keys",
    "_saved_rsa_key",
    "_preferred_auth",
    "_choose_signature_alg",
    "public_key_auth_requested",
    "send_userauth_request",
    "try_next_auth",
)
_EARLY_SHAPE = (
    "_next_service",
    "_server_version",
    "_auth_in_progress",
    "_auth_complete",
    "_username",
)


def _version_after_owner() -> bool:
    """Whether asyncssh's ``connection_made`` tells the owner before it sends the version
    (2.24.1 does): only then can ``FastAuthClient`` take over a version sent ahead."""
    made = getattr(_connection.SSHConnection, "connection_made", None)
    names = getattr(getattr(made, "__code__", None), "co_names", ())
    return (
        "connection_made" in names
        and "_send_version" in names
        and names.index("connection_made") < names.index("_send_version")
    )


# A cold command's socket may come with our version line already sent (remote/early.py);
# asyncssh must then not send it again, and must hash the same line in the key exchange.
VERSION_AHEAD = _version_after_owner()


class FastAuthClient(asyncssh.SSHClient):
    """The owner of a connection that takes the short path; one per connection."""

    def __init__(self, prefer_first_key: bool, version_sent: bool = False) -> None:
        # The profile's identity file, when it names one, is asyncssh's first configured key:
        # it is the one signed directly, ahead of the agent's keys (asyncssh puts those first).
        self.prefer_first_key = prefer_first_key
        self.started = False
        # Auth began on the server's EXT_INFO, ahead of SERVICE_ACCEPT (see the module doc).
        self.ahead_of_accept = False
        # The version line went out with the TCP connect (early.py), as asyncssh would have
        # written it (the connection's client_version is the same software name).
        self.version_sent = version_sent

    def connection_made(self, conn: SSHClientConnection) -> None:
        if self.version_sent:
            if getattr(conn, "_client_version", None) != b"":  # sent already: two versions
                raise asyncssh.ProtocolError("the client version was sent twice")
            conn._send_version = functools.partial(_version_already_sent, conn)  # type: ignore[method-assign]


def _version_already_sent(conn: Any) -> None:
    """Stock ``_send_version`` for a client, without the send (the line is out already)."""
    version = b"SSH-2.0-" + conn._version
    conn.logger.debug1("Sent version %s ahead, with the TCP connect", version)
    conn._client_version = version
    conn.set_extra_info(client_version=version.decode("ascii"))


def client_factory(
    *, prefer_first_key: bool, version_sent: bool = False
) -> Callable[[], asyncssh.SSHClient]:
    """``asyncssh.connect(client_factory=...)`` for one connection (one hop)."""
    return functools.partial(FastAuthClient, prefer_first_key, version_sent)


def _costs_the_user(key: Any) -> bool:
    """A security-key signature needs a touch (FIDO ``sk-*``, also as certificates): signing
    one the server may reject would ask for a touch for nothing, so it keeps query-first.
    So do keys not held in this process: an agent's key may be confirm-constrained
    (``ssh-add -c``: a dialog, or a wait until the login timeout with no one to answer it,
    for a key this server may not even accept), a PKCS#11 token's may want its PIN."""
    return bytes(key.algorithm).startswith(b"sk-") or not isinstance(key, SSHLocalKeyPair)


class _SignedFirst(_auth.ClientAuth):
    """``publickey`` with the first key's signature, no query; every other step is stock."""

    async def _start(self) -> None:
        conn = self._conn
        wanted = conn._client_keys[0] if self._prefer_first() and conn._client_keys else None
        key = await conn.public_key_auth_requested()
        if key is None:  # no key at all: `none` next, as stock asyncssh starts
            conn.try_next_auth(next_method=True)
            return
        if wanted is not None and key is not wanted:  # also the agent's copy of it: ours
            key = self._promote(key, wanted)
        if _costs_the_user(key):
            # Put back for asyncssh's own public-key class, which asks before signing.
            conn._client_keys.insert(0, key)
            conn.try_next_auth()
            return
        self.logger.debug1("Signing first request with %s key, no query", key.algorithm)
        try:
            await self.send_request(
                Boolean(True),
                String(key.algorithm),
                String(key.public_data),
                key=key,
                trivial=False,
            )
        except ValueError as exc:  # e.g. the agent refused to sign: the next key, as stock
            self.logger.debug1("Public key auth failed: %s", str(exc))
            conn.try_next_auth()

    def _prefer_first(self) -> bool:
        owner = self._conn.get_owner()
        return isinstance(owner, FastAuthClient) and owner.prefer_first_key

    def _promote(self, first: Any, wanted: Any) -> Any:
        """``wanted`` (the identity file's key) tried before ``first`` (an agent key)."""
        conn = self._conn
        if (
            conn._saved_rsa_key is not None  # an RSA certificate's second try pending: as is
            or wanted not in conn._client_keys
            or not conn._choose_signature_alg(wanted)
        ):
            return first
        conn._client_keys.remove(wanted)
        conn._client_keys.insert(0, first)
        if wanted.algorithm == _RSA_CERT and wanted.sig_algorithm != b"ssh-rsa":
            # As public_key_auth_requested does for the key it pops: OpenSSH >= 8.8 refuses
            # the ssh-rsa-cert-v01 name, so the rsa-sha2-*-cert-v01 name is tried next.
            conn._saved_rsa_key = wanted
        return wanted


def _first_request(conn: SSHClientConnection, method: bytes) -> _auth.ClientAuth:
    """The registry's handler for ``none``: our first request for our connections."""
    owner = conn.get_owner()
    if isinstance(owner, FastAuthClient) and not owner.started:
        owner.started = True
        missing = [name for name in _CONN_SHAPE if not hasattr(conn, name)]
        if missing:
            _log.debug("ssh_fast_auth_off", reason="asyncssh internals differ", missing=missing)
        elif _PUBLICKEY in (conn._preferred_auth or ()) and conn._auth_methods[:1] == [_NONE]:
            # `none` stays behind, for a connection without any key (stock's first request).
            conn._auth_methods[:1] = [_PUBLICKEY, _NONE]
            return _SignedFirst(conn, _PUBLICKEY)
    return _STOCK_NONE(conn, method)


def _ext_info(conn: Any, pkttype: int, pktid: int, packet: SSHPacket) -> None:
    """Stock EXT_INFO, then, on our connection to OpenSSH waiting for its service accept,
    auth begins as stock ``_process_service_accept`` begins it."""
    _STOCK_HANDLERS[MSG_EXT_INFO](conn, pkttype, pktid, packet)
    owner = conn.get_owner()
    if not isinstance(owner, FastAuthClient) or owner.ahead_of_accept or not conn.is_client():
        return
    missing = [name for name in _EARLY_SHAPE if not hasattr(conn, name)]
    if missing:
        _log.debug("ssh_early_auth_off", reason="asyncssh internals differ", missing=missing)
        return
    if (
        conn._next_service != _USERAUTH  # the service request is not pending (a later kex)
        or conn._auth_in_progress
        or conn._auth_complete
        or not conn._server_version.startswith(_OPENSSH)
    ):
        return
    owner.ahead_of_accept = True
    conn.logger.info("Beginning auth for user %s, ahead of the service accept", conn._username)
    conn._auth_in_progress = True
    owner.begin_auth(conn._username)
    conn.try_next_auth()


def _service_accept(conn: Any, pkttype: int, pktid: int, packet: SSHPacket) -> None:
    """Stock, unless auth already began (``_ext_info``): then the accept is only checked."""
    owner = conn.get_owner()
    if not (isinstance(owner, FastAuthClient) and owner.ahead_of_accept):
        _STOCK_HANDLERS[MSG_SERVICE_ACCEPT](conn, pkttype, pktid, packet)
        return
    service = packet.get_string()
    packet.check_end()
    if service != conn._next_service:
        raise asyncssh.ServiceNotAvailable("Unexpected service in service accept")
    conn.logger.debug2("Request for service %s accepted", service)
    conn._next_service = None


def _stock_none() -> type[_auth.ClientAuth] | None:
    handlers = getattr(_auth, "_client_auth_handlers", None)
    stock = handlers.get(_NONE) if isinstance(handlers, dict) else None
    if (
        not asyncssh.__version__.startswith("2.")
        or not isinstance(stock, type)
        or not issubclass(stock, _auth.ClientAuth)
    ):
        return None
    return stock


_found = _stock_none()
if _found is None:
    _log.debug(
        "ssh_fast_auth_off", reason="asyncssh internals differ", version=asyncssh.__version__
    )
    _STOCK_NONE: type[_auth.ClientAuth] = _auth.ClientAuth
else:
    _STOCK_NONE = _found
    _auth._client_auth_handlers[_NONE] = cast(Any, _first_request)

_handlers = getattr(_connection.SSHConnection, "_packet_handlers", None)
_STOCK_HANDLERS: dict[int, Any] = {}
if (
    _found is not None
    and isinstance(_handlers, dict)
    and callable(_handlers.get(MSG_EXT_INFO))
    and callable(_handlers.get(MSG_SERVICE_ACCEPT))
):
    _STOCK_HANDLERS = {k: _handlers[k] for k in (MSG_EXT_INFO, MSG_SERVICE_ACCEPT)}
    _handlers[MSG_EXT_INFO] = _ext_info
    _handlers[MSG_SERVICE_ACCEPT] = _service_accept
