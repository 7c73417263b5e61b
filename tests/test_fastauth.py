"""One authentication flight (remote/fastauth.py) against a real OpenSSH sshd on loopback.

sshd at ``LogLevel DEBUG1`` logs one ``userauth-request`` line per USERAUTH_REQUEST it reads:
each is a client flight that waits for the server, so the counts below are round trips. Stock
asyncssh, connecting in the same test, is the "before" (``none``, a query, the signature).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pwd
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import asyncssh
import pytest
from sshd import HOST, Sshd, keygen, running_sshd

from remote_chain.errors import AuthenticationError
from remote_chain.remote.ssh import SshRemote

sys.path.append(str(Path(__file__).resolve().parent.parent / "scripts"))
from benchlib.flightproxy import FlightProxy  # scripts/ is not a package: found through sys.path
from benchlib.stats import Chunk, client_flights

BANNER = "Authorized use only (loopback test banner)"
AGENT_START_TIMEOUT = 10.0


@pytest.fixture
def anyio_backend() -> str:
    """asyncssh runs on asyncio only."""
    return "asyncio"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """Logs every USERAUTH_REQUEST; at most 2 failed tries; a pre-auth banner."""
    directory = tmp_path_factory.mktemp("fastauth")
    banner = directory / "banner.txt"
    banner.write_text(BANNER + "\n")
    extra = ["LogLevel DEBUG1", "MaxAuthTries 2", f"Banner {banner}"]
    with running_sshd(directory, extra_config=extra) as server:
        yield server


@pytest.fixture(scope="module")
def password_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """Refuses public keys: passwords only."""
    extra = ["PubkeyAuthentication no", "PasswordAuthentication yes"]
    with running_sshd(tmp_path_factory.mktemp("password"), extra_config=extra) as server:
        yield server


@pytest.fixture(scope="module")
def wrong_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A key no server here accepts."""
    return keygen(tmp_path_factory.mktemp("wrong") / "wrong_key")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake home without keys or config and no agent: only the test's keys are tried."""
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return tmp_path / "home"


@pytest.fixture
def agent(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An ssh-agent of the test's own (killed by its PID); ``SSH_AUTH_SOCK`` points at it."""
    socket_path = tmp_path / "agent.sock"
    with _running_agent(socket_path, dict(os.environ)):
        monkeypatch.setenv("SSH_AUTH_SOCK", str(socket_path))
        yield socket_path


@contextlib.contextmanager
def _running_agent(socket_path: Path, env: dict[str, str]) -> Iterator[None]:
    """``ssh-agent -D`` listening at ``socket_path`` while inside; killed by its PID after."""
    process = subprocess.Popen(
        ["ssh-agent", "-D", "-a", str(socket_path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(int(AGENT_START_TIMEOUT / 0.02)):
            if socket_path.exists():
                break
            subprocess.run(["sleep", "0.02"], check=True)
        else:
            raise RuntimeError("ssh-agent did not create its socket")
        yield
    finally:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(5)


def _add(agent: Path, *keys: Path) -> None:
    env = {**os.environ, "SSH_AUTH_SOCK": str(agent)}
    for key in keys:
        subprocess.run(["ssh-add", "-q", str(key)], check=True, env=env, capture_output=True)


def _requests(server: Sshd) -> int:
    return server.log.read_text().count("userauth-request for user")


async def _ours(server: Sshd, **changes: object) -> int:
    """USERAUTH_REQUESTs remote-chain's connection sent (it must log in)."""
    before = _requests(server)
    remote = await SshRemote.open(server.endpoint(**changes))
    try:
        result = await remote.run("echo ok")
        assert result.stdout.strip() == "ok"
    finally:
        await remote.aclose()
    return _requests(server) - before


async def _stock(server: Sshd, client_keys: list[str] | tuple[()]) -> int:
    """USERAUTH_REQUESTs stock asyncssh sends for the same login (the "before")."""
    before = _requests(server)
    async with asyncssh.connect(
        HOST,
        port=server.port,
        username=server.user,
        client_keys=client_keys,
        known_hosts=str(server.known_hosts),
        config=[],
    ) as conn:
        assert (await conn.run("true")).exit_status == 0
    return _requests(server) - before


@pytest.mark.anyio
async def test_first_key_accepted_in_one_request(sshd: Sshd, home: Path) -> None:
    key = str(sshd.client_key)
    assert await _stock(sshd, [key]) == 3  # none, the query, the signature
    assert await _ours(sshd) == 1


@pytest.mark.anyio
async def test_banner_still_received(
    sshd: Sshd, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The banner arrives before the answer to our first request, which is no longer `none`.
    caplog.set_level(logging.DEBUG, logger="asyncssh")
    assert await _ours(sshd) == 1
    assert "Received authentication banner" in caplog.text


@pytest.mark.anyio
async def test_first_key_rejected_then_second_accepted(
    sshd: Sshd, agent: Path, wrong_key: Path
) -> None:
    """Agent keys [wrong, right]: the wrong one signed, the right one asked first, then signed.

    sshd's MaxAuthTries is 2 here: one failed try is within it, as with stock asyncssh.
    """
    _add(agent, wrong_key, sshd.client_key)
    assert await _stock(sshd, ()) == 4  # none, wrong query, right query, right signature
    assert await _ours(sshd, identity_file=None) == 3


@pytest.mark.anyio
async def test_profile_identity_signed_before_the_agents_keys(
    sshd: Sshd, agent: Path, wrong_key: Path
) -> None:
    """asyncssh puts agent keys first; the profile's identity file is the one signed directly."""
    _add(agent, wrong_key)
    assert await _stock(sshd, [str(sshd.client_key)]) == 4  # none, agent's key, then ours
    assert await _ours(sshd) == 1


@pytest.mark.anyio
async def test_agent_key_alone_asked_first_without_none(sshd: Sshd, agent: Path) -> None:
    """An agent's key is asked before it is signed (it may be confirm-constrained), but the
    ``none`` request is still saved: 2 requests, stock's 3."""
    _add(agent, sshd.client_key)
    assert await _stock(sshd, ()) == 3
    assert await _ours(sshd, identity_file=None) == 2


@pytest.mark.anyio
async def test_identity_also_in_the_agent_signed_from_the_file(sshd: Sshd, agent: Path) -> None:
    _add(agent, sshd.client_key)
    assert await _ours(sshd) == 1


@pytest.fixture
def confirm_agent(
    tmp_path: Path, home: Path, wrong_key: Path, sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """An agent holding ``wrong_key`` confirm-constrained (``ssh-add -c``: SSH_ASKPASS asked
    before each signature, here a script that logs and says no), then the right key. Yields
    the log of the dialogs."""
    asked = tmp_path / "asked.log"
    askpass = tmp_path / "askpass.sh"
    askpass.write_text(f'#!/bin/sh\necho "$*" >> {asked}\nexit 1\n')
    askpass.chmod(0o755)
    socket_path = tmp_path / "confirm-agent.sock"
    env = {**os.environ, "SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force"}
    env["DISPLAY"] = ":0"
    with _running_agent(socket_path, env):
        monkeypatch.setenv("SSH_AUTH_SOCK", str(socket_path))
        env = {**os.environ, "SSH_AUTH_SOCK": str(socket_path)}
        subprocess.run(["ssh-add", "-q", "-c", str(wrong_key)], check=True, env=env)
        _add(socket_path, sshd.client_key)
        yield asked


def _dialogs(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.anyio
async def test_a_confirm_constrained_agent_key_is_not_signed_for_a_server_that_refuses_it(
    sshd: Sshd, confirm_agent: Path
) -> None:
    """Stock asks the server first, which refuses this key: no dialog. Signed directly, every
    connection raised one (or, with no one there, waited until the login timeout)."""
    assert await _stock(sshd, ()) == 4
    assert not _dialogs(confirm_agent)
    assert await _ours(sshd, identity_file=None) == 3  # wrong asked, right asked, signed
    assert not _dialogs(confirm_agent)


@pytest.mark.anyio
async def test_only_wrong_keys_same_auth_error(sshd: Sshd, home: Path, wrong_key: Path) -> None:
    with pytest.raises(asyncssh.PermissionDenied) as stock:
        await _stock(sshd, [str(wrong_key)])
    before = _requests(sshd)
    with pytest.raises(AuthenticationError) as caught:
        await SshRemote.open(sshd.endpoint(identity_file=wrong_key))
    assert stock.value.reason == f"Permission denied for user {sshd.user} on host {HOST}"
    assert str(caught.value) == (
        f"loopback: {HOST}:{sshd.port} refused our keys ({stock.value.reason}); tried {wrong_key}"
    )
    assert caught.value.host == "loopback"
    assert _requests(sshd) - before == 1  # the one signed request, refused


@pytest.mark.anyio
async def test_password_only_server_clean_auth_error(password_sshd: Sshd, home: Path) -> None:
    """A server that refuses public keys: the same auth error, never a password prompt."""
    with pytest.raises(AuthenticationError) as caught:
        await SshRemote.open(password_sshd.endpoint())
    assert f"{HOST}:{password_sshd.port} refused our keys (Permission denied" in str(caught.value)
    assert caught.value.host == "loopback"
    assert password_sshd.accepted_logins() == 0


@pytest.fixture(scope="module")
def rsa_cert_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An RSA key with a user certificate (``rsa_key-cert.pub``) from ``ca`` beside it."""
    directory = tmp_path_factory.mktemp("rsacert")
    ca = keygen(directory / "ca")
    key = directory / "rsa_key"
    argv = ["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-C", "rc-test"]
    subprocess.run([*argv, "-f", str(key)], check=True)
    sign = [
        "ssh-keygen",
        "-q",
        "-s",
        str(ca),
        "-I",
        "rc-test",
        "-n",
        pwd.getpwuid(os.getuid()).pw_name,
    ]
    subprocess.run([*sign, f"{key}.pub"], check=True, capture_output=True)
    return key


@pytest.fixture(scope="module")
def cert_sshd(tmp_path_factory: pytest.TempPathFactory, rsa_cert_key: Path) -> Iterator[Sshd]:
    """Trusts the CA that signed ``rsa_cert_key``'s certificate; OpenSSH's default algorithms
    (since 8.8 they refuse the ``ssh-rsa-cert-v01`` name, asyncssh's first try of an RSA
    certificate, so asyncssh tries ``rsa-sha2-*-cert-v01`` next)."""
    extra = ["LogLevel DEBUG1", f"TrustedUserCAKeys {rsa_cert_key.parent / 'ca.pub'}"]
    with running_sshd(tmp_path_factory.mktemp("certsshd"), extra_config=extra) as server:
        yield server


@pytest.mark.anyio
async def test_identity_rsa_certificate_promoted_keeps_its_sha2_retry(
    cert_sshd: Sshd, agent: Path, wrong_key: Path, rsa_cert_key: Path
) -> None:
    """The identity file an RSA certificate, the agent another key: stock logs in (the
    certificate's second name after the first); promoted ahead of the agent's key, ours must
    too."""
    _add(agent, wrong_key)
    # none, the agent's key, the certificate's two names asked, the signature
    assert await _stock(cert_sshd, [str(rsa_cert_key)]) == 5
    # the certificate's first name signed (refused), its second asked, then signed
    assert await _ours(cert_sshd, identity_file=rsa_cert_key) == 3


# --- the first request rides with the service request ----------------------------------------
RTT_S = 0.15  # through the bench's flight proxy: a wait for the server is one of these


@contextlib.asynccontextmanager
async def _flight_proxy(target_port: int) -> AsyncIterator[tuple[int, Callable[[], int]]]:
    """The bench's delaying proxy that logs every chunk (``benchlib/flightproxy.py``) in front
    of sshd, in this event loop: its port, and the client flights the server answered so far
    (``stats.client_flights``, the bench's own count)."""
    events = io.StringIO()
    proxy = FlightProxy(HOST, target_port, delay_ms=RTT_S * 1000 / 2, events=events)
    port = await proxy.start()

    def flights() -> int:
        chunks = [
            Chunk(float(t), int(conn), way == "u", int(size))
            for t, conn, way, size in (line.split() for line in events.getvalue().splitlines())
        ]
        return client_flights(chunks, rtt=RTT_S)

    try:
        yield port, flights
    finally:
        await proxy.stop()


def _rsa_key(sshd: Sshd, directory: Path) -> Path:
    """A plain RSA key the server accepts: its signature must use server-sig-algs (rsa-sha2),
    which arrive in the EXT_INFO that starts our early request."""
    key = directory / "rsa_key"
    argv = ["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-C", "rc-test"]
    subprocess.run([*argv, "-f", str(key)], check=True)
    with (sshd.directory / "authorized_keys").open("a") as f:
        f.write(Path(f"{key}.pub").read_text())
    return key


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["ed25519", "rsa"])
async def test_the_first_request_leaves_with_the_service_request(
    sshd: Sshd, home: Path, tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """To OpenSSH, our signed request follows SERVICE_REQUEST at once: one wait fewer than
    the signed request alone would save, and still one USERAUTH_REQUEST (an RSA key signs
    with rsa-sha2, not the ssh-rsa name OpenSSH >= 8.8 refuses)."""
    key = sshd.client_key if kind == "ed25519" else _rsa_key(sshd, tmp_path)
    caplog.set_level(logging.INFO, logger="asyncssh")
    async with _flight_proxy(sshd.port) as (port, flights):
        known = tmp_path / "known_hosts"
        known.write_text(f"[{HOST}]:{port} {sshd.host_key_line}\n")
        async with asyncssh.connect(
            HOST,
            port=port,
            username=sshd.user,
            client_keys=[str(key)],
            known_hosts=str(known),
            config=[],
        ):
            stock = flights()
        before, start = _requests(sshd), flights()
        remote = await SshRemote.open(
            sshd.endpoint(port=port, identity_file=key, known_hosts=known)
        )
        ours = flights() - start
        await remote.aclose()
    assert _requests(sshd) - before == 1
    assert "ahead of the service accept" in caplog.text
    # Counted as the bench counts P1's connection (a flight the server answered; sshd sends
    # its version unasked, so the version exchange waits for nothing): stock asyncssh KEXINIT,
    # ECDH, NEWKEYS + service request, none, the query, the signature; ours ECDH, then
    # NEWKEYS + service request + the signature.
    assert (stock, ours) == (5, 2)


@pytest.mark.anyio
async def test_a_server_that_is_not_openssh_gets_the_stock_order(
    sshd: Sshd, home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Only a server whose version string says OpenSSH is known to read a USERAUTH_REQUEST
    sent before its SERVICE_ACCEPT: another (here asyncssh's own server) waits for the accept,
    and the login works as before."""
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    server = await asyncssh.listen(
        HOST,
        0,
        server_host_keys=[host_key],
        authorized_client_keys=f"{sshd.client_key}.pub",
    )
    try:
        port = server.sockets[0].getsockname()[1]
        known = tmp_path / "known_hosts"
        known.write_text(f"[{HOST}]:{port} {host_key.export_public_key().decode()}")
        caplog.set_level(logging.INFO, logger="asyncssh")
        remote = await SshRemote.open(sshd.endpoint(port=port, known_hosts=known))
        await remote.aclose()
    finally:
        server.close()
        await server.wait_closed()
    assert f"Auth for user {sshd.user} succeeded" in caplog.text
    assert "ahead of the service accept" not in caplog.text
