"""The house style's rules for tests themselves (STYLE.md section 7), read from their source:
every test function states the behaviour it checks in a docstring."""

from __future__ import annotations

import ast
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
