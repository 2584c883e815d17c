"""The one door every file the tool reads goes through: an input, a file of a build, a file it wrote itself. No other
module opens a file to read (tests/architecture/test_doors.py holds the package to it).

A local path is opened with O_NONBLOCK and judged by fstat before a byte is read: what is not a regular file (a
FIFO, which would block the reader until someone writes to it; a device such as /dev/zero, which never ends; a
socket; a folder; a link to any of them) is refused as NotRegularFile, an OSError naming the file and what it is,
which every caller's handling of a file it cannot read turns into its one line. O_NONBLOCK changes nothing for a
regular file (open(2)). A file read whole is bounded (`limit`): one larger is refused as TooLarge, never read past
its limit. An object store's object is always a regular file; its reads are bounded the same way.

A path handed to another library that opens it itself (DALI's and TensorFlow's readers, a sample's images given to
Pillow) is judged the same way first (`check_regular`).
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import stat
from typing import IO

from imagenet_build.infra import storage
from imagenet_build.infra.errors import PathLike

HASH_BLOCK = 1 << 20


class NotRegularFile(OSError):
    """A path the door does not read: not a regular file. `str()` is `<path>: not a regular file (<what>)`."""

    def __init__(self, path: PathLike, kind: str) -> None:
        self.kind = kind
        super().__init__(errno.EISDIR if kind == "a folder" else errno.EINVAL, f"not a regular file ({kind})",
                         str(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"

    def __reduce__(self) -> tuple[object, ...]:  # survive the trip back from a worker process
        return (type(self), (self.filename, self.kind))


class FolderNotFile(NotRegularFile, IsADirectoryError):
    """A folder where a file was to be read: an IsADirectoryError too, as open() would have raised."""


def _refused(path: PathLike, mode: int) -> NotRegularFile:
    kind = kind_of(mode)
    return FolderNotFile(path, kind) if stat.S_ISDIR(mode) else NotRegularFile(path, kind)


class TooLarge(OSError):
    """A file larger than its reader's limit: refused, not read past it."""

    def __init__(self, path: PathLike, limit: int) -> None:
        self.limit = limit
        super().__init__(errno.EFBIG, f"larger than {limit:,} bytes, more than any such file holds", str(path))

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.filename, self.limit))


def kind_of(mode: int) -> str:
    """What a path is, in words (from its st_mode): a link, a folder, a FIFO, a device, a socket, else a file."""
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((kind for test, kind in kinds if test(mode)), "a file")


def check_regular(path: PathLike) -> None:
    """NotRegularFile unless `path` is a regular file (a link to one is one); FileNotFoundError where it is not
    there. For a path another library will open itself."""
    if storage.is_url(path):
        return
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise _refused(path, mode)


def opened(path: PathLike) -> tuple[int, os.stat_result]:
    """A file descriptor of the regular file `path`, open to read, and its fstat (what a reader would ask of it
    next: its size, its modification time); NotRegularFile for anything else, judged before a byte is read (a FIFO
    opened without blocking, a device never read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ENXIO:  # a socket, or a FIFO nobody writes to on some systems
            raise _refused(path, os.stat(path).st_mode) from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise _refused(path, info.st_mode)
    return fd, info


def open_fd(path: PathLike) -> int:
    """A file descriptor of the regular file `path`, open to read (`opened`'s)."""
    return opened(path)[0]


def open_folder(path: PathLike) -> int:
    """A file descriptor of the folder `path` (to fsync it: infra/write_door.py), never of anything else."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def open_read(path: PathLike, random_access: bool = False, buffering: int = -1) -> IO[bytes]:
    """A binary file object of a regular file or an object; for an object, random_access reads exactly the bytes
    asked (no read-ahead)."""
    if not storage.is_url(path):
        return os.fdopen(open_fd(path), "rb", buffering)
    fs = storage.file_system(path)
    return fs.open(str(path), "rb", **({"cache_type": "none"} if random_access else {}))


def open_text(path: PathLike, encoding: str = "utf-8") -> IO[str]:
    """A text file object of a regular file or an object (universal newlines, as open() reads text)."""
    return io.TextIOWrapper(open_read(path), encoding=encoding)


def read_bytes(path: PathLike, limit: int | None = None) -> bytes:
    """The whole of a regular file or an object; with `limit`, TooLarge for one larger than that, read no further
    than `limit` + 1 bytes either way: an object in one ranged read of the object opened (replaced meanwhile by
    another, larger or not, it is an OSError, never read on), not after a size asked apart, which could be stale."""
    if limit is None and storage.is_url(path):
        return storage.file_system(path).cat_file(str(path))
    with open_read(path, random_access=True) as f:
        data = f.read() if limit is None else f.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise TooLarge(path, limit)
    return data


def read_text(path: PathLike, limit: int | None = None, encoding: str = "utf-8") -> str:
    """read_bytes decoded (UnicodeDecodeError where it is not `encoding`)."""
    return read_bytes(path, limit).decode(encoding)


def sha256(path: PathLike) -> str | None:
    """sha256 of a file or object, or None when it cannot be read (not there, not a regular file)."""
    digest = hashlib.sha256()
    try:
        with open_read(path) as f:
            for block in iter(lambda: f.read(HASH_BLOCK), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()
