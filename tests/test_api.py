"""The Python API as a library: profiles and configs built in code, render(), docstrings, LICENSE.

Flows run against fake clusters at the ``Remote`` seam (tests/fakes.py), as test_cli does.
"""

from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

import pytest
from fakes import FakeSlurm

import remote_chain
from remote_chain import (
    BenchmarkConfig,
    ClusterProfile,
    ConfigError,
    DriverConfig,
    Orchestrator,
    ResumableSpec,
    Settings,
    SlurmOptions,
    SubmitConfig,
)
from remote_chain.client.cluster import SUBMIT_S_PER_CHAIN
from remote_chain.client.index import RunIndex
from remote_chain.transport.base import ClosingContext, CommandResult, Remote
from remote_chain.transport.endpoint import Endpoint

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # asyncssh, and so the client, is asyncio-only


def _config() -> SubmitConfig:
    return SubmitConfig(
        driver=DriverConfig(
            runner="true",
            benchmarks={
                "gpqa": BenchmarkConfig(
                    run={"config_paths": ["gpqa.yaml"]},
                    resumable=ResumableSpec(max_retries=2),
                    slurm=SlurmOptions(time=3600),  # seconds, in code
                ),
                "smoke": BenchmarkConfig(command="echo hi"),
            },
        )
    )


def _orchestrator(tmp_path: Path, fake: FakeSlurm) -> Orchestrator:
    settings = Settings(state_dir=tmp_path / "state", sacct_wait_max=0.01)
    return Orchestrator(settings, clusters_dir=_empty(tmp_path), opener=fake.open)


def _empty(tmp_path: Path) -> Path:
    folder = tmp_path / "no-profiles"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.mark.anyio
async def test_a_profile_object_and_a_config_built_in_code_submit_and_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No file anywhere: a ClusterProfile object and a SubmitConfig object run a whole flow."""
    monkeypatch.chdir(tmp_path)
    fake = FakeSlurm(tmp_path)
    eos = ClusterProfile(name="eos", host="eos.test", workdir=str(fake.cluster("eos").workdir))
    async with _orchestrator(tmp_path, fake) as rc:
        result = await rc.submit(_config(), [eos])
        assert result.ok, result
        status = await rc.status(result.run_id, clusters=[eos])
        assert {c.benchmark for c in status.chains} == {"gpqa", "smoke"}
        assert {c.time_limit_s for c in status.chains if c.benchmark == "gpqa"} == {3600}
        # Found again by name through the index, as the CLI would.
        again = await rc.status(result.run_id)
        assert len(again.chains) == 2
    assert RunIndex(tmp_path / "state" / "runs").load(result.run_id) is not None


def test_render_returns_each_job_script_as_uploaded(tmp_path: Path) -> None:
    """Orchestrator.render() gives one script per cluster and benchmark, no connection made."""
    fake = FakeSlurm(tmp_path)
    eos = ClusterProfile(name="eos", host="eos.test", workdir="/w")
    dgx = ClusterProfile(name="dgx", host="dgx.test", workdir="/x")
    rc = _orchestrator(tmp_path, fake)
    scripts = rc.render(_config(), [eos, dgx], run_id="rc-api")
    assert [(s.cluster, s.benchmark) for s in scripts] == [
        ("eos", "gpqa"),
        ("eos", "smoke"),
        ("dgx", "gpqa"),
        ("dgx", "smoke"),
    ]
    assert all(s.text.startswith("#!/bin/bash\n") for s in scripts)
    assert "#SBATCH --chdir=/w/rc-api/eos/gpqa" in scripts[0].text
    assert "#SBATCH --time=01:00:00" in scripts[0].text
    assert fake.cluster("eos").connects == 0


def test_two_different_profiles_of_one_name_are_refused(tmp_path: Path) -> None:
    """The name is part of every remote path: two different objects may not share it."""
    rc = _orchestrator(tmp_path, FakeSlurm(tmp_path))
    one = ClusterProfile(name="eos", host="a.test", workdir="/w")
    other = ClusterProfile(name="eos", host="b.test", workdir="/w")
    with pytest.raises(ConfigError, match="two different profiles named 'eos'"):
        rc.render(_config(), [one, other])


def test_a_profile_object_is_validated_like_a_file() -> None:
    """Built in code, a profile is checked as strictly: a relative workdir is refused."""
    with pytest.raises(ValueError, match="absolute POSIX path"):
        ClusterProfile(name="eos", host="h", workdir="relative/dir")


def test_every_exported_name_resolves() -> None:
    """Everything in remote_chain.__all__ imports (lazily), SubmitConfig and ClusterProfile too."""
    for name in remote_chain.__all__:
        assert getattr(remote_chain, name) is not None
    assert {"SubmitConfig", "ClusterProfile", "load_submit_config"} <= set(remote_chain.__all__)


@pytest.mark.parametrize(
    "name",
    [
        n
        for n, member in inspect.getmembers(Orchestrator)
        if not n.startswith("_") and callable(member)
    ],
)
def test_every_public_method_documents_itself_and_its_errors(name: str) -> None:
    """Each public Orchestrator method has a docstring; those that can raise say what."""
    doc = inspect.getdoc(getattr(Orchestrator, name)) or ""
    assert doc, name
    if name not in {"aclose"}:
        assert "Raises" in doc or "raise" in doc or "never raise" in doc.lower(), name


def test_license_file_matches_the_declared_license() -> None:
    """LICENSE ships at the root and is the license pyproject.toml declares (Apache-2.0)."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"]
    text = (REPO / "LICENSE").read_text()
    assert declared == {"text": "Apache-2.0"}
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


@pytest.mark.anyio
async def test_a_submit_exec_has_time_for_each_of_its_chains(tmp_path: Path) -> None:
    """One sbatch per chain: the submit's exec may take the command timeout plus
    SUBMIT_S_PER_CHAIN per chain (a 1,000-benchmark submit was abandoned mid-queue at 120 s);
    every other exec keeps the plain timeout."""
    fake = FakeSlurm(tmp_path)
    timeouts: list[tuple[str, float | None]] = []

    async def opener(endpoint: Endpoint) -> Remote:
        inner = await fake.open(endpoint)

        class Timed(ClosingContext):
            name = inner.name

            async def run(
                self, script: str, *, timeout: float | None = None, sensitive: bool = False
            ) -> CommandResult:
                timeouts.append((script, timeout))
                return await inner.run(script, timeout=timeout, sensitive=sensitive)

            async def aclose(self) -> None:
                await inner.aclose()

        return Timed()

    eos = ClusterProfile(name="eos", host="eos.test", workdir=str(fake.cluster("eos").workdir))
    settings = Settings(state_dir=tmp_path / "state", command_timeout=30)
    async with Orchestrator(settings, clusters_dir=_empty(tmp_path), opener=opener) as rc:
        result = await rc.submit(_config(), [eos])
        assert result.ok, result
        await rc.status(result.run_id, clusters=[eos])
    submit, status = timeouts
    assert submit[1] == 30 + SUBMIT_S_PER_CHAIN * 2
    assert status[1] is None  # the endpoint's own command timeout
