"""The ssh config, jump hosts and failing fast, against real OpenSSH sshd's on loopback.

Two throwaway servers (tests/sshd.py): ``hop`` is the jump host, ``target`` the cluster.
Both accept the hop's client key (the profile's ``identity_file`` is used for every hop) and
one known_hosts file holds both host keys (the profile's ``known_hosts`` is for every hop).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshd import HOST, Sshd, free_port, keygen, public_key_line, running_sshd

from remote_chain.client.cluster import ClusterSession
from remote_chain.config import load_profile
from remote_chain.config.settings import Settings
from remote_chain.core.models import Transport
from remote_chain.errors import (
    ConfigError,
    ConnectError,
    HostKeyError,
    HostNotFoundError,
    RefusedError,
)
from remote_chain.transport.connect import open_remote
from remote_chain.transport.endpoint import Endpoint

pytestmark = pytest.mark.ssh
TRANSPORTS: list[Transport] = ["asyncssh", "openssh"]


@pytest.fixture
def anyio_backend() -> str:
    """asyncssh runs on asyncio only."""
    return "asyncio"


@pytest.fixture(scope="module")
def hop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """The jump host."""
    with running_sshd(tmp_path_factory.mktemp("hop")) as server:
        yield server


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory, hop: Sshd) -> Iterator[Sshd]:
    """The cluster's login node; it also accepts the hop's client key."""
    with running_sshd(tmp_path_factory.mktemp("target")) as server:
        authorized = server.directory / "authorized_keys"
        key = (hop.client_key.parent / "client_key.pub").read_text()
        authorized.write_text(authorized.read_text() + key)
        yield server


@pytest.fixture(scope="module")
def both_known(tmp_path_factory: pytest.TempPathFactory, hop: Sshd, target: Sshd) -> Path:
    """One known_hosts file with the host keys of the hop and the target."""
    path = tmp_path_factory.mktemp("kh") / "known_hosts"
    path.write_text(hop.known_hosts.read_text() + target.known_hosts.read_text())
    return path


def _write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_alias_alone_reaches_the_host_through_the_ssh_config(
    target: Sshd, tmp_path: Path, transport: Transport
) -> None:
    """host = alias and nothing else: HostName, Port, User, IdentityFile and
    UserKnownHostsFile all come from the ssh config's Host block, over both transports."""
    config = _write_config(
        tmp_path / "ssh_config",
        f"Host lab\n  HostName {HOST}\n  Port {target.port}\n  User {target.user}\n"
        f"  IdentityFile {target.client_key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {target.known_hosts}\n",
    )
    endpoint = Endpoint(name="lab", host="lab", ssh_config=config, transport=transport)
    async with await open_remote(endpoint) as remote:
        assert (await remote.run("echo via alias")).stdout == "via alias\n"


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_jump_host_is_verified_against_the_profile_s_known_hosts(
    hop: Sshd, target: Sshd, both_known: Path, tmp_path: Path, transport: Transport
) -> None:
    """Through a jump host, with the profile's key and known_hosts for both hops."""
    empty = _write_config(tmp_path / "ssh_config", "")
    endpoint = Endpoint(
        name="behind",
        host=HOST,
        port=target.port,
        user=target.user,
        identity_file=hop.client_key,
        known_hosts=both_known,
        proxy_jump=f"{hop.user}@{HOST}:{hop.port}",
        ssh_config=empty,
        transport=transport,
        connect_timeout=5,
    )
    hop_logins = hop.accepted_logins()
    async with await open_remote(endpoint) as remote:
        assert (await remote.run("echo behind the hop")).stdout == "behind the hop\n"
    assert hop.accepted_logins() > hop_logins  # really through the hop, with the profile's key


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_bastion_behind_a_bastion_is_reached_through_both(
    hop: Sshd, target: Sshd, both_known: Path, tmp_path: Path, transport: Transport
) -> None:
    """The target's ProxyJump names ``inner``, whose own Host block jumps through ``outer``:
    the route is outer, inner, target (OpenSSH's order), every hop with the profile's key and
    known_hosts. Both bastions are the hop server under two names: two logins on it."""
    config = _write_config(
        tmp_path / "ssh_config",
        f"Host lab\n  HostName {HOST}\n  Port {target.port}\n  User {target.user}\n"
        "  ProxyJump inner\n"
        f"Host inner\n  HostName {HOST}\n  Port {hop.port}\n  User {hop.user}\n"
        "  ProxyJump outer\n"
        f"Host outer\n  HostName {HOST}\n  Port {hop.port}\n  User {hop.user}\n",
    )
    endpoint = Endpoint(
        name="lab",
        host="lab",
        identity_file=hop.client_key,
        known_hosts=both_known,
        ssh_config=config,
        transport=transport,
        connect_timeout=5,
    )
    hop_logins = hop.accepted_logins()
    async with await open_remote(endpoint) as remote:
        assert (await remote.run("echo two bastions")).stdout == "two bastions\n"
    # outer, then inner through it: two logins per connection (openssh makes one for its
    # check and one per command, each through both bastions).
    logins = hop.accepted_logins() - hop_logins
    assert logins == 2 if transport == "asyncssh" else logins in (2, 4)


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_wrong_jump_host_key_is_refused_naming_the_hop(
    hop: Sshd, target: Sshd, tmp_path: Path, transport: Transport
) -> None:
    """A hop whose key is not the recorded one is a HostKeyError, never accepted."""
    other = public_key_line(keygen(tmp_path / "other"))
    known = tmp_path / "known_hosts"
    known.write_text(f"[{HOST}]:{hop.port} {other}\n" + target.known_hosts.read_text())
    endpoint = Endpoint(
        name="behind",
        host=HOST,
        port=target.port,
        user=target.user,
        identity_file=hop.client_key,
        known_hosts=known,
        proxy_jump=f"{hop.user}@{HOST}:{hop.port}",
        ssh_config=_write_config(tmp_path / "ssh_config", ""),
        transport=transport,
        connect_timeout=5,
    )
    logins = target.accepted_logins()
    with pytest.raises(HostKeyError) as caught:
        await open_remote(endpoint)
    assert not caught.value.transient
    assert str(hop.port) in str(caught.value)
    if transport == "asyncssh":
        assert "jump host" in str(caught.value)
    assert target.accepted_logins() == logins  # never got past the hop


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_config_disabling_checks_on_the_jump_host_is_refused(
    hop: Sshd, target: Sshd, both_known: Path, tmp_path: Path, transport: Transport
) -> None:
    """``UserKnownHostsFile /dev/null`` for the hop in the ssh config: a ConfigError, no login."""
    config = _write_config(
        tmp_path / "ssh_config",
        f"Host gate\n  HostName {HOST}\n  Port {hop.port}\n  UserKnownHostsFile /dev/null\n"
        "  StrictHostKeyChecking no\n",
    )
    endpoint = Endpoint(
        name="behind",
        host=HOST,
        port=target.port,
        identity_file=hop.client_key,
        known_hosts=both_known,
        proxy_jump="gate",
        ssh_config=config,
        transport=transport,
    )
    logins = hop.accepted_logins()
    with pytest.raises(ConfigError, match="host-key checking off") as caught:
        await open_remote(endpoint)
    assert "gate" in str(caught.value)
    assert hop.accepted_logins() == logins


def _session(tmp_path: Path, host: str, port: int, known_hosts: Path) -> ClusterSession:
    profile_file = tmp_path / "dead.toml"
    profile_file.write_text(
        f'host = "{host}"\nport = {port}\nknown_hosts = "{known_hosts}"\nworkdir = "/tmp/w"\n'
    )
    settings = Settings(_env_file=None, ssh_config=tmp_path / "empty_config")
    (tmp_path / "empty_config").write_text("")
    return ClusterSession(load_profile(profile_file), settings)


@pytest.mark.anyio
async def test_a_refused_connection_fails_within_3_seconds(target: Sshd, tmp_path: Path) -> None:
    """Nothing listening: retried for connect_retry (2 s) only, then a ConnectError (exit 3)."""
    session = _session(tmp_path, HOST, free_port(), target.known_hosts)
    started = time.monotonic()
    with pytest.raises(ConnectError) as caught:
        await session.remote()
    elapsed = time.monotonic() - started
    assert 1.5 <= elapsed < 3.0, elapsed
    assert caught.value.exit_code == 3
    assert "connection refused" in str(caught.value)
    assert str(caught.value).startswith("dead: ")


@pytest.mark.anyio
async def test_a_name_that_does_not_resolve_fails_at_once(target: Sshd, tmp_path: Path) -> None:
    """An unresolvable host: HostNotFoundError naming it, at once, not retried."""
    session = _session(tmp_path, "no-such-host.invalid", 22, target.known_hosts)
    started = time.monotonic()
    with pytest.raises(HostNotFoundError) as caught:
        await session.remote()
    assert time.monotonic() - started < 1.5
    assert caught.value.exit_code == 3
    assert not caught.value.transient
    assert "no-such-host.invalid" in str(caught.value)


@pytest.mark.anyio
async def test_the_ssh_config_connect_timeout_bounds_a_silent_host(
    target: Sshd, tmp_path: Path
) -> None:
    """No REMOTE_CHAIN_CONNECT_TIMEOUT: the ssh config's ConnectTimeout bounds the wait."""
    import socket  # noqa: PLC0415

    with socket.socket() as silent:
        silent.bind((HOST, 0))
        silent.listen()
        config = _write_config(
            tmp_path / "ssh_config",
            f"Host quiet\n  HostName {HOST}\n  Port {silent.getsockname()[1]}\n"
            "  ConnectTimeout 1\n",
        )
        endpoint = Endpoint(
            name="quiet", host="quiet", ssh_config=config, known_hosts=target.known_hosts
        )
        started = time.monotonic()
        with pytest.raises(Exception) as caught:  # noqa: PT011 - the class is checked below
            await open_remote(endpoint)
        assert time.monotonic() - started < 3
    assert "took longer than 1 s" in str(caught.value)
    assert dataclasses.asdict(endpoint)["connect_timeout"] is None


@pytest.mark.anyio
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("host", "error"), [(HOST, RefusedError), ("no-such-host.invalid", HostNotFoundError)]
)
async def test_dead_hosts_fail_at_once_over_both_transports(
    target: Sshd, tmp_path: Path, transport: Transport, host: str, error: type[Exception]
) -> None:
    """One try, well under a second: a refused port or an unknown name, named in the error."""
    endpoint = Endpoint(
        name="dead",
        host=host,
        port=free_port(),
        known_hosts=target.known_hosts,
        ssh_config=_write_config(tmp_path / "ssh_config", ""),
        transport=transport,
        connect_timeout=5,
    )
    started = time.monotonic()
    with pytest.raises(error) as caught:
        await open_remote(endpoint)
    assert time.monotonic() - started < 1.5
    assert host in str(caught.value)
    assert str(caught.value).startswith("dead: ")
