"""convert's request stays as it was made: no module of the package assigns to an attribute of a request or of
anything it holds (`request.copy.x = ...`, `setattr(request.dest, ...)`) or changes a list, dict or set it holds in
place (`request.copy.notes.extend(...)`); the copy's spool, and what it notes, live apart from it
(writer/spooling.py). The frozen dataclass refuses `request.x = ...` at run time; this holds the values inside."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "imagenet_build"


def _root(node):
    """The name an attribute chain starts from: `request` of `request.copy.work_dir`."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


IN_PLACE = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add", "discard",
            "sort", "reverse", "popitem"}  # a list's, a dict's or a set's methods that change it


def assignments_into_requests(source, path="<source>"):
    """'path:line' of every assignment to an attribute reached from a name `request` (or `*_request`), and every
    call of a method that changes a container in place on one."""
    found = []
    for node in ast.walk(ast.parse(source, path)):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("setattr", "delattr") and node.args:
            targets = [ast.Attribute(value=node.args[0], attr="?")]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in IN_PLACE:
            targets = [node.func.value] if isinstance(node.func.value, ast.Attribute) else []
        for target in targets:
            for part in ast.walk(target):
                root = _root(part) if isinstance(part, ast.Attribute) else None
                if root is not None and (root == "request" or root.endswith("_request")):
                    found.append(f"{path}:{node.lineno}")
    return sorted(set(found))


def test_no_module_assigns_into_a_request():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += assignments_into_requests(path.read_text(), str(path.relative_to(PACKAGE)))
    assert found == []


def test_the_rule_sees_each_way_of_assigning():
    """What the old writer did (the copy's work folder set in place), and the other forms, are each found."""
    for source in ("request.copy.work_dir = 'out'", "request.copy.notes += ['x']", "setattr(request.copy, 'a', 1)",
                   "build_request.dest.index: str = 'i'", "request.copy.spool.work_dir = ''",
                   "request.copy.notes.extend(['x'])", "request.copy.notes[:0] = ['x']"):
        assert assignments_into_requests(source) == ["<source>:1"], source
    for source in ("request = other", "copy.work_dir = 'out'", "copy.notes.extend(['x'])",
                   "notes = request.copy.notes + ['x']", "request.copy.scan_train(catalog, 'fail', pool)",
                   "', '.join(request.copy.notes)"):
        assert assignments_into_requests(source) == [], source
