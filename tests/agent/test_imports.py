"""The agent's import graph has no cycle, between modules or between folders (``benchmarks/``, ``distributed/``…).

Read from the source with ``ast``: imports inside functions count (a lazy import is still a loop), imports under
``if TYPE_CHECKING:`` do not (they never run).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _statements(nodes: Iterable[ast.AST]) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in nodes:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _statements(node.orelse)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        else:
            yield from _statements(ast.iter_child_nodes(node))


def _imports(path: Path) -> set[str]:
    """The agent modules ``path`` imports: ``from .x import y`` names module ``x.y`` where there is one, else ``x``."""
    me = _name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in _statements([ast.parse(path.read_text(encoding="utf-8"))]):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            names = [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names]
        for name in names:
            while name and not _is_module(name):
                name = name.rpartition(".")[0]
            if name.split(".")[0] == "agent" and name != me:
                found.add(name)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            if component:
                cycles.append(sorted([*component, node]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def _graph() -> dict[str, set[str]]:
    return {_name(path): _imports(path) for path in sorted((ROOT / "agent").rglob("*.py"))}


def test_no_module_of_the_agent_imports_itself_in_a_loop() -> None:
    graph = _graph()
    assert {"agent.devices.target", "agent.run.probe", "agent.devices"} <= graph.keys()
    # the walk sees them
    assert "agent.devices" in graph["agent.devices.target"] and "agent.devices.target" in graph["agent.run.probe"]
    assert _cycles(graph) == []


def test_no_folder_of_the_agent_imports_another_that_imports_it_back() -> None:
    def folder(name: str) -> str:
        return ".".join(name.split(".")[:2])

    folders: dict[str, set[str]] = {}
    for name, imported in _graph().items():
        folders.setdefault(folder(name), set()).update(folder(i) for i in imported if folder(i) != folder(name))
    assert "agent.distributed" in folders["agent.benchmarks"]  # families use the group machinery…
    assert _cycles(folders) == []  # …which never imports a family
