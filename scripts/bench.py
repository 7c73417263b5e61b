#!/usr/bin/env python3
"""remote-chain's benchmarks, side by side with the usual ways, on the real dev cluster.

    scripts/bench [--quick] [--runs N] [--only p1,p2,p3,p4,p6,p7,p9,p10] [--json PATH]
                  [--against REV [--only ab]] [--p7-chains N]

Needs the dev cluster (``scripts/dev-cluster up``, as root: the rig cancels jobs and reads
accounting as root). Latency is emulated by delaying proxies on loopback (one process per
endpoint); every figure is taken at 0 and at 50 ms RTT, as medians with min-max over
``--runs`` interleaved rounds (10; 3 with ``--quick``), after one discarded warm-up round.

Prints a table and one line per target (met / NOT met; a retired target's figure as
"retired (reported)"), and writes ``bench-results.json``
(or ``--json PATH``). Benchmarks are not tests: the exit status is 0 whether or not targets
are met, and non-zero only when the benchmark itself crashed.

``--against REV`` adds the section ``ab``: REV's code (a git worktree under /tmp, removed at
the end) timed beside this checkout's in the same interleaved rounds (``benchlib/against.py``),
printed as a second table of old and new with their ratios and written under ``against`` in
the JSON. Only when asked: ``--quick`` alone never does it. ``--p7-chains N`` sets the size of
P7's run (in ``p7`` and ``ab``; default 10,000, 200 with ``--quick``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(HERE)]

from benchlib.common import DELAYS_MS, Ctx  # noqa: E402
from benchlib.rig import Rig  # noqa: E402
from benchlib.stats import render_comparison, render_table  # noqa: E402

SECTIONS = ("p6", "p1", "p9", "p2", "p3", "p4", "p7", "p10")
AGAINST = "ab"  # the before/after section: only with --against


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="3 rounds, fewer chains (CI)")
    p.add_argument("--runs", type=int, default=None, help="rounds per figure (default 10)")
    p.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    p.add_argument("--json", type=Path, default=Path("bench-results.json"), help="output file")
    p.add_argument(
        "--against",
        metavar="REV",
        default=None,
        help="also time REV's code beside this checkout's, in the same rounds (section ab)",
    )
    p.add_argument("--p7-chains", type=int, default=None, help="P7's run size (default 10000)")
    p.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _signals_as_a_shell_gives_them() -> None:
    """Commands are timed as a user's shell starts them: SIGINT and SIGQUIT not ignored. A
    bench started in the background of a script (``scripts/bench &``) inherits them ignored
    and would pass that on to every command it times; an older checkout timed beside this one
    (``--against``) may run a command differently when it ignores them."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args.child is not None:
        return _child(args.child)
    _signals_as_a_shell_gives_them()
    from remote_chain.logconfig import configure_logging  # noqa: PLC0415

    configure_logging("json", 0)  # warnings only, on stderr: stdout is the table
    only = {s.strip().lower() for s in args.only.split(",") if s.strip()}
    unknown = only - {*SECTIONS, AGAINST}
    if unknown:
        print(f"bench: unknown section(s) {sorted(unknown)}; known: {SECTIONS}", file=sys.stderr)
        return 2
    if AGAINST in only and args.against is None:
        print("bench: section ab needs --against REV", file=sys.stderr)
        return 2
    if args.against is not None:
        only.add(AGAINST)
    runs = args.runs if args.runs is not None else (3 if args.quick else 10)
    started = dt.datetime.now(dt.UTC)
    rig = Rig.create()
    ctx = Ctx(rig, max(1, runs), args.quick, p7_chains=args.p7_chains)
    _bytecode(ctx)
    crashed: list[dict[str, str]] = []
    try:
        for name, fn in _sections(ctx, args.against):
            if name in only:
                try:
                    fn()
                except Exception as exc:  # report the crash, keep measuring the rest
                    crashed.append({"section": name, "error": repr(exc)})
                    traceback.print_exc()
                    ctx.note(f"section {name} crashed: {exc!r}")
    finally:
        rig.cleanup()
    print(render_table(ctx.rows, ctx.verdicts))
    against = ctx.raw.pop("against", None)
    if ctx.comparison:
        print(f"\nBefore/after, the same rounds: {args.against} vs this checkout")
        print(render_comparison(str(args.against), ctx.comparison))
    for c in crashed:
        print(f"CRASHED       section {c['section']}: {c['error']}")
    document = {
        "meta": _meta(argv, started, ctx),
        "rows": [r.to_json() for r in ctx.rows],
        "targets": [v.to_json() for v in ctx.verdicts],
        "notes": ctx.notes,
        "crashed": crashed,
        "samples": ctx.raw,
    }
    if args.against is not None:
        document["against"] = {
            **(against if isinstance(against, dict) else {"rev": args.against}),
            "rows": [c.to_json() for c in ctx.comparison],
        }
    args.json.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwritten: {args.json}")
    return 1 if crashed else 0


def _bytecode(ctx: Ctx) -> None:
    """Compile the package's bytecode first, as ``pip install`` does for an installed CLI.

    The cold rows (P6, P9, P10) run new processes from this checkout; with
    ``PYTHONDONTWRITEBYTECODE`` set (this machine's shells set it) no
    ``__pycache__`` is ever written there, so every process would compile the package from
    source: CPU that no installed copy pays (its site-packages has the .pyc files, as
    asyncssh's and pydantic's do here). Written next to the sources (gitignored).
    """
    result = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(REPO / "remote_chain")],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        ctx.note(f"compileall failed ({result.returncode}): {result.stdout[-300:]}")


def _sections(ctx: Ctx, against: str | None) -> list[tuple[str, Callable[[], None]]]:
    from benchlib import cold, deadhost, jobs, scale, startup, status, submit  # noqa: PLC0415

    shims: list[Path] = []

    def shim_dir() -> Path:
        if not shims:
            shims.append(ctx.rig.make_shims())
        return shims[0]

    def p2() -> None:
        folders = submit.fanout_rig(ctx)
        submit.p2_fanout(ctx, folders)
        names = ",".join(f"b{i}" for i in range(1, max(submit.FANOUT) + 1))
        doc = startup.child(
            ["fanout", str(folders[0.0]), str(ctx.tmp / "p2.yaml"), names, str(ctx.tmp / "st")]
        )
        jobs_ = doc["jobs"]
        assert isinstance(jobs_, list)
        ctx.rig.run_ids.add(str(doc["run_id"]))
        submit.cancel_submitted(ctx, [(str(c), str(j)) for c, j in jobs_])
        startup.memory_row(ctx, "mem.fanout", "Memory: fan-out submit to 8 clusters", doc)
        startup.memory_row(
            ctx,
            "mem.floor",
            "Memory floor: python + remote-chain + asyncssh imported",
            startup.child(["idle"]),
        )

    def p3() -> None:
        srig = status.prepare(ctx)
        status.p3_status(ctx, srig)
        status.p3_correct(ctx, srig)
        status.p5_status_calls(ctx, srig, shim_dir())
        top = max(status.SIZES)
        doc = startup.child(
            ["status", str(srig.folders[0.0]), status.PROFILE, srig.runs[top], str(ctx.tmp / "st")]
        )
        startup.memory_row(ctx, "mem.status", f"Memory: status over {top} chains", doc)

    def ab() -> None:
        from benchlib import against as ab_  # noqa: PLC0415
        from benchlib import againstpolls  # noqa: PLC0415

        assert against is not None
        with ab_.checkout(ctx, against) as (old_root, sha):
            ctx.raw["against"] = {"rev": against, "commit": sha}
            sides = [
                ab_.Side("old", old_root, ctx.tmp / "ab-state-old"),
                ab_.Side("new", REPO, ctx.tmp / "ab-state-new"),
            ]
            commands = ab_.commands(ctx, sides)
            try:
                againstpolls.polls(ctx, sides, commands)
            finally:
                ab_.stop_agents(ctx, sides, commands)
            againstpolls.p7(ctx, sides)

    return [
        ("p6", lambda: startup.p6_startup(ctx)),
        ("p1", lambda: submit.p1_submit(ctx)),
        ("p9", lambda: cold.p9_cold(ctx)),
        ("p2", p2),
        ("p3", p3),
        ("p4", lambda: jobs.p4_p5_links(ctx, shim_dir())),
        ("p7", lambda: scale.p7_scale(ctx, startup.child)),
        ("p10", lambda: deadhost.p10_dead_host(ctx)),
        (AGAINST, ab),
    ]


def _meta(argv: list[str], started: dt.datetime, ctx: Ctx) -> dict[str, object]:
    def git(*a: str) -> str:
        r = subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True, check=False)
        return r.stdout.strip()

    import asyncssh  # noqa: PLC0415

    return {
        "command": " ".join(["scripts/bench", *argv]),
        "load_average_at_end": list(os.getloadavg()),
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "runs": ctx.runs,
        "quick": ctx.quick,
        "rtt_ms": [2 * d for d in DELAYS_MS],
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty_files": git("status", "--porcelain", "--untracked-files=no").splitlines(),
        "python": platform.python_version(),
        "asyncssh": asyncssh.__version__,
        "cpus": len(os.sched_getaffinity(0)),
        "samples_retried": ctx.retried,
    }


def _peak_rss_kib() -> int:
    """This process's peak RSS (VmHWM). Not ru_maxrss: Linux carries the high-water mark of
    the process that forked us across exec, so ru_maxrss of a child of the bench reports the
    bench's own size whenever the child stays smaller."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# --- child processes (memory) -----------------------------------------------------------------
def _child(args: list[str]) -> int:
    """``--child idle|fanout|status ...``: do one thing, print one JSON line with its peak RSS."""
    from remote_chain.client.orchestrator import Orchestrator  # noqa: PLC0415
    from remote_chain.config.settings import Settings  # noqa: PLC0415
    from remote_chain.logconfig import configure_logging  # noqa: PLC0415

    configure_logging("json", 0)
    doc: dict[str, object] = {}
    kind = args[0]
    if kind == "idle":
        import asyncssh  # noqa: F401, PLC0415
    elif kind == "fanout":
        folder, config, names, state = args[1:5]

        async def fan() -> None:
            async with Orchestrator(
                Settings(state_dir=Path(state)), clusters_dir=Path(folder)
            ) as rc:
                result = await rc.submit(Path(config), names.split(","))
            doc["run_id"] = result.run_id
            doc["ok"] = result.ok
            doc["jobs"] = [[s.cluster, s.job_id] for s in result.submissions if s.job_id]

        asyncio.run(fan())
    elif kind == "status":
        folder, cluster, run_id, state = args[1:5]

        async def poll() -> None:
            async with Orchestrator(
                Settings(state_dir=Path(state)), clusters_dir=Path(folder)
            ) as rc:
                result = await rc.status(run_id, clusters=cluster.split(","), retry_lag=False)
            doc["chains"] = len(result.chains)

        asyncio.run(poll())
    else:
        print(f"unknown child {kind}", file=sys.stderr)
        return 2
    doc["peak_rss_kib"] = _peak_rss_kib()
    doc["ru_maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
