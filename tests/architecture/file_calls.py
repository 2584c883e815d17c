"""The calls that open a file to write or read, rename, remove or make one, found in a module's syntax tree.

What tests/architecture/test_doors.py holds the package to: only infra/write_door.py writes, and only
infra/read_door.py reads. A call is one of these by its name and, where that alone does not say, its arguments:
`open()` by its mode, `os.open()` by its flags, a library that takes a path or a file (Pillow, tarfile, gzip,
pyarrow, matplotlib) by whether it is given a file the doors opened (a name bound to a door's call in the same
module, a door's call itself, an in-memory BytesIO, or `fileobj=`).
"""

from __future__ import annotations

import ast
import re
from typing import NamedTuple

DOOR_MODULES = ("read_door", "write_door")

_WRITE_MODES = set("wax+")
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")

MODULE_CALLS = {
    "os": {"replace": "write", "rename": "write", "renames": "write", "remove": "write", "unlink": "write",
           "rmdir": "write", "removedirs": "write", "mkdir": "write", "makedirs": "write", "symlink": "write",
           "link": "write", "truncate": "write", "mkfifo": "write", "mknod": "write"},
    "shutil": {"copy": "write", "copy2": "write", "copyfile": "write", "copytree": "write", "move": "write",
               "rmtree": "write", "make_archive": "write", "unpack_archive": "write", "copymode": "write",
               "copystat": "write"},
    "tempfile": {"mkdtemp": "write", "mkstemp": "write", "TemporaryDirectory": "write",
                 "NamedTemporaryFile": "write", "TemporaryFile": "write", "SpooledTemporaryFile": "write"},
    "numpy": {"fromfile": "read", "load": "read", "loadtxt": "read", "memmap": "read", "save": "write",
              "savez": "write", "savetxt": "write"},
    "io": {"open": "open"},
    "pathlib": {},
}
# method names that write or read whatever they are called on: Path's, fsspec's file systems', numpy arrays'
METHODS = {
    **dict.fromkeys(("write_bytes", "write_text", "unlink", "rmdir", "mkdir", "makedirs", "touch", "symlink_to",
                     "hardlink_to", "rename", "pipe_file", "pipe", "put_file", "put", "rm", "rm_file", "mv",
                     "cp_file", "tofile", "extractall", "removedirs"), "write"),
    **dict.fromkeys(("read_bytes", "read_text", "cat", "cat_file", "get_file", "fromfile"), "read"),
}
# a library's call that takes a path or a file: (module, function) -> (what it does, where the file is given)
PATH_OR_FILE = {
    ("Image", "open"): ("read", 0, "fp"), ("tarfile", "open"): ("open", 0, "name"),
    ("gzip", "open"): ("open", 0, "filename"), ("gzip", "GzipFile"): ("open", 0, "filename"),
    ("zipfile", "ZipFile"): ("open", 0, "file"), ("bz2", "open"): ("open", 0, "filename"),
    ("lzma", "open"): ("open", 0, "filename"), ("pq", "write_table"): ("write", 1, "where"),
    ("pq", "ParquetFile"): ("read", 0, "source"), ("pq", "read_table"): ("read", 0, "source"),
}
PATH_OR_FILE_METHODS = {"save": ("write", 0, "fp"), "savefig": ("write", 0, "fname")}


class FileCall(NamedTuple):
    line: int
    kind: str  # "write" or "read"
    text: str


def _literal(node: ast.AST | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _argument(call: ast.Call, position: int, name: str) -> ast.AST | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return call.args[position] if len(call.args) > position else None


def _by_mode(call: ast.Call, position: int = 1) -> str:
    """"write" for a mode that writes (or one not written where it is called: it may), else "read"."""
    mode = _argument(call, position, "mode")
    text = "r" if mode is None else _literal(mode)
    return "write" if not isinstance(text, str) or set(text) & _WRITE_MODES else "read"


_MODE = re.compile(r"^[rwxabt+]+$")


def _method_mode(call: ast.Call) -> str:
    """A path's or a file system's open(): its mode is the keyword, or the positional string that is one."""
    modes = [_literal(_argument(call, 99, "mode"))] + [_literal(a) for a in call.args]
    mode = next((m for m in modes if isinstance(m, str) and _MODE.match(m)), "r")
    return "write" if set(mode) & _WRITE_MODES else "read"


def _is_devnull(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "devnull"


class _Names(ast.NodeVisitor):
    """The module's import aliases, and the names bound to a file the doors opened (or an in-memory one)."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}  # local name -> module ("np" -> "numpy")
        self.functions: dict[str, tuple[str, str]] = {}  # local name -> (module, function)
        self.safe: set[str] = set()

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.modules[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[-1] if alias.asname \
                else alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            module = (node.module or "").split(".")[-1]
            self.functions[alias.asname or alias.name] = (module, alias.name)
            if module in ("PIL", "pyarrow") or alias.name in DOOR_MODULES:
                self.modules[alias.asname or alias.name] = alias.name

    def _bind(self, target: ast.AST | None, value: ast.AST) -> None:
        if isinstance(target, ast.Name) and self.is_safe(value):
            self.safe.add(target.id)

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            self._bind(item.optional_vars, item.context_expr)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._bind(target, node.value)
        self.generic_visit(node)

    def is_safe(self, node: ast.AST) -> bool:
        """A door's call, an in-memory file, or a name bound to one of them."""
        if isinstance(node, ast.Name):
            return node.id in self.safe
        if not isinstance(node, ast.Call):
            return False
        function = node.func
        if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
            return function.value.id in DOOR_MODULES or function.attr == "BytesIO"
        return isinstance(function, ast.Name) and function.id == "BytesIO"


def _module_function(call: ast.Call, names: _Names) -> tuple[str, str] | None:
    function = call.func
    if isinstance(function, ast.Name):
        return names.functions.get(function.id, ("", function.id))
    if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
        base = function.value.id
        return (names.modules.get(base, base), function.attr)
    return None


def classify(call: ast.Call, names: _Names) -> str | None:
    """"write", "read" or None (no file opened, written or removed by this call)."""
    found = _module_function(call, names)
    module, function = found if found is not None else ("", "")
    if (module, function) in (("", "open"), ("builtins", "open"), ("io", "open")):
        return None if _is_devnull(_argument(call, 0, "file")) else _by_mode(call)
    if (module, function) == ("os", "open"):
        if _is_devnull(_argument(call, 0, "path")):
            return None  # the null device, by its name: no file is written or read
        flags = ast.unparse(_argument(call, 1, "flags") or ast.Constant(0))
        read_only = "O_RDONLY" in flags and not any(flag in flags for flag in _WRITE_FLAGS)
        return "read" if read_only else "write"  # flags not written where it is called: it may write
    kind = MODULE_CALLS.get(module, {}).get(function)
    if kind is not None:
        return kind
    key = (module if module != "pyarrow.parquet" else "pq", function)
    short = {"PIL.Image": "Image", "Image": "Image", "parquet": "pq"}.get(module, module)
    given = PATH_OR_FILE.get((short, function)) or PATH_OR_FILE.get(key)
    if given is None and isinstance(call.func, ast.Attribute):
        given = PATH_OR_FILE_METHODS.get(call.func.attr)
    if given is not None:
        kind, position, keyword = given
        if any(k.arg == "fileobj" for k in call.keywords):
            return None
        target = _argument(call, position, keyword)
        if target is None or names.is_safe(target) or (isinstance(target, ast.Constant) and
                                                       not isinstance(target.value, str)):
            return None  # given no path (a flag: another class's save(False))
        return _by_mode(call) if kind == "open" else kind
    return _method(call, names)


def _method(call: ast.Call, names: _Names) -> str | None:
    if not isinstance(call.func, ast.Attribute):
        return None
    name, base = call.func.attr, call.func.value
    if isinstance(base, ast.Name) and base.id in DOOR_MODULES:
        return None
    if name == "replace" and len(call.args) == 1 and not call.keywords:  # Path.replace (str.replace takes two)
        return "write"
    if name == "open" and not (isinstance(base, ast.Name) and base.id[:1].isupper()):  # a path's, a file system's
        return _method_mode(call)
    return METHODS.get(name)


def file_calls(source: str) -> list[FileCall]:
    """Every call of `source` that writes, renames, removes or makes a file or folder, or reads one."""
    tree = ast.parse(source)
    names = _Names()
    names.visit(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            kind = classify(node, names)
            if kind is not None:
                found.append(FileCall(node.lineno, kind, ast.unparse(node)[:100]))
    return sorted(found)
