"""The cyclic garbage collector around a command's start-up and a status poll (issue 13, P7,
P9). STDLIB.

A cold command allocates ~300,000 objects while it starts (imports, typer, pydantic models)
and frees almost none; a 10,000-chain poll makes ~20 a chain, none in a cycle. The collector's
passes over either are time spent finding no garbage, so it is off through both, and what they
leave is kept out of its young generation's way: start-up's objects frozen
(``freeze_startup``), a poll's moved to the oldest generation (``collector_paused``).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

# A process that polls on (wait, a library caller) still gets a full collection now and then:
# the few cyclic objects a poll leaves (~70-210: asyncssh's, tenacity's; gc.collect's count
# after a paused poll) would otherwise wait in the oldest generation for one that its counts
# may never start. Once a minute at most, never in a one-poll command.
FULL_PASS_EVERY_S = 60.0
_last_full: list[float] = []  # when a pause last ended in a full collection (or first ended)
_startup_frozen: list[bool] = []  # freeze_startup froze this process's start-up objects


def freeze_startup() -> None:
    """The collector back on, if start-up turned it off (``launch.main``), with every object
    made so far frozen: they live as long as the process, and ``wait`` or ``logs --follow``
    must not scan them on every collection."""
    if not gc.isenabled():
        gc.freeze()
        _startup_frozen.append(True)
        gc.enable()


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off while one reply is parsed and derived, then as it was.

    They make ~20 objects a chain, none in a cycle (refcounts free them all), and no other
    task runs meanwhile (no await): with the collector on, its passes over everything the
    process holds cost a 10,000-chain poll ~70 ms of CPU, a fifth of the client's (issue 13,
    P7). Its counts run on, so it catches up once after.

    A status command pauses it for its whole poll too (Orchestrator.status): paused reply by
    reply, it caught up after each, and its ~13 young and one or two older passes over ten
    replies' objects still cost ~45 ms of a 10,000-chain poll; once after the poll, ~5 ms
    (gc.callbacks, measured). The other tasks' garbage of that second or two waits as long.
    Nested, only the outermost turns it back on.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            _promote_survivors()
            gc.enable()


def _promote_survivors() -> None:
    """What the pause made and still holds (a poll's result: ~40,000 tracked objects for 10,000
    chains, none in a cycle) to the oldest generation, with no pass over it: turned back on,
    the collector would first scan all of it as young (20-45 ms of a 10,000-chain poll's
    tail, after its last reply), then again as middle-aged, for objects that refcounts free.
    ``freeze`` then ``unfreeze`` moves every tracked object to the oldest generation in two
    list splices; a cycle among them is found by the next full collection (FULL_PASS_EVERY_S).

    Not where objects are frozen, as ``unfreeze`` would thaw them: a command's start-up
    objects (``freeze_startup``: the flag, since counting frozen objects walks them all, ~4 ms
    for a command's 300,000) or a pre-fork server's (``get_freeze_count``: free when none).
    """
    now = time.monotonic()
    if not _last_full:
        _last_full.append(now)
    elif now - _last_full[0] >= FULL_PASS_EVERY_S:
        _last_full[0] = now
        gc.collect()
        return
    if not _startup_frozen and gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
