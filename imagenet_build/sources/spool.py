"""Gzip-compressed tarballs (.tar.gz), read by decompressing each archive once into a spool beside the shards.

gzip has no random access, and slim's shuffle puts images from all over the
dataset into every shard, so each worker needs the images in arbitrary order.
Measured on 10,000 ImageNet-sized JPEGs (1.1 GB; benchmarks/bench_sources.py,
bench_source_gzip.py):

- converting the extracted folders costs ~2 s of CPU in all (1.5-1.9 s on 2 cores);
- inflating that gzip data costs ~3 s of CPU (ISA-L ~330 MB/s here on this
  literal-heavy data, zlib ~270 MB/s): more than the whole folders convert, so
  half the folders' speed on 2 cores is about the ceiling of any reader.
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
  inflated per image byte). All archives of a copy go to the workers in one
  batch, the largest first, and an archive that would inflate with cores
  idle beside it is split between threads by rapidgzip (one gzip stream on
  several cores); memory is a bounded buffer per archive. Measured 0.43-0.52x
  the folders' speed on 2 cores (docs/benchmarks.md).

The price is disk: the spool holds the decompressed data (~140 GB for the train
split) until the build ends — what extracting the archives first would take,
but one file per archive instead of 1.28 M, and removed when the build ends,
failed or not (a killed run's is removed by the next run). It is a hidden
folder of the output folder (`.imagenet-build-spool-<pid>-*`, which the output
check accepts), so read-only inputs and archives in an object store (read as a
stream, never seeked) work; for an output in an object store it goes to the
local temporary folder. A run without the free space is refused before it starts.

A rerun needs the spool only for the shards it must write. Each archive's listing (member
names, offsets and sizes: ~60 bytes an image before compression) is kept in the output folder
(`.imagenet-build-listings/`, written atomically once the folder is checked), with the archive's
path, size and modification time. A rerun whose archives all have such a listing plans from them
without decompressing anything; resume then decides what must be written, and only the splits
holding such a shard are decompressed (decompress_deferred), their fresh listings compared with
the kept ones. An object-store output keeps none (its spool is a local temporary folder).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import sys
import tempfile
import zlib
from array import array
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from imagenet_build.format.naming import LISTINGS_NAME, SPOOL_PREFIX
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError, InputError, input_errors
from imagenet_build.sources.base import Reader, deflate_codec, will_need
from imagenet_build.sources.tars import BLOCK, list_members, read_member

if TYPE_CHECKING:
    from imagenet_build.infra.workers import Workers
    from imagenet_build.model import ImageEntry, ShardSpec
    from imagenet_build.sources.copies import Copy

# (member names, data offsets, sizes, is a regular file, header CRCs, [(member, problem)] of members left out)
# of one decompressed archive (a parquet file's rows: see hf_parquet)
Listing = tuple[list, array, array, array, array, list]

SHIFT = 40  # an entry's offset is (archive number << SHIFT) | offset in that archive's spool (1 TiB each)
MASK = (1 << SHIFT) - 1
# Compressed bytes read at a time, and decompressed bytes made at a time (whatever the compression ratio).
# Buffers that stay in the CPU's cache: ISA-L on a 200 MB archive, 64 KiB / 256 KiB, 256 KiB / 1 MiB and
# 32 KiB / 128 KiB all took 0.59-0.72 s of CPU (their order changed from one series to the next); 1 MiB /
# 4 MiB 0.84 s.
CHUNK = 256 << 10
MAX_OUT = 1 << 20
# rapidgzip only for archives whose first SAMPLE bytes inflate to at most PARALLEL_RATIO times their size
SAMPLE = 8 << 20
PARALLEL_RATIO = 2.0
_SPOOL = re.compile(re.escape(SPOOL_PREFIX) + r"(\d+)-")
PIECES = "pieces.json"  # in a split's spool folder: the archives (or files) its spool files come from, in order


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


def make_spool(copy: Copy, archives: list, split: str, needed: int | None = None, path: str = "",
               splits: str = "") -> str:
    """A new empty folder for one split's decompressed archives (at `path` when given); removed when the
    copy is closed.

    Refused unless the folder's disk has `needed` bytes free (default: the archives' size), which the
    archives of `splits` (default: this split) take.
    """
    work_dir = copy.work_dir or tempfile.gettempdir()
    created = not os.path.exists(work_dir)
    with input_errors(work_dir, expected="a folder"):
        os.makedirs(work_dir, exist_ok=True)
    if created:  # the output folder did not exist: leave none behind if nothing else is written there
        copy.cleanups.append(lambda: _rmdir_if_empty(work_dir))
    remove_stale(work_dir)
    needed = sum(storage.size(a) for a in archives) if needed is None else needed
    free = shutil.disk_usage(work_dir).free
    if needed > free:
        raise BuildError(f"{work_dir}: {human_bytes(free)} free; the {splits or split} archives decompress to at least "
                         f"{human_bytes(needed)}, kept there until the build ends; free space or choose "
                         "another --output-dir")
    if path:
        os.mkdir(path)
        spool = path
    else:
        spool = tempfile.mkdtemp(prefix=f"{SPOOL_PREFIX}{os.getpid()}-{split}-", dir=work_dir)
    copy.cleanups.append(lambda: shutil.rmtree(spool, ignore_errors=True))
    with open(os.path.join(spool, PIECES), "w") as f:  # for the reader's messages: archive and member
        json.dump([str(a) for a in archives], f)
    return spool


def human_bytes(count: float) -> str:
    """A byte count to read at a glance: 50 MB, 63 MB, 1.4 GB, 140 GB (decimal units, as disks are sold)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            value = count / size
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{int(count)} bytes"


def _rmdir_if_empty(folder: str) -> None:
    try:
        os.rmdir(folder)
    except OSError:
        pass


def gunzip(archive: str, target: str, threads: int = 1) -> None:
    """Decompress a .tar.gz (a file or an object-store URL, read as a stream) into `target`, atomically.

    Concatenated gzip members (pigz, cat a.gz b.gz) are one stream, as gzip reads them. With
    `threads` > 1, a local archive is inflated by rapidgzip on that many threads where it is installed.
    """
    part = target + ".part"
    if threads > 1 and not storage.is_url(archive) and _gunzip_parallel(archive, part, threads):
        os.replace(part, target)
        return
    decompressobj, error, _ = deflate_codec()
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


def _chunk(threads: int) -> int:
    """rapidgzip's chunk size: it holds a few chunks per thread. On the face-blurred train archive, 2
    threads: 8 MiB chunks 1.89 s, peak RSS 86 MB (16 MiB: 1.92 s, 90 MB; 4 MiB: 2.18 s, 57 MB); 8 threads:
    8 MiB 188 MB, 4 MiB 128 MB, 16 MiB 261 MB. So 8 MiB, down to 4 MiB from 8 threads up (memory bounded)."""
    return max(4 << 20, min(8 << 20, (64 << 20) // threads))


def _inflates_beyond(archive: str, ratio: float) -> bool:
    """Whether the archive's first SAMPLE bytes inflate to more than `ratio` times their size.

    rapidgzip holds a few chunks per thread, each up to 20 times its compressed size: five
    archives of 1.28 M tiny images (4.8 MB each, 81 times smaller than their tar) took it to a
    peak RSS of 700 MB on two threads, against 23 MB for ISA-L on one. A tar of JPEGs inflates
    about 1.02 times (benchmarks/bench_source_gzip.py); one that compresses better is inflated the
    one-thread way. A problem with the data is left to the inflate that follows to report.
    """
    decompressobj, error, _ = deflate_codec()
    with open(archive, "rb") as f:
        data = f.read(SAMPLE)
    inflate, made, left = decompressobj(31), 0, data
    try:
        while left and not inflate.eof and made <= ratio * len(data):
            made += len(inflate.decompress(left, MAX_OUT))
            left = inflate.unconsumed_tail
    except error:
        return False
    consumed = len(data) - len(left) - len(inflate.unused_data)
    return made > ratio * max(consumed, 1)


def _gunzip_parallel(archive: str, part: str, threads: int) -> bool:
    """Decompress a local .tar.gz into `part` with rapidgzip on `threads` threads; False when it cannot.

    rapidgzip splits one gzip stream between threads (each guesses where deflate blocks start, then
    resolves the back-references): the face-blurred train split, one archive, decompressed in 2.03 s
    on two threads against 2.75 s on one with ISA-L (878 MB), a whole convert in 3.3 s against 4.3 s.
    It says nothing of an archive cut short (it stops where the data ends), of zero padding after the
    gzip data it raises, and a problem is printed on stderr: so its stderr is silenced here, the whole
    input must have been consumed, and on any problem (False) the archive is inflated again the
    one-thread way, whose checks give the one-line error (or accept the padding). So is an archive
    that compresses well (_inflates_beyond): rapidgzip's memory grows with the compression ratio.
    """
    try:
        import rapidgzip
    except ImportError:
        return False
    if _inflates_beyond(archive, PARALLEL_RATIO):
        return False
    stderr = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        size_bits = os.path.getsize(archive) * 8
        with open(part, "wb") as out:
            # the class under rapidgzip.RapidgzipFile: the one that says how much input it consumed
            reader = rapidgzip._RapidgzipFile(archive, parallelization=threads, chunk_size=_chunk(threads))
            try:
                buffer = bytearray(MAX_OUT)
                while count := reader.readinto(buffer):
                    out.write(memoryview(buffer)[:count])
                complete = reader.tell_compressed() == size_bits
            finally:
                reader.close()  # joins its threads (left running, they abort the interpreter at exit)
    except (OSError, ValueError, RuntimeError):
        complete = False
    finally:
        os.dup2(stderr, 2)
        os.close(stderr)
    if not complete and os.path.exists(part):
        os.unlink(part)
    return complete


def spool_and_list(archive: str, target: str, threads: int = 1) -> Listing:
    """A worker task: decompress one archive into `target` (on `threads` threads where it can), then
    list it by its tar headers.

    Returns compact columns (member names, data offsets, sizes, which are regular files).
    """
    try:
        gunzip(archive, target, threads)
        size = os.path.getsize(target)
        with open(target, "rb") as f:
            members = list_members(f, size, archive)
    except BaseException:
        for path in (target, target + ".part"):
            if os.path.exists(path):
                os.unlink(path)
        raise
    names: list[str] = []
    offsets, sizes, files, crcs = array("Q"), array("Q"), array("b"), array("Q")
    for name, offset, length, is_file, crc in members:
        names.append(name)
        offsets.append(offset)
        sizes.append(length)
        files.append(is_file)
        crcs.append(crc)
    return names, offsets, sizes, files, crcs, []


def spool_name(number: int, archive: str) -> str:
    """The spool file of archive `number` of a split: sorted by number, so the reader finds them in order."""
    base = storage.basename(archive)
    return f"{number:04d}-{base[:-3] if base.endswith('.gz') else base}"


def spool_all(copy: Copy, archives: list, split: str, pool: Workers,
              task: Callable[..., Any] = spool_and_list) -> tuple[str, list]:
    """The split's archives decompressed: (spool folder, [listing of archive k]).

    What spool_splits already did for the copy is taken from there; otherwise the archives are
    decompressed now, in parallel.
    """
    if split not in copy.spooled:
        spool_splits(copy, {split: archives}, pool, task)
    return copy.spooled.pop(split)  # the scan's alone from here: not held once it is done with


def _thread_counts(sizes: list[int], workers: int) -> list[int]:
    """Each archive's threads, for archives of `sizes` handed to `workers` workers in that order.

    Where one thread each would leave cores idle — an archive inflating alone at the end, or beside a
    smaller one — it gets them: the workers' count over how many archives inflate beside it on average
    over its time, in the schedule of one thread each (time in proportion to size), rounded half up
    (1 to workers). So Hugging Face's five train archives and validation archive take one thread each
    on two cores but the last train archive, which inflates almost alone, both; 3 each of 16; the
    face-blurred release's one large train archive both cores of two, 15 of 16. rapidgzip on two
    threads costs about the CPU time of ISA-L on one (a 200 MB archive: 0.65 s against 0.60), so
    the threads more cost little where a core would idle.
    """
    free = [0] * workers  # when each worker is next free
    spans = []
    for size in sizes:
        worker = free.index(min(free))
        spans.append((free[worker], free[worker] + size))
        free[worker] += size
    counts = []
    for i, (start, end) in enumerate(spans):
        beside = sum(max(0, min(end, e) - max(start, s)) for j, (s, e) in enumerate(spans) if j != i)
        share = workers * (end - start) / ((end - start) + beside) if end > start else 1
        counts.append(max(1, min(workers, int(share + 0.5))))
    return counts


def spool_splits(copy: Copy, splits: dict[str, list], pool: Workers,
                 task: Callable[..., Any] = spool_and_list) -> None:
    """Decompress the archives of several splits in one batch, the largest first, and keep the
    result in `copy.spooled` for each split's scan (spool_all takes it from there).

    One batch keeps every core busy to the end: Hugging Face's five train archives and its
    validation archive take three rounds on two cores instead of four (train, then validation).
    An archive that would otherwise inflate with cores idle beside it gets them as threads
    (_thread_counts; `threads` for the task).

    A split each of whose archives has its listing kept by an earlier run into this output (the
    archive's path, size and modification time unchanged) is not decompressed now: its scan gets
    those listings and a spool folder still to be made, which decompress_deferred fills if a shard
    of that split must be written.
    """
    stamps = {archive: storage.stamp(archive) for archives in splits.values() for archive in archives}
    kept = {archive: read_listing(copy.work_dir, archive, stamps[archive]) for archive in stamps}
    now = {}
    for split, archives in splits.items():
        listed = [kept[archive] for archive in archives]
        if not all(listed):
            now[split] = archives
            continue
        folder = os.path.join(copy.work_dir, f"{SPOOL_PREFIX}{os.getpid()}-{split}-{secrets.token_hex(4)}")
        copy.spooled[split] = (folder, [one[0] for one in listed if one])
        copy.deferred[split] = (folder, archives, task, [one[1] for one in listed if one])
    if not now:
        return
    listings = _decompress(copy, now, pool, task, {})
    for split, archives in now.items():
        copy.spooled[split] = listings[split]
        if copy.work_dir:  # kept once the output folder is checked (keep_listings)
            for archive, listed in zip(archives, listings[split][1]):
                copy.listings[listing_path(copy.work_dir, archive)] = encode_listing(archive, stamps[archive], listed)


def _decompress(copy: Copy, splits: dict[str, list], pool: Workers, task: Callable[..., Any],
                folders: dict[str, str]) -> dict[str, tuple[str, list]]:
    """{split: (spool folder, [listing of archive k])}: the archives decompressed in one batch, the
    largest first, into new spool folders (at `folders[split]` where given)."""
    sizes = {archive: storage.size(archive) for archives in splits.values() for archive in archives}
    needed = sum(sizes.values())
    spools = {split: make_spool(copy, archives, split, needed, folders.get(split, ""), " and ".join(splits))
              for split, archives in splits.items()}
    tasks = [(archive, os.path.join(spools[split], spool_name(k, archive)), split)
             for split, archives in splits.items() for k, archive in enumerate(archives)]
    tasks.sort(key=lambda t: -sizes[t[0]])
    found: dict[str, Any] = {}
    threads = _thread_counts([sizes[archive] for archive, _, _ in tasks], pool.count)
    runs = [(archive, target, count) for (archive, target, _), count in zip(tasks, threads)]
    pool.run(task, runs, lambda t, listed: found.__setitem__(t[1], listed))
    result = {}
    for split, archives in splits.items():
        targets = [os.path.join(spools[split], spool_name(k, archive)) for k, archive in enumerate(archives)]
        result[split] = (spools[split], [found[target] for target in targets])
    return result


def decompress_deferred(copy: Copy, pool: Workers, splits: Iterable[str]) -> None:
    """Decompress, into the spool folders the scans were given, the archives of `splits` that were planned
    from kept listings: a shard of theirs must be written (or re-read). A split left deferred at the end
    is named in a note: none of its archives was decompressed.

    Each fresh listing must equal the kept one (the plan's offsets come from it); an archive rewritten
    with its old size and modification time is refused, its listing removed, so the next run plans anew.
    """
    wanted = {split: copy.deferred.pop(split) for split in sorted(set(splits)) if split in copy.deferred}
    if copy.deferred:
        archives = [storage.basename(a) for _, listed, _, _ in copy.deferred.values() for a in listed]
        copy.notes.append(f"not decompressed: {', '.join(archives)} (every shard they feed was kept; planned "
                          f"from their listings kept in {LISTINGS_NAME})")
        copy.deferred.clear()
    if not wanted:
        return
    tasks = {task for _, _, task, _ in wanted.values()}
    assert len(tasks) == 1, "one copy's archives are all read by one task"
    listings = _decompress(copy, {split: archives for split, (_, archives, _, _) in wanted.items()}, pool,
                           tasks.pop(), {split: folder for split, (folder, _, _, _) in wanted.items()})
    for split, (_, archives, _, digests) in wanted.items():
        for archive, listed, digest in zip(archives, listings[split][1], digests):
            if hashlib.sha256(_listing_body(listed)).hexdigest() != digest:
                path = listing_path(copy.work_dir, archive)
                if os.path.exists(path):
                    os.unlink(path)
                raise BuildError(f"{archive}: its content differs from the listing an earlier run kept of it, "
                                 "although its size and modification time are the same; that listing is removed: "
                                 "run the same command again")


LISTING_FORMAT = 2  # 2: with each member's header CRC-32


def _key(archive: str) -> str:
    """An archive's path as its kept listing names it: its real path, or its URL."""
    return archive if storage.is_url(archive) else os.path.realpath(archive)


def listing_path(work_dir: str, archive: str) -> str:
    """Where an archive's listing is kept: one file per archive path, in the output's listings folder."""
    digest = hashlib.sha256(_key(archive).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return os.path.join(work_dir, LISTINGS_NAME, f"{storage.basename(archive)}-{digest}")


def _listing_body(listed: Listing) -> bytes:
    """A listing's columns as bytes: name lengths, names, offsets, sizes, regular-file flags, header CRCs, then
    the members left out (the parquet reader's disagreeing rows) as JSON."""
    names, offsets, sizes, files, crcs, left_out = listed
    encoded = [name.encode("utf-8", "surrogatepass") for name in names]
    lengths = array("Q", map(len, encoded))
    return b"".join([len(names).to_bytes(8, "little"), lengths.tobytes(), b"".join(encoded), offsets.tobytes(),
                     sizes.tobytes(), files.tobytes(), crcs.tobytes(), json.dumps(left_out).encode()])


def _head(archive: str, stamp_now: str) -> dict:
    """What a kept listing must say to be used: its format, the archive's path and stamp, the byte order."""
    return {"format": LISTING_FORMAT, "archive": _key(archive), "stamp": stamp_now, "byteorder": sys.byteorder}


def encode_listing(archive: str, stamp_now: str, listed: Any) -> bytes:
    """An archive's listing as kept in the output: a JSON head (the archive, its stamp) and the body, compressed."""
    head = json.dumps(_head(archive, stamp_now)).encode()
    return zlib.compress(head + b"\n" + _listing_body(listed), 1)


def read_listing(work_dir: str, archive: str, stamp_now: str) -> tuple[Any, str] | None:
    """(the listing, sha256 of its body) an earlier run kept of `archive` as it is now, or None (no listing, another
    stamp, or a file that does not parse: the archive is then decompressed as on a first run)."""
    if not work_dir:
        return None
    try:
        with open(listing_path(work_dir, archive), "rb") as f:
            head, body = zlib.decompress(f.read()).split(b"\n", 1)
        meta = json.loads(head)
        if meta != _head(archive, stamp_now):
            return None
        return _parse_listing(body), hashlib.sha256(body).hexdigest()
    except (OSError, ValueError, zlib.error, IndexError):
        return None


def _parse_listing(body: bytes) -> Listing:
    count = int.from_bytes(body[:8], "little")
    at = 8
    lengths = array("Q")
    lengths.frombytes(body[at:at + 8 * count])
    at += 8 * count
    names = []
    for length in lengths:
        names.append(body[at:at + length].decode("utf-8", "surrogatepass"))
        at += length
    columns = []
    for code in ("Q", "Q", "b", "Q"):
        column = array(code)
        width = column.itemsize * count
        column.frombytes(body[at:at + width])
        if len(column) != count:
            raise ValueError("listing cut short")
        columns.append(column)
        at += width
    offsets, sizes, files, crcs = columns
    left_out = [(str(member), str(problem)) for member, problem in json.loads(body[at:])]
    return names, offsets, sizes, files, crcs, left_out


def keep_listings(copy: Copy) -> None:
    """Write the listings of the archives decompressed by this run into the output, each atomically:
    called once the output folder is checked (a refused folder gets nothing)."""
    from imagenet_build.infra.atomic import write_atomic

    for path, data in copy.listings.items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, data)
    copy.listings.clear()


def stamp(archives: list) -> str:
    """The archives' sizes and modification times: a rerun redoes the shards when one changes."""
    return ";".join(storage.stamp(a) for a in archives)


class SpoolReader(Reader):
    """A shard's images from the spool: one pread each, in the decompressed archive its offset names,
    checked as every tar member is (read_member); errors name the archive and the member."""

    def __init__(self, spec: ShardSpec) -> None:
        super().__init__(spec)
        root = spec.source_root
        self._names = sorted(n for n in os.listdir(root) if n != PIECES) if os.path.isdir(root) else []
        try:
            with open(os.path.join(root, PIECES)) as f:
                self._pieces = json.load(f)
        except (OSError, ValueError):
            self._pieces = []
        self._fds: dict[int, int] = {}

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def _fd(self, k: int, where: str) -> int:
        fd = self._fds.get(k)
        if fd is None:
            with input_errors(where, missing="the decompressed archive is gone (removed while the build ran?)"):
                fd = self._fds[k] = os.open(os.path.join(self.spec.source_root, self._name(k)), os.O_RDONLY)
        return fd

    def _name(self, k: int) -> str:
        return self._names[k] if k < len(self._names) else "?"

    def _piece(self, k: int) -> str:
        """The archive (or file) spool file k was made from."""
        return self._pieces[k] if k < len(self._pieces) else os.path.join(self.spec.source_root, self._name(k))

    def announce(self, number: int, entry: ImageEntry) -> None:
        """At ImageNet's size the spool is on disk (~140 GB), read in shuffled order: as the tarballs."""
        try:
            fd = self._fd(entry.offset >> SHIFT, entry.relpath)
        except InputError:
            return  # read() reports it, in order
        will_need(fd, (entry.offset & MASK) - BLOCK, BLOCK + entry.size)

    def read(self, number: int) -> tuple[bytes, str]:
        self.read_ahead(number)
        entry = self.spec.entries[number]
        self.identities.append(self.identity(self.spec, entry))
        k, offset = entry.offset >> SHIFT, entry.offset & MASK
        fd = self._fd(k, f"{self.spec.source_root}/{self._name(k)}")
        data, member = read_member(fd, offset, entry.size, entry.extra, f"{self._piece(k)}:{entry.relpath}")
        return data, f"{self._piece(k)}:{member}"

    @staticmethod
    def identity(spec: ShardSpec, entry: ImageEntry) -> str:
        """Its place in the archives; their sizes and mtimes are the shard's source_stamp."""
        return f"@{entry.offset}:{entry.size}"

