"""One shard: its images read, prepared and framed, written with its DALI index, atomically.

A worker is a pure function of its ShardSpec; the DALI index is computed from the
offsets while the shard is written (no second pass), and so is the sha256. Files
appear under their final names only when complete (temp name, fsync, rename).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import NamedTuple

from imagenet_build import images, storage
from imagenet_build.atomic import fsync_dir, write_temp
from imagenet_build.dali_index import index_text
from imagenet_build.errors import BuildError, InputError
from imagenet_build.example import encode_example_parts
from imagenet_build.naming import index_name, temp_name
from imagenet_build.output import Destination
from imagenet_build.plan import ShardSpec
from imagenet_build.sources import reader_for
from imagenet_build.tfrecord import frame
from imagenet_build.workers import exit_if_orphaned

WRITEBACK_EVERY = 4 << 20  # bytes written between two nudges to start writeback
INPUT_STATE = "input_state"  # a worker's figure for the manifest's inputs, not for its shard entry


class ShardFigures(NamedTuple):
    """What writing one shard produced."""

    records: int
    bytes: int
    sha256: str
    index_bytes: int
    index_sha256: str


def shard_entry(split, name, figures, skipped=(), reencoded=()):
    """A shard's entry in manifest.json, for every kind of build (convert, write_arrays)."""
    return {
        "split": split,
        "name": name,
        "records": figures.records,
        "bytes": figures.bytes,
        "sha256": figures.sha256,
        "index_bytes": figures.index_bytes,
        "index_sha256": figures.index_sha256,
        "skipped": list(skipped),
        "reencoded": list(reencoded),
    }


class ShardTask(NamedTuple):
    """One worker task: write this shard there."""

    spec: ShardSpec
    dest: Destination
    on_error: str


def _write_all(fd, parts):
    """os.writev until every byte of `parts` is written (no copy of the payload)."""
    total = sum(len(p) for p in parts)
    written = os.writev(fd, parts)
    if written < total:  # rare partial write: finish the rest plainly
        os.write(fd, b"".join(parts)[written:])


def _start_writeback(fd, offset, length):
    """Start writing a range of the shard to disk now, without waiting, so that the
    fsync at the end of the shard has little left to wait for; where the hint is
    missing the fsync simply does it all."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


def write_records(name, output_dir, index_dir, payloads):
    """Write one shard and its DALI index from serialized Examples, atomically.

    `payloads` yields each record's payload as parts (written without joining).
    Returns its ShardFigures. The shard and the index appear under their names only
    when both are complete.
    """
    shard_path = Path(output_dir) / name
    index_path = Path(index_dir) / index_name(name)
    shard_tmp = temp_name(shard_path)
    index_tmp = temp_name(index_path)
    digest = hashlib.sha256()
    offsets = []
    offset = flushed = 0
    try:
        fd = os.open(shard_tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for payload in payloads:
                head, foot = frame(*payload)
                record = (head, *payload, foot)
                _write_all(fd, record)
                for part in record:
                    digest.update(part)
                size = sum(len(part) for part in record)
                offsets.append((offset, size))
                offset += size
                if offset - flushed >= WRITEBACK_EVERY:
                    _start_writeback(fd, flushed, offset - flushed)
                    flushed = offset
            os.fsync(fd)
        finally:
            os.close(fd)
        index_bytes = index_text(offsets).encode()
        write_temp(index_path, index_bytes)  # renamed after the shard: an index never comes first
        os.replace(shard_tmp, shard_path)
        os.replace(index_tmp, index_path)
        fsync_dir(shard_path.parent)
        if index_path.parent != shard_path.parent:
            fsync_dir(index_path.parent)
    except OSError as e:  # a full disk, a quota: say where, and that nothing is lost
        raise BuildError(f"{output_dir}: {e.strerror or e} while writing {name}; free space, then run the "
                         "same command again to resume") from None
    finally:
        for tmp in (shard_tmp, index_tmp):
            if tmp.exists():
                tmp.unlink()
    return ShardFigures(len(offsets), offset, digest.hexdigest(), len(index_bytes),
                        hashlib.sha256(index_bytes).hexdigest())


def _payloads(spec, reader, on_error, skipped, reencoded):
    """Each record's payload parts, in order; bad inputs raise (fail) or go to `skipped` (skip)."""
    for number, entry in enumerate(spec.entries):
        exit_if_orphaned()
        try:
            stored = images.prepare(*reader.read(number))
        except InputError as e:
            if on_error == "fail":
                raise
            skipped.append({"file": entry.relpath, "label": entry.label, "reason": e.problem})
            continue
        note = images.name_disagreement(entry.filename, stored)
        if stored.reencoded or note:
            reencoded.append({"file": entry.relpath, "reencoded": stored.reencoded, "note": note})
        synset, text = spec.classes[entry.label]
        yield encode_example_parts(
            encoded=stored.data,
            filename=entry.filename,
            height=stored.height,
            width=stored.width,
            label=entry.label,
            synset=synset,
            text=text,
            boxes=entry.boxes,
        )


def codec_of(reencoded):
    """What else a shard's bytes depend on: the encoder, when it holds re-encoded images."""
    return images.encoder_version() if any(r["reencoded"] for r in reencoded) else ""


def write_shard(spec, dest, on_error):
    """Write one planned shard from its input images (and upload it, for a URL); return its manifest entry."""
    skipped, reencoded = [], []
    with reader_for(spec) as reader:
        payloads = _payloads(spec, reader, on_error, skipped, reencoded)
        if not dest.remote:
            figures = write_records(spec.name, dest.output, dest.index, payloads)
        else:
            with tempfile.TemporaryDirectory(prefix="imagenet-build-") as staging:
                figures = write_records(spec.name, staging, staging, payloads)
                # shard first, then its index: a listed index always has its shard
                storage.upload(Path(staging, spec.name), storage.join(dest.output, spec.name))
                storage.upload(Path(staging, index_name(spec.name)), storage.join(dest.index, index_name(spec.name)))
        identities = reader.identities
    entry = shard_entry(spec.split, spec.name, figures, skipped, reencoded)
    entry["fingerprint"] = spec.fingerprint(on_error, codec_of(reencoded))
    entry[INPUT_STATE] = spec.input_state(identities)  # moved to the manifest's "inputs" by the driver
    return entry


def rebuilt_sha256(spec, on_error):
    """sha256 of the shard the inputs give now, built in memory and not written (--verify-inputs)."""
    digest = hashlib.sha256()
    with reader_for(spec) as reader:
        for payload in _payloads(spec, reader, on_error, [], []):
            head, foot = frame(*payload)
            for part in (head, *payload, foot):
                digest.update(part)
    return digest.hexdigest()
