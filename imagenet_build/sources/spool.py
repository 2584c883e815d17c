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
- streaming (this module, inflate.py): inflate each archive once, sequentially, into an
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
holding such a shard are decompressed (Spool.make_readable), their fresh listings compared with
the kept ones (listings.py). An object-store output keeps none (its spool is a local temporary folder).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Callable, List, Tuple

from imagenet_build.format.naming import LISTINGS_NAME, SPLITS, SPOOL_PREFIX
from imagenet_build.infra import read_door, storage, write_door
from imagenet_build.infra.errors import BuildError, InputError, input_errors
from imagenet_build.infra.jsonfile import parse_json
from imagenet_build.infra.processes import process_alive
from imagenet_build.sources import listings
from imagenet_build.sources.copies import Copy
from imagenet_build.sources.copy_rules import MemberReader, will_need
from imagenet_build.sources.inflate import spool_and_list
from imagenet_build.sources.listings import Listing
from imagenet_build.sources.tars import BLOCK, read_member

if TYPE_CHECKING:
    from imagenet_build.infra.workers import Workers
    from imagenet_build.model import ImageEntry, ShardSpec

SHIFT = 40  # an entry's offset is (archive number << SHIFT) | offset in that archive's spool (1 TiB each)
MASK = (1 << SHIFT) - 1
_SPOOL = re.compile(re.escape(SPOOL_PREFIX) + r"(\d+)-")
PIECES = "pieces.json"  # in a split's spool folder: the archives (or files) its spool files come from, in order

# A worker task: (archive, spool file to write, threads it may use) -> the spool file's listing
SpoolTask = Callable[[str, str, int], Listing]
Spooled = Tuple[str, List[Listing]]  # (a split's spool folder, [the listing of its archive k])


def remove_stale(folder: str) -> None:
    """Spools left in `folder` by runs that were killed (their process is gone)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = _SPOOL.match(name)
        if match and int(match.group(1)) != os.getpid() and not process_alive(int(match.group(1))):
            write_door.remove_scratch(os.path.join(folder, name))


def human_bytes(count: float) -> str:
    """A byte count to read at a glance: 50 MB, 63 MB, 1.4 GB, 140 GB (decimal units, as disks are sold)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            value = count / size
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{int(count)} bytes"


def _rmdir_if_empty(folder: str) -> None:
    write_door.remove_empty_folder(folder)


def spool_name(number: int, archive: str) -> str:
    """The spool file of archive `number` of a split: sorted by number, so the reader finds them in order."""
    base = storage.basename(archive)
    return f"{number:04d}-{base[:-3] if base.endswith('.gz') else base}"


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


def stamp(archives: list[str]) -> str:
    """The archives' sizes and modification times: a rerun redoes the shards when one changes."""
    return ";".join(storage.stamp(a) for a in archives)


class Spool:
    """A copy's archives (or parquet files) decompressed once, each split's into a spool folder beside the
    shards: what each split's scan takes, what a rerun plans from instead, and what goes when the build ends.

    archives: {split: its archives, in order}; task: the worker task that decompresses and lists one.
    """

    def __init__(self, archives: dict[str, list[str]], task: SpoolTask = spool_and_list) -> None:
        self.archives = archives
        self.task = task
        self.work_dir = ""  # where the spool folders go (the output folder; "" for the temporary folder)
        self.spooled: dict[str, Spooled] = {}  # split -> what was decompressed (or planned) for its scan
        self.deferred: dict[str, tuple[str, list[str]]] = {}  # split -> (its spool folder, the kept listings'
        # digests), planned from kept listings and not decompressed yet
        self.listings: dict[str, bytes] = {}  # path in the output -> an archive's listing to keep there
        self.notes: list[str] = []  # what it noticed (an archive left compressed), for convert's summary
        self._cleanups: list[Callable[[], None]] = []

    def make_folder(self, archives: list[str], split: str, needed: int | None = None, path: str = "",
                    splits: str = "") -> str:
        """A new empty folder for one split's decompressed archives (at `path` when given); removed by close().

        Refused unless the folder's disk has `needed` bytes free (default: the archives' size), which the
        archives of `splits` (default: this split) take.
        """
        work_dir = self.work_dir or tempfile.gettempdir()
        created = not os.path.exists(work_dir)
        with input_errors(work_dir, expected="a folder"):
            write_door.make_folder(work_dir)
        if created:  # the output folder did not exist: leave none behind if nothing else is written there
            self._cleanups.append(lambda: _rmdir_if_empty(work_dir))
        remove_stale(work_dir)
        needed = sum(storage.size(a) for a in archives) if needed is None else needed
        free = shutil.disk_usage(work_dir).free
        if needed > free:
            raise BuildError(f"{work_dir}: {human_bytes(free)} free; the {splits or split} archives decompress to at "
                             f"least {human_bytes(needed)}, kept there until the build ends; free space or choose "
                             "another --output-dir")
        if path:
            write_door.make_new_folder(path)
            spool = path
        else:
            spool = write_door.new_scratch_folder(f"{SPOOL_PREFIX}{os.getpid()}-{split}-", work_dir)
        self._cleanups.append(lambda: write_door.remove_scratch(spool))
        write_door.write_bytes(os.path.join(spool, PIECES), json.dumps([str(a) for a in archives]).encode(),
                               within=spool)  # for the reader's messages: archive and member
        return spool

    def take(self, split: str, pool: Workers) -> Spooled:
        """The split's archives decompressed: (spool folder, [listing of archive k]), from what decompress()
        did already, else decompressed now. The scan's alone from here: not held once it is done with."""
        if split not in self.spooled:
            self.decompress(pool, [split])
        return self.spooled.pop(split)

    def decompress(self, pool: Workers, splits: Iterable[str] | None = None) -> None:
        """Decompress the archives of `splits` (default: all) in one batch, the largest first, and hold the
        result for each split's scan (take).

        One batch keeps every core busy to the end: Hugging Face's five train archives and its
        validation archive take three rounds on two cores instead of four (train, then validation).
        An archive that would otherwise inflate with cores idle beside it gets them as threads
        (_thread_counts; `threads` for the task).

        A split each of whose archives has its listing kept by an earlier run into this output (the
        archive's path, size and modification time unchanged) is not decompressed now: its scan gets
        those listings and a spool folder still to be made, which make_readable fills if a shard of
        that split must be written.
        """
        wanted = {split: self.archives[split] for split in (self.archives if splits is None else splits)}
        stamps = {archive: storage.stamp(archive) for archives in wanted.values() for archive in archives}
        kept = {archive: listings.read_listing(self.work_dir, archive, stamps[archive]) for archive in stamps}
        now = {}
        for split, archives in wanted.items():
            before = [kept[archive] for archive in archives]
            if not all(before):
                now[split] = archives
                continue
            folder = os.path.join(self.work_dir, f"{SPOOL_PREFIX}{os.getpid()}-{split}-{secrets.token_hex(4)}")
            self.spooled[split] = (folder, [one[0] for one in before if one])
            self.deferred[split] = (folder, [one[1] for one in before if one])
        if not now:
            return
        found = self._decompress(now, pool, {})
        for split, archives in now.items():
            self.spooled[split] = found[split]
            if self.work_dir:  # kept once the output folder is checked (keep_listings)
                for archive, listed in zip(archives, found[split][1]):
                    path = listings.listing_path(self.work_dir, archive)
                    self.listings[path] = listings.encode_listing(archive, stamps[archive], listed)

    def _decompress(self, splits: dict[str, list[str]], pool: Workers, folders: dict[str, str]) -> dict[str, Spooled]:
        """{split: (spool folder, [listing of archive k])}: the archives decompressed in one batch, the
        largest first, into new spool folders (at `folders[split]` where given)."""
        sizes = {archive: storage.size(archive) for archives in splits.values() for archive in archives}
        needed = sum(sizes.values())
        spools = {split: self.make_folder(archives, split, needed, folders.get(split, ""), " and ".join(splits))
                  for split, archives in splits.items()}
        tasks = [(archive, os.path.join(spools[split], spool_name(k, archive)), split)
                 for split, archives in splits.items() for k, archive in enumerate(archives)]
        tasks.sort(key=lambda t: -sizes[t[0]])
        found: dict[str, Listing] = {}
        threads = _thread_counts([sizes[archive] for archive, _, _ in tasks], pool.count)
        runs = [(archive, target, count) for (archive, target, _), count in zip(tasks, threads)]
        pool.run(self.task, runs, lambda t, listed: found.__setitem__(t[1], listed))
        result = {}
        for split, archives in splits.items():
            targets = [os.path.join(spools[split], spool_name(k, archive)) for k, archive in enumerate(archives)]
            result[split] = (spools[split], [found[target] for target in targets])
        return result

    def make_readable(self, pool: Workers, splits: Iterable[str]) -> None:
        """Decompress, into the spool folders the scans were given, the archives of `splits` that were planned
        from kept listings: a shard of theirs must be written (or re-read). A split left deferred at the end is
        named in its notes, none of its archives decompressed.

        Each fresh listing must equal the kept one (the plan's offsets come from it); an archive rewritten
        with its old size and modification time is refused, its listing removed, so the next run plans anew.
        """
        wanted = {split: self.deferred.pop(split) for split in sorted(set(splits)) if split in self.deferred}
        if self.deferred:
            names = [storage.basename(a) for split in self.deferred for a in self.archives[split]]
            self.notes.append(f"not decompressed: {', '.join(names)} (every shard they feed was kept; planned from "
                         f"their listings kept in {LISTINGS_NAME})")
            self.deferred.clear()
        if not wanted:
            return
        found = self._decompress({split: self.archives[split] for split in wanted}, pool,
                                 {split: folder for split, (folder, _) in wanted.items()})
        for split, (_, digests) in wanted.items():
            for archive, listed, digest in zip(self.archives[split], found[split][1], digests):
                if listings.digest(listed) != digest:
                    path = listings.listing_path(self.work_dir, archive)
                    write_door.remove(path, within=self.work_dir, missing_ok=True)
                    raise BuildError(f"{archive}: its content differs from the listing an earlier run kept of it, "
                                     "although its size and modification time are the same; that listing is "
                                     "removed: run the same command again")

    def keep_listings(self) -> None:
        """Write the listings of the archives decompressed by this run into the output, each atomically:
        called once the output folder is checked (a refused folder gets nothing)."""
        listings.write_listings(self.listings)
        self.listings.clear()

    def close(self) -> None:
        """Remove the spool folders (and an output folder made only for them), whatever the outcome."""
        while self._cleanups:
            self._cleanups.pop()()

    @contextlib.contextmanager
    def placed_in(self, folder: str) -> Iterator[Spool]:
        """The spool's life: its folders go into `folder` (the output folder; "" for the temporary folder, where
        the output is in an object store), and are removed at the end, whatever the outcome."""
        self.work_dir = folder
        try:
            yield self
        finally:
            self.close()


class SpooledCopy(Copy):
    """A copy read from a spool of its decompressed archives (Spool): the optional capability of a copy, which the
    build asks for by type (writer/spooling.py) to place the spool, decompress before the scans, keep the
    listings, decompress what a rerun must write, and remove it."""

    def __init__(self, kind: str, description: str, archives: dict[str, list[str]],
                 task: SpoolTask = spool_and_list) -> None:
        self.kind, self.description, self.notes = kind, description, []
        self.spool = Spool({split: archives[split] for split in SPLITS if split in archives}, task)

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.spool.archives)


class SpoolReader(MemberReader):
    """A shard's images from the spool: one pread each, in the decompressed archive its offset names,
    checked as every tar member is (read_member); errors name the archive and the member."""

    def __init__(self, spec: ShardSpec) -> None:
        super().__init__(spec)
        root = spec.source_root
        self._names = sorted(n for n in os.listdir(root) if n != PIECES) if os.path.isdir(root) else []
        try:
            self._pieces = parse_json(read_door.read_bytes(os.path.join(root, PIECES)), PIECES)
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
                fd = self._fds[k] = read_door.open_fd(os.path.join(self.spec.source_root, self._name(k)))
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
        data, member = read_member(fd, offset, entry.size, entry.member_info, f"{self._piece(k)}:{entry.relpath}")
        return data, f"{self._piece(k)}:{member}"

    @staticmethod
    def identity(spec: ShardSpec, entry: ImageEntry) -> str:
        """Its place in the archives; their sizes and mtimes are the shard's source_stamp."""
        return f"@{entry.offset}:{entry.size}"

