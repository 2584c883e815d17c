"""The one door for optional dependencies: a missing one is a BuildError naming the extra.

The build path needs none of them; a verb that does imports it through
`require` (or `require_all`), so a user without the extra reads what to install
instead of a ModuleNotFoundError traceback. imagenet-build is not on a package index: it is installed from
a clone of its repository, from a wheel made in one, or comes in one of its Docker images, and the hint says
how to add the extra to the install at hand (`installed_as`).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

from imagenet_build._version import __version__
from imagenet_build.infra.errors import BuildError

# module prefix -> (the extra that installs it, what the user calls it)
EXTRAS = {
    "fsspec": ("s3", "fsspec"),
    "s3fs": ("s3", "s3fs"),
    "gcsfs": ("gcs", "gcsfs"),
    "apache_beam.runners.dataflow": ("dataflow", "Apache Beam's Dataflow runner (apache-beam[gcp])"),
    "apache_beam": ("beam", "Apache Beam"),
    "distributed": ("dask", "Dask's distributed scheduler"),
    "dask": ("dask", "Dask"),
    "pyspark": ("spark", "Apache Spark (pyspark)"),
    "tensorflow": ("tf", "TensorFlow"),
    "nvidia.dali.plugin.tf": ("dali", "DALI's TensorFlow plugin"),
    "nvidia.dali": ("dali", "NVIDIA DALI"),
    "numpy": ("tf", "numpy"),
    "torchvision": ("torch", "torchvision"),
    "torch": ("torch", "PyTorch"),
    "pyarrow": ("parquet", "pyarrow"),
    "matplotlib": ("report", "matplotlib"),
    "grain": ("grain", "Grain"),
}


def _extra_of(module: str) -> tuple[str, str]:
    for prefix, extra in EXTRAS.items():
        if module == prefix or module.startswith(prefix + "."):
            return extra
    return ("", module)


PLUGIN = "nvidia.dali.plugin.tf"
PLUGIN_REQUIREMENT = "'nvidia-dali-tf-plugin-cuda120>=2.4,<2.5'"
IMAGE_ENV = "IMAGENET_BUILD_IMAGE"  # set by the Docker images (docker/Dockerfile*) to the image's name
IMAGE_SOURCE = "/opt/imagenet-build"  # where the images keep the source they installed, constraints.txt beside it


def installed_as() -> str:
    """How this imagenet-build was installed, which says how to add an extra to it: "image" (one of its Docker
    images), "clone" (the package in a clone: pyproject.toml and constraints.txt beside it; `pip install -e .`),
    else "wheel" (a wheel, or a clone's `pip install .`, into an environment's site-packages)."""
    if os.environ.get(IMAGE_ENV):
        return "image"
    root = Path(__file__).resolve().parents[2]
    return "clone" if (root / "pyproject.toml").is_file() and (root / "constraints.txt").is_file() else "wheel"


def _extras_install(extras: str) -> str:
    """The pip command that adds `extras` ("report" or "dali,tf") to this install, where it is run."""
    how = installed_as()
    if how == "clone":
        return f"in a clone of imagenet-build, pip install -c constraints.txt '.[{extras}]'"
    if how == "image":
        return (f"the Docker image {os.environ[IMAGE_ENV]} holds none: build one FROM it that does (USER root, "
                f"RUN pip install -c {IMAGE_SOURCE}/constraints.txt '{IMAGE_SOURCE}[{extras}]')")
    return (f"pip install -c constraints.txt 'imagenet_build-{__version__}-py3-none-any.whl[{extras}]' (the wheel "
            "imagenet-build was installed from, and the constraints.txt of the clone it was made in)")


def _plugin_install() -> str:
    """DALI's TF plugin, which compiles against the TensorFlow installed (after it and DALI)."""
    constraints = f"{IMAGE_SOURCE}/constraints.txt" if installed_as() == "image" else "constraints.txt"
    return (f"pip install -c {constraints} --no-build-isolation {PLUGIN_REQUIREMENT} "
            "(after TensorFlow and DALI)")


def install_hint(modules: Sequence[str]) -> str:
    """How to install these modules: the extras that bring them, as this install takes them (the package is not
    on a package index: installed_as), and DALI's TF plugin after them."""
    extras = sorted({_extra_of(m)[0] for m in modules if m != PLUGIN and _extra_of(m)[0]})
    others = sorted(m for m in modules if m != PLUGIN and not _extra_of(m)[0])
    steps = []
    if extras:
        steps.append(_extras_install(",".join(extras)))
    steps += [f"pip install {m}" for m in others]
    if PLUGIN in modules:
        steps.append(_plugin_install())
    return "; then ".join(steps)


def missing_message(module: str, purpose: str) -> str:
    return missing_all_message([module], purpose)


def missing_all_message(modules: Sequence[str], purpose: str) -> str:
    names = [_extra_of(m)[1] for m in modules]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    verb = "is" if len(names) == 1 else "are"
    return f"{purpose} needs {listed}, which {verb} not installed: {install_hint(modules)}"


def is_installed(module: str) -> bool:
    """Whether `module` can be imported, found without importing it (a missing parent package: False)."""
    if sys.modules.get(module, False) is None:  # set to None: import refused
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def not_installed(modules: Sequence[str]) -> list[str]:
    """The modules of `modules` that are not installed here, in their order."""
    return [module for module in modules if not is_installed(module)]


def require_all(modules: Sequence[str], purpose: str) -> None:
    """One BuildError naming every module of `modules` that is not installed, and how to install them
    all; each is then imported (a module that is present but fails to import raises as it does)."""
    missing = not_installed(modules)
    if missing:
        raise BuildError(missing_all_message(missing, purpose))


@contextlib.contextmanager
def native_stderr_to(target: int | None = None) -> Iterator[None]:
    """File descriptor 2 itself pointed at `target` (a file descriptor open to write, opened through
    infra/write_door.py, closed after; None: the null device) for a while: TensorFlow's C++ logging writes there on
    import, before any Python-level setting (TF_CPP_MIN_LOG_LEVEL included) can stop it, and a process started
    meanwhile (Spark's JVM) keeps it for its own logs."""
    sys.stderr.flush()
    saved = os.dup(2)
    if target is None:
        target = os.open(os.devnull, os.O_WRONLY)  # the null device, by its name: no file is written
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def require(module: str, purpose: str, quiet: bool = False) -> ModuleType:
    """Import `module`, or raise one BuildError line saying which extra brings it.

    quiet: keep the module's native start-up chatter off stderr (errors still come as exceptions).
    """
    try:
        if quiet and module not in sys.modules:
            with native_stderr_to():
                return importlib.import_module(module)
        return importlib.import_module(module)
    except ImportError as e:
        raise BuildError(missing_message(module, purpose)) from e
