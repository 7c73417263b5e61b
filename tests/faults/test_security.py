"""Security properties on the real dev cluster.

- Host keys: a changed (or unknown) host key is refused before anything is sent. The proof
  is on the wire: a recording proxy keeps every client->server byte, and they parse as the
  cleartext key exchange only (no NEWKEYS, so no authentication and no command ever left).
- Quoting: config values full of shell syntax are carried literally into a real job, and
  none of the commands hidden in them ran (canary files never appear).
- Secrets (``driver.env: {NAME: {value: ..., secret: true}}``, or ``{from_env: ...}``, secret by
  default) reach the job but never a log, a JSON document, ``render``'s output or an error
  message; the file holding them is mode 600 and every folder of the run 700.
- The client listens on no port, TCP or UDP, while it works.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import struct
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from remote_chain.client.plan import describe_bundle
from remote_chain.config import load_submit_config
from remote_chain.core.results import SubmitResult
from remote_chain.errors import ConfigError, HostKeyError
from remote_chain.job.script import SECRETS_FILE

from .conftest import HOST, Lab, RecordingProxy, Tally, blocking, bound_ports, listing

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

# SSH message numbers (RFC 4253, 4419) a client may send before NEWKEYS, in cleartext.
KEX_MESSAGES = {
    1: "DISCONNECT",
    2: "IGNORE",
    4: "DEBUG",
    20: "KEXINIT",
    30: "KEX_INIT",  # ECDH, curve25519 and the sntrup/mlkem hybrids all use 30
    32: "KEX_GEX_INIT",
    34: "KEX_GEX_REQUEST",
}
NEWKEYS = 21


def cleartext_messages(wire: bytes) -> list[int]:
    """The message numbers of a client's cleartext SSH stream: banner, then binary packets.

    Fails if anything does not parse as an unencrypted packet: after NEWKEYS the stream is
    encrypted and would not.
    """
    assert wire.startswith(b"SSH-2.0-"), wire[:40]
    rest, types = wire[wire.index(b"\r\n") + 2 :], []
    while rest:
        (length,) = struct.unpack(">I", rest[:4])
        assert 5 <= length <= 35000, f"not a cleartext packet (length {length})"
        packet, rest = rest[4 : 4 + length], rest[4 + length :]
        assert len(packet) == length, "truncated packet"
        assert 4 <= packet[0] < length, "not a cleartext packet (padding)"
        types.append(packet[1])
    return types


def keygen(path: Path) -> str:
    """A fresh ed25519 key pair; returns its public half as ``<type> <base64>``."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["changed", "unknown"])
async def test_a_changed_host_key_is_refused_before_anything_is_sent(
    lab: Lab, tally: Tally, kind: str
) -> None:
    """A host key that differs from known_hosts (or is not in it): HostKeyError, nothing sent."""
    fault = f"host key {kind}"
    other = await blocking(keygen, lab.root / "other_host_key")
    with RecordingProxy(lab.dev.ssh_port["local"]) as proxy:
        known = lab.root / "spoofed_known_hosts"
        known.write_text(f"[{HOST}]:{proxy.port} {other}\n" if kind == "changed" else "")
        # A workdir of its own: other runs of this suite may share the cluster at the same time.
        workdir = Path(lab.workdir) / f"spoofed-{secrets.token_hex(4)}"
        lab.profile("spoofed", port=proxy.port, workdir=str(workdir))
        profile = lab.clusters / "spoofed.toml"
        known_line = f"known_hosts = {json.dumps(str(lab.known_hosts))}"
        profile.write_text(
            profile.read_text().replace(known_line, f"known_hosts = {json.dumps(str(known))}")
        )
        config = lab.config({"benchmarks": {"a": {"command": "touch /tmp/rc-faults-never"}}})
        tally.injected(fault)
        async with lab.orchestrator() as rc:
            result = await rc.submit(config, ["spoofed"])
        assert [f.cluster for f in result.failures] == ["spoofed"], result.to_json()
        error = result.failures[0].error
        assert isinstance(error, HostKeyError), repr(error)
        assert error.exit_code == 3
        assert str(known) in str(error), str(error)
        assert proxy.accepted == 1, "a host key failure must not be retried"
        done = await lab.acli("submit", str(config), "--cluster", "spoofed")
        assert done.returncode == 3, done.stderr
        assert "host key" in done.stderr, done.stderr
        assert f"{HOST}:{proxy.port}" in done.stderr, done.stderr
        assert proxy.accepted == 2
        wire = bytes(proxy.upstream)
    # Both connections' bytes, one after the other: each a banner and cleartext kex packets.
    streams = [b"SSH-2.0-" + part for part in wire.split(b"SSH-2.0-")[1:]]
    assert len(streams) == 2
    for stream in streams:
        types = cleartext_messages(stream)
        assert set(types) <= set(KEX_MESSAGES), f"sent {types} before the host key was trusted"
        assert 20 in types, types  # KEXINIT: the parse did see the key exchange
        assert NEWKEYS not in types  # nothing encrypted (auth, commands) was ever sent
    assert not workdir.exists(), listing(workdir)
    tally.survived(fault)


def planted_canaries(canary: str, run_dir: Path, user: str) -> list[Path]:
    """Files named like the canary in /tmp, the run folder, or the test user's home."""
    home = Path(f"~{user}").expanduser()
    return [p for root in (Path("/tmp"), run_dir, home) for p in root.rglob(f"{canary}*")]


def bash_syntax_errors(script: str) -> str:
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    return done.stderr if done.returncode else ""


def nul_list(path: Path) -> list[str]:
    data = path.read_bytes()
    assert data.endswith(b"\0"), data[-20:]
    return data[:-1].decode().split("\0")


@pytest.mark.anyio
async def test_no_config_value_reaches_a_shell_unquoted(lab: Lab, tally: Tally) -> None:
    """Shell syntax in runner words, run values, env values, upload names and sbatch args
    arrives literally in a real job, and none of the commands hidden in it ran."""
    canary = f"rc-faults-pwned-{secrets.token_hex(4)}"
    touch = f"touch /tmp/{canary}"
    run = {
        "a": f"$({touch}-a)",
        "b": f"x; {touch}-b",
        "c": f"`{touch}-c`",
        "d": 'it\'s "quoted" and  spaced',
        "e": f"line1\n{touch}-e",
        "f": "${HOME} $PATH ~ * ?",
        "g": "ünï | & > < !",
    }
    env = {
        "E1": f"$({touch}-e1)",
        "E2": f"a b 'c' \"d\"; {touch}-e2",
        "E3": f"`{touch}-e3`",
        "E4": "*",
    }
    uploads = {
        "my file.txt": b"1",
        "it's.txt": b"2",
        f"$(touch {canary}-up).txt": b"3",
        'q"uote.txt': b"4",
    }
    for name, data in uploads.items():
        (lab.root / name).write_bytes(data)
    zero = f"rc $({touch}-0)"
    dump = (
        'cd artifacts && printf "%s\\0" "$0" "$@" > argv.bin && '
        'printf "%s\\0" "$E1" "$E2" "$E3" "$E4" > env.bin'
    )
    runner = f"bash -c '{dump}' '{zero}'"
    lab.profile("quoting", slurm={"extra_args": [f"--comment=$(touch${{IFS}}/tmp/{canary}-sb)"]})
    config = lab.config(
        {"runner": runner, "env": env, "upload": list(uploads), "benchmarks": {"q": {"run": run}}}
    )
    tally.injected("shell syntax in config values")
    rendered = await lab.acli("render", str(config), "--cluster", "quoting")
    assert rendered.returncode == 0, rendered.stderr
    assert await blocking(bash_syntax_errors, rendered.stdout) == ""
    async with lab.orchestrator() as rc:
        submitted = await rc.submit(config, ["quoting"])
        assert submitted.ok, submitted.to_json()
        lab.track("quoting", submitted.run_id, ["q"])
        final = await rc.wait(submitted.run_id, timeout=120, first_interval=1)
        assert final.all_completed, final.to_json()
    run_dir = lab.run_dir(submitted.run_id, "quoting")
    artifacts = run_dir / "q" / "artifacts"
    assert nul_list(artifacts / "argv.bin") == [zero, *(f"+{k}={v}" for k, v in run.items())]
    assert nul_list(artifacts / "env.bin") == list(env.values())
    for name, data in uploads.items():
        assert (run_dir / "files" / name).read_bytes() == data, name
    planted = await blocking(planted_canaries, canary, run_dir, lab.dev.test_user)
    assert planted == [], f"a command hidden in a config value ran: {planted}"
    tally.survived("shell syntax in config values")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _leaks(texts: Sequence[str], hidden: Sequence[str]) -> list[str]:
    return [t[:200] for t in texts for s in hidden if s in t]


def secret_holders(run_root: Path, hidden: Sequence[str]) -> list[str]:
    """Names of the files under the run holding a secret; every folder must be 0700 and every
    such file 0600 (asserted on the way)."""
    holders = []
    for path in [run_root, *run_root.rglob("*")]:
        mode = path.lstat().st_mode & 0o777
        if path.is_dir():
            assert mode == 0o700, f"{path} is {oct(mode)}"
        elif any(s.encode() in path.read_bytes() for s in hidden):
            holders.append(path.name)
            assert mode == 0o600, f"{path} holds a secret and is {oct(mode)}"
    return holders


@pytest.mark.anyio
async def test_secrets_reach_the_job_only(
    lab: Lab, tally: Tally, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Secret env values: in the job's environment, nowhere else; 600 file, 700 folders."""
    token = f"tok-{secrets.token_hex(12)}"
    from_env = f"env-{secrets.token_hex(12)}"
    monkeypatch.setenv("RC_FAULTS_TOKEN2", from_env)
    hidden = [token, from_env]
    runner = (
        'bash -c \'printf %s "$TOKEN" | sha256sum > artifacts/t1; '
        'printf %s "$TOKEN2" | sha256sum > artifacts/t2; echo job sees ${#TOKEN} chars\' rc'
    )
    lab.profile("vault")
    driver = {
        "runner": runner,
        "env": {
            "TOKEN": {"value": token, "secret": True},
            "TOKEN2": {"from_env": "RC_FAULTS_TOKEN2"},
        },
        "benchmarks": {"s": {"run": {"x": 1}}},
    }
    config = lab.config(driver)
    env = {"RC_FAULTS_TOKEN2": from_env}
    loud = ("-vv", "--log-format", "json")
    fault = "secret values exposed to logs, JSON, render, errors, files"
    tally.injected(fault)
    outputs: list[str] = [repr(load_submit_config(config))]

    # The CLI at its most verbose, in JSON: every document and every log line.
    where = ("--cluster", "vault")
    before_submit: list[tuple[str, ...]] = [
        ("render", str(config), *where),
        (*loud, "submit", str(config), *where, "--dry-run", "--json"),
    ]
    for argv in before_submit:
        done = await lab.acli(*argv, env=env)
        assert done.returncode == 0, done.stderr
        outputs += [done.stdout, done.stderr]
    submitted = await lab.acli(*loud, "submit", str(config), *where, "--json", env=env)
    assert submitted.returncode == 0, submitted.stderr
    outputs += [submitted.stdout, submitted.stderr]
    run_id = json.loads(submitted.stdout)["run_id"]
    lab.track("vault", run_id, ["s"])
    after_submit: list[tuple[str, ...]] = [
        (*loud, "wait", run_id, *where, "--timeout", "120", "--json"),
        (*loud, "status", run_id, *where, "--json"),
        ("-vv", "logs", run_id, "--benchmark", "s", *where),
    ]
    for argv in after_submit:
        done = await lab.acli(*argv, env=env)
        assert done.returncode == 0, (argv, done.stderr)
        outputs += [done.stdout, done.stderr]
    assert "job sees 28 chars" in outputs[-2], outputs[-2]  # the log did arrive

    # The client API, with structlog captured: results, logs and the dry-run description.
    async with lab.orchestrator() as rc:
        with capture_logs() as logs:
            dry: SubmitResult = await rc.submit(config, ["vault"], dry_run=True)
            status = await rc.status(run_id, clusters=["vault"])
    outputs += [json.dumps(dry.to_json()), json.dumps(status.to_json()), repr(logs)]
    outputs += [describe_bundle(b) for b in dry.bundles]
    outputs += [
        f.data.decode() for b in dry.bundles for f in b.files if not f.path.endswith(SECRETS_FILE)
    ]
    assert _leaks(outputs, hidden) == []

    # Errors about a secret entry never quote its value.
    for bad in ({"value": token, "secret": "yes"}, {"value": [token], "secret": True}):
        broken = lab.config({**driver, "env": {"TOKEN": bad}}, name="broken.yaml")
        with pytest.raises(ConfigError) as info:
            load_submit_config(broken)
        assert token not in str(info.value), str(info.value)
        done = await lab.acli("submit", str(broken), *where, env=env)
        assert done.returncode == 2, done.stderr
        assert token not in done.stderr + done.stdout, done.stderr

    # On the cluster: the job saw the values; only the 600 secrets file holds them.
    run_root = Path(lab.workdir) / run_id
    artifacts = run_root / "vault" / "s" / "artifacts"
    assert (artifacts / "t1").read_text().split()[0] == _sha(token)
    assert (artifacts / "t2").read_text().split()[0] == _sha(from_env)
    # The chain completed: its last link removed the secrets file, so no
    # file of the run holds a secret any more (the job logs and artifacts never did).
    assert await blocking(secret_holders, run_root, hidden) == []
    tally.survived(fault)


@pytest.mark.anyio
async def test_the_client_listens_on_no_port(lab: Lab, tally: Tally) -> None:
    """During submit and status, in-process, no socket of the client listens or binds."""
    lab.profile("quiet", slurm={"extra_args": ["--hold"]})
    config = lab.config({"benchmarks": {"a": {"command": "true"}}})
    tally.injected("client-side listening sockets looked for")
    before = bound_ports()
    samples: list[set[tuple[str, int]]] = []
    done = anyio.Event()

    async def sample() -> None:
        while not done.is_set():
            samples.append(bound_ports())
            await anyio.sleep(0.002)

    async with lab.orchestrator() as rc, anyio.create_task_group() as tg:
        tg.start_soon(sample)
        result = await rc.submit(config, ["quiet"])
        lab.track("quiet", result.run_id, ["a"])
        for _ in range(5):  # one connection, several execs: room for many samples
            await rc.status(result.run_id, clusters=["quiet"])
        done.set()
    assert result.ok, result.to_json()
    assert len(samples) >= 5
    assert all(s <= before for s in samples), [s - before for s in samples if not s <= before]
    tally.survived("client-side listening sockets looked for")


def test_the_cli_listens_on_no_port(lab: Lab, tally: Tally) -> None:
    """A ``remote-chain submit`` process binds no TCP or UDP port at any moment of its life."""
    lab.profile("quiet", slurm={"extra_args": ["--hold"]})
    config = lab.config({"benchmarks": {"a": {"command": "true"}}})
    tally.injected("client-side listening sockets looked for")
    proc = subprocess.Popen(
        lab.cli_argv("submit", str(config), "--cluster", "quiet", "--json"),
        cwd=lab.root,
        env=lab.cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: set[tuple[str, int]] = set()
    polls = 0
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            seen |= bound_ports(proc.pid)
            polls += 1
        except FileNotFoundError:  # the process just ended
            break
        time.sleep(0.002)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lab.track("quiet", json.loads(out)["run_id"], ["a"])
    assert polls > 10
    assert seen == set(), f"the CLI bound {seen}"
    tally.survived("client-side listening sockets looked for")
