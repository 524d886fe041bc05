"""The packages' layout: small modules, no import circle, and each package's layers importing only downwards.

Imports are read from the source with ``ast``, relative ones resolved; imports inside functions count (a lazy import
is still an edge), imports under ``if TYPE_CHECKING:`` do not (they never run). Each package's checks are a
function of its own (``test_agent_layout``, ``test_the_collectors_packages_...``); the helpers take the package's name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A module longer than this is a sign to split it (docs/architecture.md, /work/shared/STYLE.md).
MAX_LINES = 400

#: The agent's layers, lowest first (docs/architecture.md, "agent/"): a module imports only from its own layer's
#: package or from layers below it. Layer 0 is the package's own top-level modules, which any module may import.
AGENT_LAYERS: tuple[tuple[str, ...], ...] = (
    ("agent", "agent.errors", "agent.compat", "agent.stop", "agent.imports"),
    ("agent.machine",),
    ("agent.timing",),
    ("agent.devices",),
    ("agent.models",),
    ("agent.distributed",),
    ("agent.benchmarks",),
    ("agent.harness",),
    ("agent.launchers",),
    ("agent.run",),
    ("agent.cli",),
    ("agent.__main__",),
)


#: The store's classes stay under this many lines (a façade over a writer and a recovery module).
MAX_STORE_CLASS_LINES = 250
#: What each collector layer may import of the collector, besides itself and the package's ``__init__``/``__main__``.
#: The analysis reads the store's definitions (figures, tables, errors, published baselines), never a connection.
COLLECTOR_MAY_IMPORT = {
    "store": set(),
    "analysis": {"store.figures", "store.tables", "store.errors", "store.published"},
    "render": {"analysis"},
    "read": {"store", "analysis", "render"},
    "web": {"store", "analysis", "render", "read"},
    "cli": {"store", "analysis", "render", "read", "web"},
}


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


def _imports(path: Path, package: str) -> set[str]:
    """The modules of ``package`` that ``path`` imports: ``from .x import y`` names module ``x.y`` where there is
    one, else ``x``."""
    me = _name(path)
    here = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in _statements([ast.parse(path.read_text(encoding="utf-8"))]):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                up = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            names = [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base for a in node.names]
        for name in names:
            while name and not _is_module(name):
                name = name.rpartition(".")[0]
            if name.split(".")[0] == package and name != me:
                found.add(name)
    return found


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _graph(package: str) -> dict[str, set[str]]:
    return {_name(path): _imports(path, package) for path in _sources(package)}


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


def _too_long(package: str) -> dict[str, int]:
    lengths = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in _sources(package)}
    return {path: n for path, n in lengths.items() if n > MAX_LINES}


def _layer_of(module: str, layers: tuple[tuple[str, ...], ...]) -> tuple[int, str]:
    """The layer of ``module`` and the name it is placed by (its package, or itself at layer 0)."""
    for number, members in enumerate(layers):
        for member in members:
            if module == member or (member.count(".") == 1 and module.startswith(member + ".")):
                return number, member
    raise AssertionError(f"{module} is in no layer: add it to the package's layers here and in docs/architecture.md")


def _upward(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Imports from a lower layer into a higher one, or across two packages of one layer (layer 0 aside)."""
    wrong = []
    for module, imported in sorted(graph.items()):
        mine, home = _layer_of(module, layers)
        for other in sorted(imported):
            theirs, there = _layer_of(other, layers)
            if theirs > mine or (theirs == mine and mine > 0 and there != home):
                wrong.append(f"{module} -> {other}")
    return wrong


def test_agent_layout() -> None:
    graph = _graph("agent")
    assert {"agent.devices.target", "agent.run.probe", "agent.models.llama_torch"} <= graph.keys()
    assert "agent.devices.target" in graph["agent.run.probe"]  # the walk sees imports…
    assert "agent.models.llama_kernels" in graph["agent.models.llama_torch"]  # …lazy ones too
    assert _too_long("agent") == {}
    assert _cycles(graph) == []
    assert _upward(graph, AGENT_LAYERS) == []


def _collector_layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in COLLECTOR_MAY_IMPORT) else None


def _allowed(importer: str, imported: str) -> bool:
    mine, theirs = _collector_layer(importer), _collector_layer(imported)
    if mine is None or theirs is None or mine == theirs:
        return True
    inner = imported.split(".", 1)[1]
    return any(inner == rule or inner.startswith(rule + ".") for rule in COLLECTOR_MAY_IMPORT[mine])


def test_the_collectors_packages_are_layers_of_small_modules_without_circles() -> None:
    assert _too_long("collector") == {}
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
    loose = sorted(m for m in graph if _collector_layer(m) is None and m.count(".") == 1)
    kept = ["collector.__main__", "collector.data"]
    assert loose == kept, "every collector module belongs to a layer's package"


def test_no_folder_of_the_agent_imports_another_that_imports_it_back() -> None:
    def folder(name: str) -> str:
        return ".".join(name.split(".")[:2])

    folders: dict[str, set[str]] = {}
    for name, imported in _graph("agent").items():
        folders.setdefault(folder(name), set()).update(folder(i) for i in imported if folder(i) != folder(name))
    assert "agent.distributed" in folders["agent.benchmarks"]  # families use the group machinery…
    assert _cycles(folders) == []  # …which never imports a family
