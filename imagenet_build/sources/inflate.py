"""A .tar.gz decompressed into a plain tar, on one thread or split between several by rapidgzip, then listed: a
worker's task for the spool (spool.py says why). Every gzip stream is read and checked as infra/deflate.py reads
it; rapidgzip checks the same CRC-32 and length, and anything it cannot finish is read again that way."""

from __future__ import annotations

import os
from array import array

from imagenet_build.infra import read_door, storage, write_door
from imagenet_build.infra.deflate import GZIP, MAX_OUT, deflate_codec, gunzip_chunks
from imagenet_build.infra.errors import input_errors
from imagenet_build.sources.listings import Listing
from imagenet_build.sources.tars import list_members

# rapidgzip only for archives whose first SAMPLE bytes inflate to at most PARALLEL_RATIO times their size
SAMPLE = 8 << 20
PARALLEL_RATIO = 2.0


def gunzip(archive: str, target: str, threads: int = 1) -> None:
    """Decompress a .tar.gz (a file or an object-store URL, read as a stream) into `target`, atomically (nothing
    left where it fails).

    With `threads` > 1, a local archive is inflated by rapidgzip on that many threads where it is installed.
    """
    part = target + ".part"
    if threads > 1 and not storage.is_url(archive) and _gunzip_parallel(archive, part, threads):
        write_door.replace(part, target)
        return
    try:
        with input_errors(archive, expected="a .tar.gz archive", missing="archive not found"):
            with read_door.open_read(archive) as raw, write_door.open_write(part) as out:
                for chunk in gunzip_chunks(raw, archive):
                    out.write(chunk)
    except BaseException:
        write_door.remove(part, missing_ok=True)
        raise
    write_door.replace(part, target)


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
    with read_door.open_read(archive) as f:
        data = f.read(SAMPLE)
    inflate, made, left = decompressobj(GZIP), 0, data
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
        null = write_door.discard()
        os.dup2(null, 2)
        os.close(null)
        size_bits = os.path.getsize(archive) * 8
        with write_door.open_write(part) as out:
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
    if not complete:
        write_door.remove(part, missing_ok=True)
    return complete


def spool_and_list(archive: str, target: str, threads: int = 1) -> Listing:
    """A worker task: decompress one archive into `target` (on `threads` threads where it can), then
    list it by its tar headers.

    Returns compact columns (member names, data offsets, sizes, which are regular files).
    """
    try:
        gunzip(archive, target, threads)
        size = os.path.getsize(target)
        with read_door.open_read(target) as f:
            members = list_members(f, size, archive)
    except BaseException:
        for path in (target, target + ".part"):
            write_door.remove(path, missing_ok=True)
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
