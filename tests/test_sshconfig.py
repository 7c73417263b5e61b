"""Reading the ssh config as ``ssh -G`` does: the profile overrides only what it sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from remote_chain.errors import ConfigError
from remote_chain.transport.endpoint import Endpoint
from remote_chain.transport.openssh import _proxy_command, parse_ssh_g, refuse_unchecked
from remote_chain.transport.sshconfig import DEFAULT_CONNECT_TIMEOUT, resolve, split_jump


@pytest.fixture
def known_hosts(tmp_path: Path) -> Path:
    path = tmp_path / "known_hosts"
    path.write_text("")
    return path


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    return path


def test_the_config_supplies_what_the_profile_leaves_unset(tmp_path: Path) -> None:
    """HostName, Port, User, UserKnownHostsFile, GlobalKnownHostsFile and ConnectTimeout
    come from the alias's Host block when the profile does not set them."""
    user_kh = tmp_path / "user_kh"
    global_kh = tmp_path / "global_kh"
    user_kh.write_text("")
    global_kh.write_text("")
    config = _config(
        tmp_path,
        f"Host eos\n  HostName 10.1.2.3\n  Port 2222\n  User alice\n"
        f"  UserKnownHostsFile {user_kh}\n  GlobalKnownHostsFile {global_kh}\n"
        "  ConnectTimeout 7\n  ServerAliveInterval 11\n",
    )
    route = resolve(Endpoint(name="eos", host="eos", ssh_config=config))
    target = route.target
    assert (target.host, target.port, target.user) == ("10.1.2.3", 2222, "alice")
    assert (target.port_set, target.user_set) == (None, None)
    assert target.known_hosts == (user_kh, global_kh)
    assert target.connect_timeout == 7
    assert target.keepalive_interval == 11
    assert route.hops[:-1] == ()
    assert route.config_files == (config,)


def test_a_set_profile_field_wins_over_the_config(tmp_path: Path, known_hosts: Path) -> None:
    """port, user, known_hosts and the connect timeout, when set, beat the Host block."""
    config = _config(
        tmp_path,
        "Host eos\n  HostName 10.1.2.3\n  Port 2222\n  User alice\n  ConnectTimeout 7\n"
        "  UserKnownHostsFile /elsewhere\n",
    )
    endpoint = Endpoint(
        name="eos",
        host="eos",
        port=22,
        user="bob",
        known_hosts=known_hosts,
        connect_timeout=3,
        ssh_config=config,
    )
    target = resolve(endpoint).target
    assert (target.host, target.port, target.user) == ("10.1.2.3", 22, "bob")
    assert target.known_hosts == (known_hosts,)
    assert target.connect_timeout == 3


def test_include_is_followed_and_first_value_wins(tmp_path: Path) -> None:
    """``Include`` pulls in another file; as in ssh, the first value obtained wins."""
    included = tmp_path / "clusters.conf"
    included.write_text("Host eos\n  Port 2200\n  User carol\n")
    config = _config(tmp_path, f"Host eos\n  User first\nInclude {included}\n")
    target = resolve(Endpoint(name="eos", host="eos", ssh_config=config)).target
    assert (target.port, target.user) == (2200, "first")


def test_without_anything_the_defaults_apply(tmp_path: Path) -> None:
    """No Host block: port 22, OpenSSH's known_hosts files, a 15 s connect timeout."""
    config = _config(tmp_path, "Host other\n  Port 1\n")
    target = resolve(Endpoint(name="eos", host="eos.example", ssh_config=config)).target
    assert (target.host, target.port, target.user) == ("eos.example", 22, None)
    assert target.connect_timeout == DEFAULT_CONNECT_TIMEOUT
    assert [str(p) for p in target.known_hosts_wanted][-2:] == [
        "/etc/ssh/ssh_known_hosts",
        "/etc/ssh/ssh_known_hosts2",
    ]


def test_the_config_s_proxyjump_makes_jump_hops_with_the_profile_s_known_hosts(
    tmp_path: Path, known_hosts: Path
) -> None:
    """Each jump host is looked up in the config too; the profile's known_hosts is for all."""
    config = _config(
        tmp_path,
        "Host eos\n  ProxyJump gate,bob@relay:2022\n"
        "Host gate\n  HostName gate.example\n  Port 2201\n  UserKnownHostsFile /other\n",
    )
    route = resolve(Endpoint(name="eos", host="eos", known_hosts=known_hosts, ssh_config=config))
    assert [h.alias for h in route.hops] == ["gate", "relay", "eos"]
    gate, relay, _ = route.hops
    assert (gate.host, gate.port) == ("gate.example", 2201)
    assert (relay.user_set, relay.port_set) == ("bob", 2022)
    assert all(h.known_hosts == (known_hosts,) for h in route.hops)
    assert gate.where == "jump host gate (gate.example:2201)"


def test_the_profile_s_proxy_jump_wins_over_the_config_s(tmp_path: Path) -> None:
    """``proxy_jump`` in the profile replaces the config's ProxyJump, like ``ssh -J``."""
    config = _config(tmp_path, "Host eos\n  ProxyJump gate\n")
    route = resolve(Endpoint(name="eos", host="eos", proxy_jump="other", ssh_config=config))
    assert [h.alias for h in route.hops[:-1]] == ["other"]


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ("StrictHostKeyChecking no", "StrictHostKeyChecking no"),
        ("StrictHostKeyChecking=off", "StrictHostKeyChecking off"),
        ("UserKnownHostsFile /dev/null", "UserKnownHostsFile /dev/null"),
        ("UserKnownHostsFile none", "UserKnownHostsFile none"),
    ],
)
@pytest.mark.parametrize("on", ["eos", "gate"])
def test_a_config_turning_host_key_checks_off_is_refused(
    tmp_path: Path, known_hosts: Path, block: str, problem: str, on: str
) -> None:
    """On the target or on a jump host, a config that disables checking is a ConfigError."""
    config = _config(tmp_path, f"Host eos\n  ProxyJump gate\nHost {on}\n  {block}\n")
    endpoint = Endpoint(name="eos", host="eos", known_hosts=known_hosts, ssh_config=config)
    with pytest.raises(ConfigError, match="host-key checking off") as caught:
        resolve(endpoint)
    assert problem in str(caught.value)
    assert repr(on) in str(caught.value)
    assert str(config) in str(caught.value)


def test_accept_new_is_not_obeyed_but_not_refused(tmp_path: Path, known_hosts: Path) -> None:
    """accept-new still checks known keys; remote-chain verifies strictly regardless."""
    config = _config(tmp_path, "Host eos\n  StrictHostKeyChecking accept-new\n")
    route = resolve(Endpoint(name="eos", host="eos", known_hosts=known_hosts, ssh_config=config))
    assert route.target.known_hosts == (known_hosts,)


def test_a_missing_ssh_config_file_is_a_config_error(tmp_path: Path) -> None:
    """A named ssh config (profile or REMOTE_CHAIN_SSH_CONFIG) must exist, like ``ssh -F``."""
    with pytest.raises(ConfigError, match="does not exist") as caught:
        resolve(Endpoint(name="eos", host="eos", ssh_config=tmp_path / "nope"))
    assert caught.value.field == "ssh_config"


def test_an_invalid_ssh_config_names_file_and_line(tmp_path: Path) -> None:
    """A parse error is the user's config problem, named with file and line."""
    config = _config(tmp_path, "Host eos\n  Port notanumber\n")
    with pytest.raises(ConfigError, match="line 2"):
        resolve(Endpoint(name="eos", host="eos", ssh_config=config))


def test_the_user_s_config_is_read_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ssh_config, ~/.ssh/config is read (then /etc/ssh/ssh_config)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host eos\n  Port 2345\n")
    route = resolve(Endpoint(name="eos", host="eos"))
    assert route.target.port == 2345
    assert route.config_files[0] == tmp_path / ".ssh" / "config"


@pytest.mark.parametrize(
    ("spec", "parts"),
    [
        ("gate", (None, "gate", None)),
        ("bob@gate", ("bob", "gate", None)),
        ("bob@gate:2022", ("bob", "gate", 2022)),
        ("ssh://bob@gate:2022", ("bob", "gate", 2022)),
        ("[::1]:2022", (None, "::1", 2022)),
    ],
)
def test_split_jump(spec: str, parts: tuple[str | None, str, int | None]) -> None:
    """ProxyJump's ``[user@]host[:port]`` forms."""
    assert split_jump(spec) == parts


def test_ssh_g_output_is_parsed_and_unchecked_configs_refused() -> None:
    """The openssh transport reads ``ssh -G`` and refuses what turns checking off."""
    options = parse_ssh_g(
        "hostname 10.0.0.1\nport 2222\nstricthostkeychecking false\n"
        "userknownhostsfile /root/.ssh/known_hosts /root/.ssh/known_hosts2\n"
    )
    assert options["port"] == ["2222"]
    with pytest.raises(ConfigError, match="StrictHostKeyChecking false"):
        refuse_unchecked(options, "jump host 'gate'", "cfg")
    refuse_unchecked(parse_ssh_g("stricthostkeychecking accept-new\n"), "host", "cfg")
    with pytest.raises(ConfigError, match="/dev/null"):
        refuse_unchecked(parse_ssh_g("userknownhostsfile /dev/null\n"), "host", "cfg")


def test_openssh_jump_hosts_get_the_profile_s_checks(known_hosts: Path, tmp_path: Path) -> None:
    """Each hop's ssh is strict, uses the profile's known_hosts and key, nested hops escaped."""
    endpoint = Endpoint(
        name="eos", host="eos", known_hosts=known_hosts, identity_file=tmp_path / "id"
    )
    command = _proxy_command(endpoint, ["a", "bob@b:2022"])
    assert command.count("StrictHostKeyChecking=yes") == 2
    assert command.count(f"UserKnownHostsFile={known_hosts}") == 2
    assert "[%%h]:%%p" in command  # the inner hop's tokens, escaped for the outer ssh
    assert command.endswith("-l bob -p 2022 -W '[%h]:%p' -- b")


def test_the_first_jump_host_s_own_proxyjump_is_followed(tmp_path: Path, known_hosts: Path) -> None:
    """A bastion behind a bastion: the first jump host's own ProxyJump comes before it, as
    OpenSSH's ``ssh -W`` to that host reads the config for it; a later hop's is not used."""
    config = _config(
        tmp_path,
        "Host eos\n  ProxyJump inner,relay\n"
        "Host inner\n  ProxyJump outer\n"
        "Host outer\n  ProxyJump edge\n"
        "Host relay\n  ProxyJump nowhere\n",
    )
    route = resolve(Endpoint(name="eos", host="eos", known_hosts=known_hosts, ssh_config=config))
    assert [h.alias for h in route.hops] == ["edge", "outer", "inner", "relay", "eos"]
    assert all(h.jump for h in route.hops[:-1])
    profile = resolve(Endpoint(name="eos", host="eos", proxy_jump="outer", ssh_config=config))
    assert [h.alias for h in profile.hops] == ["edge", "outer", "eos"]


@pytest.mark.parametrize(
    "text",
    [
        "Host eos\n  ProxyJump gate\nHost gate\n  ProxyJump eos\n",
        "Host eos\n  ProxyJump gate\nHost *\n  ProxyJump gate\n",
    ],
)
def test_a_proxyjump_loop_is_a_config_error(tmp_path: Path, text: str) -> None:
    """A chain of jump hosts that comes back to itself is refused, naming the loop."""
    config = _config(tmp_path, text)
    with pytest.raises(ConfigError, match=r"ProxyJump loop: .*gate"):
        resolve(Endpoint(name="eos", host="eos", ssh_config=config))


def test_a_proxyjump_chain_past_the_limit_is_a_config_error(tmp_path: Path) -> None:
    """Twenty bastions, each behind the next: refused before any connection, not recursed."""
    blocks = "".join(f"Host b{i}\n  ProxyJump b{i + 1}\n" for i in range(20))
    config = _config(tmp_path, "Host eos\n  ProxyJump b0\n" + blocks)
    with pytest.raises(ConfigError, match="more than 8 jump hosts"):
        resolve(Endpoint(name="eos", host="eos", ssh_config=config))
