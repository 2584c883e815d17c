"""The ILSVRC2012 tarballs, read where they lie: member offsets indexed once, images read by offset.

The train archive is a tar of 1000 `<synset>.tar` (each a tar of JPEGs), the
validation archive a flat tar of JPEGs; both are uncompressed, so every image
is a contiguous byte range of the outer file. Indexing reads only tar headers
(tarfile seeks over member data), one inner tar per task, so nothing is
extracted and no class tar is ever held in memory; workers then read each
image with one pread().
"""

import os
import tarfile

from imagenet_build import storage
from imagenet_build.errors import InputError

BLOCK = tarfile.BLOCKSIZE


class RangeFile:
    """A read-only, seekable view of bytes [start, start + size) of a file: an inner tar in place."""

    def __init__(self, f, start, size):
        self._f, self._start, self._size, self._pos = f, start, size, 0

    def read(self, n=-1):
        n = self._size - self._pos if n is None or n < 0 else min(n, self._size - self._pos)
        self._f.seek(self._start + self._pos)
        data = self._f.read(n)
        self._pos += len(data)
        return data

    def seek(self, pos, whence=0):
        self._pos = {0: pos, 1: self._pos + pos, 2: self._size + pos}[whence]
        return self._pos

    def tell(self):
        return self._pos


def list_members(f, size, where):
    """[(name, data offset, data size, is a regular file)] of a tar held in file-like `f` of `size` bytes.

    InputError when it is not a tar or is truncated (tarfile itself takes a cut
    archive for a short one: the end-of-archive blocks are checked here).
    """
    members = []
    end = 0
    try:
        with tarfile.open(fileobj=f, mode="r:") as tar:
            for member in tar:
                if member.offset_data + member.size > size:
                    raise InputError(where, f"truncated: {member.name} needs bytes up to "
                                            f"{member.offset_data + member.size}, the archive has {size}")
                members.append((member.name, member.offset_data, member.size, member.isfile()))
                end = member.offset_data + -(-member.size // BLOCK) * BLOCK
    except tarfile.ReadError as e:
        raise InputError(where, f"not a tar archive ({e})") from None
    except (tarfile.TarError, EOFError) as e:
        raise InputError(where, f"broken tar archive ({e})") from None
    f.seek(end)
    if f.read(2 * BLOCK) != bytes(2 * BLOCK):
        raise InputError(where, f"truncated: no end-of-archive marker after byte {end}")
    return members


def outer_members(archive):
    """Members of an archive file on disk or in an object store."""
    archive = str(archive)
    try:
        size = storage.size(archive)
        with storage.open_read(archive, random_access=True) as f:
            return list_members(f, size, archive)
    except FileNotFoundError:
        raise InputError(archive, "archive not found") from None
    except IsADirectoryError:
        raise InputError(archive, "is a folder, expected a .tar archive") from None


def inner_members(archive, offset, size, inner_name):
    """A worker task: the members of the inner tar at [offset, offset + size) of the archive."""
    with storage.open_read(archive, random_access=True) as f:
        members = list_members(RangeFile(f, offset, size), size, f"{archive}:{inner_name}")
    return [(name, offset + data_offset, data_size, is_file) for name, data_offset, data_size, is_file in members]


def read_range(source, offset, size):
    """size bytes at offset: of an open fd (pread), or of a file object (seek + read: object stores)."""
    if not isinstance(source, int):
        source.seek(offset)
        return source.read(size)
    fd = source
    data = os.pread(fd, size, offset)
    while len(data) < size:
        more = os.pread(fd, size - len(data), offset + len(data))
        if not more:
            break
        data += more
    return data
