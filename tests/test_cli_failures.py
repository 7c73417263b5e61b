"""Fail fast, fail once: wait's exits, one message per failure, human logs,
and ``clusters`` listing broken profiles. Fake clusters at the ``Remote`` seam."""

from __future__ import annotations

import json
import time

import pytest
import structlog
from test_cli import World, _restore_logging, _run_id, world  # noqa: F401 - fixtures

from remote_chain.client.reachability import Outages, UnreachableFor, is_fatal
from remote_chain.config.settings import Settings
from remote_chain.errors import AuthenticationError, ConnectError, HostKeyError, RemoteError
from remote_chain.logconfig import configure_logging


@pytest.fixture
def fast_world(world: World, monkeypatch: pytest.MonkeyPatch) -> World:  # noqa: F811
    """``world`` where wait gives up on an unreachable cluster after 0.3 s, not 15 min."""
    monkeypatch.setenv("REMOTE_CHAIN_WAIT_UNREACHABLE", "0.3")
    return world


@pytest.mark.parametrize("error", [AuthenticationError, HostKeyError])
def test_wait_exits_3_at_once_on_an_auth_or_host_key_error(
    world: World,  # noqa: F811
    error: type[RemoteError],
) -> None:
    """Polling cannot fix keys: wait stops at the first poll, exit 3, naming the cluster."""
    run_id = _run_id(world.submit())
    world.cluster("eos").refuse(error)
    started = time.monotonic()
    result = world.invoke("wait", run_id, "--timeout", "60s")
    assert result.exit_code == 3, result.stderr
    assert time.monotonic() - started < 5
    assert world.cluster("eos").connects <= 2  # submit's, and wait's first poll
    assert "eos" in result.stderr


def test_wait_exits_2_at_once_on_a_config_error(world: World) -> None:  # noqa: F811
    """An unreadable known_hosts file is the profile's fault: exit 2 at the first poll."""
    run_id = _run_id(world.submit())
    profile = world.clusters_dir / "eos.toml"
    profile.write_text(
        profile.read_text() + f'known_hosts = "{world.tmp / "missing_known_hosts"}"\n'
    )
    started = time.monotonic()
    result = world.invoke("wait", run_id, "--timeout", "60s")
    assert result.exit_code == 2, result.stderr
    assert time.monotonic() - started < 5
    assert "known_hosts" in result.stderr


def test_wait_gives_up_on_a_cluster_unreachable_too_long(fast_world: World) -> None:
    """Unreachable without a break past REMOTE_CHAIN_WAIT_UNREACHABLE: exit 3, said once."""
    run_id = _run_id(fast_world.submit())
    fast_world.cluster("eos").refuse(ConnectError)
    result = fast_world.invoke("wait", run_id, "--timeout", "60s")
    assert result.exit_code == 3, result.stderr
    assert "unreachable for" in result.stderr
    assert fast_world.cluster("eos").connects > 2  # it was retried before giving up
    failure_lines = [line for line in result.stderr.splitlines() if "refused (fake)" in line]
    assert len(failure_lines) == 1, result.stderr


def test_an_outage_that_heals_resets_the_clock() -> None:
    """Only continuous unreachability counts; a good poll in between starts it again."""

    class _F:
        def __init__(self, cluster: str, error: RemoteError) -> None:
            self.cluster, self.error = cluster, error

    down = [_F("eos", ConnectError("refused", host="eos"))]
    outages = Outages(give_up=10)
    outages.check(["eos"], down, now=0)
    outages.check(["eos"], down, now=9)
    outages.check(["eos"], [], now=9.5)  # healed
    outages.check(["eos"], down, now=12)
    with pytest.raises(UnreachableFor, match="unreachable for"):
        outages.check(["eos"], down, now=22)
    assert is_fatal(HostKeyError("x", host="eos"))
    assert not is_fatal(ConnectError("x", host="eos"))


def test_a_failed_cluster_is_reported_once(world: World) -> None:  # noqa: F811
    """One failure, one line: no log line, no doubled cluster name, no JSON on stderr."""
    run_id = _run_id(world.submit("eos", "dgx"))
    world.cluster("eos").refuse(ConnectError)
    result = world.invoke("status", run_id)
    assert result.exit_code != 0
    lines = [line for line in result.stderr.splitlines() if "refused (fake)" in line]
    assert lines == ["remote-chain: error: eos: cannot connect to eos.test:None: refused (fake)"]
    assert "eos: eos:" not in result.stderr
    assert not any(line.startswith("{") for line in result.stderr.splitlines())
    assert "refused (fake)" not in result.stdout  # the table says unknown, not the cause again
    assert "unknown" in result.stdout


def test_logs_are_human_text_when_stderr_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without --log-format json, logs are console text even into a pipe (CI logs)."""
    configure_logging(None, 1)
    structlog.get_logger("remote_chain").info("probe_event", cluster="eos")
    err = capsys.readouterr().err
    assert "probe_event" in err
    assert "cluster=eos" in err
    with pytest.raises(json.JSONDecodeError):
        json.loads(err.splitlines()[0])


def test_json_output_alone_does_not_make_logs_json(world: World) -> None:  # noqa: F811
    """--json is stdout's format; stderr logs stay human text."""
    result = world.invoke("-v", "submit", str(world.config), "--cluster", "eos", "--json")
    assert result.exit_code == 0, result.stderr
    assert "job_submitted" in result.stderr
    assert not any(line.startswith("{") for line in result.stderr.splitlines())
    json.loads(result.stdout)


def test_clusters_lists_every_profile_and_the_broken_ones_then_exits_2(world: World) -> None:  # noqa: F811
    """A broken profile does not hide the others; each broken one shows its error."""
    (world.clusters_dir / "bad.toml").write_text('host = "x"\nport = "twenty-two"\n')
    (world.clusters_dir / "worse.toml").write_text("not toml [\n")
    result = world.invoke("clusters", "--json")
    assert result.exit_code == 2, result.stderr
    document = json.loads(result.stdout)
    assert {c["name"] for c in document["clusters"]} == {"dgx", "eos"}
    broken = {b["name"]: b for b in document["broken"]}
    assert set(broken) == {"bad", "worse"}
    assert "port" in broken["bad"]["error"]
    assert "invalid TOML" in broken["worse"]["error"]
    table = world.invoke("clusters")
    assert table.exit_code == 2
    assert "BROKEN" in table.stdout
    assert "eos" in table.stdout


def test_settings_defaults_for_failing_fast() -> None:
    """Refused connections are retried 2 s; wait gives up after 15 minutes unreachable."""
    settings = Settings(_env_file=None)
    assert settings.connect_retry == 2
    assert settings.wait_unreachable == 15 * 60
    assert settings.connect_timeout is None


def test_doctor_exits_2_when_the_ssh_config_is_the_problem(
    world: World,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An ssh config that turns host-key checks off is a config error (2), not a failed ssh."""
    ssh_config = world.tmp / "ssh_config"
    ssh_config.write_text("Host eos.test\n  StrictHostKeyChecking no\n")
    profile = world.clusters_dir / "eos.toml"
    profile.write_text(profile.read_text() + f'ssh_config = "{ssh_config}"\n')
    from remote_chain.cli import invocation  # noqa: PLC0415
    from remote_chain.transport.connect import open_remote  # noqa: PLC0415

    monkeypatch.setattr(invocation, "OPENER", open_remote)  # the real transport reads the config
    result = world.invoke("doctor", "--cluster", "eos")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert "host-key checking off" in result.stderr
    assert result.stderr.count("host-key checking off") == 1
