"""The TCP connect and version line sent before asyncssh is imported (remote/early.py):
when it guesses, that asyncssh takes it over only for the very route it would connect by,
and that an unused guess is closed, against a real sshd on loopback."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import asyncssh
import pytest
from sshd import HOST, Sshd, free_port, running_sshd

from remote_chain.errors import ConnectError, HostNotFoundError
from remote_chain.remote import Endpoint, early, fastauth, open_remote
from remote_chain.remote.sshconfig import resolve


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


def _config(tmp_path: Path, text: str, name: str = "config") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "rerouted"),
    [
        ("", False),
        # Debian's /etc/ssh/ssh_config: nothing about where to connect.
        ("Include /nonexistent/*.conf\nHost *\n  SendEnv LANG LC_*\n  HashKnownHosts yes\n", False),
        ("Host other\n  HostName elsewhere\n", False),
        ("Host *.example.org\n  HostName elsewhere\n", True),
        ("Host LOGIN.EXAMPLE.ORG\n  Port 2200\n", True),  # without case
        ("Host * !login.example.org\n  ProxyJump bastion\n", False),
        ("Host login.example.org,other\n  ProxyCommand nc %h %p\n", False),  # one pattern
        ("Host login.example.org other\n  ProxyCommand nc %h %p\n", True),
        ("Port 2200\n", True),  # before any Host: every host
        ("hostname=elsewhere\n", True),
        ("Match host *\n  BindAddress 10.0.0.1\n", True),  # Match: assumed to apply
        ("Host *\n  AddressFamily inet6\n", True),
        ("Host *\n  CanonicalizeHostname yes\n", True),
        ("Host *\n  CertificateFile ~/.ssh/id-cert.pub\n", True),  # loaded after the import
        ("Host login.example.org\n  User me\n  IdentityFile ~/.ssh/k\n", False),
    ],
)
def test_what_the_config_may_reroute(tmp_path: Path, text: str, rerouted: bool) -> None:
    files = (_config(tmp_path, text),)
    assert (early._identity_files("login.example.org", files) is None) is rerouted


def test_the_keys_a_config_names_are_collected(tmp_path: Path) -> None:
    text = 'Host *\n  IdentityFile "~/.ssh/id one"\nHost other\n  IdentityFile /nope\nHost\n'
    assert early._identity_files("h.example.org", (_config(tmp_path, text),)) == ["~/.ssh/id one"]


def test_included_files_are_read_from_the_including_files_folder(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    _config(tmp_path / "conf.d", "Host login.*\n  HostName elsewhere\n", "50-site.conf")
    main = _config(tmp_path, "Host *\n  Include conf.d/*.conf\n")
    assert early._identity_files("login.example.org", (main,)) is None
    assert early._identity_files("other.example.org", (main,)) == []


def test_an_unreadable_or_looping_config_counts_as_rerouting(tmp_path: Path) -> None:
    assert early._identity_files("h.example.org", (tmp_path / "missing",)) is None
    loop = _config(tmp_path, f"Include {tmp_path / 'config'}\n")
    assert early._identity_files("h.example.org", (loop,)) is None


@pytest.mark.parametrize(
    ("host", "plain"),
    [("10.1.2.3", True), ("::1", True), ("login.site.edu", True), ("eos", False), ("eos.", False)],
)
def test_only_addresses_and_dotted_names_are_guessed(host: str, plain: bool) -> None:
    assert early._plain_address(host) is plain


@pytest.mark.anyio
async def test_no_guess_for_a_jump_host_an_alias_or_a_missing_config(tmp_path: Path) -> None:
    known = _config(tmp_path, "", "known_hosts")
    base = Endpoint(
        name="c", host=HOST, port=free_port(), ssh_config=_config(tmp_path, ""), known_hosts=known
    )
    assert early.begin(dataclasses.replace(base, known_hosts=tmp_path / "none")) is None
    assert early.begin(dataclasses.replace(base, identity_file=known)) is None  # not a key
    assert early.begin(Endpoint(name="c", host="eos", ssh_config=base.ssh_config)) is None
    assert early.begin(Endpoint(name="c", host=HOST, proxy_jump="bastion")) is None
    assert early.begin(Endpoint(name="c", host=HOST, ssh_config=tmp_path / "nope")) is None
    guess = early.begin(base)
    assert guess is not None
    assert guess.reaches(HOST, base.port or 0)
    assert await guess.connected() is None  # nothing listens: the caller connects itself
    guess.close()


@pytest.mark.parametrize("case", ["plain", "encrypted", "not a key", "missing", "pem"])
def test_only_a_plain_private_key_is_guessed_at(tmp_path: Path, case: str) -> None:
    """The key files asyncssh refuses before connecting (tests/faults/test_bad_input.py)."""
    key = tmp_path / "key"
    if case in ("plain", "encrypted"):
        secret = ["-N", "pass"] if case == "encrypted" else ["-N", ""]
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-f", str(key), *secret], check=True)
    elif case == "not a key":
        key.write_text("hello\n")
    elif case == "pem":
        key.write_text("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n")
    assert early._plain_private_key(key) is (case in ("plain", "pem"))


def test_the_version_line_names_the_installed_asyncssh() -> None:
    """What asyncssh itself would send, and asyncssh lets it be taken over (2.24.1)."""
    assert early.asyncssh_software() == f"AsyncSSH_{asyncssh.__version__}"
    assert fastauth.VERSION_AHEAD


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[early.EarlyTcp | None]:
    made: list[early.EarlyTcp | None] = []
    real = early.begin

    def begin(endpoint: Endpoint) -> early.EarlyTcp | None:
        made.append(real(endpoint))
        return made[-1]

    monkeypatch.setattr(early, "begin", begin)
    return made


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_cold_connection_takes_the_early_socket(
    sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guess is handed to asyncssh, which sends no second version line (sshd would
    refuse the connection) and hashes ours: the command runs."""
    made = _spy(monkeypatch)
    async with await open_remote(sshd.endpoint()) as remote:
        assert (await remote.run("echo early")).stdout == "early\n"
        connection = remote._connection  # type: ignore[attr-defined]
        assert connection.get_extra_info("client_version") == (
            f"SSH-2.0-{early.asyncssh_software()}"
        )
    assert len(made) == 1
    assert made[0] is not None
    assert made[0].handed_over


@pytest.mark.ssh
@pytest.mark.anyio
async def test_a_guess_the_route_does_not_take_is_closed_unused(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ssh config sends the alias 127.0.0.2 to 127.0.0.1 (the pre-scan made blind to it):
    the guess at 127.0.0.2 got only our version line and was closed; asyncssh connected to
    where the config said."""
    monkeypatch.setattr(early, "_identity_files", lambda alias, files: [])
    made = _spy(monkeypatch)
    key = sshd.host_key_line
    known = _config(tmp_path, f"[127.0.0.1]:{sshd.port} {key}\n[127.0.0.2]:{sshd.port} {key}\n")
    config = _config(tmp_path, "Host 127.0.0.2\n  HostName 127.0.0.1\n", "ssh_config")
    received: list[bytes] = []
    with socket.socket() as decoy:
        decoy.bind(("127.0.0.2", sshd.port))
        decoy.listen()

        def serve() -> None:
            conn, _ = decoy.accept()
            with conn:
                conn.settimeout(10)
                while chunk := conn.recv(4096):  # until the client closes it
                    received.append(chunk)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        endpoint = sshd.endpoint(host="127.0.0.2", known_hosts=known, ssh_config=config)
        async with await open_remote(endpoint) as remote:
            assert (await remote.run("echo routed")).stdout == "routed\n"
        await anyio.to_thread.run_sync(thread.join, 10)
    assert made[0] is not None
    assert not made[0].handed_over
    assert b"".join(received) == f"SSH-2.0-{early.asyncssh_software()}\r\n".encode()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.anyio
async def test_a_refused_guess_falls_back_to_asyncssh_and_leaks_nothing(sshd: Sshd) -> None:
    """Nothing listening: the guess fails, asyncssh's own connect says so (as before), and
    no socket is left open, however often it happens."""
    endpoint = sshd.endpoint(port=free_port())
    with pytest.raises(ConnectError, match="connection refused"):
        await open_remote(endpoint)  # the first one may start the executor's thread
    before = _open_fds()
    for _ in range(5):
        with pytest.raises(ConnectError, match="connection refused"):
            await open_remote(endpoint)
    assert _open_fds() <= before


@pytest.mark.anyio
async def test_a_name_that_does_not_resolve_is_said_once(tmp_path: Path) -> None:
    """The guess's lookup failure is the error (asyncssh would look the name up again)."""
    known = _config(tmp_path, "", "known_hosts")
    endpoint = Endpoint(
        name="c", host="nowhere.invalid", ssh_config=_config(tmp_path, ""), known_hosts=known
    )
    guess = early.begin(endpoint)
    assert guess is not None
    with pytest.raises(socket.gaierror):
        await guess.connected()
    with pytest.raises(HostNotFoundError, match=r"cannot resolve host name of nowhere\.invalid"):
        await open_remote(endpoint)


@pytest.mark.parametrize(
    ("text", "direct"),
    [
        ("", True),
        ("Host *\n  SendEnv LANG\n", True),
        ("Host *\n  ProxyCommand nc %h %p\n", False),
        ("Host *\n  BindAddress 127.0.0.1\n", False),
        ("Host *\n  AddressFamily inet\n", False),
        ("Host *\n  CanonicalizeHostname yes\n  CanonicalDomains example.org\n", False),
    ],
)
def test_a_hop_is_direct_only_without_what_changes_the_socket(
    tmp_path: Path, text: str, direct: bool
) -> None:
    """``Hop.direct``, checked after the import with asyncssh's own parser: the last word on
    whether a guess may be handed over."""
    endpoint = Endpoint(name="c", host="h.example.org", ssh_config=_config(tmp_path, text))
    assert resolve(endpoint).target.direct is direct
