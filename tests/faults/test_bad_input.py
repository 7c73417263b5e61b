"""Bad input is refused before anything reaches a cluster.

One table, each row a broken submit config, cluster profile or command line. Each row runs
twice:

- through the CLI (``remote-chain submit``, a fresh process): exit 2 (config) or 3 (cluster),
  and the one ``remote-chain: error:`` line on stderr names the file and field (or the host);
- through the ``Orchestrator`` with an opener that fails the test on any connection attempt:
  the error class and its ``exit_code``, the same names in its message.

Nothing is created or changed remotely: the profiles point at a tripwire listener on loopback
that counts every TCP connection (none is allowed), and the run folder they name is listed
before and after. The few rows whose refusal can only come from the cluster (a workdir it
cannot write) run against the real dev cluster (``e2e``), listing its workdir before/after.

As root (CI), mode bits do not make a file unreadable, so the "unreadable identity file" rows
use what root cannot read as a key: a folder, a file that is not a key, an encrypted key.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import devcluster
import pytest

from remote_chain.client.orchestrator import Orchestrator
from remote_chain.config.settings import Settings
from remote_chain.errors import ConfigError, RemoteChainError, RemoteError

from .conftest import CLI_BOOT, HOST, REPO, CountingOpener, Lab, Tally, listing

VALID_CONFIG = "driver:\n  benchmarks:\n    ok:\n      command: 'true'\n"
MAX_UPLOAD = 1 << 20  # REMOTE_CHAIN_MAX_UPLOAD_BYTES for the "huge upload" row
ALIAS_BOMB = "\n".join(
    [
        "driver:",
        '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"  {n}: &{n} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]"
            for p, n in zip("abcdefgh", "bcdefghi", strict=True)
        ),
        "  benchmarks: {ok: {command: 'true'}}",
    ]
)


def bench(name: str, body: str = "{command: 'true'}") -> str:
    """A config with one benchmark ``name`` (a YAML key, written as given) set to ``body``."""
    return f"driver:\n  benchmarks:\n    {name}: {body}\n"


def resumable(spec: str) -> str:
    return bench("ev", f"{{resumable: {spec}, run: {{x: 1}}}}")


def driver(*lines: str) -> str:
    """A config whose driver holds ``lines`` and one command benchmark."""
    return "driver:\n" + "".join(f"  {line}\n" for line in lines) + ONE_BENCH


ONE_BENCH = "  benchmarks: {a: {command: 'true'}}\n"


@dataclass(frozen=True)
class Case:
    """One bad input: what is broken, and the words its error must name."""

    id: str
    expect: tuple[str, ...]  # substrings of the message: file, field or host, the problem
    config: str | bytes | None = VALID_CONFIG  # None: the file does not exist
    profile: Mapping[str, str] = field(default_factory=dict)  # TOML key -> raw value text
    profile_raw: str | bytes | None = None  # the whole profile, replacing the default
    files: Mapping[str, bytes] = field(default_factory=dict)  # next to the config
    argv: Sequence[str] = ()  # more submit options
    cluster: str = "bad"
    codes: tuple[int, ...] = (2,)
    env: Mapping[str, str] = field(default_factory=dict)


DURATIONS = {
    "four fields": "1:2:3:4",
    "letters": "abc",
    "negative": "-5",
    "seconds over 59": "10:99",
    "hours over 23 after days": "1-24",
    "minutes over 59 after days": "1-2:60",
    "too many digits": "1234567890",
    "empty": "",
    "decimal": "1.5",
    "unit suffix": "48h",
    "zero": "0",
    "over a year": "400-00:00:00",
}

CASES: list[Case] = [
    # --- malformed files ---
    Case("yaml unclosed flow", ("submit.yaml", "invalid YAML", "line 2"), config="driver: [\n"),
    Case(
        "yaml tab indent",
        ("submit.yaml", "invalid YAML", "line 2"),
        config="driver:\n\tbenchmarks: {}\n",
    ),
    Case("yaml top level list", ("submit.yaml", "mapping"), config="- driver\n- x\n"),
    Case(
        "yaml duplicate key",
        ("submit.yaml", "duplicate key", "benchmarks"),
        config="driver:\n  benchmarks: {a: {command: 'true'}}\n  benchmarks: {}\n",
    ),
    Case("yaml not utf-8", ("submit.yaml", "UTF-8"), config=b"driver:\n  runner: \xff\xfe\n"),
    Case("yaml alias bomb", ("submit.yaml", "line 7", "alias bomb"), config=ALIAS_BOMB),
    Case("config missing", ("nothere.yaml", "cannot read"), config=None),
    Case(
        "toml unterminated string",
        ("bad.toml", "invalid TOML", "line 1"),
        profile_raw='host = "127.0.0.1\nworkdir = "/tmp"\n',
    ),
    Case("toml not utf-8", ("bad.toml", "UTF-8"), profile_raw=b'host = "\xff"\nworkdir = "/x"\n'),
    Case(
        "toml time of day",
        ("bad.toml", "slurm.time", "quote"),
        profile={"[slurm] time": "04:00:00"},
    ),
    # --- unknown keys (typos) ---
    Case(
        "typo driver.benchmark",
        ("submit.yaml", "benchmark", "did you mean 'benchmarks'"),
        config="driver:\n  benchmark: {a: {command: 'true'}}\n",
    ),
    Case(
        "typo max_retry",
        ("submit.yaml", "driver.benchmarks.ev.resumable.max_retry", "max_retries"),
        config=resumable("{max_retry: 5}"),
    ),
    Case(
        "typo slurm.partiton",
        ("submit.yaml", "partiton", "partition"),
        config=bench("ok", "{command: 'true', slurm: {partiton: debug}}"),
    ),
    Case(
        "typo profile hostname",
        ("bad.toml", "hostname", "did you mean 'host'"),
        profile={"hostname": '"x"'},
    ),
    Case(
        "typo profile slurm.acount",
        ("bad.toml", "slurm.acount", "account"),
        profile={"[slurm] acount": '"x"'},
    ),
    # --- wrong types ---
    Case(
        "max_retries a string",
        ("submit.yaml", "driver.benchmarks.ev.resumable.max_retries", "integer"),
        config=resumable('{max_retries: "five"}'),
    ),
    Case(
        "runner a number",
        ("submit.yaml", "driver.runner", "string"),
        config=driver("runner: 5"),
    ),
    Case(
        "benchmarks a list",
        ("submit.yaml", "driver.benchmarks", "dictionary"),
        config="driver:\n  benchmarks: [a, b]\n",
    ),
    Case(
        "env value a list",
        ("submit.yaml", "driver.env", "A"),
        config=driver("env: {A: [1, 2]}"),
    ),
    Case("profile port a string", ("bad.toml", "port", "integer"), profile={"port": '"2222"'}),
    Case("profile port out of range", ("bad.toml", "port", "65535"), profile={"port": "70000"}),
    Case(
        "profile executor unknown", ("bad.toml", "executor", "slurm"), profile={"executor": '"k8s"'}
    ),
    Case(
        "profile host with user",
        ("bad.toml", "host", "user"),
        profile={"host": '"rcuser@127.0.0.1"'},
    ),
    # --- retries ---
    Case(
        "max_retries negative",
        ("submit.yaml", "resumable.max_retries", "greater than or equal to 0"),
        config=resumable("{max_retries: -1}"),
    ),
    Case(
        "max_retries absurd",
        ("submit.yaml", "resumable.max_retries", "less than or equal to 1000"),
        config=resumable("{max_retries: 1000000000}"),
    ),
    # --- every malformed duration ---
    *(
        Case(
            f"duration {what}",
            (
                "submit.yaml",
                "driver.benchmarks.ev.resumable.max_walltime",
                "duration" if value not in ("0",) else "zero",
            ),
            config=resumable(f"{{max_walltime: {json.dumps(value)}}}"),
        )
        for what, value in DURATIONS.items()
    ),
    Case(
        "duration a boolean",
        ("submit.yaml", "slurm.time"),
        config=bench("ok", "{command: 'true', slurm: {time: true}}"),
    ),
    # --- benchmark names ---
    Case(
        "name with space", ("submit.yaml", "my bench", "benchmark name"), config=bench('"my bench"')
    ),
    Case("name with slash", ("submit.yaml", "a/b", "benchmark name"), config=bench('"a/b"')),
    Case("name dot dot", ("submit.yaml", '".."', "benchmark name"), config=bench('".."')),
    Case("name with quote", ("submit.yaml", "benchmark name"), config=bench('"it\'s"')),
    Case(
        "name with command substitution",
        ("submit.yaml", "benchmark name"),
        config=bench('"$(touch x)"'),
    ),
    Case("name with newline", ("submit.yaml", "benchmark name", "\\n"), config=bench('"a\\nb"')),
    Case("name unicode", ("submit.yaml", "benchmark name"), config=bench('"bénch"')),
    Case("name reserved", ("submit.yaml", "files", "reserved"), config=bench("files")),
    # --- combinations ---
    Case(
        "command and resumable",
        ("submit.yaml", "driver.benchmarks.ev.command", "resumable"),
        config=bench("ev", "{command: 'true', resumable: true}"),
    ),
    Case(
        "command and run",
        ("submit.yaml", "driver.benchmarks.ev.command", "run"),
        config=bench("ev", "{command: 'true', run: {x: 1}}"),
    ),
    Case(
        "resumable on shell executor",
        ("submit.yaml", "driver.benchmarks.ev.resumable", "shell", "bad"),
        config=resumable("true"),
        profile={"executor": '"shell"'},
    ),
    Case(
        "extra_args owned option",
        ("submit.yaml", "extra_args", "--dependency"),
        config=bench("ok", "{command: 'true', slurm: {extra_args: ['--dependency=afterok:1']}}"),
    ),
    Case(
        "extra_args with a space",
        ("submit.yaml", "extra_args"),
        config=bench("ok", "{command: 'true', slurm: {extra_args: ['--comment=a b']}}"),
    ),
    Case(
        "env from an unset variable",
        ("submit.yaml", "driver.env", "RC_FAULTS_UNSET"),
        config=driver("env: {T: {from_env: RC_FAULTS_UNSET}}"),
    ),
    Case(
        "empty benchmark map",
        ("submit.yaml", "driver.benchmarks", "no benchmarks"),
        config="driver:\n  benchmarks: {}\n",
    ),
    # --- cluster and command line ---
    Case("unknown cluster", ("<command line>", "cluster", "nope"), cluster="nope"),
    Case("cluster name with a slash", ("<command line>", "cluster", "cluster name"), cluster="a/b"),
    Case("run id with dots", ("<command line>", "--run-id", "run id"), argv=("--run-id", "../x")),
    Case("run id with a space", ("<command line>", "--run-id"), argv=("--run-id", "a b")),
    Case(
        "unknown --benchmark", ("submit.yaml", "--benchmark", "nope"), argv=("--benchmark", "nope")
    ),
    Case(
        "workdir relative", ("bad.toml", "workdir", "absolute"), profile={"workdir": '"work/here"'}
    ),
    Case(
        "workdir with dot dot", ("bad.toml", "workdir", ".."), profile={"workdir": '"/tmp/../etc"'}
    ),
    # --- identity files (local: refused before connecting) ---
    Case(
        "identity file missing",
        ("bad", "/nonexistent/id_rc"),
        profile={"identity_file": '"/nonexistent/id_rc"'},
        codes=(2, 3),
    ),
    Case(
        "identity file a folder",
        ("bad", "clusters/keydir"),
        profile={"identity_file": '"keydir"'},
        codes=(2, 3),
    ),  # relative to the profile
    Case(
        "identity file not a key",
        ("bad", "clusters/garbage.key"),
        profile={"identity_file": '"garbage.key"'},
        codes=(2, 3),
    ),
    Case(
        "identity file encrypted",
        ("bad", "clusters/locked.key"),
        profile={"identity_file": '"locked.key"'},
        codes=(2, 3),
    ),
    # --- uploads ---
    Case(
        "upload over the byte limit",
        ("submit.yaml", "driver.upload", "big.bin"),
        config=driver("upload: [big.bin]"),
        files={"big.bin": b"\0" * (MAX_UPLOAD + 1)},
        env={"REMOTE_CHAIN_MAX_UPLOAD_BYTES": str(MAX_UPLOAD)},
    ),
    Case(
        "upload entries beyond the count limit",
        ("submit.yaml", "driver.upload", "at most 1000"),
        config=driver("upload: [" + ", ".join(["f.txt"] * 1001) + "]"),
        files={"f.txt": b"x"},
    ),
    Case(
        "upload missing",
        ("submit.yaml", "driver.upload", "gone.txt"),
        config=driver("upload: [gone.txt]"),
    ),
]


@dataclass
class Tripwire:
    """A loopback listener every profile points at: any connection to it is a test failure."""

    sock: socket.socket
    port: int
    accepted: int = 0

    def serve(self, stop: threading.Event) -> None:
        self.sock.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()


@pytest.fixture
def tripwire() -> Iterator[Tripwire]:
    sock = socket.socket()
    sock.bind((HOST, 0))
    sock.listen(16)
    wire = Tripwire(sock, sock.getsockname()[1])
    stop = threading.Event()
    thread = threading.Thread(target=wire.serve, args=(stop,), daemon=True)
    thread.start()
    try:
        yield wire
    finally:
        stop.set()
        thread.join(5)
        sock.close()


@dataclass(frozen=True)
class Keys:
    identity: Path
    known_hosts: Path
    remote_root: Path  # the folder the profiles' workdir lives in, listed before/after


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    """A key pair and known_hosts of our own: no row depends on the dev cluster's files."""
    folder = tmp_path_factory.mktemp("keys")
    identity = folder / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(identity)], check=True)
    known_hosts = folder / "known_hosts"
    known_hosts.write_text(
        f"[{HOST}]:22 {' '.join(identity.with_suffix('.pub').read_text().split()[:2])}\n"
    )
    try:  # the dev cluster's workdir when it is described (it need not run), else a tmp folder
        remote_root = devcluster._describe().workdir / "faults" / "badinput"
    except RuntimeError:
        remote_root = folder / "remote"
    return Keys(identity, known_hosts, remote_root)


def _profile_text(case: Case, port: int, keys: Keys) -> str | bytes:
    if case.profile_raw is not None:
        return case.profile_raw
    top = {
        "host": json.dumps(HOST),
        "port": str(port),
        "user": '"rcuser"',
        "identity_file": json.dumps(str(keys.identity)),
        "known_hosts": json.dumps(str(keys.known_hosts)),
        "workdir": json.dumps(str(keys.remote_root)),
    }
    slurm = {"partition": '"debug"'}
    for key, value in case.profile.items():
        if key.startswith("[slurm] "):
            slurm[key.removeprefix("[slurm] ")] = value
        else:
            top[key] = value
    lines = [f"{k} = {v}" for k, v in top.items()] + ["[slurm]"]
    lines += [f"{k} = {v}" for k, v in slurm.items()]
    return "\n".join(lines) + "\n"


def prepare(case: Case, root: Path, port: int, keys: Keys) -> Path:
    """Write the row's files under ``root``; return the config path (maybe missing)."""
    clusters = root / "clusters"
    clusters.mkdir(parents=True)
    profile = _profile_text(case, port, keys)
    target = clusters / "bad.toml"
    if isinstance(profile, bytes):
        target.write_bytes(profile)
    else:
        target.write_text(profile)
    (clusters / "keydir").mkdir()
    (clusters / "garbage.key").write_text("this is not a private key\n")
    subprocess.run(
        [
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "s3cret-pass",
            "-f",
            str(clusters / "locked.key"),
        ],
        check=True,
    )
    for name, data in case.files.items():
        (root / name).write_bytes(data)
    if case.config is None:
        return root / "nothere.yaml"
    config = root / "submit.yaml"
    if isinstance(case.config, bytes):
        config.write_bytes(case.config)
    else:
        config.write_text(case.config)
    return config


def _cli_env(root: Path, extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REMOTE_CHAIN_", "RC_FAULTS_"))}
    env.update(PYTHONPATH=str(REPO), HOME=str(root / "home"), XDG_STATE_HOME=str(root / "state"))
    env.update(XDG_CONFIG_HOME=str(root / "home" / ".config"), REMOTE_CHAIN_CONNECT_TIMEOUT="5")
    env.update(extra)
    return env


def _words_missing(text: str, words: Sequence[str]) -> list[str]:
    return [w for w in words if w not in text]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_cli_refuses_bad_input_naming_file_and_field(
    case: Case, tmp_path: Path, tripwire: Tripwire, keys: Keys, tally: Tally
) -> None:
    """``remote-chain submit`` with a bad input: exit 2/3, one clear line, nothing sent."""
    config = prepare(case, tmp_path, tripwire.port, keys)
    before = listing(keys.remote_root)
    argv = [sys.executable, "-c", CLI_BOOT, "--clusters-dir", str(tmp_path / "clusters")]
    argv += ["submit", str(config), "--cluster", case.cluster, *case.argv]
    tally.injected("bad input (CLI)")
    done = subprocess.run(
        argv, cwd=tmp_path, env=_cli_env(tmp_path, case.env), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert tripwire.accepted == 0, "a connection reached the network"
    assert done.returncode in case.codes, f"exit {done.returncode}: {done.stderr}"
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("remote-chain: error:")]
    assert errors, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert not _words_missing(done.stderr, case.expect), (case.expect, done.stderr)
    assert listing(keys.remote_root) == before
    tally.survived("bad input (CLI)")


def _submit_options(case: Case) -> tuple[str | None, list[str]]:
    """``--run-id`` and ``--benchmark`` of the row, as ``Orchestrator.submit`` takes them."""
    run_id, benchmarks = None, []
    args = list(case.argv)
    while args:
        option, value = args.pop(0), args.pop(0)
        if option == "--run-id":
            run_id = value
        elif option == "--benchmark":
            benchmarks.append(value)
    return run_id, benchmarks


@pytest.mark.anyio
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_the_client_refuses_bad_input_before_any_connection(
    case: Case, tmp_path: Path, tripwire: Tripwire, keys: Keys, tally: Tally
) -> None:
    """``Orchestrator.submit`` with a bad input: a ConfigError/RemoteError, no connection made."""
    config = prepare(case, tmp_path, tripwire.port, keys)
    before = listing(keys.remote_root)
    # A config error must come before the client even builds a connection; an unusable key
    # may surface while opening one, as long as nothing reaches the network (the tripwire).
    opener = CountingOpener()
    limit = int(case.env.get("REMOTE_CHAIN_MAX_UPLOAD_BYTES", 64 << 20))
    settings = Settings(
        state_dir=tmp_path / "state", clusters_dir=None, max_upload_bytes=limit, connect_timeout=5
    )
    run_id, benchmarks = _submit_options(case)
    tally.injected("bad input (client API)")
    error: RemoteChainError | None = None
    with anyio.fail_after(60):
        async with Orchestrator(settings, clusters_dir=tmp_path / "clusters", opener=opener) as rc:
            try:
                result = await rc.submit(
                    config, [case.cluster], run_id=run_id, benchmarks=benchmarks
                )
            except RemoteChainError as exc:
                error = exc
            else:
                error = result.failures[0].error if result.failures else None
    assert tripwire.accepted == 0, "a connection reached the network"
    if case.codes == (2,):
        assert opener.opened == [], f"a connection to {opener.opened} was set up"
    assert error is not None, "the bad input was accepted"
    assert isinstance(error, ConfigError | RemoteError), repr(error)
    assert error.exit_code in case.codes, f"{type(error).__name__} exit {error.exit_code}: {error}"
    assert not _words_missing(str(error), case.expect), (case.expect, str(error))
    assert listing(keys.remote_root) == before
    tally.survived("bad input (client API)")


# --- refused by the cluster itself --------------------------------------------------------------

REMOTE_CASES = ("workdir not writable", "workdir is a file")


@pytest.mark.e2e
@pytest.mark.parametrize("kind", REMOTE_CASES)
def test_a_workdir_the_cluster_cannot_use_is_a_config_error(
    lab: Lab, tally: Tally, kind: str
) -> None:
    """A workdir the cluster cannot write: exit 2 naming profile, workdir and host; nothing made."""
    # Root-owned, so the test user cannot write in it; one per test, as other runs of this
    # suite may share the cluster at the same time.
    base = Path(lab.workdir) / f"badinput-remote-{secrets.token_hex(4)}"
    base.mkdir(mode=0o755)
    if kind == "workdir not writable":
        workdir = base / "readonly"
        workdir.mkdir(mode=0o755)
    else:
        workdir = base / "afile"
        workdir.write_text("not a folder\n")
    lab.profile("bad", workdir=str(workdir))
    config = lab.config({"benchmarks": {"ok": {"command": "true"}}})
    before = listing(base)
    tally.injected("bad input (refused by the cluster)")
    done = lab.cli(
        "submit",
        str(config),
        "--cluster",
        "bad",
        "--run-id",
        f"rc-faults-bad-{secrets.token_hex(3)}",
    )
    assert done.returncode in (2, 3), f"exit {done.returncode}: {done.stderr}"
    assert not _words_missing(done.stderr, (str(workdir), "workdir", "bad")), done.stderr
    assert listing(base) == before
    tally.survived("bad input (refused by the cluster)")


def test_the_table_has_at_least_thirty_rows() -> None:
    """The table holds at least 30 bad inputs; ids are unique."""
    ids = [c.id for c in CASES]
    assert len(ids) >= 30
    assert len(set(ids)) == len(ids)
