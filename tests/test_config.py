"""Submit configs and cluster profiles: interface.md's shapes, and every way to get them wrong."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from remote_chain.config import (
    BenchmarkConfig,
    EnvVar,
    ResumableSpec,
    SlurmOptions,
    SubmitConfig,
    check_for_cluster,
    default_clusters_dirs,
    effective_slurm,
    find_profile,
    list_profiles,
    load_profile,
    load_submit_config,
)
from remote_chain.config.settings import Settings
from remote_chain.config.yamlload import MAX_DEPTH, load_yaml
from remote_chain.errors import ConfigError
from remote_chain.execs.submit import RECORD_FILE, SUBMIT_LOG
from remote_chain.job.script import CHAIN_FILE, SINCE_FILE

REPO = Path(__file__).resolve().parent.parent

SPEC_EXAMPLE = """\
driver:
  runner: "gym eval run"
  env:
    HF_HOME: /lustre/cache
  upload:
    - rollouts.py
  benchmarks:
    gpqa:
      resumable: true
      run:
        config_paths:
          - benchmarks/gpqa/config.yaml
      slurm:
        time: "04:00:00"
        extra_args: ["--gpus-per-node=8"]
    aime:
      resumable:
        max_retries: 5
        max_walltime: "48:00:00"
      run: {config_paths: [benchmarks/aime/config.yaml]}
    smoke:
      command: "python3 -c 'print(42)'"
"""

PROFILE = """\
host = "eos"
workdir = "/lustre/fsw/alice/remote-chain"

[slurm]
partition = "batch"
account = "proj"
time = "04:00:00"
extra_args = ["--exclusive"]
"""


def write(folder: Path, name: str, content: str | bytes) -> Path:
    path = folder / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def load(path: Path, environ: dict[str, str] | None = None) -> SubmitConfig:
    return load_submit_config(path, environ={} if environ is None else environ)


# --- the good path ------------------------------------------------------------------------


def test_spec_example_loads(tmp_path: Path) -> None:
    """The submit config of interface.md section 1 loads with the values it spells out."""
    write(tmp_path, "rollouts.py", "")
    config = load_submit_config(write(tmp_path, "submit.yaml", SPEC_EXAMPLE), environ={})
    driver = config.driver
    assert driver.runner == "gym eval run"
    assert driver.env == (EnvVar(name="HF_HOME", value="/lustre/cache", secret=False),)
    assert driver.upload == ((tmp_path / "rollouts.py").resolve(),)
    gpqa, aime, smoke = (driver.benchmarks[n] for n in ("gpqa", "aime", "smoke"))
    assert gpqa.resume == ResumableSpec(max_retries=3, max_walltime=None)
    assert gpqa.run == {"config_paths": ["benchmarks/gpqa/config.yaml"]}
    assert gpqa.slurm.time == 4 * 3600
    assert gpqa.slurm.extra_args == ("--gpus-per-node=8",)
    assert aime.resume == ResumableSpec(max_retries=5, max_walltime=48 * 3600)
    assert smoke.resume is None
    assert smoke.command == "python3 -c 'print(42)'"
    assert config.source == (tmp_path / "submit.yaml").absolute()


def test_unquoted_durations_stay_strings_and_parse(tmp_path: Path) -> None:
    """`time: 48:00:00` unquoted is 48 hours, not YAML 1.1's base-60 number 172800 minutes."""
    text = "driver:\n  benchmarks:\n    b:\n      resumable: {max_walltime: 48:00:00}\n"
    text += "      slurm: {time: 90:00}\n"
    bench = load_submit_config(write(tmp_path, "s.yaml", text)).driver.benchmarks["b"]
    assert bench.resume is not None
    assert bench.resume.max_walltime == 48 * 3600
    assert bench.slurm.time == 90 * 60


def test_bare_int_is_minutes_in_a_file_and_seconds_in_python(tmp_path: Path) -> None:
    """`time: 90` in YAML is 90 minutes as sbatch reads it; SlurmOptions(time=90) is 90 seconds."""
    path = write(tmp_path, "s.yaml", "driver:\n  benchmarks:\n    b: {slurm: {time: 90}}\n")
    assert load_submit_config(path).driver.benchmarks["b"].slurm.time == 90 * 60
    assert SlurmOptions(time=90).time == 90
    assert ResumableSpec(max_walltime=172800).max_walltime == 172800


def test_runner_without_run_or_command_is_allowed(tmp_path: Path) -> None:
    """A benchmark with neither run nor command runs the runner without arguments."""
    path = write(tmp_path, "s.yaml", "driver:\n  benchmarks:\n    plain: {}\n")
    bench = load_submit_config(path).driver.benchmarks["plain"]
    assert (bench.run, bench.command, bench.resume) == (None, None, None)


def test_example_config_and_profile_load_together() -> None:
    """examples/rollouts.yaml and clusters/example.toml load and fit together."""
    config = load_submit_config(REPO / "examples" / "rollouts.yaml", environ={})
    profile = find_profile("example", clusters_dirs=[REPO / "clusters"])
    check_for_cluster(config, profile)
    demo = config.driver.benchmarks["demo"]
    assert config.driver.runner == "python3 ../files/rollouts.py"
    assert config.driver.upload == ((REPO / "examples" / "rollouts.py").resolve(),)
    assert demo.resume is not None
    assert demo.run == {"items": 45, "sleep": 2}
    assert effective_slurm(profile, demo).time == 60
    assert config.driver.benchmarks["smoke"].command == "echo hello"
    assert profile.host == "eos"
    assert profile.slurm.partition == "batch"


def test_env_forms_and_secrets(tmp_path: Path) -> None:
    """Plain, {value, secret} and {from_env} entries load; secrets never show in repr or str."""
    text = """\
driver:
  env:
    PLAIN: hello
    THREADS: 8
    TOKEN: {from_env: LOCAL_TOKEN}
    SHOWN: {from_env: LOCAL_TOKEN, secret: false}
    PASSWORD: {value: hunter2, secret: true}
  benchmarks: {b: {}}
"""
    env = load_submit_config(
        write(tmp_path, "s.yaml", text), environ={"LOCAL_TOKEN": "tok-123"}
    ).driver.env
    assert [(e.name, e.value, e.secret) for e in env] == [
        ("PLAIN", "hello", False),
        ("THREADS", "8", False),
        ("TOKEN", "tok-123", True),
        ("SHOWN", "tok-123", False),
        ("PASSWORD", "hunter2", True),
    ]
    shown = repr(env) + str(env[2]) + str(env[4])
    assert "tok-123" not in shown.replace(repr(env[3]), "")
    assert "hunter2" not in shown
    assert "PASSWORD" in repr(env[4])


def test_upload_is_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upload entries resolve against the config's folder, not the current directory."""
    (tmp_path / "cfg" / "tools").mkdir(parents=True)
    write(tmp_path / "cfg" / "tools", "x.py", "")
    path = write(
        tmp_path / "cfg",
        "s.yaml",
        "driver:\n  upload: [tools, tools/x.py]\n  benchmarks: {b: {}}\n",
    )
    monkeypatch.chdir(tmp_path)
    upload = load_submit_config(Path("cfg/s.yaml")).driver.upload
    assert upload == (
        (tmp_path / "cfg" / "tools").resolve(),
        (tmp_path / "cfg" / "tools" / "x.py").resolve(),
    )
    assert path.exists()


def test_models_are_frozen_and_round_trip(tmp_path: Path) -> None:
    """Models refuse assignment, and durations dump back in Slurm's form and reload equal."""
    write(tmp_path, "rollouts.py", "")
    config = load_submit_config(write(tmp_path, "s.yaml", SPEC_EXAMPLE), environ={})
    aime = config.driver.benchmarks["aime"]
    with pytest.raises(ValidationError):
        aime.command = "x"  # type: ignore[misc]  # the assignment a frozen model refuses is the point
    dumped = aime.model_dump()
    assert dumped["resumable"]["max_walltime"] == "2-00:00:00"
    assert BenchmarkConfig.model_validate(dumped) == aime
    gpqa_slurm = config.driver.benchmarks["gpqa"].slurm
    assert SlurmOptions.model_validate(gpqa_slurm.model_dump()) == gpqa_slurm


def test_effective_slurm_merges_benchmark_over_profile(tmp_path: Path) -> None:
    """Keys the benchmark sets win, unset keys keep the profile's, extra_args add up in order."""
    profile = load_profile(write(tmp_path, "eos.toml", PROFILE + 'admin_cancel = "preempt"\n'))
    bench = BenchmarkConfig.model_validate(
        {"slurm": {"time": "1:00:00", "qos": "high", "extra_args": ["--gpus-per-node=8"]}}
    )
    merged = effective_slurm(profile, bench)
    assert merged == SlurmOptions(
        partition="batch",
        account="proj",
        qos="high",
        time=3600,
        extra_args=("--exclusive", "--gpus-per-node=8"),
        admin_cancel="preempt",
    )
    assert effective_slurm(profile, BenchmarkConfig()) == profile.slurm


def test_profile_fields_and_paths(tmp_path: Path) -> None:
    """A full profile loads; its name is the file stem and relative key paths follow the file."""
    text = PROFILE.replace(
        'host = "eos"',
        'host = "eos"\nport = 2222\nuser = "alice"\nidentity_file = "keys/id"\n'
        'transport = "openssh"\ncontrol_path = "~/.ssh/cm-%r@%h:%p"\nexecutor = "shell"',
    )
    profile = load_profile(write(tmp_path, "eos-2.toml", text))
    assert profile.name == "eos-2"
    assert (profile.port, profile.user, profile.executor, profile.transport) == (
        2222,
        "alice",
        "shell",
        "openssh",
    )
    assert profile.identity_file == tmp_path / "keys" / "id"
    assert profile.workdir == "/lustre/fsw/alice/remote-chain"
    assert profile.slurm.time == 14400


def test_check_local_files_names_the_missing_key(tmp_path: Path) -> None:
    """A missing identity file fails check_local_files (not loading) and names file and key."""
    path = write(tmp_path, "eos.toml", 'identity_file = "nokey"\n' + PROFILE)
    profile = load_profile(path)
    with pytest.raises(ConfigError) as info:
        profile.check_local_files()
    assert info.value.field == "identity_file"
    assert info.value.source == str(path.absolute())
    assert str(tmp_path / "nokey") in str(info.value)
    write(tmp_path, "nokey", "key")
    profile.check_local_files()


# --- lookup order ---------------------------------------------------------------------------


def _profiles(root: Path, folder: str, names: dict[str, str]) -> Path:
    path = root / folder
    path.mkdir(parents=True)
    for name, host in names.items():
        write(path, f"{name}.toml", f'host = "{host}"\nworkdir = "/w"\n')
    return path


def test_first_folder_wins(tmp_path: Path) -> None:
    """find_profile and list_profiles take a name from the first folder that has it."""
    first = _profiles(tmp_path, "a", {"eos": "eos-a"})
    second = _profiles(tmp_path, "b", {"eos": "eos-b", "draco": "draco-b"})
    assert find_profile("eos", clusters_dirs=[first, second]).host == "eos-a"
    assert find_profile("eos", clusters_dirs=[second, first]).host == "eos-b"
    listed = list_profiles([first, second, tmp_path / "missing"])
    assert [(p.name, p.host) for p in listed] == [("draco", "draco-b"), ("eos", "eos-a")]


def test_default_dirs_follow_the_interface_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--clusters-dir, then REMOTE_CHAIN_CLUSTERS_DIR's folders, ./clusters, the user config."""
    cli = _profiles(tmp_path, "cli", {"eos": "from-cli"})
    env1 = _profiles(tmp_path, "env1", {"eos": "from-env1", "draco": "from-env1"})
    env2 = _profiles(tmp_path, "env2", {"selene": "from-env2"})
    work = tmp_path / "work"
    _profiles(work, "clusters", {"eos": "from-cwd", "local": "from-cwd"})
    _profiles(tmp_path, "xdg/remote-chain/clusters", {"home": "from-home"})
    monkeypatch.chdir(work)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("REMOTE_CHAIN_CLUSTERS_DIR", f"{env1}{os.pathsep}{os.pathsep}{env2}")
    dirs = default_clusters_dirs(cli, Settings(_env_file=None))
    assert dirs == [cli, env1, env2, work / "clusters", tmp_path / "xdg/remote-chain/clusters"]
    hosts = {
        n: find_profile(n, clusters_dirs=dirs).host
        for n in ("eos", "draco", "selene", "local", "home")
    }
    assert hosts == {
        "eos": "from-cli",
        "draco": "from-env1",
        "selene": "from-env2",
        "local": "from-cwd",
        "home": "from-home",
    }
    no_cli = default_clusters_dirs(None, Settings(_env_file=None))
    assert find_profile("eos", clusters_dirs=no_cli).host == "from-env1"


def test_missing_explicit_clusters_dir_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --clusters-dir or REMOTE_CHAIN_CLUSTERS_DIR that is no folder is an error, not skipped."""
    monkeypatch.delenv("REMOTE_CHAIN_CLUSTERS_DIR", raising=False)
    with pytest.raises(ConfigError) as info:
        default_clusters_dirs(tmp_path / "typo", Settings(_env_file=None))
    assert (info.value.source, info.value.field) == ("<command line>", "--clusters-dir")
    monkeypatch.setenv("REMOTE_CHAIN_CLUSTERS_DIR", str(tmp_path / "gone"))
    with pytest.raises(ConfigError) as info:
        default_clusters_dirs(None, Settings(_env_file=None))
    assert info.value.field == "REMOTE_CHAIN_CLUSTERS_DIR"
    assert str(tmp_path / "gone") in str(info.value)


def test_unknown_cluster_lists_folders_and_profiles(tmp_path: Path) -> None:
    """An unknown name names every folder searched and every profile that was found."""
    first = _profiles(tmp_path, "a", {"eos": "x"})
    second = _profiles(tmp_path, "b", {"draco": "y"})
    with pytest.raises(ConfigError) as info:
        find_profile("selene", clusters_dirs=[first, second, tmp_path / "nope"])
    error = info.value
    assert (error.source, error.field) == ("<command line>", "cluster")
    for part in (str(first), str(second), f"{tmp_path / 'nope'} (missing)", "draco, eos", "selene"):
        assert part in str(error)


@pytest.mark.parametrize("name", ["../a/eos", "a/b", "", "..", "eos\n"])
def test_cluster_name_cannot_escape_the_folder(tmp_path: Path, name: str) -> None:
    """A cluster name is a file stem, never a path."""
    _profiles(tmp_path, "a/b", {"eos": "x"})
    with pytest.raises(ConfigError) as info:
        find_profile(name, clusters_dirs=[tmp_path / "a"])
    assert info.value.field == "cluster"


# --- bad submit configs -------------------------------------------------------------------

BENCH = "driver:\n  benchmarks:\n    gpqa:\n"
BAD_SUBMIT: list[tuple[str, str | bytes, str | None, str]] = [
    # (id, file content, field, message regex)
    ("yaml-syntax", "driver:\n  benchmarks: [\n", None, r"invalid YAML at line \d+"),
    ("yaml-tab-indent", "driver:\n\tbenchmarks: {}\n", None, r"line 2"),
    ("non-utf8", b"driver:\n  runner: \xff\xfe\n", None, r"not UTF-8.*line 2"),
    (
        "alias-bomb",
        "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
        + "driver: *a8\n",
        None,
        r"line \d+.*aliases expand to more than",
    ),
    ("alias-undefined", "driver: *x\n", None, r"undefined alias"),
    (
        "duplicate-key",
        "driver:\n  benchmarks: {b: {}}\n  benchmarks: {c: {}}\n",
        None,
        "duplicate key",
    ),
    ("duplicate-bench", BENCH + "      {}\n    gpqa: {}\n", None, "duplicate key 'gpqa'"),
    ("empty-file", "", None, "mapping with a 'driver' key"),
    ("top-level-list", "- driver\n", None, "mapping with a 'driver' key"),
    ("two-documents", "driver: {}\n---\ndriver: {}\n", None, "single document"),
    ("missing-driver", "drivers: {}\n", "driver", "required"),
    ("unknown-top-key", "driver: {benchmarks: {b: {}}}\nextra: 1\n", "extra", "unknown key"),
    (
        "unknown-driver-key",
        "driver:\n  runnr: x\n  benchmarks: {b: {}}\n",
        "driver.runnr",
        "did you mean 'runner'",
    ),
    (
        "unknown-bench-key",
        BENCH + "      resumabel: true\n",
        "driver.benchmarks.gpqa.resumabel",
        "did you mean 'resumable'",
    ),
    (
        "unknown-resumable-key",
        BENCH + "      resumable: {max_retry: 2}\n",
        "driver.benchmarks.gpqa.resumable.max_retry",
        "did you mean 'max_retries'",
    ),
    (
        "unknown-slurm-key",
        BENCH + "      slurm: {partiton: batch}\n",
        "driver.benchmarks.gpqa.slurm.partiton",
        "did you mean 'partition'",
    ),
    (
        "unknown-env-key",
        "driver:\n  env: {T: {valeu: x}}\n  benchmarks: {b: {}}\n",
        "driver.env.T",
        "unknown key 'valeu'",
    ),
    (
        "runner-not-string",
        "driver:\n  runner: 5\n  benchmarks: {b: {}}\n",
        "driver.runner",
        r"valid string \(got int\)",
    ),
    ("runner-empty", "driver:\n  runner: ''\n  benchmarks: {b: {}}\n", "driver.runner", "empty"),
    (
        "benchmarks-list",
        "driver:\n  benchmarks: [gpqa]\n",
        "driver.benchmarks",
        r"dictionary \(got list\)",
    ),
    ("benchmarks-empty", "driver:\n  benchmarks: {}\n", "driver.benchmarks", "at least one"),
    ("benchmarks-missing", "driver:\n  runner: x\n", "driver.benchmarks", "required"),
    ("bench-not-mapping", BENCH + "      true\n", "driver.benchmarks.gpqa", "dictionary"),
    (
        "run-not-mapping",
        BENCH + "      run: gpqa.yaml\n",
        "driver.benchmarks.gpqa.run",
        "dictionary",
    ),
    (
        "run-bad-key",
        BENCH + "      run: {'a b': 1}\n",
        'driver.benchmarks.gpqa.run["a b"]',
        "argument name",
    ),
    (
        "run-list-of-maps",
        BENCH + "      run: {xs: [{a: 1}]}\n",
        "driver.benchmarks.gpqa.run.xs[0]",
        "list may hold only",
    ),
    ("run-nan", BENCH + "      run: {x: .nan}\n", "driver.benchmarks.gpqa.run.x", "finite"),
    (
        "run-empty-nested",
        BENCH + "      run: {x: {}}\n",
        "driver.benchmarks.gpqa.run.x",
        "empty mapping",
    ),
    (
        "max-retries-negative",
        BENCH + "      resumable: {max_retries: -1}\n",
        "driver.benchmarks.gpqa.resumable.max_retries",
        "greater than or equal to 0",
    ),
    (
        "max-retries-absurd",
        BENCH + "      resumable: {max_retries: 100000}\n",
        "driver.benchmarks.gpqa.resumable.max_retries",
        "less than or equal to 1000",
    ),
    (
        "max-retries-string",
        BENCH + "      resumable: {max_retries: '3'}\n",
        "driver.benchmarks.gpqa.resumable.max_retries",
        r"valid integer \(got string\)",
    ),
    (
        "max-retries-bool",
        BENCH + "      resumable: {max_retries: true}\n",
        "driver.benchmarks.gpqa.resumable.max_retries",
        "valid integer",
    ),
    (
        "max-retries-float",
        BENCH + "      resumable: {max_retries: 2.5}\n",
        "driver.benchmarks.gpqa.resumable.max_retries",
        "valid integer",
    ),
    (
        "resumable-string",
        BENCH + "      resumable: 'yes'\n",
        "driver.benchmarks.gpqa.resumable",
        "true, false or a mapping",
    ),
    (
        "resumable-null",
        BENCH + "      resumable: null\n",
        "driver.benchmarks.gpqa.resumable",
        "true, false or a mapping",
    ),
    (
        "walltime-overflow-seconds",
        BENCH + "      resumable: {max_walltime: '10:99'}\n",
        "driver.benchmarks.gpqa.resumable.max_walltime",
        "seconds must be below 60",
    ),
    (
        "walltime-negative",
        BENCH + "      resumable: {max_walltime: -5}\n",
        "driver.benchmarks.gpqa.resumable.max_walltime",
        "negative",
    ),
    (
        "walltime-garbage",
        BENCH + "      resumable: {max_walltime: 2 days}\n",
        "driver.benchmarks.gpqa.resumable.max_walltime",
        "D-HH:MM:SS",
    ),
    (
        "walltime-zero",
        BENCH + "      resumable: {max_walltime: '0:00'}\n",
        "driver.benchmarks.gpqa.resumable.max_walltime",
        "longer than zero",
    ),
    (
        "walltime-year-plus",
        BENCH + "      resumable: {max_walltime: 400-00}\n",
        "driver.benchmarks.gpqa.resumable.max_walltime",
        "365 days",
    ),
    (
        "time-hours-overflow",
        BENCH + "      slurm: {time: 1-24}\n",
        "driver.benchmarks.gpqa.slurm.time",
        "hours must be below 24",
    ),
    (
        "time-minutes-overflow",
        BENCH + "      slurm: {time: '1:60:00'}\n",
        "driver.benchmarks.gpqa.slurm.time",
        "minutes must be below 60",
    ),
    (
        "time-float",
        BENCH + "      slurm: {time: 1.5}\n",
        "driver.benchmarks.gpqa.slurm.time",
        "float",
    ),
    (
        "time-bool",
        BENCH + "      slurm: {time: true}\n",
        "driver.benchmarks.gpqa.slurm.time",
        "bool",
    ),
    (
        "time-unlimited",
        BENCH + "      slurm: {time: UNLIMITED}\n",
        "driver.benchmarks.gpqa.slurm.time",
        "invalid duration",
    ),
    (
        "partition-space",
        BENCH + "      slurm: {partition: 'a b'}\n",
        "driver.benchmarks.gpqa.slurm.partition",
        "Slurm name",
    ),
    (
        "extra-arg-no-dashes",
        BENCH + "      slurm: {extra_args: [gpus=8]}\n",
        "driver.benchmarks.gpqa.slurm.extra_args[0]",
        "--name=value",
    ),
    (
        "extra-arg-newline",
        BENCH + '      slurm: {extra_args: ["--x=1\\n#SBATCH --y"]}\n',
        "driver.benchmarks.gpqa.slurm.extra_args[0]",
        "--name=value",
    ),
    (
        "extra-arg-time",
        BENCH + "      slurm: {extra_args: ['--exclusive', '--time=5']}\n",
        "driver.benchmarks.gpqa.slurm.extra_args[1]",
        "slurm key 'time'",
    ),
    (
        "extra-arg-prefix",
        BENCH + "      slurm: {extra_args: ['--part=x']}\n",
        "driver.benchmarks.gpqa.slurm.extra_args[0]",
        "slurm key 'partition'",
    ),
    (
        "extra-arg-chdir",
        BENCH + "      slurm: {extra_args: ['--chdir=/tmp']}\n",
        "driver.benchmarks.gpqa.slurm.extra_args[0]",
        "sets --chdir itself",
    ),
    (
        "extra-args-string",
        BENCH + "      slurm: {extra_args: '--exclusive'}\n",
        "driver.benchmarks.gpqa.slurm.extra_args",
        "valid tuple",
    ),
    (
        "admin-cancel",
        BENCH + "      slurm: {admin_cancel: ignore}\n",
        "driver.benchmarks.gpqa.slurm.admin_cancel",
        "'stop' or 'preempt'",
    ),
    (
        "name-space",
        "driver:\n  benchmarks:\n    my bench: {}\n",
        'driver.benchmarks["my bench"]',
        "invalid benchmark name",
    ),
    (
        "name-slash",
        "driver:\n  benchmarks:\n    a/b: {}\n",
        'driver.benchmarks["a/b"]',
        "invalid benchmark name",
    ),
    (
        "name-dotdot",
        "driver:\n  benchmarks:\n    ..: {}\n",
        'driver.benchmarks[".."]',
        "not '.' or '..'",
    ),
    (
        "name-dot",
        "driver:\n  benchmarks:\n    .: {}\n",
        'driver.benchmarks["."]',
        "not '.' or '..'",
    ),
    (
        "name-quote",
        'driver:\n  benchmarks:\n    "it\'s": {}\n',
        'driver.benchmarks["it\'s"]',
        "invalid benchmark name",
    ),
    (
        "name-command-subst",
        "driver:\n  benchmarks:\n    $(reboot): {}\n",
        'driver.benchmarks["$(reboot)"]',
        "invalid benchmark name",
    ),
    (
        "name-newline",
        'driver:\n  benchmarks:\n    "a\\nb": {}\n',
        'driver.benchmarks["a\\nb"]',
        "invalid benchmark name",
    ),
    (
        "name-trailing-newline",
        'driver:\n  benchmarks:\n    "ab\\n": {}\n',
        'driver.benchmarks["ab\\n"]',
        "invalid benchmark name",
    ),
    (
        "name-unicode",
        "driver:\n  benchmarks:\n    bénch: {}\n",
        'driver.benchmarks["b\\u00e9nch"]',
        "invalid benchmark name",
    ),
    ("name-int", "driver:\n  benchmarks:\n    1: {}\n", "driver.benchmarks[1]", "valid string"),
    (
        "name-reserved",
        "driver:\n  benchmarks:\n    files: {}\n",
        "driver.benchmarks.files",
        "reserved",
    ),
    (
        "name-too-long",
        "driver:\n  benchmarks:\n    " + "a" * 101 + ": {}\n",
        "driver.benchmarks." + "a" * 101,
        "longer than 100",
    ),
    (
        "command-and-resumable",
        "driver:\n  benchmarks:\n    smoke: {command: 'echo', resumable: true}\n",
        "driver.benchmarks.smoke.command",
        "cannot be resumable",
    ),
    (
        "command-and-resumable-map",
        "driver:\n  benchmarks:\n    smoke: {command: 'echo', resumable: {}}\n",
        "driver.benchmarks.smoke.command",
        "cannot be resumable",
    ),
    (
        "command-and-run",
        "driver:\n  benchmarks:\n    smoke: {command: 'echo', run: {a: 1}}\n",
        "driver.benchmarks.smoke.command",
        "either command or run",
    ),
    (
        "command-newline",
        'driver:\n  benchmarks:\n    smoke: {command: "a\\nb"}\n',
        "driver.benchmarks.smoke.command",
        "one line",
    ),
    (
        "upload-missing",
        "driver:\n  upload: [missing.py]\n  benchmarks: {b: {}}\n",
        "driver.upload[0]",
        "'missing.py' not found",
    ),
    (
        "upload-not-list",
        "driver:\n  upload: missing.py\n  benchmarks: {b: {}}\n",
        "driver.upload",
        "list of paths",
    ),
    (
        "upload-too-many",
        "driver:\n  upload: [" + ", ".join(["x"] * 1001) + "]\n  benchmarks: {b: {}}\n",
        "driver.upload",
        "at most 1000",
    ),
    (
        "env-bad-name",
        "driver:\n  env: {1X: a}\n  benchmarks: {b: {}}\n",
        "driver.env.1X",
        "invalid variable name",
    ),
    (
        "env-dash-name",
        "driver:\n  env: {A-B: a}\n  benchmarks: {b: {}}\n",
        "driver.env.A-B",
        "invalid variable name",
    ),
    (
        "env-reserved",
        "driver:\n  env: {REMOTE_CHAIN_RUN_ID: a}\n  benchmarks: {b: {}}\n",
        "driver.env.REMOTE_CHAIN_RUN_ID",
        "reserved",
    ),
    (
        "env-from-env-missing",
        "driver:\n  env: {T: {from_env: NOT_SET_HERE}}\n  benchmarks: {b: {}}\n",
        "driver.env.T",
        "NOT_SET_HERE is not set",
    ),
    (
        "env-both-forms",
        "driver:\n  env: {T: {from_env: A, value: b}}\n  benchmarks: {b: {}}\n",
        "driver.env.T",
        "exactly one",
    ),
    ("env-bool", "driver:\n  env: {T: yes}\n  benchmarks: {b: {}}\n", "driver.env.T", "quote it"),
    ("env-list", "driver:\n  env: [A=b]\n  benchmarks: {b: {}}\n", "driver.env", "mapping of NAME"),
    (
        "env-secret-string",
        "driver:\n  env: {T: {value: x, secret: 'yes'}}\n  benchmarks: {b: {}}\n",
        "driver.env.T",
        "true or false",
    ),
    ("yaml-custom-tag", "driver: !!python/object:os.system {}\n", None, "not allowed"),
    (
        "yaml-deep",
        "driver: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n",
        None,
        "nested deeper",
    ),
]


@pytest.mark.parametrize(
    ("content", "field", "message"),
    [row[1:] for row in BAD_SUBMIT],
    ids=[row[0] for row in BAD_SUBMIT],
)
def test_bad_submit_config_names_file_and_field(
    tmp_path: Path, content: str | bytes, field: str | None, message: str
) -> None:
    """Each malformed submit config raises one ConfigError naming the file and the field path."""
    path = write(tmp_path, "submit.yaml", content)
    with pytest.raises(ConfigError) as info:
        load(path)
    error = info.value
    assert error.source == str(path)
    assert str(error).startswith(f"{path}: ")
    assert error.field == field
    assert any(re.search(message, text) for text in (error.message, str(error))), error.message


@pytest.mark.parametrize(
    "name",
    [
        RECORD_FILE,
        f"{RECORD_FILE}.tmp",
        "files",
        SINCE_FILE,
        SUBMIT_LOG,
        ".remote_chain_anything_later",
        CHAIN_FILE,
        ".gym_other",
    ],
)
def test_a_benchmark_named_like_a_run_file_is_refused(tmp_path: Path, name: str) -> None:
    """A benchmark named like one of the run folder's own files is a config error naming it."""
    path = write(tmp_path, "s.yaml", f'driver:\n  benchmarks:\n    "{name}": {{}}\n')
    with pytest.raises(ConfigError) as info:
        load(path)
    assert info.value.field is not None
    assert name in info.value.field
    assert f"benchmark name {name!r} is reserved" in info.value.message


@pytest.mark.parametrize("name", ["logs", "artifacts", "job.sh", "remote-chain", "gym_x"])
def test_names_inside_a_benchmark_folder_stay_usable(tmp_path: Path, name: str) -> None:
    """Names of files inside each benchmark folder (logs, job.sh) do not collide at run level."""
    path = write(tmp_path, "s.yaml", f'driver:\n  benchmarks:\n    "{name}": {{}}\n')
    assert list(load(path).driver.benchmarks) == [name]


def test_several_problems_are_listed_together(tmp_path: Path) -> None:
    """All problems come in one error, each as `field: message`, the first in `field`."""
    text = BENCH + "      resumable: {max_retries: -1}\n      slurm: {time: '10:99', qos: 'a b'}\n"
    with pytest.raises(ConfigError) as info:
        load(write(tmp_path, "s.yaml", text))
    lines = info.value.message.splitlines()
    assert lines[0] == "3 problems:"
    assert info.value.field == "driver.benchmarks.gpqa.resumable.max_retries"
    assert lines[1].startswith("  driver.benchmarks.gpqa.resumable.max_retries: ")
    assert any(line.startswith("  driver.benchmarks.gpqa.slurm.time: ") for line in lines)
    assert any(line.startswith("  driver.benchmarks.gpqa.slurm.qos: ") for line in lines)


def test_secret_values_never_appear_in_errors(tmp_path: Path) -> None:
    """A rejected secret value is not echoed in the error."""
    text = "driver:\n  env: {T: {value: [hunter2], secret: true}}\n  benchmarks: {b: {}}\n"
    with pytest.raises(ConfigError) as info:
        load(write(tmp_path, "s.yaml", text))
    assert "hunter2" not in str(info.value)


def test_duplicate_upload_names_are_refused(tmp_path: Path) -> None:
    """Two uploads with one file name would overwrite each other in files/."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write(tmp_path / "a", "x.py", "")
    write(tmp_path / "b", "x.py", "")
    path = write(tmp_path, "s.yaml", "driver:\n  upload: [a/x.py, b/x.py]\n  benchmarks: {b: {}}\n")
    with pytest.raises(ConfigError) as info:
        load(path)
    assert info.value.field == "driver.upload[1]"
    assert "files/x.py" in info.value.message


def test_unreadable_config_file(tmp_path: Path) -> None:
    """A missing file or a folder is a ConfigError naming the path."""
    for path in (tmp_path / "nope.yaml", tmp_path):
        with pytest.raises(ConfigError) as info:
            load_submit_config(path)
        assert info.value.source == str(path)


def test_oversized_config_is_refused(tmp_path: Path) -> None:
    """A config over 1 MiB is refused before parsing."""
    path = write(tmp_path, "s.yaml", "# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(ConfigError, match="at most 1048576 bytes"):
        load(path)


def test_resumable_on_shell_executor(tmp_path: Path) -> None:
    """Resumable on a shell executor is refused, naming the benchmark, profile and executor."""
    write(tmp_path, "rollouts.py", "")
    config = load_submit_config(write(tmp_path, "submit.yaml", SPEC_EXAMPLE), environ={})
    profile = load_profile(
        write(tmp_path, "laptop.toml", 'host = "h"\nworkdir = "/w"\nexecutor = "shell"\n')
    )
    with pytest.raises(ConfigError) as info:
        check_for_cluster(config, profile)
    error = info.value
    assert error.source == str(tmp_path / "submit.yaml")
    assert error.field == "driver.benchmarks.gpqa.resumable"
    for part in ("'gpqa'", "'aime'", "'laptop'", "'shell'"):
        assert part in error.message
    not_resumable = config.model_copy(
        update={
            "driver": config.driver.model_copy(
                update={"benchmarks": {"smoke": config.driver.benchmarks["smoke"]}}
            )
        }
    )
    check_for_cluster(not_resumable, profile)


# --- bad profiles -------------------------------------------------------------------------

GOOD_KEYS = 'host = "eos"\nworkdir = "/w"\n'
BAD_PROFILE: list[tuple[str, str, str | bytes, str | None, str]] = [
    # (id, file name, content, field, message regex)
    ("toml-syntax", "eos.toml", 'host = "eos\n', None, "invalid TOML.*line 1"),
    ("toml-duplicate", "eos.toml", GOOD_KEYS + 'host = "x"\n', None, "invalid TOML"),
    ("non-utf8", "eos.toml", b'host = "\xff"\n', None, "not UTF-8"),
    ("unknown-key", "eos.toml", GOOD_KEYS + 'hots = "x"\n', "hots", "did you mean 'host'"),
    (
        "unknown-slurm-key",
        "eos.toml",
        GOOD_KEYS + '[slurm]\npartion = "x"\n',
        "slurm.partion",
        "did you mean 'partition'",
    ),
    ("name-key", "eos.toml", GOOD_KEYS + 'name = "x"\n', "name", "file name"),
    ("bad-stem", "my cluster.toml", GOOD_KEYS, None, "rename the file"),
    ("host-missing", "eos.toml", 'workdir = "/w"\n', "host", "required"),
    (
        "host-option",
        "eos.toml",
        'host = "-oProxyCommand=x"\nworkdir = "/w"\n',
        "host",
        "must not start with '-'",
    ),
    ("host-user", "eos.toml", 'host = "alice@eos"\nworkdir = "/w"\n', "host", "`user`"),
    ("host-space", "eos.toml", 'host = "e os"\nworkdir = "/w"\n', "host", "one word"),
    ("port-zero", "eos.toml", GOOD_KEYS + "port = 0\n", "port", "greater than or equal to 1"),
    ("port-big", "eos.toml", GOOD_KEYS + "port = 70000\n", "port", "less than or equal to 65535"),
    ("port-string", "eos.toml", GOOD_KEYS + 'port = "22"\n', "port", "valid integer"),
    ("workdir-missing", "eos.toml", 'host = "eos"\n', "workdir", "required"),
    ("workdir-relative", "eos.toml", 'host = "eos"\nworkdir = "runs"\n', "workdir", "absolute"),
    ("workdir-tilde", "eos.toml", 'host = "eos"\nworkdir = "~/runs"\n', "workdir", "absolute"),
    ("workdir-dotdot", "eos.toml", 'host = "eos"\nworkdir = "/a/../b"\n', "workdir", r"'\.\.'"),
    ("workdir-quote", "eos.toml", 'host = "eos"\nworkdir = "/a\'b"\n', "workdir", "quotes"),
    ("workdir-newline", "eos.toml", 'host = "eos"\nworkdir = "/a\\nb"\n', "workdir", "absolute"),
    (
        "workdir-dollar",
        "eos.toml",
        'host = "eos"\nworkdir = "/lustre/$USER"\n',
        "workdir",
        "absolute",
    ),
    ("workdir-root", "eos.toml", 'host = "eos"\nworkdir = "/"\n', "workdir", "root"),
    ("executor", "eos.toml", GOOD_KEYS + 'executor = "pbs"\n', "executor", "'slurm' or 'shell'"),
    (
        "transport",
        "eos.toml",
        GOOD_KEYS + 'transport = "paramiko"\n',
        "transport",
        "'asyncssh' or 'openssh'",
    ),
    (
        "control-path-asyncssh",
        "eos.toml",
        GOOD_KEYS + 'control_path = "~/.ssh/cm"\n',
        "control_path",
        "openssh",
    ),
    (
        "time-unquoted",
        "eos.toml",
        GOOD_KEYS + "[slurm]\ntime = 04:00:00\n",
        "slurm.time",
        "quote it",
    ),
    (
        "time-bad",
        "eos.toml",
        GOOD_KEYS + '[slurm]\ntime = "4h"\n',
        "slurm.time",
        "invalid duration",
    ),
    (
        "extra-args-bad",
        "eos.toml",
        GOOD_KEYS + '[slurm]\nextra_args = ["-N 2"]\n',
        "slurm.extra_args[0]",
        "--name=value",
    ),
    ("slurm-not-table", "eos.toml", 'slurm = "batch"\n' + GOOD_KEYS, "slurm", "dictionary"),
]


@pytest.mark.parametrize(
    ("filename", "content", "field", "message"),
    [row[1:] for row in BAD_PROFILE],
    ids=[row[0] for row in BAD_PROFILE],
)
def test_bad_profile_names_file_and_field(
    tmp_path: Path, filename: str, content: str | bytes, field: str | None, message: str
) -> None:
    """Each malformed profile raises one ConfigError naming the file and the key."""
    path = write(tmp_path, filename, content)
    with pytest.raises(ConfigError) as info:
        find_profile(path.stem, clusters_dirs=[tmp_path]) if path.stem == "eos" else load_profile(
            path
        )
    error = info.value
    assert error.source == str(path)
    assert error.field == field
    assert re.search(message, error.message), error.message


def test_list_profiles_reports_a_broken_profile(tmp_path: Path) -> None:
    """A broken profile in a searched folder is an error naming it, not silently skipped."""
    folder = _profiles(tmp_path, "c", {"eos": "x"})
    broken = write(folder, "zeta.toml", "host = \n")
    with pytest.raises(ConfigError) as info:
        list_profiles([folder])
    assert info.value.source == str(broken)


# --- properties -----------------------------------------------------------------------------


@given(st.binary(max_size=512))
def test_load_yaml_raises_only_config_error_on_bytes(data: bytes) -> None:
    """Arbitrary bytes load or raise ConfigError naming the source, never anything else."""
    try:
        load_yaml(data, source="x.yaml")
    except ConfigError as error:
        source = error.source
    else:
        source = "x.yaml"
    assert source == "x.yaml"


_YAMLISH = st.text(alphabet="ab: -[]{}&*!|>'\"#\n\t%@`,?~0123456789.<=+", max_size=120)


@given(_YAMLISH)
def test_load_yaml_raises_only_config_error_on_yamlish_text(text: str) -> None:
    """YAML-looking text (tags, anchors, flows, indicators) loads or raises ConfigError only."""
    try:
        load_yaml(text.encode(), source="x.yaml")
    except ConfigError as error:
        source = error.source
    else:
        source = "x.yaml"
    assert source == "x.yaml"


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(max_size=12), st.floats()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=12,
)
_KEYS = st.sampled_from(
    [
        "runner",
        "env",
        "upload",
        "benchmarks",
        "run",
        "command",
        "resumable",
        "slurm",
        "max_retries",
        "max_walltime",
        "time",
        "extra_args",
        "value",
        "from_env",
        "secret",
        "x",
    ]
)
_TREES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_KEYS | st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=16,
)


@settings(max_examples=150, deadline=None)
@given(st.one_of(_TREES, _VALUES))
def test_load_submit_config_raises_only_config_error(driver: object) -> None:
    """Any YAML-expressible driver either loads or raises ConfigError, never a pydantic error."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.yaml"
        path.write_text(yaml.safe_dump({"driver": driver}), encoding="utf-8")
        try:
            load_submit_config(path, environ={})
        except ConfigError as error:
            source = error.source
        else:
            source = str(path)
        assert source == str(path)
