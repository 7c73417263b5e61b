"""P6 (``remote-chain --help`` cold, whole process) and peak memory (child processes).

Memory is read as the peak RSS (VmHWM; see ``bench._peak_rss_kib`` for why not ru_maxrss)
of a child process that does one thing: a fan-out submit to 8
clusters, or one status poll over 200 chains; a third child only imports what those two
import, so the table shows how much of the peak is the work and how much the interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchlib.common import Ctx
from benchlib.rig import REPO
from benchlib.stats import Row, Summary, Verdict, plain

BENCH = Path(__file__).resolve().parent.parent / "bench.py"
HELP_TARGET_S = 0.4


def _cli_argv() -> list[str] | None:
    """The console script if installed, else ``python -m remote_chain.cli``; None if no CLI."""
    if not (REPO / "remote_chain" / "cli" / "__init__.py").exists():
        return None
    script = shutil.which("remote-chain")
    return [script] if script else [sys.executable, "-m", "remote_chain.cli"]


def p6_startup(ctx: Ctx) -> None:
    argv = _cli_argv()
    if argv is None:
        ctx.verdicts.append(
            Verdict("P6 remote-chain --help cold <= 0.4 s", None, "remote_chain/cli/ is absent")
        )
        return
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    samples = []
    for i in range(ctx.runs + 1):  # the first run only warms the page cache
        t0 = time.monotonic()
        result = subprocess.run(
            [*argv, "--help"],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            cwd=ctx.tmp,
            timeout=60,
        )
        seconds = time.monotonic() - t0
        if result.returncode != 0 or "Usage" not in result.stdout:
            raise RuntimeError(
                f"{' '.join(argv)} --help exited {result.returncode}: {result.stderr[-300:]}"
            )
        if i:
            samples.append(seconds)
    s = Summary.of(samples)
    met = s.median <= HELP_TARGET_S
    ctx.rows.append(
        Row(
            "p6.help",
            f"P6 `{' '.join(Path(a).name for a in argv)} --help`, new process each",
            plain(s, " s", 3),
            target=f"<= {HELP_TARGET_S} s",
            met=met,
            data=s.to_json(),
        )
    )
    floor = []
    for _ in range(ctx.runs):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env, timeout=60)
        floor.append(time.monotonic() - t0)
    f = Summary.of(floor)
    ctx.rows.append(
        Row("p6.python", "P6 floor: `python -c pass`", plain(f, " s", 3), data=f.to_json())
    )
    detail = f"{s.median:.3f} s median of {s.n} (python itself: {f.median:.3f} s)"
    if not met:
        detail += "; slowest imports: " + ", ".join(_slow_imports(argv, env))
    ctx.verdicts.append(Verdict("P6 remote-chain --help cold <= 0.4 s", met, detail))


def _slow_imports(argv: list[str], env: dict[str, str]) -> list[str]:
    """The five biggest cumulative imports of ``--help`` (python -X importtime)."""
    cmd = [sys.executable, "-X", "importtime", "-m", "remote_chain.cli", "--help"]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, check=False)
    rows = []
    for line in result.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].strip()))
    top = [r for r in sorted(rows, reverse=True) if not r[1].startswith(" ")][:5]
    return [f"{name} {us / 1e6:.3f} s" for us, name in top]


def child(args: list[str]) -> dict[str, object]:
    """Run ``bench.py --child ...`` and return the JSON it printed."""
    result = subprocess.run(
        [sys.executable, str(BENCH), "--child", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"child {args[0]} failed: {result.stderr[-500:]}")
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert isinstance(doc, dict)
    return doc


def memory_row(ctx: Ctx, key: str, figure: str, doc: dict[str, object]) -> None:
    kib = doc["peak_rss_kib"]
    assert isinstance(kib, int)
    ctx.rows.append(
        Row(key, figure, f"{kib / 1024:.1f} MiB peak RSS", data={"peak_rss_kib": kib, **doc})
    )
