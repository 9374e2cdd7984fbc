"""No import cycles between ragshield's modules.

Every module under ``src/ragshield`` is parsed (not imported) and its imports of other
ragshield modules become edges of a graph; a strongly connected component of more than one
module is a cycle. Two graphs are checked:

- *module level*: the imports that run when the module is imported (inside ``try`` / ``if``
  at the top level too), without those under ``if TYPE_CHECKING:``. A cycle here breaks
  ``import`` depending on which module is imported first.
- *everywhere*: the same plus the imports inside functions (ragshield imports heavy or
  optional parts lazily). A cycle here is not an error at run time, but it means two modules
  each need the other: a shared part belongs in a third module (e.g. the extraction plan in
  ``eval/extraction_plan.py``, used by both the command line and the Ray path).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "ragshield"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, *, in_functions: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import nodes, skipping ``if TYPE_CHECKING:`` bodies (and function bodies unless
    ``in_functions``)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            elif isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                if in_functions:
                    stack.append(child)
            else:
                stack.append(child)


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The ragshield modules an import statement loads."""
    names: set[str] = set()
    if isinstance(node, ast.Import):
        names = {alias.name for alias in node.names}
    else:
        base = node.module or ""
        if node.level:  # relative: resolve against this module's package
            pkg = module.split(".")
            if MODULES[module].name != "__init__.py":
                pkg = pkg[:-1]
            pkg = pkg[: len(pkg) - (node.level - 1)]
            base = ".".join([*pkg, base] if base else pkg)
        names = {base}
        names |= {f"{base}.{alias.name}" for alias in node.names}  # `from pkg import submodule`
    out = set()
    for name in names:
        # `import a.b.c` loads a, a.b and a.b.c; keep the deepest known module only
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name.startswith(PACKAGE) and name != module:
            out.add(name)
    return out


def _graph(*, in_functions: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: set[str] = set()
        for node in _imports(tree, in_functions=in_functions):
            edges |= _targets(module, node)
        # a package's __init__ is imported before any of its submodules: not a real edge
        graph[module] = {e for e in edges if not module.startswith(e + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(graph: dict[str, set[str]], component: list[str]) -> str:
    members = set(component)
    edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
    return "; ".join(edges)


@pytest.mark.parametrize("in_functions", [False, True], ids=["module-level", "everywhere"])
def test_no_import_cycles(in_functions: bool) -> None:
    graph = _graph(in_functions=in_functions)
    cycles = _cycles(graph)
    assert not cycles, "import cycles: " + " | ".join(_describe(graph, c) for c in cycles)


def test_the_checker_finds_a_cycle() -> None:
    """The checker itself: a known two- and three-module cycle, and none in a chain."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_type_checking_and_function_imports_are_told_apart() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "import ragshield.types\n"
        "if TYPE_CHECKING:\n    import ragshield.pipeline\n"
        "def f():\n    import ragshield.config\n"
    )
    top = {a.name for n in _imports(tree, in_functions=False) for a in n.names}
    every = {a.name for n in _imports(tree, in_functions=True) for a in n.names}
    assert top == {"TYPE_CHECKING", "ragshield.types"}
    assert every == top | {"ragshield.config"}
