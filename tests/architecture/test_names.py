"""One name, one meaning: no two classes of the package share a name, and no two of its modules a file name
(docs/architecture.md, "Words"). A name met twice reads the same in an import, a traceback or a search and
means two things; each is named by what it is (a copy's MemberReader, a build's BuildReader; a writer's
ShardWriteTask, verify's ShardVerifyTask; convert_run.py, verify_run.py, report_run.py)."""

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "imagenet_build"
# A package's own files: every package has them, and they are named by the package's folder
SHARED_BASENAMES = {"__init__.py", "__main__.py"}


def twin_classes(package):
    """{class name: [where, ...]} of the names two or more classes share (nested classes included)."""
    where = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{path.relative_to(package.parent)}:{node.lineno}")
    return {name: places for name, places in where.items() if len(places) > 1}


def twin_modules(package):
    """{file name: [module, ...]} of the file names two or more modules share, but a package's own files."""
    where = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        if path.name not in SHARED_BASENAMES:
            where[path.name].append(str(path.relative_to(package.parent)))
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def test_no_two_classes_share_a_name():
    assert twin_classes(PACKAGE) == {}


def test_no_two_modules_share_a_file_name():
    assert twin_modules(PACKAGE) == {}


def test_the_package_is_read_whole():
    """The checks see the package, classes nested in functions among them (a vacuous pass would hide twins)."""
    modules = list(PACKAGE.rglob("*.py"))
    assert len(modules) > 100 and PACKAGE / "trainercheck" / "torch_training.py" in modules
    nested = ast.parse((PACKAGE / "trainercheck" / "torch_training.py").read_text())
    assert any(isinstance(n, ast.ClassDef) and n.col_offset > 0 for n in ast.walk(nested))


def test_a_twin_is_named_with_both_homes(tmp_path):
    """Each check finds a name met twice, nested or not, and says where; a package's own files are no twins."""
    package = tmp_path / "pkg"
    for folder in ("a", "b"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
        (package / folder / "__main__.py").write_text("")
    (package / "a" / "run.py").write_text("class Reader:\n    pass\n")
    (package / "b" / "run.py").write_text("def f():\n    class Reader:\n        pass\n")
    (package / "b" / "other.py").write_text("class Other:\n    pass\n")
    assert twin_classes(package) == {"Reader": ["pkg/a/run.py:1", "pkg/b/run.py:2"]}
    assert twin_modules(package) == {"run.py": ["pkg/a/run.py", "pkg/b/run.py"]}
