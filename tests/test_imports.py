"""The package's import graph, counting every import statement (in functions and
``TYPE_CHECKING`` blocks too): no cycles, imports at the top of modules except the CLI's
dispatch, and a root that holds only what every folder shares."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "remote_chain"
# The CLI's dispatch: a command's declaration imports its implementation when it runs.
DISPATCH = "remote_chain.cli.commands"
MAX_ROOT_MODULES = 8
MAX_MODULE_LINES = 400


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in PACKAGE.rglob("*.py")}


TREES = {m: ast.parse(p.read_text()) for m, p in MODULES.items()}


def _imports(module: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Each import statement of ``module`` with each module of the package it names."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                while name and name not in MODULES:
                    name = name.rpartition(".")[0]
                if name:
                    yield node, name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    yield node, f"{base}.{alias.name}"
                elif base in MODULES:
                    yield node, base


def _graph() -> dict[str, set[str]]:
    return {m: {target for _, target in _imports(m)} - {m} for m in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycle() -> None:
    """No module reaches itself through the imports of others, lazy ones included."""
    assert _cycles(_graph()) == []


def test_a_cycle_is_found_when_there_is_one() -> None:
    """The check itself: a graph with a loop through three modules reports it."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_imports_are_at_the_top_but_for_the_cli_dispatch() -> None:
    """A function imports only a command's implementation (``cli/commands/``), from the
    CLI's declarations: every other import is at its module's top."""
    lazy = []
    for module, path in MODULES.items():
        for node in ast.walk(TREES[module]):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    named = [t for n, t in _imports(module) if n is inner]
                    dispatch = all(t.startswith(f"{DISPATCH}.") for t in named)
                    if not (module.startswith("remote_chain.cli.") and named and dispatch):
                        lazy.append(f"{path.relative_to(PACKAGE)}:{inner.lineno}")
    assert sorted(set(lazy)) == []


def test_the_package_root_holds_few_modules() -> None:
    """The root holds what every folder shares (errors, retries, logging, the version and the
    public API); everything else is in the folder that says where it runs."""
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def test_no_module_is_over_400_lines() -> None:
    """Every module holds one concept, small enough to read at one sitting."""
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in MODULES.values()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


# What each folder may import besides itself and the shared root modules (errors, retries,
# logconfig, version): the layers of docs/architecture.md, lowest first.
LAYERS = {
    "protocol": set(),
    "core": {"protocol"},
    "execs": {"core", "protocol"},
    "job": {"core", "execs", "protocol"},
    "config": {"core", "protocol"},
    "transport": {"core", "protocol"},
    "client": {"config", "core", "execs", "job", "protocol", "transport"},
    "cli": {"client", "config", "core", "execs", "job", "protocol", "transport"},
}
SHARED = {"errors", "retries", "logconfig", "version"}


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_each_folder_imports_only_the_layers_below_it() -> None:
    """The pure core and the protocol import nothing of the client, transport or CLI, and no
    folder imports one above it: where code runs decides what it may touch."""
    wrong = sorted(
        f"{module} -> {target}"
        for module in MODULES
        if (folder := _folder(module)) in LAYERS
        for target in _graph()[module]
        if _folder(target) not in {folder, *LAYERS[folder], *SHARED}
    )
    assert wrong == []
