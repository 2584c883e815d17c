"""The package's shape, as docs/architecture.md draws it: no import cycle between modules (function-local and
TYPE_CHECKING imports included), the layers and forbidden imports of pyproject.toml's import contracts (an
optional package imported through require() included), and the sizes a reader can hold in mind."""

import re
import shutil
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


def lint_imports(root):
    """scripts/lint_imports.py run on the package and pyproject.toml in `root`: (exit code, its output)."""
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "lint_imports.py")], cwd=root,
                            capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def test_the_import_contracts_hold():
    code, output = lint_imports(ROOT)
    assert code == 0, output[-3000:]
    assert "Contracts: 4 kept, 0 broken." in output


def package_copy(tmp_path, module, added):
    """The package and pyproject.toml copied into tmp_path, `added` appended to `module` (a path in it)."""
    shutil.copytree(ROOT / "imagenet_build", tmp_path / "imagenet_build",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with open(tmp_path / "imagenet_build" / module, "a") as f:
        f.write(added)
    return tmp_path


@pytest.mark.parametrize("added, contract, chain", [
    ('\n\ndef _torch():\n    from imagenet_build.infra.optional import require\n\n    require("torch", "x")\n',
     "The build path and verify never import TensorFlow, DALI or PyTorch", "imagenet_build.verify.verify_run -> torch"),
    ('\n\ndef _charts():\n    from imagenet_build.infra import optional\n\n'
     '    optional.require_all(["numpy", "matplotlib.pyplot"], "x")\n',
     "Only report imports matplotlib (the report extra)", "imagenet_build.verify.verify_run -> matplotlib"),
])
def test_a_require_counts_as_an_import(tmp_path, added, contract, chain):
    """import-linter alone reads import statements: a require("torch") added to verify/verify_run.py kept every
    contract.
    Counted as an import, it breaks the contract that forbids it, naming the call's line."""
    code, output = lint_imports(package_copy(tmp_path, "verify/verify_run.py", added))
    assert code == 1, output
    broken = output.split("Broken contracts")[1]
    assert contract in broken and chain in broken, output


@pytest.mark.parametrize("module", ["report/figures.py", "readers/registry.py", "verify/verify_run.py", "tfdata.py"])
def test_the_readers_verify_and_report_never_import_the_writer(tmp_path, module):
    """The readers stand beside the writer on the on-disk contract (format/): a writer's module imported by any
    of them, even inside a function, breaks the contract that forbids it."""
    added = "\n\ndef _writer():\n    from imagenet_build.writer import summary  # noqa: F401\n"
    code, output = lint_imports(package_copy(tmp_path, module, added))
    assert code == 1, output
    broken = output.split("Broken contracts")[1]
    importer = "imagenet_build." + module.removesuffix(".py").replace("/", ".")
    assert "The readers, verify and report never import the writer" in broken, output
    assert f"{importer} -> imagenet_build.writer.summary" in broken, output


def test_a_require_whose_module_cannot_be_read_is_refused(tmp_path):
    added = '\n\ndef _hidden(name):\n    from imagenet_build.infra.optional import require\n\n    require(name, "x")\n'
    code, output = lint_imports(package_copy(tmp_path, "verify/verify_run.py", added))
    assert code == 1
    assert 'verify/verify_run.py:' in output and 'require(name, "x"): name the module as a literal or a module-level ' \
        'constant, so that the import contracts see it' in output


def test_no_module_over_400_lines_and_no_function_over_60():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_sizes.py")], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_every_document_cited_is_in_the_repository():
    """A docstring or doc cites the repository's own docs (under docs/), never a file it does not have."""
    outside = "REFER" + "ENCE"  # spelled apart so that this file does not cite it either
    files = [p for folder in ("imagenet_build", "tests", "scripts", "benchmarks", "docs") for p in
             (ROOT / folder).rglob("*") if p.suffix in (".py", ".md", ".sh")] + [ROOT / "README.md"]
    cited, missing = set(), []
    for path in files:
        text = path.read_text()
        assert outside not in text, path
        cited |= set(re.findall(r"docs/([\w-]+\.(?:md|yml))", text))
    missing = sorted(name for name in cited if not (ROOT / "docs" / name).exists())
    assert cited and missing == []


def test_no_test_file_over_400_lines():
    """The tests are held to the package's module size: a file a reader can hold in mind."""
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "tests").rglob("*.py")
            if (n := p.read_text().count("\n")) > 400}
    assert long == {}
