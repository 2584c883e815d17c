"""verify: prove a build folder sound. Every module of this package is imported with it, so a check registers
by being defined in any of them (check.py): adding a check, or a module of checks, edits nothing else."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
