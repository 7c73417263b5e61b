"""The collector is off while a status reply is parsed and while a status command polls, and
left as it was found."""

from __future__ import annotations

import gc
import time
import weakref
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeSlurm

from remote_chain import (
    BenchmarkConfig,
    ClusterProfile,
    DriverConfig,
    Orchestrator,
    Settings,
    SubmitConfig,
    collector,
)
from remote_chain.collector import collector_paused
from remote_chain.remote import CommandResult, Endpoint, Remote


@pytest.mark.parametrize("was_on", [True, False])
def test_off_inside_and_as_it_was_after(was_on: bool) -> None:
    (gc.enable if was_on else gc.disable)()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled() is was_on
        with pytest.raises(RuntimeError), collector_paused():
            raise RuntimeError("a parse that fails")
        assert gc.isenabled() is was_on
    finally:
        gc.enable()


class _Node:
    def __init__(self) -> None:
        self.other: object = None


def test_what_it_made_is_old_after_and_a_cycle_still_collected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Turned back on, the collector does not first scan what the pause made as young: it is
    in the oldest generation; cyclic garbage among it is still found by a full collection."""
    monkeypatch.setattr(collector, "_last_full", [time.monotonic()])
    gc.enable()
    with collector_paused():
        kept = _Node()
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
    assert any(o is kept for o in gc.get_objects(generation=2))
    assert not any(o is kept for o in gc.get_objects(generation=0))
    del a, b
    assert gone() is not None  # a cycle: refcounts alone never free it
    gc.collect()
    assert gone() is None


def test_a_process_that_polls_on_gets_a_full_collection_a_minute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A poll's few cycles are not left in the oldest generation for good: a pause that ends
    a minute or more after the last full collection ends in one."""
    monkeypatch.setattr(collector, "_last_full", [time.monotonic() - collector.FULL_PASS_EVERY_S])
    gc.enable()
    with collector_paused():
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
    assert gone() is None  # no gc.collect() here: the pause's end made it
    assert time.monotonic() - collector._last_full[0] < collector.FULL_PASS_EVERY_S


def test_a_commands_frozen_start_up_stays_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """freeze_startup (the console script's) marks what it froze, and a pause leaves it
    frozen without counting it (a walk over ~300,000 objects)."""
    monkeypatch.setattr(collector, "_startup_frozen", [])
    monkeypatch.setattr(collector, "_last_full", [time.monotonic()])
    counted: list[int] = []
    real_count = gc.get_freeze_count

    def count() -> int:
        counted.append(1)
        return real_count()

    gc.disable()
    try:
        collector.freeze_startup()
        assert gc.isenabled()
        frozen = real_count()
        monkeypatch.setattr(gc, "get_freeze_count", count)
        with collector_paused():
            _Node()
        assert real_count() == frozen
        assert counted == []
    finally:
        gc.enable()
        gc.unfreeze()


def test_objects_someone_else_froze_stay_frozen() -> None:
    gc.enable()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with collector_paused():
            _Node()
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # asyncssh, and so the client, is asyncio-only


@pytest.mark.anyio
async def test_a_status_command_pauses_it_for_its_whole_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off while every cluster's exec is awaited (not only while each reply is parsed: one
    pass after the poll, not one per reply), for status of a run and of recent runs, and on
    again after."""
    monkeypatch.chdir(tmp_path)
    fake = FakeSlurm(tmp_path)
    profiles = [
        ClusterProfile(name=n, host=f"{n}.test", workdir=str(fake.cluster(n).workdir))
        for n in ("eos", "dgx")
    ]
    seen: list[bool] = []
    opened = fake.open

    async def opener(endpoint: Endpoint) -> Remote:
        remote = await opened(endpoint)
        run = remote.run

        async def spying_run(script: str, **kwargs: Any) -> CommandResult:
            seen.append(gc.isenabled())
            return await run(script, **kwargs)

        remote.run = spying_run  # type: ignore[method-assign]
        return remote

    settings = Settings(state_dir=tmp_path / "state", sacct_wait_max=0.01)
    config = SubmitConfig(driver=DriverConfig(runner="true", benchmarks={"b": BenchmarkConfig()}))
    gc.enable()
    async with Orchestrator(settings, clusters_dir=tmp_path, opener=opener) as rc:
        result = await rc.submit(config, profiles)
        assert result.ok, result
        seen.clear()
        await rc.status(result.run_id)
        assert gc.isenabled()
        await rc.status_recent()
        assert gc.isenabled()
    assert len(seen) == 4
    assert not any(seen)
