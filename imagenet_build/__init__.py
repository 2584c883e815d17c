"""imagenet-build: ImageNet to TF-slim TFRecord shards with DALI indexes.

Data flows one way: sources -> catalog -> plan -> encode -> write -> manifest.
Importing the package is cheap; nothing here imports TensorFlow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagenet_build.build.manifest import Manifest

# The one place the version is written: the package's metadata is made from it (pyproject.toml), and --version,
# every manifest and every --json document give it
__version__ = "0.1.0"


def write_arrays(*args: Any, **kwargs: Any) -> Manifest:
    """NumPy images and labels -> sharded TFRecords with indexes and manifest (see imagenet_build.build.arrays)."""
    from imagenet_build.build.arrays import write_arrays as write

    return write(*args, **kwargs)

