"""imagenet-build: ImageNet to TF-slim TFRecord shards with DALI indexes.

The stages and the package's layers: docs/architecture.md (the layers are pyproject.toml's import contracts).
From Python: imagenet_build.api (convert, verify, index, report) and write_arrays below. Importing the
package imports nothing else but its version (_version.py): each function imports what it needs when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imagenet_build.format.manifest import Manifest

from imagenet_build._version import __version__  # noqa: F401  (written once, there)


def write_arrays(*args: Any, **kwargs: Any) -> Manifest:
    """NumPy images and labels -> sharded TFRecords with indexes and manifest (see imagenet_build.writer.arrays)."""
    from imagenet_build.writer.arrays import write_arrays as write

    return write(*args, **kwargs)

