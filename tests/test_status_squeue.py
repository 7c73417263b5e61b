"""Past 256 chains, the status exec lists all of the user's jobs once and keeps the run's
with awk, instead of ``squeue --name`` (a client-side filter in squeue, O(jobs x names)). The
lines kept must be those ``--name`` keeps. A stub ``squeue`` on PATH does what
Slurm's does with ``--name`` (22.05 and 24.11, ``src/squeue``: the list split on commas, each
compared with ``xstrcasecmp``; ``SQUEUE_NAMES`` when no ``--name`` is given) over a fixed
listing; the same script runs with each path forced, and the SQUEUE records must be equal."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from localexec import run_script, squeue_record, stubs_on_path

from remote_chain.core.models import JobId
from remote_chain.core.runstatus import statuses
from remote_chain.core.snapshot import Target
from remote_chain.execs.status import parse_status_output, render_status_script
from remote_chain.job.script import CHAIN_FILE
from remote_chain.protocol import wire

RUN_ID = "rc-20261201T000000Z-abcdef"
CHAINS = 40  # under the awk path's 256 names: each path is forced in turn
THRESHOLD = "(( ${#names[@]} > 256 ))"

_SQUEUE = r"""#!/bin/bash
echo "squeue $*" >> "$RC_STUB_LOG"
if [[ -n ${RC_STUB_FAIL:-} ]]; then
  echo "squeue: error: slurm_load_jobs error: Unable to contact slurm controller" >&2; exit 1
fi
echo "squeue: warning: a plugin's noise on stderr" >&2
names=${SQUEUE_NAMES-}
for a in "$@"; do [[ $a == --name=* ]] && names=${a#--name=}; done
declare -A want=()
IFS=, read -r -a list <<< "$names"
for n in "${list[@]}"; do [[ -n $n ]] && want[${n,,}]=1; done
# Like Slurm's, a state list in the environment (SQUEUE_STATES, squeue -t) narrows the listing
# (checked on 22.05: SQUEUE_STATES=RUNNING hides a PENDING job from `squeue --me --format=...`).
states=,${SQUEUE_STATES-},
while IFS= read -r line; do
  name=${line##*|}
  state=${line#*|}; state=${state%%|*}
  [[ $states == ,, || ${states,,} == *",${state,,},"* ]] || continue
  if [[ -z $names || -n ${want[${name,,}]:-} ]]; then printf '%s\n' "$line"; fi
done < "$RC_STUB_LISTING"
"""


def _listing(run_dir: Path) -> str:
    lines = [
        f"{300000 + i}|PENDING|JobHeldUser|N/A|0:00|{run_dir}/chain{i:02d}|{RUN_ID}:chain{i:02d}"
        for i in range(CHAINS)
    ]
    # A requeued twin in squeue's order, another run's job, a name that differs only in case
    # (squeue matches it), a reason holding spaces, and a job whose name is a prefix of ours.
    lines += [
        f"300100|REQUEUED|BeginTime|N/A|0:00|{run_dir}/chain03|{RUN_ID}:chain03",
        "300101|PENDING|JobHeldUser|N/A|0:00|/elsewhere/chain04|rc-other:chain04",
        f"300102|PENDING|Priority|N/A|0:00|{run_dir}/chain05|{RUN_ID.upper()}:CHAIN05",
        f"300103|RUNNING|None (a reason with spaces)|2026-12-01T00:00:00|12:34|{run_dir}/chain06"
        f"|{RUN_ID}:chain06",
        f"300104|PENDING|JobHeldUser|N/A|0:00|{run_dir}/chain07|{RUN_ID}:chain0",
    ]
    return "\n".join(lines) + "\n"


def _env(tmp: Path, run_dir: Path, **extra: str) -> dict[str, str]:
    listing = tmp / "listing"
    listing.write_text(_listing(run_dir))
    return stubs_on_path(tmp, {"squeue": _SQUEUE}, RC_STUB_LISTING=str(listing), **extra)


def _run_dir(tmp: Path) -> Path:
    run_dir = tmp / RUN_ID
    for i in range(CHAINS):
        bench = run_dir / f"chain{i:02d}"
        bench.mkdir(parents=True)
        (bench / "job.sh").write_text("#!/bin/bash\n")
        (bench / CHAIN_FILE).write_text(f"{300000 + i}\n")
    return run_dir


def _squeue_record(script: str, env: dict[str, str]) -> tuple[str, ...]:
    return squeue_record(run_script(script, env))


def _both(tmp: Path, env: dict[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    run_dir = Path(env["RC_RUN_DIR"])
    # No sacct on PATH is fine: sacct's record is not compared here.
    script = render_status_script([Target(RUN_ID, str(run_dir))])
    assert THRESHOLD in script
    new = _squeue_record(script.replace(THRESHOLD, "(( 1 ))"), env)
    old = _squeue_record(script.replace(THRESHOLD, "(( 0 ))"), env)
    calls = (tmp / "calls.log").read_text().splitlines()
    assert [("--name=" in c) for c in calls] == [False, True]  # new: no name list; old: names
    return new, old


@pytest.mark.parametrize("squeue_names", [None, "somebody-else:x"])
def test_awk_keeps_what_squeue_name_keeps(tmp_path: Path, squeue_names: str | None) -> None:
    """Same text and status as ``--name``: case-insensitive names, twins, stderr noise; a
    ``SQUEUE_NAMES`` in the login environment does not narrow the listing."""
    run_dir = _run_dir(tmp_path)
    extra = {"RC_RUN_DIR": str(run_dir)}
    if squeue_names:
        extra["SQUEUE_NAMES"] = squeue_names
    new, old = _both(tmp_path, _env(tmp_path, run_dir, **extra))
    assert new == old
    assert new[1] == "0"
    targets = [Target(RUN_ID, str(run_dir))]
    snap = parse_status_output(wire.encode(*new) + "\nDONE\n", targets)
    ours = {str(300000 + i) for i in range(CHAINS)} | {"300100", "300102", "300103"}
    assert set(snap.squeue) == ours  # not another run's job, nor a prefix of a name of ours
    assert snap.squeue[JobId("300103")].reason == "None (a reason with spaces)"


def test_squeue_failure_reaches_the_client_as_before(tmp_path: Path) -> None:
    """squeue's error and exit status come through unfiltered, as with ``--name``."""
    run_dir = _run_dir(tmp_path)
    env = _env(tmp_path, run_dir, RC_RUN_DIR=str(run_dir), RC_STUB_FAIL="1")
    new, old = _both(tmp_path, env)
    assert new == old
    assert new[1] == "1"
    assert "Unable to contact slurm controller" in new[2]


def test_a_state_filter_in_the_login_environment_hides_no_job(tmp_path: Path) -> None:
    """``SQUEUE_STATES=RUNNING`` (or a partition, account, QOS, user or license filter) in a
    login shell's rc file narrows squeue's listing: a pending chain would read as gone. Both
    paths list every state of the user's jobs, as without it."""
    run_dir = _run_dir(tmp_path)
    env = _env(tmp_path, run_dir, RC_RUN_DIR=str(run_dir), SQUEUE_STATES="RUNNING")
    new, old = _both(tmp_path, env)
    assert new == old
    targets = [Target(RUN_ID, str(run_dir))]
    snap = parse_status_output(wire.encode(*new) + "\nDONE\n", targets)
    assert JobId("300000") in snap.squeue  # PENDING, listed
    assert snap.squeue[JobId("300000")].state.name == "PENDING"


def test_a_twin_profiles_jobs_are_left_out_and_change_no_chain(tmp_path: Path) -> None:
    """The same run on a second profile of this Slurm cluster (its jobs: our names, its own
    folders, ids no chain file of ours names) is left out by the awk path, and every chain's
    status reads the same as from ``--name``'s listing, which keeps the twin's jobs."""
    run_dir = _run_dir(tmp_path)
    twin = tmp_path / "elsewhere" / RUN_ID / "twin"
    (run_dir / "chain09" / CHAIN_FILE).write_text("300009\n399009\n")  # a twin-range id of ours
    env = _env(tmp_path, run_dir, RC_RUN_DIR=str(run_dir))
    listing = Path(env["RC_STUB_LISTING"])
    with listing.open("a") as f:
        for i in range(CHAINS):  # each chain's twin, a job in the twin's folder
            f.write(
                f"{399000 + i}|RUNNING|None|N/A|0:05|{twin}/chain{i:02d}|{RUN_ID}:chain{i:02d}\n"
            )
    new, old = _both(tmp_path, env)
    targets = [Target(RUN_ID, str(run_dir))]
    new_snap = parse_status_output(wire.encode(*new) + "\nDONE\n", targets)
    old_snap = parse_status_output(wire.encode(*old) + "\nDONE\n", targets)
    twins = {JobId(str(399000 + i)) for i in range(CHAINS)}
    assert twins <= set(old_snap.squeue)
    assert set(new_snap.squeue) & twins == {JobId("399009")}  # named by chain09's file: kept
    assert statuses("c", new_snap, "slurm") == statuses("c", old_snap, "slurm")


def _with_broken_tool(
    tmp: Path, script_text: str, names: tuple[str, ...] = ("awk", "mawk"), *, listed: bool = True
) -> tuple[str, str]:
    """The SQUEUE status and the one sacct call of the listing path (``listed``; else
    ``--name``'s), with each of ``names`` the given script and a sacct that logs its call."""
    run_dir = _run_dir(tmp)
    env = _env(tmp, run_dir, RC_RUN_DIR=str(run_dir))
    bin_dir = tmp / "bin"
    for name in (*names, "sacct"):
        tool = bin_dir / name
        tool.write_text(
            script_text if name != "sacct" else '#!/bin/bash\necho "sacct $*" >> "$RC_STUB_LOG"\n'
        )
        tool.chmod(0o755)
    script = render_status_script([Target(RUN_ID, str(run_dir))])
    forced = "(( 1 ))" if listed else "(( 0 ))"
    record = _squeue_record(script.replace(THRESHOLD, forced), env)
    (sacct,) = [c for c in (tmp / "calls.log").read_text().splitlines() if c[:5] == "sacct"]
    return record[1], sacct


def test_an_awk_that_fails_makes_squeue_read_as_failed_not_empty(tmp_path: Path) -> None:
    """An awk that dies mid-filter (a broken or too old one on the login node) sent an empty
    answer with squeue's status 0: every queued chain read as gone. Its status is squeue's
    answer now, and every id goes to sacct (rc_unqueued keeps them)."""
    # It reads all it is given first: squeue ends with 0, as a real one would.
    status, sacct = _with_broken_tool(
        tmp_path, "#!/bin/sh\ncat > /dev/null\necho 'awk: no memory' >&2\nexit 2\n"
    )
    assert status == "2"
    assert all(f"{300000 + i}" in sacct for i in range(CHAINS))


@pytest.mark.parametrize("tool", ["gzip", "base64"])
def test_a_listing_cut_short_on_its_way_out_reads_as_failed(tmp_path: Path, tool: str) -> None:
    """The listing path streams awk's lines through gzip and base64 to the answer: one that
    dies half way (after some output: a full disk for a temporary, a killed process) leaves a
    text cut short, which must read as squeue failed, never as the whole answer; and no id
    may be dropped for it: every one goes to sacct."""
    real = shutil.which(tool)
    assert real
    half = f'#!/bin/bash\nhead -c 40 | {real} "$@"\ncat > /dev/null\nexit 1\n'
    status, sacct = _with_broken_tool(tmp_path, half, (tool,))
    assert status == "1"
    assert all(f"{300000 + i}" in sacct for i in range(CHAINS))


def test_an_awk_that_fails_to_compare_the_ids_sends_every_id_to_sacct(tmp_path: Path) -> None:
    """squeue answered, but the awk that leaves out its live jobs' ids died: no id may be
    dropped for that (each would read as unknown); every id goes to sacct. (Every job squeue
    lists is held: with the comparison working, no id would reach sacct.)"""
    real = shutil.which("mawk")
    assert real, "mawk is not installed (scripts/setup installs it)"
    only_the_ids = (  # rc_unqueued's program (its `live` list) fails, the others run
        f"#!/bin/bash\ncase $* in *'live['*) cat > /dev/null; exit 2 ;; esac\nexec {real} \"$@\"\n"
    )
    status, sacct = _with_broken_tool(tmp_path, only_the_ids, listed=False)
    assert status == "0"
    assert all(f"{300000 + i}" in sacct for i in range(CHAINS))
