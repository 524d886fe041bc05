"""The packages show the architecture: small modules, no import circles, and lower layers that never import upper ones
(docs/architecture.md draws them)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

#: A module over this many lines is a sign to split it (STYLE.md).
MAX_MODULE_LINES = 400
#: The store's classes stay under this many lines (a façade over a writer and a recovery module).
MAX_STORE_CLASS_LINES = 250
#: What each collector layer may import of the collector, besides itself and the package's ``__init__``/``__main__``.
#: The analysis reads the store's definitions (figures, tables, errors, published baselines), never a connection.
MAY_IMPORT = {
    "store": set(),
    "analysis": {"store.figures", "store.tables", "store.errors", "store.published"},
    "render": {"analysis"},
    "read": {"store", "analysis", "render"},
    "web": {"store", "analysis", "render", "read"},
    "cli": {"store", "analysis", "render", "read", "web"},
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports at run time (inside functions too; not under TYPE_CHECKING),
    relative imports resolved; ``from package import module`` is the module."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in modules and m != name}


def _graph(top: str) -> dict[str, set[str]]:
    paths = {_module(p): p for p in (ROOT / top).rglob("*.py")}
    return {name: _imports(path, set(paths)) for name, path in paths.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or of one that imports itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in MAY_IMPORT) else None


def _allowed(importer: str, imported: str) -> bool:
    mine, theirs = _layer(importer), _layer(imported)
    if mine is None or theirs is None or mine == theirs:
        return True
    inner = imported.split(".", 1)[1]
    return any(inner == rule or inner.startswith(rule + ".") for rule in MAY_IMPORT[mine])


def test_the_collectors_packages_are_layers_of_small_modules_without_circles() -> None:
    sources = sorted((ROOT / "collector").rglob("*.py"))
    long = {str(p.relative_to(ROOT)): n for p in sources if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: {long}"
    big = {
        f"{p.relative_to(ROOT)}:{node.name}": lines
        for p in (ROOT / "collector" / "store").rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.ClassDef)
        and (lines := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_STORE_CLASS_LINES
    }
    assert big == {}, f"store classes over {MAX_STORE_CLASS_LINES} lines: {big}"
    graph = _graph("collector")
    assert _cycles(graph) == []
    upward = sorted(f"{a} imports {b}" for a, imported in graph.items() for b in imported if not _allowed(a, b))
    assert upward == [], "a lower layer imports an upper one (docs/architecture.md, ## collector/)"
    loose = sorted(m for m in graph if _layer(m) is None and m.count(".") == 1)
    kept = ["collector.__main__", "collector.data", "collector.tokens"]  # tokens: a re-export for tests/agent
    assert loose == kept, "every collector module belongs to a layer's package"
