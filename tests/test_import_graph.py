"""ragmi's import graph: no cycles (imports inside functions included), the floors in order, and an
attack that reaches nothing of the target (docs/architecture.md, "Floors")."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "ragmi"


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """{dotted module name: file} of every module of the package under ``root``."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def imported_names(module: str, path: Path) -> set[str]:
    """Every absolute name ``module`` imports anywhere in its file (top level, inside functions, under
    ``if``), ``from . import x`` resolved to ``pkg.x`` and ``from .m import f`` to both ``pkg.m`` and
    ``pkg.m.f``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)
    return out


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """{module: the package's modules it imports} (a name that is not a module counts as its module)."""
    files = module_files(root)
    graph = {}
    for m, p in files.items():
        deps = set()
        for name in imported_names(m, p):
            while name and name not in files:
                name = name.rpartition(".")[0]
            if name and name != m:
                deps.add(name)
        graph[m] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted, plus one
    shortest cycle through its first module to print."""
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
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def shortest_cycle(graph: dict[str, set[str]], start: str) -> list[str]:
    """start -> ... -> start by breadth-first search."""
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return [start, *reversed(path[:-1]), start] if v != start else [start, start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return []


def closure(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        v = todo.pop()
        for w in graph[v]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


# docs/architecture.md, "Floors": the floor of each package or module named there (the longest prefix wins).
# Every other module sits on the lowest floor its imports allow, so it carries no floor of its own: an arrow
# through it counts as an arrow from the module that imports it.
FLOORS = {
    "ragmi.errors": 1,
    "ragmi.io": 1,
    "ragmi.hardware": 1,
    "ragmi.schema": 2,
    "ragmi.gate.metrics": 2,  # the gate's declarations, which the validator reads
    "ragmi.gate.limits": 2,
    "ragmi.attacks": 3,
    "ragmi.defenses": 3,
    "ragmi.rag": 3,
    "ragmi.targets": 3,
    "ragmi.datasets": 3,
    "ragmi.plan": 4,
    "ragmi.config": 5,
    "ragmi.analysis": 6,  # the tables' computations (report, on the same floor, only formats them)
    "ragmi.workflow": 6,
    "ragmi.report": 6,
    "ragmi.gate": 6,
    "ragmi.audit": 6,
    "ragmi.utility": 6,
    "ragmi.stores": 6,
    "ragmi.serve_target": 6,
    "ragmi.eta": 6,
    "ragmi.__main__": 6,
}


def floor_of(module: str, floors: dict[str, int] = FLOORS) -> int | None:
    best = None
    for prefix, f in floors.items():
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, f)
    return None if best is None else best[1]


def arrows_up(graph: dict[str, set[str]], floors: dict[str, int] = FLOORS) -> list[str]:
    """Every import of a module on a floor that reaches a module on a higher floor, directly or through
    modules without a floor of their own (imports inside functions included): ``a (3) -> b -> c (6)``."""
    found = []
    for m in sorted(graph):
        f = floor_of(m, floors)
        if f is None:
            continue
        prev, todo = {d: None for d in graph[m]}, sorted(graph[m])
        while todo:
            d = todo.pop(0)
            fd = floor_of(d, floors)
            if fd is not None:
                if fd > f:
                    path = [d]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    found.append(f"{m} ({f}) -> " + " -> ".join(reversed(path)) + f" ({fd})")
                continue  # a module with a floor answers for what it imports
            for e in sorted(graph[d]):
                if e not in prev and e != m:
                    prev[e] = d
                    todo.append(e)
    return found


def test_the_floor_check_finds_arrows_up_direct_and_through_free_modules():
    floors = {"p.low": 1, "p.mid": 2, "p.high": 3}
    graph = {
        "p.low": {"p.free"},  # through a module without a floor
        "p.free": {"p.high"},
        "p.mid": {"p.low", "p.other"},  # down, and to a free module that reaches nothing above it
        "p.other": set(),
        "p.high": {"p.mid"},
    }
    assert arrows_up(graph, floors) == ["p.low (1) -> p.free -> p.high (3)"]
    graph["p.mid"].add("p.high")  # a lazy import up counts the same
    assert arrows_up(graph, floors) == ["p.low (1) -> p.free -> p.high (3)", "p.mid (2) -> p.high (3)"]


def test_no_import_runs_up_the_floors():
    """docs/architecture.md's floors, in order: no module imports (directly, inside a function, or
    through a module without a floor of its own) a module of a floor above its own."""
    graph = import_graph()
    assert all(floor_of(m) is not None for m in ("ragmi.config", "ragmi.targets.remote", "ragmi.gate.cli"))
    up = arrows_up(graph)
    assert not up, "imports up the floors:\n" + "\n".join(up)


def test_the_scan_sees_lazy_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import g\n    return g\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.a"}  # an import inside a function counts
    assert cycles(graph) == [["pkg.a", "pkg.sub.b"]]
    assert shortest_cycle(graph, "pkg.a") == ["pkg.a", "pkg.sub.b", "pkg.a"]


def test_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 100 and "ragmi.config" in graph
    found = cycles(graph)
    paths = [" -> ".join(shortest_cycle(graph, c[0])) for c in found]
    assert not found, "import cycles (imports inside functions included):\n" + "\n".join(paths)


@pytest.mark.parametrize(
    "module, allowed",
    [
        ("ragmi.schema", {"ragmi.errors", "ragmi.io"}),
        ("ragmi.gate.metrics", {"ragmi.errors"}),
        ("ragmi.rag.remote.keys", {"ragmi.errors"}),
    ],
)
def test_bottom_floors_import_almost_nothing(module, allowed):
    graph = import_graph()
    assert module in graph
    assert closure(graph, module) <= allowed | {"ragmi", "ragmi.rag", "ragmi.rag.remote", "ragmi.gate"}


def test_plug_ins_and_plan_never_reach_the_validator():
    """The plug-ins read their defaults from ragmi.schema; the questions about a validated config
    (ragmi.plan) never import the validator that imports them."""
    graph = import_graph()
    for m in (
        "ragmi.plan",
        "ragmi.attacks",
        "ragmi.defenses",
        "ragmi.rag.frameworks",
        "ragmi.rag.index",
        "ragmi.targets",
    ):
        assert "ragmi.config" not in closure(graph, m), m


def test_attacks_never_reach_the_target():
    """An attack sees only queries and responses: nothing it imports, directly or through another
    module, is the target's retriever, generator, defenses, stores or the audit."""
    graph = import_graph()
    target = ("ragmi.rag", "ragmi.defenses", "ragmi.audit", "ragmi.stores", "ragmi.config")
    reached = {
        m: sorted(d for d in closure(graph, m) if d.startswith(target))
        for m in graph
        if m == "ragmi.attacks" or m.startswith("ragmi.attacks.")
    }
    assert len(reached) > 5
    assert {m: d for m, d in reached.items() if d} == {}


def test_every_module_imports_first_in_a_fresh_interpreter():
    """Each module imported with no other ragmi module loaded before it (ragmi's modules dropped from
    sys.modules between imports, third-party ones kept): an import order that only works because
    another module happened to load first fails here."""
    code = textwrap.dedent(
        """
        import importlib, pkgutil, sys, traceback
        import ragmi
        names = sorted(m.name for m in pkgutil.walk_packages(ragmi.__path__, "ragmi.")
                       if not m.name.endswith("__main__"))
        failed = []
        for name in names:
            for m in [m for m in sys.modules if m == "ragmi" or m.startswith("ragmi.")]:
                del sys.modules[m]
            try:
                importlib.import_module(name)
            except Exception:
                failed.append(name + ": " + traceback.format_exc().strip().splitlines()[-1])
        print(len(names))
        print("\\n".join(failed))
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=SRC.parent)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert int(lines[0]) > 100
    assert lines[1:] == []
