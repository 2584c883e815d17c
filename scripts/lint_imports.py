"""pyproject.toml's import contracts, checked by import-linter on a graph that also holds the imports it cannot see.

The optional packages (TensorFlow, DALI, torch, matplotlib, ...) are imported through `infra.optional.require`
and `require_all`, and a few modules through `importlib.import_module`: import-linter reads only import
statements, so a `require("torch")` in verify/ would keep every contract. Here each such call is an import of
the module it names (its top-level package, as import-linter counts an external package), added to the graph
before the contracts are checked: every contract, the layers and the forbidden modules, applies to them too.
A require() whose module is not written where it is called (a literal, or a module-level constant of the
package) is refused: a contract cannot see it. scripts/test.sh runs this instead of `lint-imports`.

Usage: python scripts/lint_imports.py   (in the folder of pyproject.toml; the package is found there first)
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
from pathlib import Path
from typing import NamedTuple, Optional

PACKAGE = "imagenet_build"
DOORS = {"require": "one", "require_all": "many", "import_module": "one"}  # the calls that import a module by name


class Hidden(NamedTuple):
    importer: str  # the module calling require()
    imported: str  # the module it names
    line: int
    text: str


def package_files(root: Path) -> dict[str, Path]:
    """{dotted module name: file} of every module of the package in `root`."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _constants(tree: ast.Module) -> dict[str, object]:
    """A module's top-level NAME = "literal" (or a tuple or list of literals) assignments."""
    found: dict[str, object] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        for target in targets:
            if isinstance(target, ast.Name):
                try:
                    found[target.id] = ast.literal_eval(node.value)  # type: ignore[arg-type]
                except ValueError:
                    continue
    return found


class _Module:
    """One module's source, its constants, and the constants it imports from the package's other modules."""

    def __init__(self, name: str, path: Path, trees: dict[str, ast.Module]) -> None:
        self.name, self.path, self.tree = name, path, trees[name]
        self.constants = _constants(self.tree)
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom) and node.module in trees and node.level == 0:
                theirs = _constants(trees[node.module])
                for alias in node.names:
                    if alias.name in theirs:
                        self.constants[alias.asname or alias.name] = theirs[alias.name]

    def value(self, node: ast.AST) -> object:
        """What an argument names: a literal, a constant, or a list or tuple of them; None if it cannot tell."""
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.value(item) for item in node.elts]
            return None if any(not isinstance(item, str) for item in items) else items
        try:
            return ast.literal_eval(node)
        except ValueError:
            return None


def _door(call: ast.Call) -> Optional[str]:
    """The door a call is (require, require_all, import_module), else None."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
    return name if name in DOORS else None


def hidden_imports(root: Path) -> tuple[list[Hidden], list[str]]:
    """The modules imported by name in the package at `root`, and the calls whose module cannot be read."""
    files = package_files(root)
    trees = {name: ast.parse(path.read_text(), str(path)) for name, path in files.items()}
    found, unreadable = [], []
    for name, path in files.items():
        module = _Module(name, path, trees)
        lines = path.read_text().splitlines()
        for call in (n for n in ast.walk(module.tree) if isinstance(n, ast.Call) and _door(n) and n.args):
            value = module.value(call.args[0])
            names = [value] if DOORS[str(_door(call))] == "one" and isinstance(value, str) else value
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                if _door(call) != "import_module" and name != f"{PACKAGE}.infra.optional":
                    unreadable.append(f"{path}:{call.lineno}: {lines[call.lineno - 1].strip()}: name the module "
                                      "as a literal or a module-level constant, so that the import contracts see it")
                continue
            found += [Hidden(name, n, call.lineno, lines[call.lineno - 1].strip()) for n in names]
    return found, unreadable


def _graph_builder(hidden: list[Hidden]) -> object:
    from importlinter.adapters.building import GraphBuilder

    class WithHiddenImports(GraphBuilder):  # type: ignore[misc]
        """import-linter's graph, and an import for each module named in a require() call."""

        def build(self, *args: object, **kwargs: object) -> object:
            graph = super().build(*args, **kwargs)
            for h in hidden:
                internal = h.imported == PACKAGE or h.imported.startswith(PACKAGE + ".")
                imported = h.imported if internal else h.imported.split(".")[0]
                graph.add_import(importer=h.importer, imported=imported, line_number=h.line, line_contents=h.text)
            return graph

    return WithHiddenImports()


def main() -> int:
    sys.path.insert(0, os.getcwd())  # the package beside pyproject.toml, before any installed one
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        print(f"{PACKAGE}: not found from {os.getcwd()}")
        return 1
    hidden, unreadable = hidden_imports(Path(list(spec.submodule_search_locations)[0]))
    for problem in unreadable:
        print(problem)
    from importlinter import configuration
    from importlinter.application.app_config import settings
    from importlinter.application.use_cases import lint_imports

    configuration.configure()
    settings.configure(GRAPH_BUILDER=_graph_builder(hidden))
    print(f"Imports by name counted as imports ({len(hidden)}: require(), require_all(), import_module()).")
    kept = lint_imports(cache_dir=None, no_logo=True)
    return 0 if kept and not unreadable else 1


if __name__ == "__main__":
    sys.exit(main())
