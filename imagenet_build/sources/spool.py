"""Gzip-compressed tarballs (.tar.gz), read by decompressing each archive once into a spool beside the shards.

gzip has no random access, and slim's shuffle puts images from all over the
dataset into every shard, so each worker needs the images in arbitrary order.
Measured on 10,000 ImageNet-sized JPEGs (1.0 GB; 2 cores shared with other
work, so CPU seconds are the steadier figure; benchmarks/bench_source_gzip.py):

- converting the extracted folders costs 2.5 s of CPU in all (0.25 ms/image);
- inflating the .tar.gz once costs 4.4-5.0 s of CPU (zlib, ~210 MB/s; ISA-L
  and zlib-ng measured 0-30% faster, within this machine's noise: not worth a
  dependency). So any reader pays at least twice the folders' CPU for gzip
  alone: ~0.35x the folders' speed on 2 cores is the floor of a one-pass design.
- seek points (rapidgzip 0.16 export_index/import_index; indexed_gzip 1.10 is
  the same zran scheme): each image costs inflating from the nearest point
  before it. Points every 4 MiB / 1 MiB / 256 KiB / 64 KiB cost 12.8 / 3.8 /
  1.3 / 0.8 ms of CPU per image — 50x / 15x / 5x / 3x what a folder convert
  spends on it — and the index takes 8 / 31 / 125 / 498 MB per GB of data (a
  32 KiB window per point: 4 GB at 1 MiB for the 135 GB train set), loaded
  whole by every worker (RSS 274 MB at 256 KiB for 1 GB). Rejected.
- streaming (this module): inflate each archive once, sequentially, into an
  uncompressed tar in a spool folder, list it by its tar headers, and read
  each image with one pread as the ILSVRC tarballs are read (1.00 byte
  inflated per image byte). Archives are inflated in parallel on the workers
  (Hugging Face's five train archives keep both cores busy); memory is a
  bounded buffer per archive. Measured 0.36-0.38x the folders' speed (CPU
  6.9 s against 2.5 s), at the floor above.

The price is disk: the spool holds the decompressed data (~140 GB for the train
split) until the build ends — what extracting the archives first would take,
but one file per archive instead of 1.28 M, and removed when the build ends,
failed or not (a killed run's is removed by the next run). It is a hidden
folder of the output folder (`.imagenet-build-spool-<pid>-*`, which the output
check accepts), so read-only inputs and archives in an object store (read as a
stream, never seeked) work; for an output in an object store it goes to the
local temporary folder. A run without the free space is refused before it starts.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import zlib
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from imagenet_build import storage
from imagenet_build.errors import BuildError, InputError, input_errors
from imagenet_build.naming import SPOOL_PREFIX
from imagenet_build.sources.base import READERS, Reader
from imagenet_build.sources.tars import list_members, read_range

if TYPE_CHECKING:
    from imagenet_build.plan import ImageEntry, ShardSpec
    from imagenet_build.sources.copies import Copy
    from imagenet_build.workers import Workers

# (member names, data offsets, sizes, is a regular file) of one decompressed archive
Listing = tuple[list, array, array, array]

SHIFT = 40  # an entry's offset is (archive number << SHIFT) | offset in that archive's spool (1 TiB each)
MASK = (1 << SHIFT) - 1
CHUNK = 256 << 10  # compressed bytes read at a time (small buffers: measured a little faster than 1 MiB)
MAX_OUT = 1 << 20  # decompressed bytes held at a time, whatever the compression ratio
_SPOOL = re.compile(re.escape(SPOOL_PREFIX) + r"(\d+)-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def remove_stale(folder: str) -> None:
    """Spools left in `folder` by runs that were killed (their process is gone)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = _SPOOL.match(name)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            shutil.rmtree(os.path.join(folder, name), ignore_errors=True)


def make_spool(copy: Copy, archives: list, split: str) -> str:
    """A new empty folder for one split's decompressed archives; removed when the copy is closed."""
    work_dir = copy.work_dir or tempfile.gettempdir()
    created = not os.path.exists(work_dir)
    with input_errors(work_dir, expected="a folder"):
        os.makedirs(work_dir, exist_ok=True)
    if created:  # the output folder did not exist: leave none behind if nothing else is written there
        copy.cleanups.append(lambda: _rmdir_if_empty(work_dir))
    remove_stale(work_dir)
    needed = sum(storage.size(a) for a in archives)
    free = shutil.disk_usage(work_dir).free
    if needed > free:
        raise BuildError(f"{work_dir}: {free / 1e9:.1f} GB free; the {split} archives decompress to at least "
                         f"{needed / 1e9:.1f} GB, kept there until the build ends; free space or choose "
                         "another --output-dir")
    spool = tempfile.mkdtemp(prefix=f"{SPOOL_PREFIX}{os.getpid()}-{split}-", dir=work_dir)
    copy.cleanups.append(lambda: shutil.rmtree(spool, ignore_errors=True))
    return spool


def _rmdir_if_empty(folder: str) -> None:
    try:
        os.rmdir(folder)
    except OSError:
        pass


def _inflate_with() -> tuple[Callable[..., Any], Any]:
    """(decompressobj, its error) of ISA-L (package isal) where installed, else of zlib.

    The same bytes either way; ISA-L inflates a gzipped ImageNet-like tar 1.4-1.9x faster than zlib
    on one core here (2.5 s against 3.5-4.7 s for 0.88 GB), and a copy whose train split is one
    archive (the face-blurred release) is decompressed on one core.
    """
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib.decompressobj, zlib.error
    return isal_zlib.decompressobj, isal_zlib.error


def gunzip(archive: str, target: str) -> None:
    """Decompress a .tar.gz (a file or an object-store URL, read as a stream) into `target`, atomically.

    Concatenated gzip members (pigz, cat a.gz b.gz) are one stream, as gzip reads them.
    """
    part = target + ".part"
    decompressobj, error = _inflate_with()
    with input_errors(archive, expected="a .tar.gz archive", missing="archive not found"):
        with storage.open_read(archive) as raw, open(part, "wb") as out:
            inflate, seen = decompressobj(31), False
            while True:
                chunk = raw.read(CHUNK)
                if not chunk:
                    break
                while chunk:
                    if inflate.eof:  # one gzip member ended: another follows, or zero padding
                        if not chunk.strip(b"\0"):
                            break
                        inflate = decompressobj(31)
                    try:
                        out.write(inflate.decompress(chunk, MAX_OUT))
                    except error as e:
                        raise InputError(archive, f"not a valid gzip file ({e})") from None
                    seen = True
                    chunk = inflate.unused_data if inflate.eof else inflate.unconsumed_tail
            if not seen:
                raise InputError(archive, "empty file: not a .tar.gz archive")
            if not inflate.eof:
                raise InputError(archive, "truncated: the gzip data ends before its end marker "
                                          "(an interrupted download?)")
    os.replace(part, target)


def spool_and_list(archive: str, target: str) -> Listing:
    """A worker task: decompress one archive into `target`, then list it by its tar headers.

    Returns compact columns (member names, data offsets, sizes, which are regular files).
    """
    try:
        gunzip(archive, target)
        size = os.path.getsize(target)
        with open(target, "rb") as f:
            members = list_members(f, size, archive)
    except BaseException:
        for path in (target, target + ".part"):
            if os.path.exists(path):
                os.unlink(path)
        raise
    names: list[str] = []
    offsets, sizes, files = array("Q"), array("Q"), array("b")
    for name, offset, length, is_file in members:
        names.append(name)
        offsets.append(offset)
        sizes.append(length)
        files.append(is_file)
    return names, offsets, sizes, files


def spool_name(number: int, archive: str) -> str:
    """The spool file of archive `number` of a split: sorted by number, so the reader finds them in order."""
    base = storage.basename(archive)
    return f"{number:04d}-{base[:-3] if base.endswith('.gz') else base}"


def spool_all(copy: Copy, archives: list, split: str, pool: Workers,
              task: Callable[..., Any] = spool_and_list) -> tuple[str, list]:
    """Decompress the split's archives in parallel; (spool folder, [listing of archive k])."""
    spool = make_spool(copy, archives, split)
    tasks = [(archive, os.path.join(spool, spool_name(k, archive))) for k, archive in enumerate(archives)]
    found: dict[str, Any] = {}
    pool.run(task, tasks, lambda task, listed: found.__setitem__(task[1], listed))
    return spool, [found[target] for _, target in tasks]


def stamp(archives: list) -> str:
    """The archives' sizes and modification times: a rerun redoes the shards when one changes."""
    return ";".join(storage.stamp(a) for a in archives)


class SpoolReader(Reader):
    """A shard's images from the spool: one pread each, in the decompressed archive its offset names."""

    def __init__(self, spec: ShardSpec) -> None:
        super().__init__(spec)
        self._names = sorted(os.listdir(spec.source_root)) if os.path.isdir(spec.source_root) else []
        self._fds: dict[int, int] = {}

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def read(self, number: int) -> tuple[bytes, str]:
        entry = self.spec.entries[number]
        self.identities.append(self.identity(self.spec, entry))
        k, offset = entry.offset >> SHIFT, entry.offset & MASK
        name = self._names[k] if k < len(self._names) else "?"
        where = f"{self.spec.source_root}/{name}:{entry.relpath}"
        fd = self._fds.get(k)
        if fd is None:
            with input_errors(where, missing="the decompressed archive is gone (removed while the build ran?)"):
                fd = self._fds[k] = os.open(os.path.join(self.spec.source_root, name), os.O_RDONLY)
        data = read_range(fd, offset, entry.size)
        if len(data) != entry.size:
            raise InputError(where, "decompressed archive shorter than when it was listed")
        return data, where

    @staticmethod
    def identity(spec: ShardSpec, entry: ImageEntry) -> str:
        """Its place in the archives; their sizes and mtimes are the shard's source_stamp."""
        return f"@{entry.offset}:{entry.size}"


READERS["spool"] = SpoolReader
