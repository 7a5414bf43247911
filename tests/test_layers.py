"""The package's import graph: no cycle between modules, and a small top level (ARCHITECTURE.md)."""

from __future__ import annotations

from pathlib import Path

import grimp

import dahl

PACKAGE = Path(dahl.__file__).parent


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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


class TestImportGraph:
    def test_no_cycle_between_modules(self) -> None:
        """No module imports itself back through others, counting imports under TYPE_CHECKING."""
        graph = grimp.build_graph("dahl", exclude_type_checking_imports=False)
        assert _cycles(graph) == []

    def test_cycle_finder_finds_a_cycle(self) -> None:
        """The finder reports a two-module circle (so the test above can fail)."""
        graph = grimp.ImportGraph()
        for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
            graph.add_module(name)
        graph.add_import(importer="pkg.a", imported="pkg.b")
        graph.add_import(importer="pkg.b", imported="pkg.a")
        graph.add_import(importer="pkg.c", imported="pkg.a")
        assert _cycles(graph) == [["pkg.a", "pkg.b"]]


class TestTopLevel:
    def test_at_most_twelve_modules_beside_the_packages(self) -> None:
        """dahl/ holds packages and at most 12 modules (dunder files included)."""
        modules = sorted(p.name for p in PACKAGE.glob("*.py"))
        assert len(modules) <= 12, modules
