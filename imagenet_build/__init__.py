"""imagenet-build: ImageNet to TF-slim TFRecord shards with DALI indexes.

The stages and the package's layers: docs/architecture.md (the layers are pyproject.toml's import contracts).
From Python (docs/api.md): `imagenet_build.convert`, `verify`, `index` and `report`, the verbs with their
options, and `write_arrays` — api.py's functions, with their signatures. Importing the package imports nothing
but its version (_version.py): a function's module is imported when the function is first named, and each
function imports what it needs when called.

`verify` and `report` are also the names of subpackages (the verbs' own code). Python's import system sets a
subpackage as an attribute of its package when it is first imported, which would replace the function; here the
function keeps the name, and the subpackage is imported by its full name (`from imagenet_build.verify import
check`), never reached as an attribute (`import imagenet_build.verify.check as check` looks the function up).
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from imagenet_build._version import __version__

if TYPE_CHECKING:  # what mypy and editors see: the functions themselves; at run time __getattr__ brings them
    from imagenet_build.api import convert, index, report, verify, write_arrays

__all__ = ["__version__", "convert", "index", "report", "verify", "write_arrays"]
FUNCTIONS = ("convert", "verify", "index", "report", "write_arrays")  # the Python API's: api.py's, named here too


if not TYPE_CHECKING:  # hidden from mypy, which then refuses a name the package does not have

    def __getattr__(name: str) -> Any:
        if name not in FUNCTIONS:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from imagenet_build import api

        function = getattr(api, name)
        globals()[name] = function  # named once: the next look-up finds it without calling here
        return function


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(FUNCTIONS))


class _Package(types.ModuleType):
    """This package, whose function names its subpackages cannot take (the import system's setattr is refused)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in FUNCTIONS and isinstance(value, types.ModuleType):
            return  # a subpackage of the same name (verify/, report/) stays in sys.modules, under its full name
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
