"""The one door for optional dependencies: a missing one is a BuildError naming the extra.

The build path needs none of them; a verb that does imports it through
`require`, so a user without the extra reads what to install instead of a
ModuleNotFoundError traceback.
"""

from __future__ import annotations

import importlib
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
}


def _extra_of(module: str) -> tuple[str, str]:
    for prefix, extra in EXTRAS.items():
        if module == prefix or module.startswith(prefix + "."):
            return extra
    return ("", module)


def missing_message(module: str, purpose: str) -> str:
    extra, name = _extra_of(module)
    if module == "nvidia.dali.plugin.tf":
        how = ("pip install --no-build-isolation nvidia-dali-tf-plugin-cuda120 "
               "(after TensorFlow and DALI)")
    else:
        how = f"pip install 'imagenet-build[{extra}]'" if extra else f"pip install {module}"
    return f"{purpose} needs {name}, which is not installed: {how}"


def require(module: str, purpose: str) -> ModuleType:
    """Import `module`, or raise one BuildError line saying which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise BuildError(missing_message(module, purpose)) from e
