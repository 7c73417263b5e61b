#!/usr/bin/env python3
"""A resumable example runner (stdlib only): N items, one JSON line each, a sleep per item.

It takes Hydra-style arguments as remote-chain passes them::

    python3 rollouts.py +items=30 +sleep=2 +resume_from_cache=true

Each item appends one JSON line to ``artifacts/rollouts.jsonl`` and flushes it. With
``+resume_from_cache=true`` it keeps the complete lines already there, drops a torn last line
(the job was killed mid-write), and does only the missing items. ``+fail_first=K`` makes the
first K attempts exit 1 after their first item (to exercise retries); ``+fail_always=true``
always fails.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def parse_args(argv: list[str]) -> dict[str, str]:
    args: dict[str, str] = {}
    for token in argv:
        key, sep, value = token.lstrip("+").partition("=")
        if not sep:
            raise SystemExit(f"rollouts.py: expected +key=value, got {token!r}")
        args[key] = value
    return args


def load_done(path: Path) -> list[str]:
    """Complete lines already written; a torn last line (no newline, bad JSON) is dropped."""
    if not path.exists():
        return []
    kept: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            json.loads(line)
        except ValueError:
            break
        kept.append(line)
    return kept


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    items = int(args.get("items", "10"))
    sleep = float(args.get("sleep", "1"))
    resume = args.get("resume_from_cache", "false").lower() == "true"
    attempt = int(os.environ.get("REMOTE_CHAIN_ATTEMPT", "1"))
    out = Path(args.get("output", "artifacts/rollouts.jsonl"))
    out.parent.mkdir(parents=True, exist_ok=True)

    done = load_done(out) if resume else []
    # Rewrite the kept lines so a torn tail is gone before we append.
    out.write_text("".join(done), encoding="utf-8")
    print(f"rollouts: attempt {attempt}, {len(done)} of {items} items cached", flush=True)
    with out.open("a", encoding="utf-8") as f:
        for i in range(len(done), items):
            time.sleep(sleep)
            f.write(json.dumps({"item": i, "attempt": attempt, "value": i * i}) + "\n")
            f.flush()
            if args.get("fail_always") == "true" or attempt <= int(args.get("fail_first", "0")):
                print(f"rollouts: failing on purpose at item {i}", flush=True)
                return 1
    print(f"rollouts: all {items} items done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
