"""Suite-wide option: one part of the suite, so that ``scripts/test`` can run two parts side by
side. Most of the suite's time is Slurm's (jobs running into their one-minute limits), and each
release of the dev cluster has its own controllers, slurmdbd, munge and sshd (the ``version``
parameter of tests/e2e/conftest.py), so the parts are cut along the releases:

``--suite-part=24.11``: the Slurm 24.11 halves of the per-release end-to-end tests, and the
unit layers (``tests/test_*.py``: stub Slurm commands and sshd servers of their own, no
daemon of the dev cluster's).
``--suite-part=22.05``: everything else: the 22.05 halves, the end-to-end tests that are not
per release (most on 22.05's clusters), the ``cross_release`` modules, whose fixtures span
both releases, and the faults suite, which stops 22.05's sshd and slurmdbd.
``--suite-part=all`` (the default): the whole suite, as one process runs it.

Deselected, not skipped: a part shows only what it ran, and the two add up to the suite.

Order: the modules marked ``runs_last`` (the accounting outage, which stops both releases'
slurmdbd) run after every other test of their process, whatever their file names; the rest
keep pytest's order. scripts/test runs them in a third process of their own.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

PARTS = ("all", "22.05", "24.11")
TESTS = Path(__file__).resolve().parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--suite-part",
        choices=PARTS,
        default="all",
        help="one part of the suite: 24.11 (its per-release halves and the unit layers) or "
        "22.05 (the rest); scripts/test runs the two side by side",
    )


def pytest_configure(config: pytest.Config) -> None:
    """The suite's processes start with SIGHUP and SIGINT as a terminal gives them, whatever
    started the run: under `nohup` (or `cmd &` in a script) they arrive ignored, a disposition
    every child inherits across exec, and the tests that hang up a shell or press Ctrl-C on a
    command would see them ignored."""
    del config
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def part_of(item: pytest.Item) -> str:
    """Which part a test belongs to (see the module's docstring)."""
    if item.path.parent == TESTS:
        return "24.11"  # a unit layer
    if item.get_closest_marker("cross_release") is not None:
        return "22.05"
    callspec = getattr(item, "callspec", None)
    version = callspec.params.get("version") if callspec is not None else None
    return "24.11" if getattr(version, "slurm", None) == "24.11" else "22.05"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tests of ``--suite-part``, then move the ``runs_last`` ones after the others."""
    part = config.getoption("--suite-part")
    if part != "all":
        keep: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        for item in items:
            (keep if part_of(item) == part else dropped).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
    items.sort(key=runs_last)  # stable: each group keeps pytest's order


def runs_last(item: pytest.Item) -> bool:
    """Whether a test belongs after every other of its process (its module stops daemons)."""
    return item.get_closest_marker("runs_last") is not None
