"""The house style's rules for tests themselves (STYLE.md section 7): every test function
states the behaviour it checks in a docstring (read from the source), and no test relies on
its file's name to run in order (tests/conftest.py orders by the ``runs_last`` marker)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _test_modules() -> Iterator[Path]:
    """Every module pytest collects tests from under tests/ (its default ``python_files``)."""
    seen = {*TESTS.rglob("test_*.py"), *TESTS.rglob("*_test.py")}
    yield from sorted(seen)


def _test_functions(path: Path) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Each function of ``path`` named as pytest collects it (``test`` first), wherever defined."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            yield node


def test_the_rules_see_the_whole_suite() -> None:
    """The walk reaches the unit layers, the end-to-end and faults suites, and async tests."""
    modules = {p.relative_to(TESTS).parts[0] for p in _test_modules()}
    assert {"e2e", "faults", Path(__file__).name} <= modules
    kinds = {type(node) for path in _test_modules() for node in _test_functions(path)}
    assert kinds == {ast.FunctionDef, ast.AsyncFunctionDef}


def test_every_test_has_a_docstring() -> None:
    """Every test function, sync or async, has a docstring that is not blank."""
    missing = [
        f"{path.relative_to(TESTS.parent)}:{node.lineno}: {node.name}"
        for path in _test_modules()
        for node in _test_functions(path)
        if not (ast.get_docstring(node) or "").strip()
    ]
    assert not missing, "tests without a docstring stating what they check:\n" + "\n".join(missing)


def test_runs_last_modules_follow_every_other_test(tmp_path: Path) -> None:
    """tests/conftest.py moves a ``runs_last`` module's tests after all others, in their order."""
    (tmp_path / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\naddopts = --strict-markers\nmarkers =\n    runs_last: last\n")
    (tmp_path / "test_a.py").write_text("def test_1() -> None:\n    pass\n")
    (tmp_path / "test_b.py").write_text(
        "import pytest\n\npytestmark = pytest.mark.runs_last\n\n\n"
        "def test_2() -> None:\n    pass\n\n\ndef test_3() -> None:\n    pass\n"
    )
    (tmp_path / "test_c.py").write_text("def test_4() -> None:\n    pass\n")
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*argv, "-c", str(ini), "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert collected == [
        "test_a.py::test_1",
        "test_c.py::test_4",
        "test_b.py::test_2",
        "test_b.py::test_3",
    ], done.stdout
