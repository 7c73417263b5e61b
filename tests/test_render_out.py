"""``render --out DIR`` and ``--run-id``: each job script written exactly as it is uploaded.

Runs over the fake clusters of test_cli.py (``world``).
"""

# The `world` fixture is imported from test_cli; each test naming it as a parameter is
# what pytest asks for, not a redefinition.
# ruff: noqa: F811

from __future__ import annotations

import stat

from test_cli import World, world  # noqa: F401 - the fixture, shared with test_cli


def test_render_out_writes_one_file_per_cluster_and_benchmark(world: World) -> None:
    """--out DIR holds DIR/<cluster>/<benchmark>/job.sh, byte for byte what submit uploads."""
    run_id = "rc-out"
    world.submit("eos", "dgx", extra=("--run-id", run_id))
    out = world.tmp / "rendered"
    result = world.invoke(
        "render", str(world.config), "-c", "eos", "-c", "dgx", "--run-id", run_id, "--out", str(out)
    )
    assert result.exit_code == 0, result.stderr
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("job.sh"))
    assert written == [f"{c}/{b}/job.sh" for c in ("dgx", "eos") for b in ("gpqa", "smoke")]
    assert result.stdout.splitlines() == [str(out / w) for w in _upload_order(written)]
    for rel in written:
        cluster = rel.split("/", 1)[0]
        uploaded = world.cluster(cluster).workdir / run_id / rel
        assert (out / rel).read_bytes() == uploaded.read_bytes()
        assert (out / rel).read_text().startswith("#!/bin/bash\n")
        assert stat.S_IMODE((out / rel).stat().st_mode) == 0o700


def _upload_order(written: list[str]) -> list[str]:
    """The order render prints paths: clusters as given (eos, dgx), benchmarks in config order."""
    return sorted(written, key=lambda w: (w.split("/")[0] != "eos", w))


def test_render_out_onto_a_file_is_an_error_naming_it(world: World) -> None:
    """--out naming an existing file is refused (exit 2); the file is left as it was."""
    target = world.tmp / "a-file"
    target.write_text("keep me\n")
    result = world.invoke("render", str(world.config), "-c", "eos", "--out", str(target))
    assert result.exit_code == 2
    assert target.read_text() == "keep me\n"
