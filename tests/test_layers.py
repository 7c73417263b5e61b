"""The pure core imports no I/O library: a functional core, an imperative shell (STYLE §1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PURE = [
    "layout",
    "models",
    "chain",
    "sacct",
    "script",
    "durations",
    "bundle",
    "snapshot",
    "chainstatus",
    "actions",
    "doctor",
    "limits",
    "resumecaps",
    "_template",
    "remote/markers",
    "remote/endpoint",
    "summary",
    "records",
    "results",
    "outcomes",
    "wire",
    "runstatus",
]
FORBIDDEN = {"anyio", "asyncio", "asyncssh", "tenacity", "structlog", "subprocess", "socket"}
PACKAGE = Path(__file__).resolve().parent.parent / "remote_chain"


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_no_io(module: str) -> None:
    """Pure modules import none of the I/O libraries and define nothing async."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
        assert not isinstance(node, ast.AsyncFunctionDef), f"{module}: async def {node.name}"
    assert not imported & FORBIDDEN, f"{module} imports {imported & FORBIDDEN}"


def test_only_the_ssh_module_imports_asyncssh() -> None:
    """asyncssh is imported only by the seam's implementation: the transport and its
    reading of the ssh config (asyncssh's own parser)."""
    users = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "import asyncssh" in p.read_text() or "from asyncssh" in p.read_text()
    )
    assert users == ["remote/ssh.py", "remote/sshconfig.py"]
