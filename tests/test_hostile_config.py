"""Config values that would take over the job are refused at load time."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from remote_chain.client.plan import read_uploads
from remote_chain.config import (
    RESERVED_ENV_NAMES,
    RESERVED_ENV_PREFIXES,
    load_profile,
    load_submit_config,
)
from remote_chain.errors import ConfigError
from remote_chain.job.script import JobSpec, render_job_script

RESERVED = [
    *sorted(RESERVED_ENV_NAMES),
    *(f"{prefix}X" for prefix in RESERVED_ENV_PREFIXES),
    # The prologue's own variables, each by name.
    "RC_SELF",
    "RC_MAX_RETRIES",
    "RC_JOB_ID",
    "RC_DIR",
    "RC_RUNNER",
    "SBATCH_DEPENDENCY",
    "SLURM_JOB_ID",
]


def _submit(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "submit.yaml"
    path.write_text("driver:\n" + body + "  benchmarks: {b: {}}\n")
    return path


@pytest.mark.parametrize("name", RESERVED)
def test_a_reserved_env_name_is_refused_with_its_reason(tmp_path: Path, name: str) -> None:
    """driver.env may not set a name the prologue or bash relies on; the error says why."""
    with pytest.raises(ConfigError) as info:
        load_submit_config(_submit(tmp_path, f"  env: {{{name}: x}}\n"), environ={})
    assert info.value.field == f"driver.env.{name}"
    assert f"{name} is reserved: " in str(info.value)


@pytest.mark.parametrize("name", ["LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS"])
def test_ordinary_env_names_are_allowed(tmp_path: Path, name: str) -> None:
    """Names that only steer the runner stay allowed."""
    config = load_submit_config(_submit(tmp_path, f"  env: {{{name}: x}}\n"), environ={})
    assert config.driver.env[0].name == name


OWNED = [
    ("--job-name=x", "--job-name"),
    ("--job=x", "--job-name"),
    ("-J", "--job-name"),
    ("-Jx", "--job-name"),
    ("--chdir=/tmp", "--chdir"),
    ("-D", "--chdir"),
    ("--output=/tmp/x", "--output"),
    ("-o", "--output"),
    ("--error=/tmp/x", "--error"),
    ("-e", "--error"),
    ("--dependency=afterok:1", "--dependency"),
    ("-d", "--dependency"),
    ("--array=1-3", "--array"),
    ("-a", "--array"),
    ("--requeue", "--requeue"),
    ("--no-requeue", "--no-requeue"),
]


@pytest.mark.parametrize(("arg", "named"), OWNED)
def test_an_owned_sbatch_argument_is_refused_in_a_benchmark(
    tmp_path: Path, arg: str, named: str
) -> None:
    """extra_args may not set what status, cancel and the chain rely on; the error names it."""
    path = tmp_path / "submit.yaml"
    path.write_text(f"driver:\n  benchmarks:\n    b:\n      slurm: {{extra_args: ['{arg}']}}\n")
    with pytest.raises(ConfigError) as info:
        load_submit_config(path, environ={})
    assert info.value.field == "driver.benchmarks.b.slurm.extra_args[0]"
    assert named in str(info.value)


@pytest.mark.parametrize(("arg", "named"), OWNED)
def test_an_owned_sbatch_argument_is_refused_in_a_profile(
    tmp_path: Path, arg: str, named: str
) -> None:
    """The same rule holds for a profile's [slurm] table, naming the profile file."""
    path = tmp_path / "c.toml"
    path.write_text(f'host = "h"\nworkdir = "/w"\n[slurm]\nextra_args = ["{arg}"]\n')
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    assert info.value.source == str(path)
    assert info.value.field == "slurm.extra_args[0]"
    assert named in str(info.value)


@pytest.mark.parametrize("arg", ["--requeue", "--no-requeue"])
def test_requeue_arguments_are_allowed_with_the_requeue_key(tmp_path: Path, arg: str) -> None:
    """`requeue = true` in the same [slurm] table lets the requeue options through."""
    path = tmp_path / "c.toml"
    path.write_text(
        f'host = "h"\nworkdir = "/w"\n[slurm]\nrequeue = true\nextra_args = ["{arg}"]\n'
    )
    assert load_profile(path).slurm.extra_args == (arg,)


def test_the_prologue_constants_come_after_the_user_exports() -> None:
    """Belt and braces: even an export of an RC_ name (built in Python) cannot win."""
    spec = JobSpec(
        run_id="r",
        cluster="c",
        benchmark="b",
        remote_dir="/w/r/c/b",
        env=(("RC_MAX_RETRIES", "999"),),
    )
    script = render_job_script(spec)
    assert script.index("export RC_MAX_RETRIES=999") < script.index("RC_MAX_RETRIES=0")


def _upload_config(tmp_path: Path) -> Path:
    return _submit(tmp_path, "  upload: [proj]\n")


def _uploaded(tmp_path: Path) -> dict[str, bytes]:
    config = load_submit_config(_upload_config(tmp_path), environ={})
    return {f.path: f.data for f in read_uploads(config, max_bytes=1 << 20)}


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    folder = tmp_path / "proj"
    (folder / "sub").mkdir(parents=True)
    (folder / "main.py").write_text("print(1)\n")
    (folder / "sub" / "data.txt").write_text("data\n")
    return folder


def test_a_symlink_to_a_file_inside_the_folder_is_copied(tmp_path: Path, proj: Path) -> None:
    """A link to a file in the uploaded folder uploads that file's bytes under the link's name."""
    (proj / "alias.py").symlink_to("main.py")
    files = _uploaded(tmp_path)
    assert files["files/proj/alias.py"] == b"print(1)\n"
    assert files["files/proj/sub/data.txt"] == b"data\n"


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p, secret: (p / "README.md").symlink_to(secret), "out of the uploaded folder"),
        (lambda p, secret: (p / "up").symlink_to("../secret_key"), "out of the uploaded folder"),
        (lambda p, secret: (p / "dir").symlink_to(p / "sub"), "symlinked folder"),
        (lambda p, secret: (p / "dir").symlink_to(secret.parent), "symlinked folder"),
        (lambda p, secret: (p / "gone").symlink_to(p / "nothing"), "dangling"),
        (lambda p, secret: os.mkfifo(p / "sub" / "pipe"), "not a regular file"),
    ],
    ids=["file-out", "relative-out", "folder-in", "folder-out", "dangling", "fifo"],
)
def test_what_cannot_be_uploaded_is_refused_with_its_path(
    tmp_path: Path, proj: Path, make: Callable[[Path, Path], object], why: str
) -> None:
    """Nothing leaves through a symlink and nothing is skipped silently."""
    secret = tmp_path / "secret_key"
    secret.write_text("PRIVATE KEY\n")
    make(proj, secret)
    with pytest.raises(ConfigError, match=why) as info:
        _uploaded(tmp_path)
    assert str(proj) in str(info.value)
    assert info.value.field == "driver.upload"
