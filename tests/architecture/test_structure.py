"""The package's shape, as docs/architecture.md draws it: no import cycle between modules (function-local and
TYPE_CHECKING imports included), the layers and forbidden imports of pyproject.toml's import contracts, and the
sizes a reader can hold in mind."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def strongly_connected(graph):
    """Tarjan's strongly connected components of {node: set of nodes}: a component of two or more is a cycle."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_tarjan_finds_a_cycle_and_nothing_else():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"], ["d"]]


def test_no_import_cycle_between_modules():
    grimp = pytest.importorskip("grimp")  # with import-linter, in the test extras
    graph = grimp.build_graph("imagenet_build", exclude_type_checking_imports=False)
    imports = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    # a package's __init__ importing its own modules is how a package is made, not a cycle between jobs
    edges = {module: {other for other in targets if not module.startswith(other + ".")} for module, targets in
             imports.items()}
    cycles = [component for component in strongly_connected(edges) if len(component) > 1]
    assert cycles == []


def test_the_import_contracts_hold():
    result = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:]


def test_no_module_over_400_lines_and_no_function_over_60():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_sizes.py")], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
