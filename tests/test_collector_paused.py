"""The collector is off while a status reply is parsed, and left as it was found."""

from __future__ import annotations

import gc

import pytest

from remote_chain.cluster import collector_paused


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
