"""PURE: what ``doctor``'s one exec found on a cluster, and what each finding means for runs.

``doctor.bash`` prints raw facts (``FACT name status output``: ``sbatch --version``,
``scontrol show config``, ``sacctmgr`` rows, ``sbatch --test-only`` probes, the login shell);
every reading of them is here, as pure parsers fed literal recorded output in the tests, for
Slurm 22.05 and 24.11 alike (the formats read are the same in both; where the behaviour
differs, e.g. 24.11 refusing ``afternotok`` on a job slurmctld does not know, it is said
where it is handled).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from remote_chain.core.limits import ASSOC_FORMAT, QOS_FORMAT, Limit, parse_assoc, parse_qos
from remote_chain.core.models import Executor
from remote_chain.core.results import Check, DoctorFacts
from remote_chain.execs.templates import bash_array, render_template
from remote_chain.protocol.wire import decode

# The exec (doctor.bash) and its checks.
HINTS = {
    "command": "load Slurm in your login environment (e.g. `module load slurm` in ~/.bash_profile)",
    "accounting": "sacct must answer: ask the admins whether slurmdbd accounting is enabled",
    "partition": "set [slurm] partition in the profile to one `sinfo -s` lists",
    "workdir": "set `workdir` in the profile to a folder you can write on the cluster",
}


def render_doctor_script(
    *, workdir: str, partition: str | None, executor: Executor, sbatch_args: Sequence[str] = ()
) -> str:
    """``sbatch_args``: the profile's own sbatch options, for the ``--test-only`` probes."""
    head = [
        f"RC_WORKDIR={shlex.quote(workdir)}",
        f"RC_PARTITION={shlex.quote(partition or '')}",
        f"RC_EXECUTOR={shlex.quote(executor)}",
        bash_array("RC_SBATCH", sbatch_args),
        f"RC_ASSOC_FORMAT={','.join(ASSOC_FORMAT)}",
        f"RC_QOS_FORMAT={','.join(QOS_FORMAT)}",
    ]
    return "\n".join([*head, render_template("doctor.bash")])


def parse_doctor_output(text: str) -> list[Check]:
    checks = []
    for parts in decode(text):
        if parts[0] == "CHECK" and len(parts) == 4:
            ok = parts[2] == "ok"
            family = parts[1].split(":", 1)[0]
            hint = "" if ok else HINTS.get(family, "")
            checks.append(Check(parts[1], ok, parts[3].strip()[:500], hint))
    return checks


# What its facts mean for runs.
# `sbatch --version` prints "<PACKAGE_NAME> <version>" (src/common/proc_args.c, 22.05..24.11):
# "slurm 24.11.5" upstream, "slurm-wlm 22.05.8" from Debian's packages.
_VERSION = re.compile(r"^slurm(?:-wlm)?\s+(\d+\.\d+(?:\.\d+)?\S*)\s*$", re.MULTILINE)
# `scontrol show config`: "Key<blanks>= value", one per line, after a header line.
_CONFIG_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)\s*=\s?(.*)$")
CONFIG_KEYS = (
    "ClusterName",
    "AccountingStorageType",
    "AccountingStorageEnforce",
    "MinJobAge",
    "MaxJobCount",
    "JobRequeue",
    "PreemptMode",
    "ProctrackType",
)
NO_ACCOUNTING = "accounting_storage/none"
# Which rc file a non-interactive `ssh host command` reads, per login shell (bash on Debian:
# ~/.bashrc through the compiled-in SSH_SOURCE_BASHRC; zsh: ~/.zshenv only; tcsh: ~/.tcshrc).
SHELL_RC = {"bash": "~/.bashrc", "zsh": "~/.zshenv", "tcsh": "~/.tcshrc", "csh": "~/.cshrc"}

NOT_VISIBLE_MEANING = (
    "without accounting a link cannot read how its predecessor ended from sacct: it asks "
    "slurmctld (which forgets a job MinJobAge after its end), then the predecessor's own end "
    "record; a predecessor unknown to all of them is the spec's 'not visible' row (resume, "
    "no retry spent), so a runner that fails at once is stopped only by max_walltime or the "
    "cap on consecutive unknown links: set max_walltime for resumable runs here"
)


@dataclass(frozen=True)
class Fact:
    status: int
    output: str


def parse_facts(text: str) -> dict[str, Fact]:
    """The ``FACT`` lines of the doctor exec, by name; other lines are skipped."""
    facts = {}
    for parts in decode(text):
        if parts[0] == "FACT" and len(parts) == 4:
            status = int(parts[2]) if parts[2].isdigit() else 1
            facts[parts[1]] = Fact(status, parts[3])
    return facts


def parse_slurm_version(text: str) -> str | None:
    """``sbatch --version`` -> "22.05.8"; None when no line of that shape is there."""
    match = _VERSION.search(text)
    return match.group(1) if match else None


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config`` -> the CONFIG_KEYS it shows."""
    out = {}
    for line in text.splitlines():
        match = _CONFIG_LINE.match(line.strip())
        if match and match.group(1) in CONFIG_KEYS:
            out[match.group(1)] = match.group(2).strip()
    return out


def _first_line(text: str, limit: int = 300) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # sbatch's own messages, not the login banner: prefer the lines it prefixes.
    mine = [ln for ln in lines if ln.startswith(("sbatch:", "allocation failure"))]
    return "; ".join(mine or lines[-1:])[:limit]


@dataclass(frozen=True)
class DoctorReport:
    checks: tuple[Check, ...]
    facts: DoctorFacts


def _probe(facts: dict[str, Fact], name: str) -> bool | None:
    fact = facts.get(name)
    return None if fact is None else fact.status == 0


def _enforced(enforce: str | None) -> bool | None:
    """Whether AccountingStorageEnforce enforces limits (``safe`` and ``qos`` imply ``limits``)."""
    if enforce is None:
        return None
    words = {w.strip().lower() for w in enforce.split(",")}
    return bool(words & {"limits", "safe", "qos"})


def read_doctor(text: str, *, executor: Executor = "slurm") -> DoctorReport:
    """The doctor exec's answer: its checks, the facts, and a check per finding."""
    checks = parse_doctor_output(text)
    facts = parse_facts(text)
    shell = (facts["login_shell"].output.strip() or None) if "login_shell" in facts else None
    if executor != "slurm":
        return DoctorReport(tuple(checks), DoctorFacts(login_shell=shell))
    version_fact = facts.get("version")
    version = parse_slurm_version(version_fact.output) if version_fact else None
    config_fact = facts.get("config")
    config = parse_config(config_fact.output) if config_fact and config_fact.status == 0 else {}
    storage = config.get("AccountingStorageType")
    enabled = None if storage is None else storage != NO_ACCOUNTING
    sacct = next((c for c in checks if c.name == "accounting"), None)
    reachable = None if sacct is None or enabled is False else sacct.ok
    limits: list[Limit] = []
    if "assoc" in facts and facts["assoc"].status == 0:
        assoc, qos_names = parse_assoc(facts["assoc"].output, cluster=config.get("ClusterName"))
        limits += assoc
        if "qos" in facts and facts["qos"].status == 0:
            limits += parse_qos(facts["qos"].output, set(qos_names))
    queued_text = facts["queued"].output.strip() if "queued" in facts else ""
    dep = _dependency(facts)
    result = DoctorFacts(
        slurm_version=version,
        config=config,
        accounting_enabled=enabled,
        accounting_reachable=reachable,
        login_shell=shell,
        afternotok=dep,
        kill_on_invalid_dep=_probe(facts, "test_kill") if _probe(facts, "test_base") else None,
        limits=tuple(limits),
        limits_enforced=_enforced(config.get("AccountingStorageEnforce")),
        queued=int(queued_text) if queued_text.isdigit() else None,
    )
    checks = _with_accounting(checks, result)
    checks += _finding_checks(result, facts, version_fact)
    return DoctorReport(tuple(checks), result)


def _dependency(facts: dict[str, Fact]) -> bool | None:
    """afternotok accepted? None when the probe cannot tell.

    A base submission that fails tells nothing about the option. 24.11 refuses afternotok on
    a job slurmctld does not know ("Job dependency problem", job_scheduler.c), 22.05 accepts
    it; so when afternotok fails but afterok on the same job fails too, the probe job was
    the problem, not the option. (Not afterany: 24.11 accepts afterany on an unknown job,
    measured on the dev cluster, so it cannot tell the two apart.)
    """
    if not _probe(facts, "test_base"):
        return None
    if _probe(facts, "test_afternotok"):
        return True
    return False if _probe(facts, "test_afterok") else None


def _with_accounting(checks: list[Check], facts: DoctorFacts) -> list[Check]:
    """A cluster without accounting is a warning with its meaning, not a broken sacct."""
    if facts.accounting_enabled is not False:
        return checks
    storage = facts.config.get("AccountingStorageType", NO_ACCOUNTING)
    return [
        Check(
            "accounting",
            True,
            f"no accounting on this cluster (AccountingStorageType={storage})",
            NOT_VISIBLE_MEANING,
            warn=True,
        )
        if c.name == "accounting"
        else c
        for c in checks
    ]


def _finding_checks(
    facts: DoctorFacts, raw: dict[str, Fact], version_fact: Fact | None
) -> list[Check]:
    out = []
    if facts.slurm_version:
        out.append(Check("slurm_version", True, facts.slurm_version))
    elif version_fact is not None:
        out.append(
            Check(
                "slurm_version",
                False,
                f"sbatch --version said: {_first_line(version_fact.output) or 'nothing'}",
                "load Slurm's commands in your login environment",
            )
        )
    base = raw.get("test_base")
    if base is not None:
        out.append(
            Check(
                "submit",
                base.status == 0,
                "sbatch --test-only with the profile's options: "
                + ("accepted" if base.status == 0 else _first_line(base.output)),
                ""
                if base.status == 0
                else "fix [slurm] partition/account/qos/time in the profile: every link of a "
                "chain is submitted with them",
            )
        )
    if base is not None and base.status == 0:
        out += _option_checks(facts, raw)
    if facts.login_shell:
        out.append(_shell_check(facts.login_shell))
    if raw.get("assoc") is not None or facts.limits:
        out.append(_limits_check(facts))
    return out


def _option_checks(facts: DoctorFacts, raw: dict[str, Fact]) -> list[Check]:
    out = []
    kill = raw.get("test_kill")
    out.append(
        Check(
            "option:kill-on-invalid-dep",
            bool(facts.kill_on_invalid_dep),
            "sbatch accepts --kill-on-invalid-dep=yes"
            if facts.kill_on_invalid_dep
            else _first_line(kill.output if kill else ""),
            ""
            if facts.kill_on_invalid_dep
            else "every successor is submitted with it: resumable chains cannot continue here",
        )
    )
    probe = raw.get("probe_job")
    job = probe.output.strip() if probe else "?"
    if facts.afternotok is None:
        out.append(
            Check(
                "dependency:afternotok",
                True,
                f"could not tell: slurmctld does not know job {job} (Slurm 24.11 refuses "
                "afternotok on an unknown job; 22.05 accepts it)",
                "run doctor again while any job is in the queue",
                warn=True,
            )
        )
    else:
        fact = raw.get("test_afternotok")
        out.append(
            Check(
                "dependency:afternotok",
                facts.afternotok,
                "sbatch accepts --dependency=afternotok"
                if facts.afternotok
                else _first_line(fact.output if fact else ""),
                ""
                if facts.afternotok
                else "resumable chains queue each successor with afternotok: use plain "
                "(non-resumable) benchmarks here, or ask the admins",
            )
        )
    return out


def _shell_check(shell: str) -> Check:
    name = shell.rsplit("/", 1)[-1]
    rc = SHELL_RC.get(name)
    if rc is None:
        return Check(
            "login_shell",
            True,
            shell,
            "remote-chain runs its scripts with bash; make sure Slurm's commands are on PATH "
            "for a non-interactive `ssh host command` in this shell",
            warn=True,
        )
    return Check(
        "login_shell",
        True,
        shell,
        f"a non-interactive ssh command reads {rc}: set PATH (module load slurm) there",
    )


def _limits_check(facts: DoctorFacts) -> Check:
    if not facts.limits:
        return Check("job_limits", True, "no per-user job limits reported (sacctmgr)")
    detail = ", ".join(f"{lim.name}={lim.value} ({lim.source})" for lim in facts.limits)
    submit = [lim.value for lim in facts.limits if lim.refuses]
    means = (
        "a resumable chain holds a pending successor beside each running link: a run needs up "
        "to 2 queue slots per resumable benchmark"
    )
    if submit:
        room = max(0, min(submit) - (facts.queued or 0))
        means += f"; with {facts.queued or 0} jobs queued now, {room // 2} resumable benchmarks fit"
    if facts.limits_enforced is False:
        means += (
            " (AccountingStorageEnforce does not include limits: Slurm does not enforce them now)"
        )
    return Check("job_limits", True, detail, means, warn=bool(submit))
