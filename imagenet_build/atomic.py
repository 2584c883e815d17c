"""Atomic file writes: a temporary name in the same folder, fsync, rename.

A reader (or a rerun after a crash) sees either the old file or the whole new
one, never a part.
"""

import os
from pathlib import Path

from imagenet_build.naming import temp_name


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, data):
    """Write bytes under a temporary name in the same folder, fsync, rename over `path`."""
    path = Path(path)
    tmp = temp_name(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # out of space, say: the old file stays whole under its name, and no temp file is left
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
