"""doctor's findings from literal recorded Slurm output (22.05 on the dev cluster; 24.11 as its
source prints it), and what each finding means: pure, no cluster."""

from __future__ import annotations

import pytest

from remote_chain.execs.doctor import parse_config, parse_slurm_version, read_doctor
from remote_chain.protocol.wire import encode

BANNER = "Welcome to the remote-chain dev cluster (noise line)\n"
# `scontrol show config` of the dev cluster's `local` (22.05.8), abridged; 24.11 prints the same
# "%-23s = %s" lines (src/api/config_info.c in both).
CONFIG_2205 = """\
Configuration data as of 2026-11-30T19:30:54
AccountingStorageBackupHost = (null)
AccountingStorageEnforce = none
AccountingStorageHost   = 127.0.0.1
AccountingStorageType   = accounting_storage/slurmdbd
ClusterName             = local
JobRequeue              = 0
MaxJobCount             = 10000
MinJobAge               = 10 sec
PreemptMode             = CANCEL
SLURM_VERSION           = 22.05.8
"""
CONFIG_NO_ACCOUNTING = """\
Configuration data as of 2026-11-30T19:30:54
AccountingStorageEnforce = none
AccountingStorageType   = accounting_storage/none
ClusterName             = noacct
MinJobAge               = 300 sec
"""
TEST_OK = (
    "sbatch: Job 269 to start at 2026-11-30T19:30:54 using 1 processors on nodes local-n1 "
    "in partition debug"
)
DEP_PROBLEM = "allocation failure: Job dependency problem"


def fact(name: str, status: int, output: str) -> str:
    return encode("FACT", name, str(status), output)


def check(name: str, ok: bool, detail: str) -> str:
    state = "ok" if ok else "fail"
    return encode("CHECK", name, state, detail)


def answer(**over: tuple[int, str]) -> str:
    facts = {
        "login_shell": (0, "/bin/bash"),
        "version": (0, BANNER + "slurm-wlm 22.05.8\n"),
        "config": (0, BANNER + CONFIG_2205),
        "assoc": (0, BANNER + "local|rc|rcuser||||normal\nlocal2|rc|rcuser||||normal\n"),
        "qos": (0, BANNER + "normal||\n"),
        "queued": (0, "2"),
        "probe_job": (0, "268"),
        "test_base": (0, BANNER + TEST_OK),
        "test_kill": (0, BANNER + TEST_OK),
        "test_afternotok": (0, BANNER + TEST_OK),
        "test_afterok": (0, BANNER + TEST_OK),
        **over,
    }
    text = BANNER + check("login", True, "rcuser on vm")
    text += check("accounting", True, "sacct answers (3 jobs in the last hour)")
    text += "".join(fact(name, status, out) for name, (status, out) in facts.items())
    return text + "DONE\n"


@pytest.mark.parametrize(
    ("text", "version"),
    [
        (BANNER + "slurm-wlm 22.05.8\n", "22.05.8"),  # Debian 12's package
        ("slurm 24.11.5\n", "24.11.5"),  # upstream: PACKAGE_NAME SLURM_VERSION_STRING
        ("slurm-wlm 24.11.5\n", "24.11.5"),  # Debian 13's package
        ("slurm 23.11.0-0rc1\n", "23.11.0-0rc1"),
        ("bash: sbatch: command not found\n", None),
        ("", None),
    ],
)
def test_slurm_version_from_sbatch_version(text: str, version: str | None) -> None:
    """`sbatch --version` of either packaging gives the version; anything else gives None."""
    assert parse_slurm_version(text) == version


def test_config_keys_are_read_and_noise_skipped() -> None:
    """The keys doctor reports come from `scontrol show config`; other lines are ignored."""
    config = parse_config(BANNER + CONFIG_2205)
    assert config["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert config["ClusterName"] == "local"
    assert config["MinJobAge"] == "10 sec"
    assert "AccountingStorageHost" not in config


def test_a_healthy_2205_cluster() -> None:
    """The dev cluster's answer: every finding passes, with the facts doctor --json reports."""
    report = read_doctor(answer())
    assert all(c.ok and not c.warn for c in report.checks)
    doc = report.facts.to_json()
    assert doc["slurm_version"] == "22.05.8"
    assert doc["accounting"] == {
        "enabled": True,
        "reachable": True,
        "storage_type": "accounting_storage/slurmdbd",
        "enforce": "none",
    }
    assert doc["login_shell"] == "/bin/bash"
    assert doc["dependency_options"] == {"afternotok": True, "kill_on_invalid_dep": True}
    assert doc["job_limits"] == {"limits": [], "enforced": False, "queued_now": 2}
    names = [c.name for c in report.checks]
    assert names[-6:] == [
        "slurm_version",
        "submit",
        "option:kill-on-invalid-dep",
        "dependency:afternotok",
        "login_shell",
        "job_limits",
    ]


def test_no_accounting_is_a_warning_saying_what_it_means() -> None:
    """Without slurmdbd, sacct fails, but doctor says what that means for resumable runs."""
    text = answer(config=(0, CONFIG_NO_ACCOUNTING)).replace(
        check("accounting", True, "sacct answers (3 jobs in the last hour)"),
        check("accounting", False, "Slurm accounting storage is disabled"),
    )
    report = read_doctor(text)
    (acct,) = [c for c in report.checks if c.name == "accounting"]
    assert (acct.ok, acct.level) == (True, "warn")
    assert "AccountingStorageType=accounting_storage/none" in acct.detail
    assert "not visible" in acct.hint
    assert "max_walltime" in acct.hint
    assert report.facts.accounting_enabled is False
    assert report.facts.accounting_reachable is None


def test_accounting_on_but_down_fails() -> None:
    """slurmdbd configured but not answering is a failed check (reachable: false)."""
    text = answer().replace(
        check("accounting", True, "sacct answers (3 jobs in the last hour)"),
        check("accounting", False, "sacct: error: Problem talking to the database"),
    )
    report = read_doctor(text)
    assert report.facts.accounting_enabled is True
    assert report.facts.accounting_reachable is False
    assert not next(c for c in report.checks if c.name == "accounting").ok


def test_afternotok_refused_while_afterok_accepted_is_a_failure() -> None:
    """A site that refuses afternotok (afterok on the same job passes) fails the check."""
    refusal = BANNER + "sbatch: error: Batch job submission failed: Job dependency problem"
    report = read_doctor(answer(test_afternotok=(1, refusal)))
    assert report.facts.afternotok is False
    (dep,) = [c for c in report.checks if c.name == "dependency:afternotok"]
    assert not dep.ok
    assert "Job dependency problem" in dep.detail
    assert "non-resumable" in dep.hint


def test_afternotok_on_a_job_2411_does_not_know_is_inconclusive() -> None:
    """24.11 refuses afternotok on an unknown job; with afterok refused too, doctor cannot tell."""
    report = read_doctor(
        answer(
            version=(0, "slurm 24.11.5\n"),
            probe_job=(0, "1"),
            test_afternotok=(1, DEP_PROBLEM),
            test_afterok=(1, DEP_PROBLEM),
        )
    )
    assert report.facts.slurm_version == "24.11.5"
    assert report.facts.afternotok is None
    (dep,) = [c for c in report.checks if c.name == "dependency:afternotok"]
    assert (dep.ok, dep.level) == (True, "warn")
    assert "job 1" in dep.detail


def test_kill_on_invalid_dep_refused_fails() -> None:
    """An sbatch without --kill-on-invalid-dep cannot queue successors: a failed check."""
    err = "sbatch: unrecognized option '--kill-on-invalid-dep=yes'"
    report = read_doctor(answer(test_kill=(255, err)))
    assert report.facts.kill_on_invalid_dep is False
    (kill,) = [c for c in report.checks if c.name == "option:kill-on-invalid-dep"]
    assert not kill.ok
    assert kill.detail == err


def test_profile_options_refused_fail_the_submit_check_only() -> None:
    """A bad partition fails `submit`; the option probes are not judged on it."""
    err = "sbatch: error: invalid partition specified: nope\nallocation failure: Invalid partition"
    report = read_doctor(answer(test_base=(1, err), test_kill=(1, err), test_afternotok=(1, err)))
    (submit,) = [c for c in report.checks if c.name == "submit"]
    assert not submit.ok
    assert "invalid partition specified: nope" in submit.detail
    assert "partition" in submit.hint
    assert report.facts.afternotok is None
    assert report.facts.kill_on_invalid_dep is None
    assert not any(c.name.startswith(("option:", "dependency:")) for c in report.checks)


def test_limits_say_how_many_resumable_benchmarks_fit() -> None:
    """MaxSubmitJobs=10 with 2 jobs queued: 4 resumable benchmarks fit; the check warns."""
    assoc = "local|rc|rcuser||4|10|normal,long\nlocal2|rc|rcuser||1|1|normal\n"
    report = read_doctor(answer(assoc=(0, assoc), qos=(0, "normal||\nlong|2|\n")))
    (lim,) = [c for c in report.checks if c.name == "job_limits"]
    assert lim.level == "warn"
    assert "MaxSubmitJobs=10 (association rc/rcuser on local)" in lim.detail
    assert "MaxJobsPU=2 (QOS long)" in lim.detail
    assert "local2" not in lim.detail
    assert "4 resumable benchmarks fit" in lim.hint
    assert "does not enforce" in lim.hint
    limits = report.facts.to_json()["job_limits"]
    assert isinstance(limits, dict)
    assert {"limit": "MaxSubmitJobs", "value": 10, "source": "association rc/rcuser on local"} in (
        limits["limits"]
    )


@pytest.mark.parametrize(
    ("shell", "rc"),
    [("/bin/bash", "~/.bashrc"), ("/usr/bin/zsh", "~/.zshenv"), ("/bin/tcsh", "~/.tcshrc")],
)
def test_login_shell_says_which_rc_file_is_read(shell: str, rc: str) -> None:
    """The login shell is reported with the rc file a non-interactive ssh command reads."""
    report = read_doctor(answer(login_shell=(0, shell)))
    (sh,) = [c for c in report.checks if c.name == "login_shell"]
    assert sh.detail == shell
    assert rc in sh.hint


def test_shell_executor_reports_no_slurm_facts() -> None:
    """A shell-executor profile has no Slurm: no version, no probes, only the login facts."""
    text = check("login", True, "u on h") + fact("login_shell", 0, "/bin/zsh") + "DONE\n"
    report = read_doctor(text, executor="shell")
    assert report.facts.slurm_version is None
    assert report.facts.login_shell == "/bin/zsh"
    assert [c.name for c in report.checks] == ["login"]
