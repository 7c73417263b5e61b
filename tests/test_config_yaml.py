"""Configs people write: anchors, aliases, merge keys, ``x-*`` keys, errors naming the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from remote_chain.config import load_submit_config
from remote_chain.config.yamlload import MAX_ALIAS_NODES, load_yaml, load_yaml_lines
from remote_chain.errors import ConfigError

SHARED = """\
x-gpu: &gpu
  partition: gpu
  time: 48:00:00
  extra_args: [--gres=gpu:8]
x-notes: free text the tool never reads
driver:
  benchmarks:
    gpqa:
      run: {config_paths: [a.yaml]}
      slurm:
        <<: *gpu
        time: "04:00:00"
    mmlu:
      slurm: *gpu
    math:
      slurm:
        <<: [{qos: high, partition: first}, *gpu]
"""


def _load(tmp_path: Path, text: str) -> object:
    return load_submit_config(_write(tmp_path, text), environ={})


def test_anchors_aliases_and_merge_keys_share_one_slurm_block(tmp_path: Path) -> None:
    """<<: *gpu merges the block, written keys override it; an alias reuses it whole."""
    cfg = load_submit_config(_write(tmp_path, SHARED), environ={})
    benches = cfg.driver.benchmarks
    assert benches["gpqa"].slurm.partition == "gpu"
    assert benches["gpqa"].slurm.time == 4 * 3600  # the written key wins over the merged one
    assert benches["gpqa"].slurm.extra_args == ("--gres=gpu:8",)
    assert benches["mmlu"].slurm.time == 48 * 3600  # sexagesimal still read as a Slurm duration
    # In a list of merged mappings the first one wins, as the YAML merge key spec says.
    assert (benches["math"].slurm.partition, benches["math"].slurm.qos) == ("first", "high")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "eval.yaml"
    path.write_text(text)
    return path


def test_only_top_level_x_keys_are_ignored(tmp_path: Path) -> None:
    """x-* at the top is the user's; inside driver it is still an unknown key."""
    _load(tmp_path, "x-anything: [1, 2]\ndriver: {benchmarks: {b: {}}}\n")
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, "driver:\n  x-mine: 1\n  benchmarks: {b: {}}\n")
    assert info.value.field == "driver.x-mine"


def test_a_key_written_twice_is_still_an_error_even_beside_a_merge(tmp_path: Path) -> None:
    """Merging is not a licence for duplicates: two written `time` keys are refused."""
    text = "x: &x {time: 10}\ndriver:\n  benchmarks:\n    b:\n      slurm:\n"
    text += "        <<: *x\n        time: 20\n        time: 30\n"
    with pytest.raises(ConfigError, match="duplicate key 'time'"):
        _load(tmp_path, text)


def test_an_alias_bomb_is_refused_quickly() -> None:
    """Nested aliases (10 ** 9 nodes) hit the expansion cap, with the line of the alias."""
    text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    text += "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))
    with pytest.raises(ConfigError, match=rf"line \d+.*more than {MAX_ALIAS_NODES} nodes"):
        load_yaml(text.encode(), source="bomb.yaml")


def test_a_modest_alias_use_is_under_the_cap() -> None:
    """Forty benchmarks sharing one block are far below the cap."""
    text = "x: &s {partition: gpu, time: 60, extra_args: [--a, --b]}\nb:\n"
    text += "".join(f"  b{i}: {{slurm: *s}}\n" for i in range(40))
    data = load_yaml(text.encode(), source="s.yaml")
    assert isinstance(data, dict)
    assert len(data["b"]) == 40


def test_lines_of_keys_and_items() -> None:
    """load_yaml_lines maps each key and list item to its line; overrides to where written."""
    _, lines = load_yaml_lines(SHARED.encode(), source="s")
    assert lines[("driver", "benchmarks", "gpqa")] == 8
    assert lines[("driver", "benchmarks", "gpqa", "run", "config_paths", 0)] == 9
    assert lines[("driver", "benchmarks", "gpqa", "slurm", "time")] == 12
    assert lines[("driver", "benchmarks", "gpqa", "slurm", "partition")] == 2  # from the anchor


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        ("driver:\n  benchmarks:\n    b:\n      slurm: {partiton: x}\n", "partiton", 4),
        ("driver:\n  benchmarks:\n    b:\n      resumable: maybe\n", "resumable", 4),
        ("driver:\n  runner: x\n  upload:\n    - a\n    - /no/such/file\n", "upload[1]", 5),
        ("driver:\n  env:\n    A: 1\n    9bad: x\n  benchmarks: {b: {}}\n", "9bad", 4),
    ],
)
def test_validation_errors_name_the_line(tmp_path: Path, text: str, field: str, line: int) -> None:
    """A validation error names the field and the line it is written on."""
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    assert field in str(info.value)
    assert f"(line {line})" in str(info.value), str(info.value)


def test_several_problems_each_name_their_line(tmp_path: Path) -> None:
    """With several problems, each listed one carries its own line."""
    text = "driver:\n  benchmarks:\n    b:\n      slurm:\n        time: '10:99'\n"
    text += "        qos: 'a b'\n"
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    lines = info.value.message.splitlines()
    assert any(
        ln.startswith("  driver.benchmarks.b.slurm.time: ") and "(line 5)" in ln for ln in lines
    )
    assert any(
        ln.startswith("  driver.benchmarks.b.slurm.qos: ") and "(line 6)" in ln for ln in lines
    )
