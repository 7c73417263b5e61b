"""PURE: the bash templates shipped in ``remote_chain/templates/`` and their substitution."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources

from remote_chain.guard import GUARD_PLACEHOLDER, UNSAFE_EXIT, trusted_bench_files

WIRE_PLACEHOLDER = "__WIRE__"


@functools.cache
def _read(name: str) -> str:
    return resources.files("remote_chain").joinpath("templates", name).read_text("utf-8")


def render_template(name: str, subs: Mapping[str, str]) -> str:
    """The template with each ``__KEY__`` replaced; its leading comment block is dropped."""
    lines = _read(name).splitlines()
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    text = "\n".join(lines).strip("\n")
    if GUARD_PLACEHOLDER in text:  # the shared ownership check (guard.py)
        guard = render_template(
            "guard.bash",
            {"__UNSAFE_EXIT__": str(UNSAFE_EXIT), "__TRUSTED__": " ".join(trusted_bench_files())},
        )
        text = text.replace(GUARD_PLACEHOLDER, guard)
    if WIRE_PLACEHOLDER in text:  # the one wire codec of every answer (wire.py)
        text = text.replace(WIRE_PLACEHOLDER, render_template("wire.bash", {}))
    for key, value in subs.items():
        text = text.replace(key, value)
    return text
