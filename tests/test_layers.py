"""The pipeline's layers, held by the real import graph: every ``import`` of every module under ``kbase/`` —
at the top, inside functions, under ``TYPE_CHECKING`` — mapped to its package (or top-level module), must
point down this order, so no package-level cycle can form:

    errors, enums, version, jsonable, units, display, safe_write -> gitrepo -> readers -> analysis -> policy,
    store_urls -> settings -> store -> comparison -> render -> api -> kbase (the facade re-exporting api) -> synth
    -> cli

(read -> window -> leaderboard in readers/analysis; the store persists what analysis computes; the
comparison reads the store; render formats what it is given; the API is the one call per job; the CLI
parses and calls it.) A new package or top-level module must be placed in ``LAYERS`` to pass.

Inside the packages the same graph, module by module, has no cycle either (a deferred import that closes a loop
is a cycle too: it only hides it), and no two sub-packages of one package import each other in a loop
(``render.report`` and ``render.notebook`` say what they hold; a loop would make them one). docs/architecture.md
says where a new reader, renderer, column or statistic goes.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kbase"

LAYERS = ["errors", "enums", "version", "jsonable", "units", "display", "safe_write", "gitrepo", "readers", "analysis",
          "policy", "store_urls",
          "settings", "store", "comparison", "render", "api", "kbase", "synth", "cli"]
RANK = {name: i for i, name in enumerate(LAYERS)}


def _node(dotted: str) -> str:
    """The layer node of a module: ``kbase.store.write.queries`` -> ``store``; the package itself -> ``kbase``."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "kbase"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(rel[:-1] if rel[-1] == "__init__" else rel)


def _imported(path: Path) -> list[tuple[str, int]]:
    """(module imported, line) for every kbase import in ``path``, relative ones resolved."""
    return imports_of(path.read_text(encoding="utf-8"), _module_name(path), path.name == "__init__.py")


def imports_of(source: str, name: str, is_package: bool) -> list[tuple[str, int]]:
    """(module imported, line) of every kbase import anywhere in ``source``, the text of module ``name``."""
    package = name if is_package else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "kbase"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            if base.split(".")[0] != "kbase":
                continue
            folder = PACKAGE.parent.joinpath(*base.split("."))
            for a in node.names:  # from P import X: the submodule P.X where there is one, else (a name of) P
                sub = folder / a.name
                out.append((f"{base}.{a.name}" if (sub / "__init__.py").is_file() or sub.with_suffix(".py").is_file()
                            else base, node.lineno))
    return out


def import_graph() -> dict[tuple[str, str], list[str]]:
    """(from node, to node) -> where: every import between two different nodes."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _node(_module_name(path))
        for target, line in _imported(path):
            dst = _node(target)
            if dst != src:
                edges[(src, dst)].append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    return edges


def module_graph() -> dict[tuple[str, str], list[str]]:
    """(module, module it imports) -> where: every kbase import between two modules (a package is its
    ``__init__``; ``from P import X`` is the submodule ``P.X`` where there is one)."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _module_name(path)
        for target, line in _imported(path):
            if target != src:
                edges[(src, target)].append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    return edges


def subpackage_loops(edges) -> list[list[str]]:
    """Loops between the direct parts of one package (its modules and sub-packages, each sub-package standing for
    every module in it) that take in at least one sub-package: two sub-packages, or a sub-package and a module
    beside it, importing each other. (A loop of modules alone is a module-level cycle.)"""
    packages = {_module_name(p.parent / "__init__.py") for p in PACKAGE.rglob("__init__.py")}
    out = []

    def part(package: str, module: str) -> str | None:
        if not module.startswith(package + "."):
            return None
        return package + "." + module[len(package) + 1:].split(".")[0]

    for package in sorted(packages):
        pairs = [(part(package, a), part(package, b)) for a, b in edges]
        collapsed = {(a, b): [] for a, b in pairs if a and b and a != b}
        subs = {p for p in packages if p.startswith(package + ".") and p.count(".") == package.count(".") + 1}
        out += [c for c in _cycles(collapsed) if set(c) & subs]
    return out


def _cycles(edges) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_every_package_has_a_layer():
    nodes = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    nodes |= {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert nodes - {"kbase"} <= set(RANK), f"place these in LAYERS: {sorted(nodes - set(RANK))}"


def test_no_package_level_import_cycle():
    edges = import_graph()
    assert edges, "the walk found no imports: the test would pass vacuously"
    cycles = _cycles(edges)
    detail = {c: [w for (a, b), ws in edges.items() if a in c and b in c for w in ws[:2]] for c in map(tuple, cycles)}
    assert not cycles, f"package-level import cycles: {detail}"


def test_imports_point_down_the_layers():
    upward = {f"{a} -> {b}": where for (a, b), where in import_graph().items() if RANK[b] >= RANK[a]}
    assert not upward, "imports against the layering:\n" + "\n".join(f"{k}: {v}" for k, v in upward.items())


def test_render_imports_neither_the_api_nor_the_store():
    edges = import_graph()
    for banned in ("api", "store", "kbase"):
        assert ("render", banned) not in edges, edges.get(("render", banned))


def test_the_walk_sees_every_kind_of_import():
    """The graph would miss the cycles this test exists for if it read only top-level imports."""
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kbase.api import x\n"
              "def f():\n    from kbase.store import y\n    import kbase.cli.app\n    from ..render import z\n"
              "    from . import w\n    from kbase import jsonable, __version__\n")
    found = {t for t, _ in imports_of(source, "kbase.comparison.probe", False)}
    assert found == {"kbase.api", "kbase.store", "kbase.cli.app", "kbase.render", "kbase.comparison",
                     "kbase.jsonable", "kbase"}
    assert _cycles({("a", "b"): [], ("b", "c"): [], ("c", "a"): [], ("c", "d"): []}) == [["a", "b", "c"]]
    edges = import_graph()
    assert ("api", "store") in edges and ("cli", "kbase") in edges  # the walk reaches function-level imports


def test_no_module_level_import_cycle():
    edges = module_graph()
    assert len({m for pair in edges for m in pair}) > 100, "the walk found too few modules: it would pass vacuously"
    cycles = _cycles(edges)
    detail = {tuple(c): [w for (a, b), ws in edges.items() if a in c and b in c for w in ws[:1]] for c in cycles}
    assert not cycles, "module-level import cycles:\n" + "\n".join(f"{k}: {v}" for k, v in detail.items())


def test_no_subpackage_loop():
    loops = subpackage_loops(module_graph())
    assert not loops, f"sub-packages importing each other in a loop: {loops}"


def test_the_checks_catch_a_planted_cycle_and_loop():
    """A deferred import closing a loop (``kbase.analysis.board`` -> ``notebook`` -> ``board``) is a module-level
    cycle; ``render.report`` and ``render.notebook`` importing each other, through any modules, is a sub-package
    loop, though no module is in a cycle."""
    planted = imports_of("def f():\n    from kbase.analysis import board\n", "kbase.analysis.notebook", False)
    assert planted == [("kbase.analysis.board", 2)]  # a submodule named in a from-import is that module
    edges = {("kbase.analysis.board", "kbase.analysis.notebook"): [],
             **{("kbase.analysis.notebook", t): [] for t, _ in planted}}
    assert _cycles(edges) == [["kbase.analysis.board", "kbase.analysis.notebook"]]
    loop = {("kbase.render.report.pages", "kbase.render.notebook.stored"): [],
            ("kbase.render.notebook.history", "kbase.render.report.model"): [],
            ("kbase.render.report.pages", "kbase.render.report.model"): []}
    assert _cycles(loop) == []
    assert subpackage_loops(loop) == [["kbase.render.notebook", "kbase.render.report"]]
    one_way = {k: v for k, v in loop.items() if k[0] != "kbase.render.notebook.history"}
    assert subpackage_loops(one_way) == []
