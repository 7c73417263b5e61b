"""At 10,000 chains no argument of a remote command may exceed Linux's MAX_ARG_STRLEN
(128 KiB): the status and cancel scripts cut job-id and job-name lists into chunks.
Run by bash with stub ``sacct``/``squeue`` that refuse any longer argument."""

from __future__ import annotations

import subprocess
from pathlib import Path

from localexec import run_script, stubs_on_path

from remote_chain.core.sacct import MAX_LIST_ARG_BYTES
from remote_chain.core.snapshot import Snapshot, Target
from remote_chain.execs.cancel import parse_cancel_output, render_cancel_script
from remote_chain.execs.status import parse_status_output, render_status_script
from remote_chain.execs.templates import render_chunks_function
from remote_chain.job.script import CANCEL_MARKER, CHAIN_FILE

MAX_ARG_STRLEN = 128 * 1024
RUN_ID = "rc-20261130T000000Z-abcdef"
CHAINS = 10_000
# Enough chains that their names (33 bytes each) overflow one argument unchunked.
CANCEL_CHAINS = 4_500

# Each stub logs its argv lengths, refuses (like execve's E2BIG) any argument over
# MAX_ARG_STRLEN, and answers for what it was asked: sacct a PENDING row per job id,
# squeue a PENDING row per job name (cancel's own stub prints nothing: nothing queued).
_SACCT = r"""#!/bin/bash
for a in "$@"; do (( ${#a} <= __MAX__ )) || { echo "argument of ${#a} bytes" >&2; exit 7; }; done
echo "sacct" >> "$RC_STUB_LOG"
while (( $# )); do [[ $1 == --jobs ]] && jobs=$2; shift; done
IFS=, read -r -a ids <<< "$jobs"
printf '%s\n' "${ids[@]}" >> "$RC_STUB_LOG.ids"
for id in "${ids[@]}"; do printf '%s|PENDING|0|0:0|JobHeldUser|Unknown|Unknown\n' "$id"; done
"""
_SQUEUE = r"""#!/bin/bash
for a in "$@"; do (( ${#a} <= __MAX__ )) || { echo "argument of ${#a} bytes" >&2; exit 7; }; done
echo "squeue" >> "$RC_STUB_LOG"
[[ -n ${RC_STUB_QUIET:-} ]] && exit 0
for a in "$@"; do [[ $a == --name=* ]] && names=${a#--name=}; done
if [[ -z ${names+set} ]]; then  # all of the user's jobs: the run's, and another run's
  printf '%s|PENDING|JobHeldUser|N/A|0:00|/elsewhere/x|rc-other:chain00001\n' 199999
  for d in "$RC_RUN_DIR"/chain*; do names+=${names:+,}__RUN_ID__:${d##*/}; done
fi
IFS=, read -r -a list <<< "$names"
for n in "${list[@]}"; do
  i=$((10#${n##*chain}))
  # RC_STUB_LIVE_EVEN: the even chains' own jobs queued, the odd chains' ended (not shown);
  # else a job of another id for every chain (sacct must then be asked of every chain's).
  if [[ -n ${RC_STUB_LIVE_EVEN:-} ]]; then (( i % 2 )) && continue; id=$((100000 + i))
  else id=$((200000 + i)); fi
  printf '%s|PENDING|JobHeldUser|N/A|0:00|%s|%s\n' "$id" "$RC_RUN_DIR/${n#*:}" "$n"
done
"""


def _stubs(tmp: Path) -> dict[str, str]:
    stubs = {"sacct": _SACCT, "squeue": _SQUEUE}
    return stubs_on_path(
        tmp,
        {
            n: t.replace("__MAX__", str(MAX_ARG_STRLEN)).replace("__RUN_ID__", RUN_ID)
            for n, t in stubs.items()
        },
    )


def _run_dir(tmp: Path, chains: int = CHAINS) -> Path:
    run_dir = tmp / RUN_ID
    for i in range(chains):
        bench = run_dir / f"chain{i:05d}"
        bench.mkdir(parents=True)
        (bench / "job.sh").write_text("#!/bin/bash\n")
        (bench / CHAIN_FILE).write_text(f"{100000 + i}\n")
    return run_dir


def test_chunks_stay_under_the_limit_and_keep_every_item() -> None:
    """rc_chunks cuts 10,000 names into arguments of at most MAX_LIST_ARG_BYTES, losing none."""
    names = [f"{RUN_ID}:chain{i:05d}" for i in range(CHAINS)]
    script = render_chunks_function() + '\nrc_chunks "$@"\nprintf "%s\\n" "${rc_chunk_list[@]}"\n'
    proc = subprocess.run(
        ["bash", "-c", script, "bash", *names], capture_output=True, text=True, check=True
    )
    chunks = proc.stdout.splitlines()
    assert len(chunks) > 1
    assert all(len(c.encode()) <= MAX_LIST_ARG_BYTES for c in chunks)
    assert [n for c in chunks for n in c.split(",")] == names


def test_status_of_10000_chains_asks_in_chunks(tmp_path: Path) -> None:
    """Status of 10,000 chains: every job id reaches sacct, in chunks; squeue lists the user's
    jobs once (no name list at all) and only the run's chains are kept."""
    run_dir = _run_dir(tmp_path)
    env = {**_stubs(tmp_path), "RC_RUN_DIR": str(run_dir)}
    targets = [Target(RUN_ID, str(run_dir))]
    snap: Snapshot = parse_status_output(run_script(render_status_script(targets), env), targets)
    assert snap.sacct_ok, snap.sacct_error
    assert snap.squeue_ok
    assert len(snap.runs[0].chains) == CHAINS
    assert len(snap.sacct) == CHAINS
    assert len(snap.squeue) == CHAINS
    calls = (tmp_path / "calls.log").read_text().split()
    assert calls.count("sacct") >= 2
    assert calls.count("squeue") == 1
    assert "199999" not in snap.squeue


def test_status_asks_sacct_only_of_the_jobs_squeue_does_not_show(tmp_path: Path) -> None:
    """The jobs squeue shows queued are squeue's; only the others reach sacct (slurmdbd, which
    the site shares), still in chunks; a run whose every job is queued never asks sacct."""
    run_dir = _run_dir(tmp_path)
    env = {**_stubs(tmp_path), "RC_RUN_DIR": str(run_dir), "RC_STUB_LIVE_EVEN": "1"}
    targets = [Target(RUN_ID, str(run_dir))]
    snap: Snapshot = parse_status_output(run_script(render_status_script(targets), env), targets)
    asked = (tmp_path / "calls.log.ids").read_text().split()
    assert sorted(asked) == [str(100000 + i) for i in range(1, CHAINS, 2)]
    assert len(snap.squeue) == CHAINS // 2
    assert len(snap.sacct) == CHAINS // 2
    assert set(snap.squeue).isdisjoint(snap.sacct)

    # Every chain queued (a run of held chains, every poll of a live run): no sacct at all.
    for i in range(1, CHAINS, 2):
        (run_dir / f"chain{i:05d}" / CHAIN_FILE).write_text(f"{100000 + i - 1}\n")
    (tmp_path / "calls.log").unlink()
    snap = parse_status_output(run_script(render_status_script(targets), env), targets)
    assert (tmp_path / "calls.log").read_text().split() == ["squeue"]
    assert snap.sacct_ok
    assert not snap.sacct


def test_cancel_of_4500_chains_asks_squeue_in_chunks(tmp_path: Path) -> None:
    """Cancel of 4,500 chains marks each one and reads the queue in chunks of names."""
    run_dir = _run_dir(tmp_path, CANCEL_CHAINS)
    env = {**_stubs(tmp_path), "RC_RUN_DIR": str(run_dir), "RC_STUB_QUIET": "1"}
    out = run_script(render_cancel_script(RUN_ID, str(run_dir), []), env)
    answer = parse_cancel_output(out, [f"chain{i:05d}" for i in range(CANCEL_CHAINS)])
    assert not answer.errors
    assert not answer.left
    assert all((run_dir / f"chain{i:05d}" / CANCEL_MARKER).exists() for i in range(CANCEL_CHAINS))
    calls = (tmp_path / "calls.log").read_text().split()
    assert calls.count("squeue") >= 2
