"""The status exec reads every chain's files with one reader, bash (``rc_bench`` in
``templates/status.bash``), after one guard (``rc_guard_bench``, ``templates/guard.bash``) has
judged every path it trusts. Each test builds a run folder, runs the rendered exec with local
bash and quiet stub Slurm commands on PATH, and reads its answer as the client does."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remote_chain.core.snapshot import Snapshot, Target
from remote_chain.execs.status import parse_status_output, render_status_script
from remote_chain.execs.templates import INLINE_FILE_BYTES
from remote_chain.protocol.guard import UNSAFE_EXIT
from remote_chain.protocol.layout import (
    CANCEL_MARKER,
    CHAIN_FILE,
    CHAIN_FILES,
    EVENTS_FILE,
    EXIT_FILE,
    FIRST_JOB_FILE,
    JOB_SCRIPT,
    LEASE_FILE,
    RETRIES_FILE,
    WALLTIME_FILE,
)
from remote_chain.protocol.markers import wrap

RUN_ID = "rc-20261201T000000Z-abcdef"
OTHER_USER = "rcuser"  # made by scripts/dev-cluster up, as tests/test_agent.py uses it
# squeue and sacct answer nothing: the records read here are the chains' own.
_QUIET = "#!/bin/sh\nexit 0\n"
KIND_OF = {name: kind for kind, name in CHAIN_FILES.items()}


def _tools(tmp: Path) -> dict[str, str]:
    """PATH with quiet squeue and sacct first."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("squeue", "sacct"):
        (bin_dir / name).write_text(_QUIET)
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LC_ALL": "C.UTF-8"}


@dataclass(frozen=True)
class _Ran:
    payload: str  # every record, up to the end marker
    refused: tuple[str, ...]  # the guard's lines on stderr
    status: str  # the script's exit status, after the end marker


def _run(tmp: Path, targets: list[Target]) -> _Ran:
    """The status exec of ``targets`` run by local bash."""
    wrapped, nonce = wrap(render_status_script(targets))
    proc = subprocess.run(
        ["bash", "-s"], input=wrapped.encode(), capture_output=True, env=_tools(tmp), timeout=120
    )
    text = proc.stdout.decode("utf-8", "surrogateescape")
    begin, end = f"__REMOTE_CHAIN_BEGIN_{nonce}\n", f"\n__REMOTE_CHAIN_END_{nonce}"
    assert begin in text, proc.stderr
    refused = tuple(
        line for line in proc.stderr.decode().splitlines() if "remote-chain refused" in line
    )
    return _Ran(
        text[text.index(begin) + len(begin) : text.index(end)],
        refused,
        text[text.index(end) + len(end) :].strip(),
    )


def _as_read(content: bytes) -> str:
    """A file's text as the client reads it: bash holds no NUL byte, and the client decodes
    UTF-8, replacing what is not."""
    return content.replace(b"\0", b"").decode("utf-8", "replace")


def _snapshot(ran: _Ran, targets: list[Target]) -> Snapshot:
    assert ran.status == "0", ran
    return parse_status_output(ran.payload, targets)


def _chain(run_dir: Path, name: str, files: dict[str, bytes], *, job: bool = True) -> None:
    bench = run_dir / name
    bench.mkdir(parents=True)
    (bench / "logs").mkdir()
    (bench / "artifacts").mkdir()
    if job:
        (bench / JOB_SCRIPT).write_bytes(b"#!/bin/bash\n")
    for file, content in files.items():
        (bench / file).write_bytes(content)


PLAIN = {FIRST_JOB_FILE: b"101\n"}
EVENTS = (
    b"1764000000 101 decided resume\n"
    b"1764000001 101 successor 102\n"
    b"1764000002 101 successor_failed sbatch: error: nope\n"
    b"1764000003 102 successor 103_4\n"
    b"1764000004 102 successor\n"
    b"1764000005 102 successor 104"  # no newline: a line still being written
)
SHAPES: dict[str, dict[str, bytes]] = {
    "plain": PLAIN,
    "full": {
        CHAIN_FILE: b"101\n102\n103_4\n104+0\n",
        WALLTIME_FILE: b"3600\n",
        RETRIES_FILE: b"1\n",
        EVENTS_FILE: EVENTS,
        FIRST_JOB_FILE: b"101\n",
        EXIT_FILE: b"0\n",
    },
    "unfinished": {CHAIN_FILE: b"101\n102", FIRST_JOB_FILE: b"101"},
    "empty": {CHAIN_FILE: b"", WALLTIME_FILE: b"", FIRST_JOB_FILE: b"\n"},
    "cancelled": {**PLAIN, CANCEL_MARKER: b""},
    "garbage": {CHAIN_FILE: b"not a job\n 12 \n\n77\n", RETRIES_FILE: b"x y z\n"},
    "exactly_inline": {EVENTS_FILE: b"e" * (INLINE_FILE_BYTES - 1) + b"\n"},
}
# Each must go to rc_bench: rc_emit's escapes and base64, or its FILE record.
ODD: dict[str, dict[str, bytes]] = {
    "tab": {EVENTS_FILE: b"1 101 successor\t102\n"},
    "backslash": {EVENTS_FILE: b"1 101 note C:\\path\n"},
    "utf8": {EVENTS_FILE: "1 101 note caf\u00e9\n".encode()},
    "cr": {CHAIN_FILE: b"101\r\n"},
    "nul": {CHAIN_FILE: b"101\x00\n"},
    "big": {EVENTS_FILE: b"1 101 successor 102\n" * (INLINE_FILE_BYTES // 10)},
}


def test_every_chain_is_read_with_each_of_its_files(tmp_path: Path) -> None:
    """Every shape of a chain's files, and files that need escaping, base64 or their own FILE
    record (a tab, a backslash, non-ASCII, a carriage return, a NUL, one above the inline
    limit), reach the client as written; a folder without a job script and the uploads'
    folder are no chains."""
    run_dir = tmp_path / RUN_ID / "c1"
    chains = {**SHAPES, **ODD}
    for name, files in chains.items():
        _chain(run_dir, name, files)
    _chain(run_dir, "nojob", PLAIN, job=False)
    (run_dir / "files" / "sub").mkdir(parents=True)
    targets = [Target(RUN_ID, str(run_dir))]
    ran = _run(tmp_path, targets)
    assert "\nFILE\t" in f"\n{ran.payload}"  # the big file, in its own record
    read = {c.benchmark: c for c in _snapshot(ran, targets).runs[0].chains}
    assert sorted(read) == sorted(chains)
    for name, files in chains.items():
        assert read[name].cancel_marker == (CANCEL_MARKER in files)
        for file, content in files.items():
            if file in KIND_OF:
                got = read[name].file(KIND_OF[file])
                assert got.status == "ok", (name, file)
                assert got.content == _as_read(content), (name, file)


def test_named_benchmarks_keep_their_order_and_the_missing_ones(tmp_path: Path) -> None:
    """Benchmarks named (``--benchmark``) come in the order asked; one that is not there is
    NOBENCH."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(12)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    asked = ("b11", "gone", *names[:10])
    targets = [Target(RUN_ID, str(run_dir), asked)]
    snap = _snapshot(_run(tmp_path, targets), targets)
    assert [c.benchmark for c in snap.runs[0].chains] == [b for b in asked if b != "gone"]
    assert snap.runs[0].missing == ("gone",)


def test_an_unreadable_chain_folder_is_named_unreadable(tmp_path: Path) -> None:
    """A chain folder we may not list or enter is sent as UNREADABLE, and the others are read."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    (run_dir / "b04").chmod(0o000)
    targets = [Target(RUN_ID, str(run_dir))]
    try:
        snap = _snapshot(_run(tmp_path, targets), targets)
    finally:
        (run_dir / "b04").chmod(0o755)
    if os.getuid() == 0:  # root reads it all the same
        assert len(snap.runs[0].chains) == 10
        return
    assert snap.runs[0].unreadable == ("b04",)
    assert [c.benchmark for c in snap.runs[0].chains] == [n for n in names if n != "b04"]


def test_a_folder_where_a_chains_file_should_be_reads_as_an_empty_file(tmp_path: Path) -> None:
    """A folder named as a chain's file (which the guard lets pass: it is a folder of ours)
    stops no chain: the run is read, and that file reads as empty."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    (run_dir / "b03" / EXIT_FILE).mkdir()
    targets = [Target(RUN_ID, str(run_dir))]
    chains = {c.benchmark: c for c in _snapshot(_run(tmp_path, targets), targets).runs[0].chains}
    assert sorted(chains) == names
    assert chains["b03"].file("exit").content == ""


# (A newline in a folder's name stops the exec earlier, at the guard, which reads stat's lines.)
@pytest.mark.parametrize("odd_name", ["has space", "tab\there", "caf\u00e9"])
def test_a_folder_named_outside_the_benchmark_names_is_read_and_escaped(
    tmp_path: Path, odd_name: str
) -> None:
    """A folder made by hand with a name no benchmark has (a space, a tab, not ASCII) is a
    chain like the others, its name escaped as the wire needs."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in [*names, odd_name]:
        _chain(run_dir, name, PLAIN)
    targets = [Target(RUN_ID, str(run_dir))]
    snap = _snapshot(_run(tmp_path, targets), targets)
    assert {c.benchmark for c in snap.runs[0].chains} == {*names, odd_name}


def _others(path: Path) -> None:
    """The path owned by the dev cluster's other user (the tests run as root)."""
    os.chown(path, pwd.getpwnam(OTHER_USER).pw_uid, -1, follow_symlinks=False)


def _relink(path: Path) -> None:
    path.unlink()
    path.symlink_to("/etc/passwd")


# What the guard refuses (guard.bash), each made in one chain of a run of 10; the refusal must
# name the path, and nothing of the run may be sent.
GUARDED: dict[str, tuple[str, Callable[[Path], object]]] = {
    "a symlinked benchmark folder": (
        "elsewhere",
        lambda d: (d / "elsewhere").symlink_to(d / "b04"),
    ),
    "a benchmark folder others may write": ("b05", lambda d: (d / "b05").chmod(0o777)),
    "a benchmark folder of another user": ("b06", lambda d: _others(d / "b06")),
    "a state file of another user": (
        "b07/" + CHAIN_FILE,
        lambda d: _others(d / "b07" / CHAIN_FILE),
    ),
    "a symlinked state file": ("b08/" + RETRIES_FILE, lambda d: _relink(d / "b08" / RETRIES_FILE)),
    "a job script others may write": (
        "b02/" + JOB_SCRIPT,
        lambda d: (d / "b02" / JOB_SCRIPT).chmod(0o666),
    ),
    "a fifo for a lease": ("b03/" + LEASE_FILE, lambda d: os.mkfifo(d / "b03" / LEASE_FILE)),
}


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root (CI runs as root)")
@pytest.mark.parametrize("case", sorted(GUARDED))
@pytest.mark.parametrize("named", [False, True], ids=["every-chain", "named"])
def test_the_guard_refuses_each_unsafe_path_before_any_chain_is_read(
    tmp_path: Path, case: str, named: bool
) -> None:
    """Each path the guard checks, made unsafe: the exec stops before any record of a chain,
    naming that path, whether the benchmarks were named or the run folder's are read."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in names:
        _chain(run_dir, name, {**PLAIN, CHAIN_FILE: b"101\n", RETRIES_FILE: b"0\n"})
    path, make = GUARDED[case]
    make(run_dir)
    asked = (*(["elsewhere"] if path == "elsewhere" else []), *names) if named else ()
    ran = _run(tmp_path, [Target(RUN_ID, str(run_dir), asked)])
    assert "BENCH" not in ran.payload
    assert ran.status == str(UNSAFE_EXIT), ran
    (line,) = ran.refused
    assert f"{run_dir}/{path} " in line, line


def test_the_run_folders_other_entries_are_no_chains(tmp_path: Path) -> None:
    """The run folder's own files, a hidden folder, a folder without a job script, the
    uploads' folder: no chain; a file others may write there is no chain either, and is not
    the guard's."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    _chain(run_dir, ".hidden", PLAIN)
    _chain(run_dir, "nojob", PLAIN, job=False)
    (run_dir / "files").mkdir()
    (run_dir / "files" / JOB_SCRIPT).write_text("#!/bin/bash\n")
    (run_dir / "notes.txt").write_text("mine\n")
    (run_dir / "shared.txt").write_text("ours\n")
    (run_dir / "shared.txt").chmod(0o666)
    targets = [Target(RUN_ID, str(run_dir))]
    ran = _run(tmp_path, targets)
    assert ran.refused == ()
    assert [c.benchmark for c in _snapshot(ran, targets).runs[0].chains] == names


def test_what_the_guard_does_not_check_does_not_stop_the_reader(tmp_path: Path) -> None:
    """A folder that is no chain (no job script) others may write, and the runner's own
    group-writable files in a chain, are not the guard's: the run is read as usual."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    (run_dir / "scratch").mkdir(mode=0o777)
    (run_dir / "scratch").chmod(0o777)
    (run_dir / "b01" / "output.txt").write_text("x")
    (run_dir / "b01" / "output.txt").chmod(0o666)
    (run_dir / "b01" / "artifacts").chmod(0o777)
    ran = _run(tmp_path, [Target(RUN_ID, str(run_dir))])
    assert ran.refused == ()
    assert ran.payload.count("BENCH\t") == len(names)


def test_an_exit_file_that_is_a_symlink_is_read_through_it(tmp_path: Path) -> None:
    """The exit file (read, not guarded) as a symlink is read through the link."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    (tmp_path / "exit").write_text("0\n")
    (run_dir / "b04" / EXIT_FILE).symlink_to(tmp_path / "exit")
    ran = _run(tmp_path, [Target(RUN_ID, str(run_dir))])
    assert "exit\tok\t0\\n" in ran.payload


_CONTENT = st.binary(max_size=40) | st.lists(
    st.sampled_from([b"101", b"102_3", b"7+0", b" ", b"\n", b"\t", b"\\", b"successor", b"x"]),
    max_size=12,
).map(b"".join)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    contents=st.lists(
        st.dictionaries(
            st.sampled_from([CHAIN_FILE, EVENTS_FILE, FIRST_JOB_FILE, WALLTIME_FILE]),
            _CONTENT,
            max_size=4,
        ),
        min_size=9,
        max_size=12,
    )
)
def test_any_files_reach_the_client_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory, contents: list[dict[str, bytes]]
) -> None:
    """Whatever the chains' files hold, the client reads each file as written."""
    tmp = tmp_path_factory.mktemp("any")
    run_dir = tmp / RUN_ID / "c1"
    for i, files in enumerate(contents):
        _chain(run_dir, f"c{i:02d}", files)
    targets = [Target(RUN_ID, str(run_dir))]
    read = {c.benchmark: c for c in _snapshot(_run(tmp, targets), targets).runs[0].chains}
    for i, files in enumerate(contents):
        chain = read[f"c{i:02d}"]
        assert set(chain.files) == {KIND_OF[f] for f in files}
        for file, content in files.items():
            assert chain.file(KIND_OF[file]).content == _as_read(content)


def test_a_runners_own_files_are_never_stat_ed(tmp_path: Path) -> None:
    """A runner may keep thousands of files in its working folder (the benchmark folder);
    the reader's listing names them (readdir) but stats only the files it trusts or reads:
    on Lustre or GPFS each stat is a metadata server's round trip, every poll. Counted with
    strace: far fewer stat calls than the runners' files."""
    assert shutil.which("strace"), "strace is not installed (scripts/setup installs it)"
    run_dir = tmp_path / RUN_ID / "c1"
    runner_files = 0
    for i in range(10):
        _chain(run_dir, f"b{i:02d}", PLAIN)
        for j in range(300):
            (run_dir / f"b{i:02d}" / f"shard{j:04d}.bin").write_bytes(b"x")
            runner_files += 1
    env = _tools(tmp_path)
    script = render_status_script([Target(RUN_ID, str(run_dir))])
    wrapped, _ = wrap(script)
    counts = tmp_path / "syscalls"
    proc = subprocess.run(
        ["strace", "-f", "-c", "-o", str(counts), "-e", "trace=/stat", "bash", "-s"],
        input=wrapped.encode(),
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert proc.stdout.decode().count("BENCH\t") == 10, proc.stderr[-2000:]
    # "% time  seconds  usecs/call  calls  [errors]  total": the calls of every stat kind.
    total = counts.read_text().splitlines()[-1].split()
    assert total[-1] == "total", counts.read_text()
    assert int(total[3]) < runner_files // 4, counts.read_text()


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root (CI runs as root)")
def test_no_chain_file_is_opened_before_every_guarded_path_passed(tmp_path: Path) -> None:
    """The guard judges every chain asked before rc_bench opens any file of the run: with
    the last chain's state file another user's, no chain's file is opened at all (strace)."""
    assert shutil.which("strace"), "strace is not installed (scripts/setup installs it)"
    run_dir = tmp_path / RUN_ID / "c1"
    for i in range(10):
        _chain(run_dir, f"b{i:02d}", {**PLAIN, CHAIN_FILE: b"101\n"})
    _others(run_dir / "b09" / CHAIN_FILE)
    env = _tools(tmp_path)
    script = render_status_script([Target(RUN_ID, str(run_dir))])
    wrapped, _ = wrap(script)
    trace = tmp_path / "opens"
    proc = subprocess.run(
        ["strace", "-f", "-o", str(trace), "-e", "trace=open,openat", "bash", "-s"],
        input=wrapped.encode(),
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert f"{run_dir}/b09/{CHAIN_FILE} is owned by" in proc.stderr.decode()
    opened = [line for line in trace.read_text().splitlines() if FIRST_JOB_FILE in line]
    assert opened == []
