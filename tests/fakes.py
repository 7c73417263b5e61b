"""A fake Slurm cluster behind the ``Remote`` seam: the whole client, fast, without SSH.

``FakeSlurm(tmp_path)`` holds fake clusters by name. Each is a folder with

- ``bin/``: stub ``sbatch``, ``sacct``, ``squeue``, ``scancel``, ``scontrol`` (and a ``sleep``
  that returns at once: the fake's clock runs fast), first on ``PATH``;
- ``slurm/queue``: what squeue shows, ``id|STATE|reason|name`` lines (sbatch appends PENDING);
- ``slurm/accounting``: what sacct shows, lines in ``SACCT_FIELDS`` order (printed in the
  asked ``--format``; ``JobName``/``WorkDir`` come from ``slurm/jobs``); as with
  ``sacct --duplicates``, the last line of an id is the newest;
- ``slurm/jobs``: one line per sbatch: ``id<TAB>name<TAB>dependency<TAB>script<TAB>args``,
  and ``slurm/<command>.calls``, each call's argv;
- ``fs/``: the cluster's filesystem, where profiles point their ``workdir``.

``FakeSlurm.open`` is an ``Opener``: ``monkeypatch.setattr(invocation, "OPENER", fake.open)``. The
``FakeRemote`` it returns runs each script with local ``bash`` under ``anyio.run_process``,
wrapped and unwrapped exactly as the SSH transports do (``remote.markers``), so what the
client sends is what runs. ``FakeCluster.run_job`` then plays Slurm: it runs a queued
``job.sh`` (prologue and all) and records its end in accounting.

Faults: ``cluster.drop(run=N, after=True)`` loses the connection on the Nth script run on that
cluster (counted across reconnects), after the script ran (a lost reply) or before it
started; ``cluster.refuse(HostKeyError)`` makes every connect fail with that error.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from remote_chain.client.cluster import Opener
from remote_chain.errors import ConnectError, RemoteError, RemoteTimeout
from remote_chain.protocol.markers import wrap
from remote_chain.transport.base import ClosingContext, CommandResult, Remote, result_from_output
from remote_chain.transport.endpoint import Endpoint

FIRST_JOB_ID = 1001
_LOCK = 'exec 9>>"$FAKE_SLURM/lock"; flock 9'

SBATCH = f"""#!/bin/bash
# Fake sbatch: queues the job PENDING, records it, prints its id.
S=$FAKE_SLURM; {_LOCK}
printf '%s\\n' "$*" >> "$S/sbatch.calls"
if [[ ${{1:-}} == --version ]]; then
  cat "$S/version" 2>/dev/null || echo "slurm-wlm 22.05.8"; exit 0
fi
if [[ -f $S/sbatch.fail ]]; then cat "$S/sbatch.fail" >&2; exit 1; fi
# $S/refuse: "word<TAB>message" lines; a call with an argument containing word is refused.
while IFS=$'\t' read -r word message; do
  [[ -n $word && " $* " == *"$word"* ]] && {{ echo "$message" >&2; exit 1; }}
done < <(cat "$S/refuse" 2>/dev/null)
dep="" name="" parsable=0 script="" testonly=0
while (( $# )); do
  case $1 in
    --test-only) testonly=1 ;;
    --parsable) parsable=1 ;;
    --dependency=*) dep=${{1#--dependency=}} ;;
    --job-name=*) name=${{1#--job-name=}} ;;
    -*) ;;
    *) script=$1; shift; break ;;
  esac
  shift
done
if (( testonly )); then
  echo "sbatch: Job 99 to start at 2026-01-01T00:00:00 using 1 processors on nodes n1" >&2; exit 0
fi
[[ -r $script ]] || {{ echo "sbatch: error: Unable to open file $script" >&2; exit 1; }}
script=$(cd "$(dirname "$script")" && pwd)/$(basename "$script")
if [[ -z $name ]]; then
  name=$(sed -n 's/^#SBATCH --job-name=//p' "$script" | head -n 1); name=${{name//\\"/}}
fi
id=$(cat "$S/next_id" 2>/dev/null || echo {FIRST_JOB_ID}); echo $((id + 1)) > "$S/next_id"
reason=None; [[ -n $dep ]] && reason=Dependency
printf '%s|PENDING|%s|%s\\n' "$id" "$reason" "$name" >> "$S/queue"
printf '%s\\t%s\\t%s\\t%s\\t%s\\n' "$id" "$name" "$dep" "$script" "$*" >> "$S/jobs"
if (( parsable )); then echo "$id"; else echo "Submitted batch job $id"; fi
"""

SACCT = """#!/bin/bash
# Fake sacct: prints accounting lines, filtered by --jobs; --format=JobIDRaw prints ids only.
S=$FAKE_SLURM
printf '%s\\n' "$*" >> "$S/sacct.calls"
if [[ -f $S/sacct.fail ]]; then cat "$S/sacct.fail" >&2; exit 1; fi
fmt="" jobs=""
while (( $# )); do
  case $1 in
    --format=*) fmt=${1#--format=} ;;
    --format|-o) fmt=$2; shift ;;
    --jobs=*) jobs=${1#--jobs=} ;;
    --jobs|-j) jobs=$2; shift ;;
    --starttime|--endtime|-S|-E) shift ;;
  esac
  shift
done
[[ -f $S/accounting ]] || exit 0
IFS=, read -r -a want <<< "$fmt"
while IFS= read -r line; do
  id=${line%%|*}
  [[ -z $jobs || ",$jobs," == *",$id,"* ]] || continue
  if [[ $fmt == JobIDRaw ]]; then printf '%s\\n' "$id"; continue; fi
  if [[ -z $fmt ]]; then printf '%s\\n' "$line"; continue; fi
  # The stored fields (SACCT_FIELDS order), plus JobName and WorkDir (the job's name and the
  # folder of its script, as --chdir makes it) for a format that asks for them.
  IFS='|' read -r f_id f_state f_elapsed f_exit f_reason f_start f_end <<< "$line"
  out=""
  for field in "${want[@]}"; do
    case $field in
      JobIDRaw) v=$f_id ;; State) v=$f_state ;; ElapsedRaw) v=$f_elapsed ;;
      ExitCode) v=$f_exit ;; Reason) v=$f_reason ;; Start) v=$f_start ;; End) v=$f_end ;;
      JobName) v=$(awk -F '\\t' -v i="$id" '$1 == i {print $2}' "$S/jobs" 2>/dev/null) ;;
      WorkDir) v=$(awk -F '\\t' -v i="$id" '$1 == i {print $4}' "$S/jobs" 2>/dev/null); v=${v%/*} ;;
      *) v="" ;;
    esac
    out+="${out:+|}$v"
  done
  printf '%s\\n' "$out"
done < "$S/accounting"
"""

SQUEUE = """#!/bin/bash
# Fake squeue: the queue in the asked --format (%i %T %r %S %M %Z %j), filtered by --name/--jobs;
# %Z (the working directory) is the folder of the job's script, as --chdir makes it.
S=$FAKE_SLURM
printf '%s\\n' "$*" >> "$S/squeue.calls"
if [[ -f $S/squeue.fail ]]; then cat "$S/squeue.fail" >&2; exit 1; fi
fmt='%i|%T|%r|%j' names="" jobs=""
while (( $# )); do
  case $1 in
    --format=*) fmt=${1#--format=} ;;
    --format|-o) fmt=$2; shift ;;
    --name=*) names=${1#--name=} ;;
    --name|-n) names=$2; shift ;;
    --jobs=*) jobs=${1#--jobs=} ;;
    --jobs|-j) jobs=$2; shift ;;
  esac
  shift
done
[[ -f $S/queue ]] || exit 0
while IFS='|' read -r id state reason name; do
  [[ -n $id ]] || continue
  [[ -z $names || ",$names," == *",$name,"* ]] || continue
  [[ -z $jobs || ",$jobs," == *",$id,"* ]] || continue
  out=$fmt; out=${out//"%i"/"$id"}; out=${out//"%T"/"$state"}
  out=${out//"%r"/"$reason"}; out=${out//"%j"/"$name"}
  # %S and %M: N/A and 0:00 until the job runs; then a fixed start and 65 s used.
  if [[ $state == PENDING ]]; then start=N/A used=0:00; else start=2026-01-01T00:00:00 used=1:05; fi
  out=${out//"%S"/"$start"}; out=${out//"%M"/"$used"}
  if [[ $out == *%Z* ]]; then
    wd=$(awk -F '\t' -v i="$id" '$1 == i {print $4}' "$S/jobs" 2>/dev/null); wd=${wd%/*}
    out=${out//"%Z"/"$wd"}
  fi
  printf '%s\\n' "$out"
done < "$S/queue"
"""

SCANCEL = f"""#!/bin/bash
# Fake scancel: takes the jobs off the queue; accounting shows them CANCELLED by this user.
S=$FAKE_SLURM; {_LOCK}
printf '%s\\n' "$*" >> "$S/scancel.calls"
uid=$(id -u)
for id in "$@"; do
  [[ $id == -* ]] && continue
  if grep -q "^$id|" "$S/queue" 2>/dev/null; then
    grep -v "^$id|" "$S/queue" > "$S/queue.tmp"; mv -f "$S/queue.tmp" "$S/queue"
    printf '%s|CANCELLED by %s|0|0:0|None|Unknown|Unknown\\n' "$id" "$uid" >> "$S/accounting"
  fi
done
"""

SCONTROL = """#!/bin/bash
# Fake scontrol: `show partition P` knows the partitions listed in $FAKE_SLURM/partitions.
S=$FAKE_SLURM
printf '%s\\n' "$*" >> "$S/scontrol.calls"
if [[ ${1:-} == -o && ${2:-} == show && ${3:-} == assoc_mgr ]]; then
  cat "$S/assoc_mgr" 2>/dev/null; exit 0
fi
if [[ ${1:-} == show && ${2:-} == config ]]; then
  cat "$S/config" 2>/dev/null || printf '%s\n' "Configuration data as of 2026-01-01T00:00:00" \
    "AccountingStorageType   = accounting_storage/slurmdbd" "ClusterName             = fake"
  exit 0
fi
if [[ ${1:-} == show && ${2:-} == partition ]]; then
  if grep -qx -- "${3:-}" "$S/partitions" 2>/dev/null; then echo "PartitionName=$3"; exit 0; fi
  echo "slurm_load_partitions: Invalid partition name specified" >&2; exit 1
fi
exit 0
"""

SACCTMGR = """#!/bin/bash
# Fake sacctmgr: `show assoc` / `show qos` print $FAKE_SLURM/assoc / qos as they are (-nP rows).
S=$FAKE_SLURM
printf '%s\\n' "$*" >> "$S/sacctmgr.calls"
case " $* " in
  *" assoc "*) cat "$S/assoc" 2>/dev/null ;;
  *" qos "*) cat "$S/qos" 2>/dev/null ;;
esac
exit 0
"""

SLEEP = """#!/bin/bash
# The fake cluster's clock runs fast: every sleep is a hundredth of a second.
exec {real} 0.01
"""


@dataclass(frozen=True)
class FakeJob:
    """One sbatch call, as the fake recorded it."""

    job_id: str
    name: str
    dependency: str
    script: Path
    args: tuple[str, ...]


@dataclass
class FakeCluster:
    """One fake cluster: its stub Slurm, its filesystem, and the faults to inject."""

    name: str
    root: Path
    runs: int = 0  # scripts run (or dropped) so far, across connections
    connects: int = 0
    scripts: list[str] = field(default_factory=list)  # every script that ran, in order
    faults: dict[int, str] = field(default_factory=dict)  # run number -> "before" | "after"
    unreachable: type[RemoteError] | None = None

    def __post_init__(self) -> None:
        for folder in (self.bin, self.state, self.fs, self.home):
            folder.mkdir(parents=True, exist_ok=True)
        real_sleep = shutil.which("sleep") or "/bin/sleep"
        stubs = {
            "sbatch": SBATCH,
            "sacct": SACCT,
            "squeue": SQUEUE,
            "scancel": SCANCEL,
            "scontrol": SCONTROL,
            "sacctmgr": SACCTMGR,
            "sleep": SLEEP.format(real=real_sleep),
        }
        for command, text in stubs.items():
            path = self.bin / command
            path.write_text(text)
            path.chmod(0o755)

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def state(self) -> Path:
        return self.root / "slurm"

    @property
    def fs(self) -> Path:
        return self.root / "fs"

    @property
    def home(self) -> Path:
        return self.fs / "home"

    @property
    def workdir(self) -> Path:
        return self.fs / "work"

    def env(self, **extra: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {
            **base,
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "FAKE_SLURM": str(self.state),
            "HOME": str(self.home),
            **extra,
        }

    # --- faults -----------------------------------------------------------------------------
    def drop(self, *, run: int, after: bool) -> None:
        """Lose the connection on the ``run``-th script: after it ran, or before it started."""
        self.faults[run] = "after" if after else "before"

    def refuse(self, error: type[RemoteError] | None) -> None:
        """Make every connect fail with ``error`` (naming the host); None heals the cluster."""
        self.unreachable = error

    def fail(self, command: str, message: str) -> None:
        """Make a stub Slurm command print ``message`` on stderr and exit 1."""
        (self.state / f"{command}.fail").write_text(message + "\n")

    def partitions(self, *names: str) -> None:
        (self.state / "partitions").write_text("".join(f"{n}\n" for n in names))

    # --- what the fake Slurm saw ------------------------------------------------------------
    def slurm_says(self, name: str, text: str) -> None:
        """What a stub prints: ``version`` (sbatch --version), ``config`` (scontrol show
        config), ``assoc_mgr`` (scontrol -o show assoc_mgr), ``assoc``/``qos`` (sacctmgr),
        ``refuse`` (sbatch: word<TAB>message lines)."""
        (self.state / name).write_text(text)

    def calls(self, command: str) -> list[str]:
        path = self.state / f"{command}.calls"
        return path.read_text().splitlines() if path.exists() else []

    def jobs(self) -> list[FakeJob]:
        path = self.state / "jobs"
        out = []
        for line in path.read_text().splitlines() if path.exists() else []:
            job_id, name, dep, script, args = line.split("\t")
            out.append(FakeJob(job_id, name, dep, Path(script), tuple(args.split())))
        return out

    def job(self, job_id: str) -> FakeJob:
        (found,) = [j for j in self.jobs() if j.job_id == job_id]
        return found

    def queue(self) -> dict[str, str]:
        """Job id -> state, for every job squeue would show."""
        path = self.state / "queue"
        rows = [line.split("|") for line in path.read_text().splitlines()] if path.exists() else []
        return {row[0]: row[1] for row in rows if row and row[0]}

    # --- playing Slurm ----------------------------------------------------------------------
    def _rewrite_queue(self, edit: Callable[[list[str]], list[str] | None]) -> None:
        path = self.state / "queue"
        lines = path.read_text().splitlines() if path.exists() else []
        kept = []
        for line in lines:
            row = edit(line.split("|"))
            if row is not None:
                kept.append("|".join(row))
        path.write_text("".join(f"{line}\n" for line in kept))

    def set_state(self, job_id: str, state: str, reason: str = "None") -> None:
        """Change a queued job's state (e.g. RUNNING) as squeue shows it."""

        def edit(row: list[str]) -> list[str]:
            return [row[0], state, reason, row[3]] if row[0] == job_id else row

        self._rewrite_queue(edit)

    def account(
        self, job_id: str, state: str, *, elapsed: int = 60, exit_code: str = "0:0"
    ) -> None:
        """Append an accounting line (sacct's newest for that id)."""
        fields = [job_id, state, str(elapsed), exit_code, "None", "2026-01-01T00:00:00", "Unknown"]
        with (self.state / "accounting").open("a") as f:
            f.write("|".join(fields) + "\n")

    def finish(self, job_id: str, state: str, *, elapsed: int = 60, exit_code: str = "0:0") -> None:
        """The job ended: off the queue, into accounting; its afternotok dependents follow.

        After COMPLETED a dependent's ``afternotok`` can never be met, and Slurm (with
        ``--kill-on-invalid-dep=yes``) cancels it; after any other end it becomes eligible.
        """
        self._rewrite_queue(lambda row: None if row[0] == job_id else row)
        self.account(job_id, state, elapsed=elapsed, exit_code=exit_code)
        dependents = {j.job_id for j in self.jobs() if j.dependency == f"afternotok:{job_id}"}
        dependents &= set(self.queue())
        if state == "COMPLETED":
            self._rewrite_queue(lambda row: None if row[0] in dependents else row)
            for dep in sorted(dependents):
                self.account(dep, "CANCELLED by 0", elapsed=0)
        else:
            for dep in sorted(dependents):
                self.set_state(dep, "PENDING", "None")

    def run_job(self, job_id: str, *, state: str | None = None, elapsed: int = 60) -> int:
        """Run a queued job's script as Slurm would, then finish it.

        ``state`` is how the job ends in accounting; by default COMPLETED or FAILED from the
        script's exit status (pass e.g. TIMEOUT for a job the scheduler killed).
        """
        job = self.job(job_id)
        text = job.script.read_text()
        chdir = _directive(text, "chdir") or str(job.script.parent)
        log = (_directive(text, "output") or f"{chdir}/slurm-%j.out").replace("%j", job_id)
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        self.set_state(job_id, "RUNNING")
        with open(log, "a") as out:
            proc = subprocess.run(
                ["bash", str(job.script), *job.args],
                cwd=chdir,
                env=self.env(SLURM_JOB_ID=job_id),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=60,
                check=False,
            )
        final = state or ("COMPLETED" if proc.returncode == 0 else "FAILED")
        self.finish(job_id, final, elapsed=elapsed, exit_code=f"{proc.returncode}:0")
        return proc.returncode


def _directive(script: str, name: str) -> str | None:
    match = re.search(rf"^#SBATCH --{name}=(.*)$", script, re.MULTILINE)
    return match.group(1).strip('"') if match else None


class FakeRemote(ClosingContext):
    """A ``Remote`` that runs each script with local bash on a ``FakeCluster``."""

    def __init__(self, endpoint: Endpoint, cluster: FakeCluster) -> None:
        self._endpoint = endpoint
        self._cluster = cluster
        self._closed = False

    @property
    def name(self) -> str:
        return self._endpoint.name

    async def run(
        self, script: str, *, timeout: float | None = None, sensitive: bool = False
    ) -> CommandResult:
        if self._closed:
            raise RemoteError("used after aclose()", host=self.name)
        cluster = self._cluster
        cluster.runs += 1
        fault = cluster.faults.get(cluster.runs)
        lost = f"connection to {self._endpoint.host} lost (fake, run {cluster.runs})"
        if fault == "before":
            raise ConnectError(lost, host=self.name)
        wrapped, nonce = wrap(script)
        limit = self._endpoint.command_timeout if timeout is None else timeout
        try:
            with anyio.fail_after(limit):
                proc = await anyio.run_process(
                    ["bash", "-s"],
                    input=wrapped.encode(),
                    env=cluster.env(),
                    cwd=cluster.home,
                    check=False,
                )
        except TimeoutError:
            raise RemoteTimeout(f"command took longer than {limit:g} s", host=self.name) from None
        cluster.scripts.append(script)
        if fault == "after":
            self._closed = True
            raise ConnectError(lost, host=self.name)
        return result_from_output(
            name=self.name,
            nonce=nonce,
            stdout=proc.stdout.decode("utf-8", "replace"),
            stderr=proc.stderr.decode("utf-8", "replace"),
            exit_status=proc.returncode,
            lost=False,
        )

    async def aclose(self) -> None:
        self._closed = True


class FakeSlurm:
    """Fake clusters by name, under one folder; ``open`` is the ``Opener`` for the client."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "fake-slurm"
        self.clusters: dict[str, FakeCluster] = {}

    def cluster(self, name: str) -> FakeCluster:
        if name not in self.clusters:
            self.clusters[name] = FakeCluster(name, self.root / name)
        return self.clusters[name]

    async def open(self, endpoint: Endpoint) -> Remote:
        cluster = self.cluster(endpoint.name)
        cluster.connects += 1
        if cluster.unreachable is not None:
            raise cluster.unreachable(
                f"cannot connect to {endpoint.host}:{endpoint.port}: refused (fake)",
                host=endpoint.name,
            )
        return FakeRemote(endpoint, cluster)

    def profile(self, clusters_dir: Path, name: str, **extra: str | int) -> Path:
        """Write ``<clusters_dir>/<name>.toml`` for this fake cluster (host ``<name>.test``)."""
        return write_profile(
            clusters_dir,
            name,
            workdir=self.cluster(name).workdir,
            **{"host": f"{name}.test", **extra},
        )


def write_profile(clusters_dir: Path, name: str, *, workdir: Path, **fields: str | int) -> Path:
    """A cluster profile TOML with ``workdir`` and the given top-level fields."""
    clusters_dir.mkdir(parents=True, exist_ok=True)
    lines = [f'workdir = "{workdir}"']
    lines += [f"{k} = {v}" if isinstance(v, int) else f'{k} = "{v}"' for k, v in fields.items()]
    path = clusters_dir / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def fake_opener(tmp_path: Path) -> Opener:
    """An ``Opener`` over new fake clusters under ``tmp_path``; ``FakeSlurm`` reaches them."""
    return FakeSlurm(tmp_path).open
