"""A shared login node and a hostile neighbour, on the real dev cluster.

The neighbour is ``rcother`` (scripts/dev-cluster ``ensure_neighbour``), a second unprivileged
user of the same login node who, like the victim ``rcuser``, is in the group ``rcshare``. A
project folder of that group, writable by both, is the victim's workdir. The neighbour acts
on the login node itself (``runuser``), as one would. Each takeover attempt must be refused
with the path and its owner named, with nothing of the neighbour's executed and nothing of
the victim's changed.

The flooding and lying login shells need a login whose rc files a test may change: they use a
private sshd (tests/sshd.py) whose login shell talks to the dev cluster's Slurm.
"""

from __future__ import annotations

import base64
import grp
import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshd import HOST as SSHD_HOST
from sshd import running_sshd

from .conftest import Lab, slurm, squeue_jobs, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

NEIGHBOUR = "rcother"
SHARE_GROUP = "rcshare"
SHARED_ROOT = Path("/var/tmp/remote-chain-neighbour-tests")


def as_neighbour(script: str) -> None:
    """Run ``script`` in bash as the neighbour, on this (the login) node."""
    subprocess.run(
        ["runuser", "-u", NEIGHBOUR, "--", "bash", "-euc", script],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )


def tree(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry under ``root``: (uid, mode, sha256 of a file or a link's target)."""
    out: dict[str, tuple[int, int, str]] = {}
    for path in sorted([root, *root.rglob("*")]):
        st = path.lstat()
        if path.is_symlink():
            digest = os.readlink(path)
        elif path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            digest = ""
        out[str(path)] = (st.st_uid, st.st_mode, digest)
    return out


@pytest.fixture
def project(lab: Lab) -> Iterator[Path]:
    """A group project folder (rcshare, mode 770, no sticky bit) the victim and neighbour share."""
    try:
        pwd.getpwnam(NEIGHBOUR)
        group = grp.getgrnam(SHARE_GROUP)
    except KeyError:
        pytest.fail(f"no user {NEIGHBOUR} or group {SHARE_GROUP}: run `scripts/dev-cluster up`")
    SHARED_ROOT.mkdir(mode=0o755, exist_ok=True)
    folder = SHARED_ROOT / f"p-{secrets.token_hex(4)}"
    folder.mkdir()
    os.chown(folder, 0, group.gr_gid)
    folder.chmod(0o770)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def canary() -> Iterator[Path]:
    """A file the neighbour's planted job.sh would create, run as whoever runs it."""
    path = Path("/tmp") / f"rc-neighbour-canary-{secrets.token_hex(4)}"
    yield path
    path.unlink(missing_ok=True)


def plant_run(run_dir: Path, canary: Path, victim_file: Path) -> None:
    """The neighbour pre-creates a whole run folder: record, state files, job.sh, a symlink."""
    record = {
        "run_id": run_dir.parent.name,
        "cluster": run_dir.name,
        "created": "2026-01-01T00:00:00Z",
        "executor": "slurm",
        "run_dir": str(run_dir),
        "chains": [
            {
                "benchmark": "a",
                "remote_dir": f"{run_dir}/a",
                "job_name": f"{run_dir.parent.name}:a",
                "resumable": True,
                "first_job_id": "1",
                "error": None,
            }
        ],
    }
    as_neighbour(
        f"""umask 000
mkdir -p {run_dir}/a/logs
printf '%s\\n' {json.dumps(json.dumps(record))} > {run_dir}/remote-chain.json
printf '#!/bin/bash\\ntouch {canary}\\n' > {run_dir}/a/job.sh; chmod 777 {run_dir}/a/job.sh
echo 1 > {run_dir}/a/.gym_job_chain; echo 1 > {run_dir}/a/.remote_chain_first_job
date +%Y-%m-%dT%H:%M:%S > {run_dir}/.remote_chain_since
ln -s {victim_file} {run_dir}/a/.remote_chain_cancelled
"""
    )


def test_a_run_folder_planted_by_the_neighbour_is_never_adopted(
    lab: Lab, project: Path, canary: Path
) -> None:
    """submit, status, wait, resume, cancel and logs all refuse it, naming the path and owner."""
    victim_file = Path(pwd.getpwnam(lab.dev.test_user).pw_dir) / f"precious-{canary.name}"
    victim_file.write_text("the victim's data\n")
    lab.profile("shared", workdir=str(project))
    run_id = f"rc-nb-{secrets.token_hex(4)}"
    run_dir = project / run_id / "shared"
    plant_run(run_dir, canary, victim_file)
    named = project / run_id
    before = tree(project / run_id)
    config = lab.config({"benchmarks": {"a": {"command": f"touch {canary}"}}})
    submitted = lab.cli("submit", str(config), "--cluster", "shared", "--run-id", run_id)
    assert submitted.returncode != 0, submitted.stdout
    assert f"{named} is owned by {NEIGHBOUR}" in submitted.stderr, submitted.stderr
    assert "exist" not in (submitted.stdout + submitted.stderr).lower()
    for args in (
        ["status", run_id, "-c", "shared"],
        ["wait", run_id, "-c", "shared", "--timeout", "30"],
        ["resume", run_id, "-c", "shared"],
        ["cancel", run_id, "-c", "shared"],
        ["logs", run_id, "-b", "a", "-c", "shared"],
    ):
        done = lab.cli(*args)
        assert done.returncode != 0, (args, done.stdout)
        assert f"is owned by {NEIGHBOUR}" in done.stderr, (args, done.stderr)
        assert "completed" not in done.stdout, (args, done.stdout)
    time.sleep(2)  # a job.sh that was queued by mistake would have had time to start
    assert not canary.exists(), "the neighbour's job.sh ran as the victim"
    assert victim_file.read_text() == "the victim's data\n"
    assert tree(project / run_id) == before
    assert slurm("local", "squeue", "--noheader", f"--name={run_id}:a").stdout.strip() == ""


def test_a_group_writable_run_folder_is_refused(lab: Lab, project: Path, canary: Path) -> None:
    """A careless chmod g+w lets the neighbour swap job.sh: resume and status refuse the run."""
    lab.profile("shared", workdir=str(project))
    run_id = f"rc-nb-{secrets.token_hex(4)}"
    config = lab.config({"benchmarks": {"a": {"command": "true"}}})
    lab.track("shared", run_id, ["a"])
    first = lab.cli("submit", str(config), "--cluster", "shared", "--run-id", run_id)
    assert first.returncode == 0, first.stderr
    ended = lab.cli("wait", run_id, "-c", "shared", "--timeout", "150")
    assert ended.returncode == 0, ended.stderr  # the victim's own job has ended
    bench = project / run_id / "shared" / "a"
    # The victim's own mistake: "share my results with the group" (chmod -R g+rwX).
    for folder in (bench.parent.parent, bench.parent, bench):
        folder.chmod(0o770)
        os.chown(folder, lab.dev.test_uid, grp.getgrnam(SHARE_GROUP).gr_gid)
    as_neighbour(
        f"rm -f {bench}/job.sh; printf '#!/bin/bash\\ntouch {canary}\\n' > {bench}/job.sh; "
        f"chmod 755 {bench}/job.sh"
    )
    before = tree(bench)
    for args in (["resume", run_id, "-c", "shared"], ["status", run_id, "-c", "shared"]):
        done = lab.cli(*args)
        assert done.returncode != 0, (args, done.stdout)
        assert "is writable by group or others" in done.stderr, (args, done.stderr)
        assert f"{project / run_id}" in done.stderr, (args, done.stderr)
    assert not canary.exists()
    assert tree(bench) == before


def test_a_symlinked_marker_in_the_victims_folder_is_not_written_through(
    lab: Lab, project: Path
) -> None:
    """cancel never follows a marker symlink, even one the victim owns: refused, target intact."""
    lab.profile("shared", workdir=str(project))
    run_id = f"rc-nb-{secrets.token_hex(4)}"
    config = lab.config({"benchmarks": {"a": {"command": "sleep 60"}}})
    lab.track("shared", run_id, ["a"])
    assert lab.cli("submit", str(config), "--cluster", "shared", "--run-id", run_id).returncode == 0
    target = Path(pwd.getpwnam(lab.dev.test_user).pw_dir) / f"precious-{run_id}"
    target.write_text("the victim's data\n")
    marker = project / run_id / "shared" / "a" / ".remote_chain_cancelled"
    marker.symlink_to(target)
    os.lchown(marker, lab.dev.test_uid, lab.dev.test_uid)
    done = lab.cli("cancel", run_id, "-c", "shared")
    assert done.returncode != 0, done.stdout
    assert f"{marker} is a symlink" in done.stderr, done.stderr
    assert target.read_text() == "the victim's data\n"
    target.unlink()


def test_no_bundle_in_any_command_line_during_submits(lab: Lab, project: Path) -> None:
    """A sampler of /proc/*/cmdline sees the fixed bootstrap, never the bundle."""
    token = f"BUNDLE-{secrets.token_hex(8)}"
    (lab.root / "upload.txt").write_text(f"{token}\n" * 2000)
    lab.profile("shared", workdir=str(project))
    config = lab.config(
        {
            "upload": ["upload.txt"],
            "env": {"NB_TOKEN": token},
            "benchmarks": {"a": {"command": "true"}, "b": {"command": "true"}},
        }
    )
    seen: list[str] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    seen.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
                except OSError:
                    continue

    run_ids = [f"rc-nb-{secrets.token_hex(4)}" for _ in range(3)]
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        for run_id in run_ids:
            lab.track("shared", run_id, ["a", "b"])
            done = lab.cli("submit", str(config), "--cluster", "shared", "--run-id", run_id)
            assert done.returncode == 0, done.stderr
    finally:
        stop.set()
        sampler.join(10)
    # The asyncssh transport's fixed command (markers.EXEC_COMMAND), as /proc shows it.
    bootstrap = 'bash -l -c eval "${LC_REMOTE_CHAIN:-$(echo __REMOTE_CHAIN_STDIN__ >&2; cat)}"'
    assert any(bootstrap in line for line in seen), "the sampler never saw a submit"
    # Nothing of the bundle (an uploaded file, an env value, the script itself), plain or
    # base64-encoded: the old path ran `echo <base64 script> | base64 -d | bash -l -s`. Paths
    # and job names in sbatch/squeue argv are not the bundle (squeue shows names to all).
    # Other users' processes share the node, so the script is recognised by our run ids.
    leaked = [line[:200] for line in set(seen) if token in _decoded(line)]
    scripts = [
        line[:200]
        for line in set(seen)
        for text in _decoded(line).split("\n")[1:]
        if "__REMOTE_CHAIN_BEGIN_" in text and any(run_id in text for run_id in run_ids)
    ]
    assert not leaked
    assert not scripts


def _decoded(line: str) -> str:
    """The command line with each long base64 word decoded next to it."""
    words = [w for w in line.split() if len(w) > 64 and re.fullmatch(r"[A-Za-z0-9+/=]+", w)]
    decoded = [base64.b64decode(w + "=" * (-len(w) % 4)).decode("utf-8", "replace") for w in words]
    return "\n".join([line, *(d.replace("\n", " ") for d in decoded)])


# --- login shells that flood or lie ------------------------------------------------------------


@pytest.fixture
def login(lab: Lab, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A private sshd whose login shell reaches the dev cluster's Slurm: (home, profile file)."""
    (tmp_path / "sshd").mkdir()
    with running_sshd(tmp_path / "sshd") as server:
        slurm_conf = lab.dev.slurm_conf["local"]
        (server.home / ".bash_profile").write_text(f"export SLURM_CONF={slurm_conf}\n")
        workdir = tmp_path / "work"
        workdir.mkdir(mode=0o700)
        profile = lab.clusters / "private.toml"
        profile.write_text(
            "\n".join(
                [
                    f"host = {json.dumps(SSHD_HOST)}",
                    f"port = {server.port}",
                    f"user = {json.dumps(server.user)}",
                    f"identity_file = {json.dumps(str(server.client_key))}",
                    f"known_hosts = {json.dumps(str(server.known_hosts))}",
                    f"workdir = {json.dumps(str(workdir))}",
                    "[slurm]",
                    'partition = "debug"',
                    'time = "00:05:00"',
                ]
            )
            + "\n"
        )
        yield server.home, profile


def test_a_lying_sbatch_function_is_not_believed(lab: Lab, login: tuple[Path, Path]) -> None:
    """`sbatch(){ echo 31337; }` in the login files: the real sbatch runs, its id is confirmed."""
    home, _ = login
    with (home / ".bash_profile").open("a") as handle:
        handle.write("sbatch() { echo 31337; }\nsqueue() { echo '31337|x'; }\n")
    run_id = f"rc-nb-{secrets.token_hex(4)}"
    lab.cluster_of["private"] = "local"
    lab.track("private", run_id, ["a"])
    config = lab.config({"benchmarks": {"a": {"command": "true"}}})
    done = lab.cli("submit", str(config), "-c", "private", "--run-id", run_id, "--json")
    assert done.returncode == 0, done.stderr
    assert "31337" not in done.stdout
    job_ids = [s["job_id"] for s in json.loads(done.stdout)["submissions"] if s["job_id"]]
    assert job_ids, done.stdout
    names: list[str] = []
    for _ in range(60):  # accounting may lag the submit by a few seconds
        names = slurm(
            "local",
            "sacct",
            "-X",
            "-n",
            "-P",
            "-S",
            "now-1hours",
            "-j",
            job_ids[0],
            "-o",
            "JobName",
        ).stdout.split()
        if f"{run_id}:a" in names:
            break
        time.sleep(0.5)
    assert f"{run_id}:a" in names  # (a recycled id of the dev cluster may show too)


@pytest.mark.parametrize(
    "noise",
    [
        "head -c 200000000 /dev/zero | tr '\\0' x\n",  # 200 MB of noise, then a working shell
        "while :; do echo endless login noise; done\n",
    ],
    ids=["200MB", "endless"],
)
def test_a_flooding_login_shell_is_cut_off(lab: Lab, login: tuple[Path, Path], noise: str) -> None:
    """Past REMOTE_CHAIN_MAX_OUTPUT_BYTES: an error naming the host, the client's memory bounded."""
    home, _ = login
    with (home / ".bash_profile").open("a") as handle:
        handle.write(noise)
    argv = lab.cli_argv("doctor", "-c", "private")
    env = lab.cli_env({"REMOTE_CHAIN_MAX_OUTPUT_BYTES": str(8 * 1024 * 1024)})
    started = time.monotonic()
    with subprocess.Popen(
        ["/usr/bin/time", "-f", "maxrss_kb=%M", *argv],
        cwd=lab.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        stdout, stderr = proc.communicate(timeout=120)
    assert time.monotonic() - started < 90
    assert proc.returncode != 0, stdout
    assert "private printed more than 8388608 bytes" in stderr + stdout, stderr[-2000:]
    rss_kb = int(stderr.rsplit("maxrss_kb=", 1)[1].split()[0])
    assert rss_kb < 200 * 1024, f"client peaked at {rss_kb} KiB"


def test_verbose_names_the_profile_and_known_hosts_files(lab: Lab) -> None:
    """-v says which profile file and which known_hosts file decided the connection (14)."""
    profile = lab.profile("named")
    done = lab.cli("-v", "--log-format", "json", "doctor", "-c", "named")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    used = [e for e in events if e.get("event") == "profile_used"]
    assert used, done.stderr
    assert used[0]["profile"] == str(profile)
    assert used[0]["known_hosts"] == str(lab.known_hosts)


def test_squeue_filters_in_the_login_files_hide_no_job(lab: Lab, login: tuple[Path, Path]) -> None:
    """`export SQUEUE_STATES=RUNNING` (and a partition, SLURM_TIME_FORMAT) in the login files:
    status still sees the pending chain, resume does not queue a second one beside it, and
    cancel still cancels it. Each of the three reads the queue with squeue, which honours those
    variables as if given on its command line (checked on 22.05)."""
    home, _ = login
    with (home / ".bash_profile").open("a") as handle:
        handle.write(
            "export SQUEUE_STATES=RUNNING SQUEUE_PARTITION=nosuch SLURM_TIME_FORMAT=relative\n"
        )
    run_id = f"rc-nb-{secrets.token_hex(4)}"
    lab.cluster_of["private"] = "local"
    (name,) = lab.track("private", run_id, ["a"])
    held = {"command": "true", "slurm": {"extra_args": ["--hold"]}}
    config = lab.config({"benchmarks": {"a": held}})
    done = lab.cli("submit", str(config), "-c", "private", "--run-id", run_id, "--json")
    assert done.returncode == 0, done.stderr
    (job_id,) = [s["job_id"] for s in json.loads(done.stdout)["submissions"]]

    status = lab.cli("status", run_id, "-c", "private", "--json")
    assert status.returncode == 0, status.stderr
    (chain,) = json.loads(status.stdout)["chains"]
    assert chain["state"] == "pending", chain
    assert [(j["job_id"], j["state"]) for j in chain["jobs"]] == [(job_id, "PENDING")]

    resumed = lab.cli("resume", run_id, "-c", "private", "--json")
    assert resumed.returncode != 0, resumed.stdout  # refused: the chain is queued
    assert list(squeue_jobs("local", [name])) == [job_id]

    cancelled = lab.cli("cancel", run_id, "-c", "private", "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    wait_until(
        lambda: True if not squeue_jobs("local", [name]) else None,
        timeout=60,
        what=f"{name} off the queue",
    )
