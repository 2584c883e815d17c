"""The commit check (writer/commit.py) is the one way to manifest.json and a build's TFDS files: no module of the
package imports or calls their writers but it (and the manifest's writer, which writes a complete build's TFDS
files first), and no other function writes a file under those names. A new commit path that went around the
check fails here, before any case of it is tried."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "imagenet_build"
COMMIT = "imagenet_build/writer/commit.py"
# each writer of a commit's files: the modules that may name it (besides the one defining it)
WRITERS = {"write_manifest": {COMMIT}, "write_tfds_files": {COMMIT, "imagenet_build/format/manifest.py"}}
NAMES = {"MANIFEST_NAME", "FEATURES_JSON", "DATASET_INFO_JSON", "TFDS_FILES"}  # format/naming.py's
WRITING = {"write_bytes", "write_text", "write_atomic", "write_temp", "pipe_file", "put_file", "upload", "replace",
           "rename"}
DEFINED = {"write_manifest": "imagenet_build/format/manifest.py",
           "write_tfds_files": "imagenet_build/format/tfds_metadata.py"}


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path))


def called(node):
    """The name a call calls: f(...) and x.f(...) alike."""
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def naming(tree, names):
    """Each name of `names` the module imports, calls or reads as an attribute."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield from (alias.name for alias in node.names if alias.name in names)
        elif isinstance(node, ast.Call) and called(node) in names:
            yield called(node)
        elif isinstance(node, ast.Attribute) and node.attr in names:
            yield node.attr


def test_only_the_commit_check_names_the_writers_of_a_commits_files():
    found = {name: set() for name in WRITERS}
    for module, tree in modules():
        for name in naming(tree, WRITERS):
            if module != DEFINED[name]:
                found[name].add(module)
    assert found == WRITERS


def opens_to_write(node):
    mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax")


def writing(node):
    """A call that writes a file: one of WRITING's, a write_*() (a door's, whatever its module), open() to write."""
    name = called(node) or ""
    return name in WRITING or name.startswith("write") or name == "open" and opens_to_write(node)


def writes(function):
    return any(isinstance(node, ast.Call) and writing(node) for node in ast.walk(function))


def test_no_other_function_writes_under_a_commits_file_names():
    found = set()
    for module, tree in modules():
        for function in (node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))):
            uses = {node.id for node in ast.walk(function) if isinstance(node, ast.Name)}
            if uses & NAMES and writes(function):
                found.add(f"{module}:{function.name}")
    assert found == {"imagenet_build/format/manifest.py:write_manifest"}


def test_the_rules_see_what_they_look_for():
    tree = ast.parse("from x import write_manifest as w\n"
                     "def f():\n    storage.write_bytes(join(o, MANIFEST_NAME), b'')\n"
                     "def g():\n    open(MANIFEST_NAME, 'w')\ndef h():\n    open(MANIFEST_NAME)\n"
                     "def i():\n    doors.write_file(MANIFEST_NAME, b'')\n")
    assert list(naming(tree, WRITERS)) == ["write_manifest"]
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert [writes(f) for f in functions] == [True, True, False, True]
