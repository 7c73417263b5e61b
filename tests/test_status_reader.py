"""Past 8 chains, the status exec reads every chain's files with one find and one awk
(``templates/chains.awk``) instead of bash per chain (issue 13, P7). Its records must be
rc_bench's, byte for byte: the same script runs with each reader forced, under mawk and gawk,
and the whole outputs must be equal. A chain awk must not read (odd bytes, a big file) goes
to rc_bench in its place; a run find does not list as plain folders and files goes to
rc_bench whole. rc_bench's calls are logged, so each test also proves which reader ran."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remote_chain.layout import (
    CANCEL_MARKER,
    CHAIN_FILE,
    EVENTS_FILE,
    EXIT_FILE,
    FIRST_JOB_FILE,
    JOB_SCRIPT,
    RETRIES_FILE,
    WALLTIME_FILE,
)
from remote_chain.remote.markers import wrap
from remote_chain.snapshot import (
    INLINE_FILE_BYTES,
    Target,
    parse_status_output,
    render_status_script,
)

RUN_ID = "rc-20261201T000000Z-abcdef"
THRESHOLD = "(( ${#wanted[@]} > 8 ))"
BENCH_FN = "rc_bench() {"
AWKS = ("mawk", "gawk")
# squeue and sacct answer nothing: the records compared here are the chains' own.
_QUIET = "#!/bin/sh\nexit 0\n"


def _tools(tmp: Path, awk: str) -> dict[str, str]:
    """PATH with quiet squeue/sacct and ``awk`` being the named implementation."""
    real = shutil.which(awk)
    assert real, f"{awk} is not installed (scripts/setup installs both mawk and gawk)"
    bin_dir = tmp / f"bin-{awk}"
    bin_dir.mkdir(exist_ok=True)
    for name in ("squeue", "sacct"):
        (bin_dir / name).write_text(_QUIET)
        (bin_dir / name).chmod(0o755)
    link = bin_dir / "awk"
    if not link.exists():
        link.symlink_to(real)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LC_ALL": "C.UTF-8"}


def _run(script: str, env: dict[str, str], log: Path, *, fast: bool) -> tuple[str, list[str]]:
    """The script's payload with the reader forced, and the benchmarks rc_bench was called for."""
    assert THRESHOLD in script
    assert BENCH_FN in script
    forced = script.replace(THRESHOLD, "(( 1 ))" if fast else "(( 0 ))")
    forced = forced.replace(BENCH_FN, f'{BENCH_FN}\n  printf "%s\\0" "$1" >> {log}', 1)
    log.unlink(missing_ok=True)
    wrapped, nonce = wrap(forced)
    proc = subprocess.run(["bash", "-s"], input=wrapped.encode(), capture_output=True, env=env)
    text = proc.stdout.decode("utf-8", "surrogateescape")
    begin = f"__REMOTE_CHAIN_BEGIN_{nonce}\n"
    assert begin in text, proc.stderr
    payload = text[text.index(begin) + len(begin) : text.index(f"\n__REMOTE_CHAIN_END_{nonce}")]
    called = log.read_text().split("\0")[:-1] if log.exists() else []
    return payload, called


def _both(tmp: Path, targets: list[Target], awk: str) -> tuple[str, list[str], list[str]]:
    """Both readers' payloads must be equal: the payload, and who rc_bench read in each."""
    env = _tools(tmp, awk)
    script = render_status_script(targets)
    log = tmp / "bench.log"
    fast, fast_called = _run(script, env, log, fast=True)
    slow, slow_called = _run(script, env, log, fast=False)
    assert fast == slow
    return fast, fast_called, slow_called


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


@pytest.mark.parametrize("awk", AWKS)
def test_awk_reads_the_plain_chains_as_rc_bench_does(tmp_path: Path, awk: str) -> None:
    """Plain chains are awk's, odd ones rc_bench's in their place; the bytes are the same."""
    run_dir = tmp_path / RUN_ID / "c1"
    for name, files in {**SHAPES, **ODD}.items():
        _chain(run_dir, name, files)
    _chain(run_dir, "nojob", PLAIN, job=False)  # listed without job.sh: not a chain
    (run_dir / "files" / "sub").mkdir(parents=True)  # the uploads' folder is no chain
    payload, fast_called, slow_called = _both(tmp_path, [Target(RUN_ID, str(run_dir))], awk)
    assert sorted(fast_called) == sorted(ODD)
    assert sorted(slow_called) == sorted([*SHAPES, *ODD])
    snap = parse_status_output(payload + "DONE\n", [Target(RUN_ID, str(run_dir))])
    chains = {c.benchmark: c for c in snap.runs[0].chains}
    assert sorted(chains) == sorted([*SHAPES, *ODD])
    assert chains["full"].files["events"].content == EVENTS.decode()
    assert chains["cancelled"].cancel_marker


@pytest.mark.parametrize("awk", AWKS)
def test_named_benchmarks_keep_their_order_and_the_missing_ones(tmp_path: Path, awk: str) -> None:
    """Benchmarks named (``--benchmark``) come in the order asked; one that is not there is
    NOBENCH from either reader."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(12)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    asked = ("b11", "gone", *names[:10])
    payload, fast_called, _ = _both(tmp_path, [Target(RUN_ID, str(run_dir), asked)], awk)
    assert fast_called == []
    snap = parse_status_output(payload + "DONE\n", [Target(RUN_ID, str(run_dir), asked)])
    assert [c.benchmark for c in snap.runs[0].chains] == [b for b in asked if b != "gone"]
    assert snap.runs[0].missing == ("gone",)


def test_a_run_find_does_not_list_plainly_is_read_by_rc_bench_whole(tmp_path: Path) -> None:
    """A folder where a chain's file should be (which the guard lets pass: it is a folder of
    ours) is not for awk: every chain of the run goes to rc_bench."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    (run_dir / "b03" / EXIT_FILE).mkdir()
    _, fast_called, slow_called = _both(tmp_path, [Target(RUN_ID, str(run_dir))], "mawk")
    assert fast_called == slow_called == names


# (A newline in a folder's name stops the exec earlier, at the guard, which reads stat's lines.)
@pytest.mark.parametrize("odd_name", ["has space", "tab\there", "caf\u00e9"])
def test_a_folder_named_outside_the_benchmark_names_sends_the_run_to_rc_bench(
    tmp_path: Path, odd_name: str
) -> None:
    """A folder made by hand with a name no benchmark has (a space, a tab, not ASCII) is
    listed as bash lists it, and the whole run is read by rc_bench, which escapes the name as
    the wire needs."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in [*names, odd_name]:
        _chain(run_dir, name, PLAIN)
    payload, fast_called, slow_called = _both(tmp_path, [Target(RUN_ID, str(run_dir))], "gawk")
    assert fast_called == slow_called
    assert sorted(fast_called) == sorted([*names, odd_name])
    snap = parse_status_output(payload + "DONE\n", [Target(RUN_ID, str(run_dir))])
    assert odd_name in {c.benchmark for c in snap.runs[0].chains}


def test_a_symlinked_benchmark_is_refused_before_either_reader(tmp_path: Path) -> None:
    """A benchmark folder that is a symlink stops the exec at the guard, before any file of
    the run is read, whichever reader would follow."""
    run_dir = tmp_path / RUN_ID / "c1"
    names = [f"b{i:02d}" for i in range(10)]
    for name in names:
        _chain(run_dir, name, PLAIN)
    (run_dir / "elsewhere").symlink_to(run_dir / "b04")
    asked = ("elsewhere", *names)
    payload, fast_called, slow_called = _both(
        tmp_path, [Target(RUN_ID, str(run_dir), asked)], "mawk"
    )
    assert fast_called == slow_called == []
    assert "BENCH" not in payload


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
    tmp_path_factory: pytest.TempPathFactory, contents: list[dict[str, bytes]]
) -> None:
    """Whatever the chains' files hold, both readers send the same records."""
    tmp = tmp_path_factory.mktemp("any")
    run_dir = tmp / RUN_ID / "c1"
    for i, files in enumerate(contents):
        _chain(run_dir, f"c{i:02d}", files)
    _both(tmp, [Target(RUN_ID, str(run_dir))], "mawk")
