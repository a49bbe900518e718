"""The package's layers: every import, function-level ones included, points down or sideways
within a layer, the environment core imports nothing but itself, and no modules import each
other in a circle. The import graph is the one the workflow's code digests are built from."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemashift.workflow.digests import ImportGraph

ROOT = Path(__file__).resolve().parents[1]
#: bottom to top; a module may import its own layer and the layers below it
LAYERS = (
    ("schemashift.env", "schemashift.lineage", "schemashift.provenance"),
    ("schemashift.policies",),
    ("schemashift.rollout", "schemashift.runs"),
    ("schemashift.train", "schemashift.server"),
    ("schemashift.report",),
    ("schemashift.cli",),
    ("schemashift.workflow",),
)


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return ImportGraph(ROOT)


def layer_of(module: str) -> int:
    for rank, tops in enumerate(LAYERS):
        if any(module == top or module.startswith(f"{top}.") for top in tops):
            return rank
    raise AssertionError(f"{module} belongs to no layer; add its package to LAYERS")


def imports(graph: ImportGraph, module: str) -> set[str]:
    """The package modules `module` imports, without the package's own face (`schemashift`)."""
    return set(graph.modules[module].imports) - {"schemashift"}


def test_every_import_points_down_or_sideways(graph: ImportGraph) -> None:
    upward = [
        f"{module} -> {target}"
        for module in graph.modules
        if module != "schemashift"
        for target in imports(graph, module)
        if layer_of(target) > layer_of(module)
    ]
    assert upward == []


def test_the_environment_core_imports_only_itself(graph: ImportGraph) -> None:
    outside = [
        f"{module} -> {target}"
        for module in graph.modules
        if module.startswith("schemashift.env")
        for target in imports(graph, module)
        if not target.startswith("schemashift.env")
    ]
    assert outside == []


def test_no_modules_import_each_other_in_a_circle(graph: ImportGraph) -> None:
    """Tarjan's strongly connected components over the module graph; a package's `__init__`
    that re-exports its submodules is the package's face, not a member of a circle."""
    edges = {
        module: {t for t in imports(graph, module) if not module.startswith(f"{t}.")}
        for module in graph.modules
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    assert circles == []


def test_the_circle_check_sees_a_circle(tmp_path: Path) -> None:
    """The check above on a package made to hold one: it must not pass by construction."""
    package = tmp_path / "schemashift"
    (package / "env").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "env" / "__init__.py").write_text("")
    (package / "env" / "a.py").write_text("from schemashift.env import b\n")
    (package / "env" / "b.py").write_text("def f():\n    from schemashift.env import a\n")
    with pytest.raises(AssertionError, match=r"schemashift\.env\.a', 'schemashift\.env\.b"):
        test_no_modules_import_each_other_in_a_circle(ImportGraph(tmp_path))
