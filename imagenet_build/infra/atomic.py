"""Atomic file writes: a temporary name in the same folder, fsync, rename.

A reader (or a rerun after a crash) sees either the old file or the whole new
one, never a part.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from imagenet_build.infra.errors import InputError, PathLike

_TEMP = re.compile(r"^\..+\.\d+\.tmp$")


def temp_name(path: str | os.PathLike[str]) -> Path:
    """A hidden temporary name beside `path`, unique to the writing process."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def is_temp_name(name: str) -> bool:
    """A name temp_name gives: what a writer killed mid-write leaves behind."""
    return bool(_TEMP.match(name))


def fsync_dir(path: PathLike) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_temp(path: PathLike, data: bytes, durable: bool = True) -> Path:
    """Write bytes to a temporary name beside `path` and fsync (where `durable`); returns that name (to rename, or
    to remove). On failure nothing is left."""
    tmp = temp_name(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _naming(e, path) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _naming(error: OSError, path: PathLike) -> OSError:
    """The same error (its errno, so its class) naming the file the user knows, not the temporary name: a full
    disk, a read-only folder or a missing folder says which file could not be written."""
    return OSError(error.errno, error.strerror or str(error), str(path)) if error.errno else error


def write_atomic(path: PathLike, data: bytes, durable: bool = True) -> None:
    """Write bytes under a temporary name in the same folder, fsync, rename over `path`, fsync the folder; an
    OSError names `path`. Not `durable`: neither fsync (a file that a crash may take back whole, or leave empty)."""
    path = Path(path)
    tmp = write_temp(path, data, durable)
    try:
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)  # the old file stays whole under its name, and no temp file is left
        raise _naming(e, path) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def check_writable(path: PathLike) -> None:
    """Refuse, before any work, a file name that cannot be written (its folder missing or not a folder, the
    name a folder, no permission, a read-only disk): one InputError naming it. Tried by writing and removing
    the temporary file write_atomic would write."""
    path = Path(path)
    folder = path.parent
    if path.is_dir():
        raise InputError(path, "is a folder; give a file name")
    if not folder.is_dir():
        raise InputError(path, f"{folder} is not a folder" if folder.exists() else f"folder {folder} does not exist")
    tmp = temp_name(path)
    try:
        with open(tmp, "wb"):
            pass
    except OSError as e:
        raise InputError(path, f"cannot be written here ({e.strerror or e})") from None
    tmp.unlink(missing_ok=True)
