"""Past 8 chains, the status exec reads every chain's files with one perl
(``templates/chains.pl``), or where there is none one find and one awk
(``templates/chains.awk``), instead of bash per chain (issue 13, P7). Their records must be
rc_bench's, byte for byte: the same script runs with each reader forced (perl; find with mawk;
find with gawk) and with rc_bench, and the whole outputs must be equal. A chain the fast reader
must not read (odd bytes, a big file) goes to rc_bench in its place; a run it cannot judge
plainly goes to rc_bench whole. rc_bench's calls are logged, and the reader not tested is
taken away, so each test also proves which reader ran."""

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

from remote_chain.execs.status import Target, parse_status_output, render_status_script
from remote_chain.execs.templates import INLINE_FILE_BYTES
from remote_chain.protocol.guard import UNSAFE_EXIT
from remote_chain.protocol.layout import (
    CANCEL_MARKER,
    CHAIN_FILE,
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
THRESHOLD = "(( ${#wanted[@]} > 8 ))"
BENCH_FN = "rc_bench() {"
READERS = ("perl", "mawk", "gawk")
# How status.bash picks its reader: perl first, else find with awk (mawk where it is there).
PERL_PICK = "command -v perl >"
AWK_PICK = 'command -v "$rc_awk" >/dev/null 2>&1 && command -v find'
NO_TOOL = "command -v rc-no-such-tool >"
OTHER_USER = "rcuser"  # made by scripts/dev-cluster up, as tests/test_agent.py uses it
# squeue and sacct answer nothing: the records compared here are the chains' own.
_QUIET = "#!/bin/sh\nexit 0\n"


def _tools(tmp: Path, reader: str) -> dict[str, str]:
    """PATH with quiet squeue/sacct, and ``awk`` and ``mawk`` being the named implementation
    (mawk for the perl reader, whose fallback is not find and awk but rc_bench)."""
    awk = "mawk" if reader == "perl" else reader
    assert shutil.which("perl"), "perl is not installed (every Debian has perl-base)"
    real = shutil.which(awk)
    assert real, f"{awk} is not installed (scripts/setup installs both mawk and gawk)"
    bin_dir = tmp / f"bin-{awk}"
    bin_dir.mkdir(exist_ok=True)
    for name in ("squeue", "sacct"):
        (bin_dir / name).write_text(_QUIET)
        (bin_dir / name).chmod(0o755)
    for name in ("awk", "mawk"):  # status.bash runs mawk where it is there, else awk
        link = bin_dir / name
        if not link.exists():
            link.symlink_to(real)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LC_ALL": "C.UTF-8"}


@dataclass(frozen=True)
class _Ran:
    payload: str  # every record, up to the end marker
    refused: tuple[str, ...]  # the guard's lines on stderr
    status: str  # the script's exit status, after the end marker
    called: tuple[str, ...]  # the benchmarks rc_bench read


def _only(script: str, reader: str) -> str:
    """The script with only READER as its fast reader: the other kind's pick never holds."""
    assert script.count(PERL_PICK) == 1
    assert script.count(AWK_PICK) == 1
    if reader == "perl":
        return script.replace(AWK_PICK, NO_TOOL + "/dev/null 2>&1 && command -v find")
    return script.replace(PERL_PICK, NO_TOOL)


def _run(script: str, env: dict[str, str], log: Path, *, fast: bool) -> _Ran:
    """The script run with the reader forced."""
    assert THRESHOLD in script
    assert BENCH_FN in script
    forced = script.replace(THRESHOLD, "(( 1 ))" if fast else "(( 0 ))")
    forced = forced.replace(BENCH_FN, f'{BENCH_FN}\n  printf "%s\\0" "$1" >> {log}', 1)
    log.unlink(missing_ok=True)
    wrapped, nonce = wrap(forced)
    proc = subprocess.run(["bash", "-s"], input=wrapped.encode(), capture_output=True, env=env)
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
        tuple(log.read_text().split("\0")[:-1]) if log.exists() else (),
    )


def _both(tmp: Path, targets: list[Target], reader: str) -> tuple[_Ran, _Ran]:
    """Both readers' runs, which must send the same bytes and refuse the same paths."""
    env = _tools(tmp, reader)
    script = _only(render_status_script(targets), reader)
    log = tmp / "bench.log"
    fast = _run(script, env, log, fast=True)
    slow = _run(script, env, log, fast=False)
    assert (fast.payload, fast.refused, fast.status) == (slow.payload, slow.refused, slow.status)
    return fast, slow


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


@pytest.mark.parametrize("reader", READERS)
def test_the_fast_reader_reads_the_plain_chains_as_rc_bench_does(
    tmp_path: Path, reader: str
) -> None:
    """Plain chains are the fast reader's, odd ones rc_bench's in their place; the bytes are
    the same."""
    run_dir = tmp_path / RUN_ID / "c1"
    for name, files in {**SHAPES, **ODD}.items():
        _chain(run_dir, name, files)
    _chain(run_dir, "nojob", PLAIN, job=False)  # listed without job.sh: not a chain
    (run_dir / "files" / "sub").mkdir(parents=True)  # the uploads' folder is no chain
    fast, slow = _both(tmp_path, [Target(RUN_ID, str(run_dir))], reader)
    assert sorted(fast.called) == sorted(ODD)
    assert sorted(slow.called) == sorted([*SHAPES, *ODD])
    snap = parse_status_output(fast.payload + "DONE\n", [Target(RUN_ID, str(run_dir))])
    chains = {c.benchmark: c for c in snap.runs[0].chains}
    assert sorted(chains) == sorted([*SHAPES, *ODD])
    assert chains["full"].files["events"].content == EVENTS.decode()
    assert chains["cancelled"].cancel_marker


@pytest.mark.parametrize("reader", READERS)
def test_named_benchmarks_keep_their_order_and_the_missing_ones(
    tmp_path: Path, reader: str
) -> None:
    """Benchmarks named (``--benchmark``) come in the order asked; one that is not there is
    NOBENCH from either reader."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(12)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    asked = ("b11", "gone", *names[:10])
    fast, _ = _both(tmp_path, [Target(RUN_ID, str(run_dir), asked)], reader)
    assert fast.called == ()
    snap = parse_status_output(fast.payload + "DONE\n", [Target(RUN_ID, str(run_dir), asked)])
    assert [c.benchmark for c in snap.runs[0].chains] == [b for b in asked if b != "gone"]
    assert snap.runs[0].missing == ("gone",)


@pytest.mark.parametrize("reader", READERS)
def test_a_run_find_does_not_list_plainly_is_read_by_rc_bench_whole(
    tmp_path: Path, reader: str
) -> None:
    """A folder where a chain's file should be (which the guard lets pass: it is a folder of
    ours) is not for awk: every chain of the run goes to rc_bench."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    (run_dir / "b03" / EXIT_FILE).mkdir()
    fast, slow = _both(tmp_path, [Target(RUN_ID, str(run_dir))], reader)
    assert list(fast.called) == list(slow.called) == names


# (A newline in a folder's name stops the exec earlier, at the guard, which reads stat's lines.)
@pytest.mark.parametrize("odd_name", ["has space", "tab\there", "caf\u00e9"])
@pytest.mark.parametrize("reader", READERS)
def test_a_folder_named_outside_the_benchmark_names_sends_the_run_to_rc_bench(
    tmp_path: Path, odd_name: str, reader: str
) -> None:
    """A folder made by hand with a name no benchmark has (a space, a tab, not ASCII) is
    listed as bash lists it, and the whole run is read by rc_bench, which escapes the name as
    the wire needs."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in [*names, odd_name]:
        _chain(run_dir, name, PLAIN)
    fast, slow = _both(tmp_path, [Target(RUN_ID, str(run_dir))], reader)
    assert fast.called == slow.called
    assert sorted(fast.called) == sorted([*names, odd_name])
    snap = parse_status_output(fast.payload + "DONE\n", [Target(RUN_ID, str(run_dir))])
    assert odd_name in {c.benchmark for c in snap.runs[0].chains}


def _others(path: Path) -> None:
    """The path owned by the dev cluster's other user (the tests run as root)."""
    os.chown(path, pwd.getpwnam(OTHER_USER).pw_uid, -1, follow_symlinks=False)


def _relink(path: Path) -> None:
    path.unlink()
    path.symlink_to("/etc/passwd")


# What the guard refuses (guard.bash), each made in one chain of a run of 10; the refusal must
# name the path, whichever reader runs, and nothing of the run may be sent.
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
@pytest.mark.parametrize("reader", READERS)
def test_the_guard_refuses_the_same_paths_before_either_reader_reads(
    tmp_path: Path, case: str, named: bool, reader: str
) -> None:
    """Each path the guard checks, made unsafe: the exec stops before any record of a chain,
    naming that path, with the fast reader as with rc_guard_bench, whether the benchmarks
    were named or the run folder's are read."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in names:
        _chain(run_dir, name, {**PLAIN, CHAIN_FILE: b"101\n", RETRIES_FILE: b"0\n"})
    path, make = GUARDED[case]
    make(run_dir)
    asked = (*(["elsewhere"] if path == "elsewhere" else []), *names) if named else ()
    fast, slow = _both(tmp_path, [Target(RUN_ID, str(run_dir), asked)], reader)
    assert fast.called == slow.called == ()
    assert "BENCH" not in fast.payload
    assert fast.status == str(UNSAFE_EXIT), fast
    (line,) = fast.refused
    assert f"{run_dir}/{path} " in line, line


@pytest.mark.parametrize("reader", READERS)
def test_the_run_folders_other_entries_are_no_chains_for_either_reader(
    tmp_path: Path, reader: str
) -> None:
    """The run folder's own files, a hidden folder, a folder without a job script, the
    uploads' folder: no chain, from the names (chains.awk) as from the folders' glob; a file
    others may write there (which only a stat tells from a folder) is no chain either: the
    folders' glob says which are, and chains.awk reads them as named."""
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
    fast, _ = _both(tmp_path, [Target(RUN_ID, str(run_dir))], reader)
    assert fast.refused == ()
    assert fast.called == ()  # chains.awk read them all
    snap = parse_status_output(fast.payload + "DONE\n", [Target(RUN_ID, str(run_dir))])
    assert [c.benchmark for c in snap.runs[0].chains] == names


@pytest.mark.parametrize("reader", READERS)
def test_what_the_guard_does_not_check_does_not_stop_the_fast_reader(
    tmp_path: Path, reader: str
) -> None:
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
    fast, _ = _both(tmp_path, [Target(RUN_ID, str(run_dir))], reader)
    assert fast.called == ()
    assert fast.refused == ()
    assert fast.payload.count("BENCH\t") == len(names)


@pytest.mark.parametrize("reader", READERS)
def test_an_odd_file_the_guard_does_not_check_sends_the_run_to_rc_bench(
    tmp_path: Path, reader: str
) -> None:
    """The exit file (read, not guarded) as a symlink: not awk's to judge; rc_bench reads it
    through the link, as it always did."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    (tmp_path / "exit").write_text("0\n")
    (run_dir / "b04" / EXIT_FILE).symlink_to(tmp_path / "exit")
    fast, slow = _both(tmp_path, [Target(RUN_ID, str(run_dir))], reader)
    assert list(fast.called) == list(slow.called) == names
    assert "exit\tok\t0\\n" in fast.payload


_CONTENT = st.binary(max_size=40) | st.lists(
    st.sampled_from([b"101", b"102_3", b"7+0", b" ", b"\n", b"\t", b"\\", b"successor", b"x"]),
    max_size=12,
).map(b"".join)


@pytest.mark.parametrize("reader", READERS)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    contents=st.lists(
        st.dictionaries(
            st.sampled_from(
                [CHAIN_FILE, EVENTS_FILE, FIRST_JOB_FILE, WALLTIME_FILE, CANCEL_MARKER]
            ),
            _CONTENT,
            max_size=4,
        ),
        min_size=9,
        max_size=12,
    )
)
def test_any_files_give_the_same_bytes_from_either_reader(
    tmp_path_factory: pytest.TempPathFactory, contents: list[dict[str, bytes]], reader: str
) -> None:
    """Whatever the chains' files hold, both readers send the same records."""
    tmp = tmp_path_factory.mktemp("any")
    run_dir = tmp / RUN_ID / "c1"
    for i, files in enumerate(contents):
        _chain(run_dir, f"c{i:02d}", files)
    _both(tmp, [Target(RUN_ID, str(run_dir))], reader)


@pytest.mark.parametrize("reader", READERS)
def test_a_runners_own_files_are_never_stat_ed(tmp_path: Path, reader: str) -> None:
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
    env = _tools(tmp_path, reader)
    script = _only(render_status_script([Target(RUN_ID, str(run_dir))]), reader)
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


def test_the_perl_reader_is_clean_under_strict_and_warnings(tmp_path: Path) -> None:
    """The program runs without ``use strict`` and ``warnings`` (each costs a start a module
    load) and with its stderr dropped: run here with both, over every shape and odd file, it
    must say nothing on stderr (an undeclared name, a use of undef) and read every chain."""
    run_dir = tmp_path / RUN_ID / "c1"
    for name, files in {**SHAPES, **ODD}.items():
        _chain(run_dir, name, files)
    script = render_status_script([Target(RUN_ID, str(run_dir))])
    head = "command perl -C0 -e '"
    start = script.index(head) + len(head)
    program = script[start : script.index("'", start)]
    names = sorted([*SHAPES, *ODD, "gone"])
    proc = subprocess.run(
        ["perl", "-Mstrict", "-Mwarnings", "-e", program],
        input=b"".join(f"W\t{n}\0".encode() for n in names) + b"END\0",
        capture_output=True,
        env={**os.environ, "RC_AWK_RUN": "0", "RC_AWK_RUN_ID": RUN_ID, "RC_AWK_DIR": str(run_dir)},
        check=True,
    )
    assert proc.stderr == b""
    lines = proc.stdout.decode().splitlines()
    assert lines[0].startswith(f"OK {len(names)} "), lines[:3]
    assert sorted(line.split("\t")[1] for line in lines if line.startswith("DEFER\t")) == sorted(
        ODD
    )
    assert "NOBENCH\t0\tgone" in lines


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root (CI runs as root)")
@pytest.mark.parametrize("reader", READERS)
def test_no_chain_file_is_opened_before_every_guarded_path_passed(
    tmp_path: Path, reader: str
) -> None:
    """The guard judges every chain asked before the reader opens any file of the run: with
    the last chain's state file another user's, no chain's file is opened at all (strace)."""
    assert shutil.which("strace"), "strace is not installed (scripts/setup installs it)"
    run_dir = tmp_path / RUN_ID / "c1"
    for i in range(10):
        _chain(run_dir, f"b{i:02d}", {**PLAIN, CHAIN_FILE: b"101\n"})
    _others(run_dir / "b09" / CHAIN_FILE)
    env = _tools(tmp_path, reader)
    script = _only(render_status_script([Target(RUN_ID, str(run_dir))]), reader)
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


_INSANE = ["", "OK 9", "FEED 10 10 10 99 1\nN rc-x:b00", "FEED 10 1 x 0 1", "garbage\n"]


@pytest.mark.parametrize(
    ("answer", "named"),
    [*((a, False) for a in _INSANE), *((a, True) for a in _INSANE), ("FEED 3 0 0 0 1", True)],
    ids=repr,
)
def test_a_perl_that_answers_nothing_sane_leaves_the_run_to_rc_bench(
    tmp_path: Path, answer: str, named: bool
) -> None:
    """A login node's perl that dies, prints nothing, or prints what chains.pl never would
    (a short count, FEED with its bytes missing or a count not a number, fewer records than
    the chains asked by name): the run is read the careful way, the same bytes as
    rc_bench's, every chain by rc_bench; the run's chains asked for by name or not."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    env = _tools(tmp_path, "perl")
    fake = Path(env["PATH"].split(":")[0]) / "perl"
    fake.write_text(f"#!/bin/sh\nprintf '%s' '{answer}'\nexit 1\n")
    fake.chmod(0o755)
    target = Target(RUN_ID, str(run_dir), tuple(names) if named else ())
    script = _only(render_status_script([target]), "perl")
    log = tmp_path / "bench.log"
    fast = _run(script, env, log, fast=True)
    slow = _run(script, env, log, fast=False)
    assert (fast.payload, fast.refused, fast.status) == (slow.payload, slow.refused, slow.status)
    assert list(fast.called) == names
