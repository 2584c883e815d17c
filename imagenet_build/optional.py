"""The one door for optional dependencies: a missing one is a BuildError naming the extra.

The build path needs none of them; a verb that does imports it through
`require`, so a user without the extra reads what to install instead of a
ModuleNotFoundError traceback.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from types import ModuleType

from imagenet_build.errors import BuildError

# module prefix -> (the extra that installs it, what the user calls it)
EXTRAS = {
    "fsspec": ("s3", "fsspec"),
    "s3fs": ("s3", "s3fs"),
    "gcsfs": ("gcs", "gcsfs"),
    "apache_beam": ("beam", "Apache Beam"),
    "tensorflow": ("tf", "TensorFlow"),
    "nvidia.dali.plugin.tf": ("dali", "DALI's TensorFlow plugin"),
    "nvidia.dali": ("dali", "NVIDIA DALI"),
    "numpy": ("tf", "numpy"),
    "torchvision": ("torch", "torchvision"),
    "torch": ("torch", "PyTorch"),
    "pyarrow": ("parquet", "pyarrow"),
}


def _extra_of(module: str) -> tuple[str, str]:
    for prefix, extra in EXTRAS.items():
        if module == prefix or module.startswith(prefix + "."):
            return extra
    return ("", module)


def missing_message(module: str, purpose: str) -> str:
    extra, name = _extra_of(module)
    if module == "nvidia.dali.plugin.tf":
        how = ("pip install --no-build-isolation 'nvidia-dali-tf-plugin-cuda120>=2.4,<2.5' "
               "(after TensorFlow and DALI)")
    else:
        how = f"pip install 'imagenet-build[{extra}]'" if extra else f"pip install {module}"
    return f"{purpose} needs {name}, which is not installed: {how}"


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Silence file descriptor 2 itself: TensorFlow's C++ logging writes there on import,
    before any Python-level setting (TF_CPP_MIN_LOG_LEVEL included) can stop it."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def require(module: str, purpose: str, quiet: bool = False) -> ModuleType:
    """Import `module`, or raise one BuildError line saying which extra brings it.

    quiet: keep the module's native start-up chatter off stderr (errors still come as exceptions).
    """
    try:
        if quiet and module not in sys.modules:
            with _native_stderr_silenced():
                return importlib.import_module(module)
        return importlib.import_module(module)
    except ImportError as e:
        raise BuildError(missing_message(module, purpose)) from e
