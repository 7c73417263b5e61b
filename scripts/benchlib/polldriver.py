#!/usr/bin/env python3
"""Status polls inside one process, with whichever checkout is first on PYTHONPATH.

    python3 polldriver.py SPEC.json

The before/after mode runs this once with the old checkout's path and once with the new's,
so both are timed by the same code. ``SPEC``: ``{"state": folder, "rounds": n, "keep_open":
bool, "polls": [{"tag", "folder", "cluster", "run"}, ...]}``. Each round polls every entry
in order; ``keep_open`` keeps one session per clusters folder for every round (what ``wait``
and ``--watch`` do), else each poll opens and closes its own (connect included). Prints
``{"polls": {tag: [[t0, t1, cpu_s], ...]}}`` (CLOCK_MONOTONIC, the proxies' clock), the
first round included: the bench discards it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

# The only imports of the package here, from its public API: the same in every checkout the
# bench compares, whatever its layout.
from remote_chain import Orchestrator, Settings


async def _run(spec: dict[str, Any]) -> dict[str, list[list[float]]]:
    settings = Settings(state_dir=Path(spec["state"]))
    polls: list[dict[str, str]] = spec["polls"]
    out: dict[str, list[list[float]]] = {p["tag"]: [] for p in polls}
    async with AsyncExitStack() as stack:
        open_: dict[str, Orchestrator] = {}
        for _ in range(int(spec["rounds"])):
            for p in polls:
                t0, c0 = time.monotonic(), time.process_time()
                if spec["keep_open"]:
                    if p["folder"] not in open_:
                        open_[p["folder"]] = await stack.enter_async_context(
                            Orchestrator(settings, clusters_dir=Path(p["folder"]))
                        )
                    result = await open_[p["folder"]].status(
                        p["run"], clusters=[p["cluster"]], retry_lag=False
                    )
                else:
                    async with Orchestrator(settings, clusters_dir=Path(p["folder"])) as rc:
                        result = await rc.status(p["run"], clusters=[p["cluster"]], retry_lag=False)
                t1, c1 = time.monotonic(), time.process_time()
                if result.failures or not result.chains:
                    raise RuntimeError(f"poll {p['tag']} failed: {result.to_json()}")
                out[p["tag"]].append([t0, t1, c1 - c0])
    return out


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    print(json.dumps({"polls": asyncio.run(_run(spec))}))


if __name__ == "__main__":
    main()
