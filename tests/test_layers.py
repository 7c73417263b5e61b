"""The pure core imports no I/O library: a functional core, an imperative shell (STYLE §1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

FORBIDDEN = {"anyio", "asyncio", "asyncssh", "tenacity", "structlog", "subprocess", "socket"}
PACKAGE = Path(__file__).resolve().parent.parent / "remote_chain"
# The folders whose code runs nowhere but in memory: the core, the protocol the client, login
# node and job share, and the renderers and parsers of what runs on the login node and in the
# allocation. A module put in one of them is held to it by being there.
PURE_FOLDERS = ("core", "protocol", "execs", "job")
PURE = sorted(
    str(p.relative_to(PACKAGE).with_suffix(""))
    for folder in PURE_FOLDERS
    for p in (PACKAGE / folder).glob("*.py")
)


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
    assert users == ["transport/ssh.py", "transport/sshconfig.py", "transport/sshconnect.py"]
