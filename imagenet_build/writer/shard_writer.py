"""One shard: its images read, stored as is or re-encoded, framed, written with its DALI index, atomically.

A worker is a pure function of its ShardSpec; the DALI index is computed from the
offsets while the shard is written (no second pass), and so is the sha256. Files
appear under their final names only when complete (temp name, fsync, rename).
A resized build writes the same shard once per target from one read of each image:
one ShardSink per target, each its own build's shard, index and manifest entry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from imagenet_build.encode import images
from imagenet_build.encode.example import example_parts
from imagenet_build.encode.resize import ResizeOptions, stored_resized
from imagenet_build.encode.resize import codec as resized_codec
from imagenet_build.format.dali_index import index_text
from imagenet_build.format.destination import Destination
from imagenet_build.format.manifest import ShardEntry
from imagenet_build.format.naming import index_name, temp_name
from imagenet_build.format.tfrecord import framed
from imagenet_build.infra import storage, write_door
from imagenet_build.infra.errors import BuildError, InputError, PathLike
from imagenet_build.infra.workers import exit_if_orphaned
from imagenet_build.model import ShardSpec
from imagenet_build.request import OnError
from imagenet_build.sources import MemberReader, reader_for
from imagenet_build.writer.commit import ShardFacts

WRITEBACK_EVERY = 4 << 20  # bytes written between two nudges to start writeback


class ShardWriteResult(NamedTuple):
    """One shard written, or kept from a previous run: its entry in the manifest's shards, and its inputs'
    state (sources.MemberReader.identity), which the manifest records apart, in inputs.shards, for the next resume;
    `facts`: what its files say, which the commit check holds its entry to (None: not known yet, and no
    manifest lists it: writer/commit.py)."""

    entry: ShardEntry
    input_state: str
    facts: ShardFacts | None = None


class ShardWriteFigures(NamedTuple):
    """What writing one shard produced."""

    records: int
    bytes: int
    sha256: str
    index_bytes: int
    index_sha256: str


def shard_entry(split: str, name: str, figures: ShardWriteFigures, skipped: Iterable[dict] = (),
                reencoded: Iterable[dict] = ()) -> ShardEntry:
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


class ShardWriteTask(NamedTuple):
    """One worker task: write this shard to each destination (one per target of a resized run)."""

    spec: ShardSpec
    dests: tuple[Destination, ...]
    on_error: OnError
    resize: ResizeOptions | None = None  # None: the full-size build, to its one destination

    def portable(self) -> ShardWriteTask:
        """The task with its local paths absolute, as a worker in another folder (a Spark executor's) needs them."""
        absolute = storage.absolute
        spec = dataclasses.replace(self.spec, source_root=absolute(self.spec.source_root))
        dests = tuple(Destination(absolute(d.output), absolute(d.index)) for d in self.dests)
        return self._replace(spec=spec, dests=dests)


def run_shard_task(spec: ShardSpec, dests: Sequence[Destination], on_error: OnError,
                   resize: ResizeOptions | None = None) -> list[list[Any]]:
    """write_shard as an engine runs it: its results as JSON, each naming its build, [[output, entry, input state],
    ...] (what the task's receipt carries, and what a rerun after a failed job reads)."""
    results = write_shard(spec, dests, on_error, resize)
    return [[dest.output, result.entry, result.input_state] for dest, result in zip(dests, results)]


def _write_all(fd: int, parts: Sequence[bytes], size: int) -> None:
    """os.writev until every byte of `parts` (`size` bytes) is written (no copy of the payload)."""
    written = os.writev(fd, parts)
    if written < size:  # rare partial write: finish the rest plainly
        rest = memoryview(b"".join(parts))[written:]
        while rest:
            rest = rest[os.write(fd, rest):]


def _start_writeback(fd: int, offset: int, length: int) -> None:
    """Start writing a range of the shard to disk now, without waiting, so that the
    fsync at the end of the shard has little left to wait for; where the hint is
    missing the fsync simply does it all."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


class ShardSink:
    """One shard and its DALI index being written, a record at a time; atomic on finish().

    Several sinks can be open at once in one process: a resized build writes one shard per
    target from each image read. The shard and the index appear under their names only
    when both are complete; close() without finish() leaves nothing behind.
    """

    def __init__(self, name: str, output_dir: PathLike, index_dir: PathLike) -> None:
        self.name, self.output_dir, self.index_dir = name, output_dir, index_dir
        self.shard_path = Path(output_dir) / name
        self.index_path = Path(index_dir) / index_name(name)
        self.shard_tmp, self.index_tmp = temp_name(self.shard_path), temp_name(self.index_path)
        self._digest = hashlib.sha256()
        self._offsets: list[tuple[int, int]] = []
        self._offset = self._flushed = 0
        self._fd: int | None = None
        try:
            self._fd = write_door.open_fd(self.shard_tmp, within=self.output_dir)
        except OSError as e:
            raise self._said(e) from None

    def _said(self, e: OSError) -> BuildError:
        """A full disk, a quota: say where, and that nothing is lost."""
        return BuildError(f"{self.output_dir}: {e.strerror or e} while writing {self.name}; free space, then run "
                          "the same command again to resume")

    def add(self, payload: Sequence[bytes]) -> None:
        """Frame one record's payload parts and write them (without joining the parts)."""
        record, size = framed(payload)
        assert self._fd is not None, "add() after finish()"
        try:
            _write_all(self._fd, record, size)
        except OSError as e:
            raise self._said(e) from None
        update = self._digest.update
        for part in record:
            update(part)
        self._offsets.append((self._offset, size))
        self._offset += size
        if self._offset - self._flushed >= WRITEBACK_EVERY:
            _start_writeback(self._fd, self._flushed, self._offset - self._flushed)
            self._flushed = self._offset

    def finish(self) -> ShardWriteFigures:
        """fsync, write the index, rename both into place; returns the ShardWriteFigures."""
        assert self._fd is not None, "finish() twice"
        try:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
            index_bytes = index_text(self._offsets).encode()
            write_door.write_temp(self.index_path, index_bytes, within=self.index_dir)  # renamed after the shard
            write_door.replace(self.shard_tmp, self.shard_path, within=self.output_dir)  # (an index never comes first)
            write_door.replace(self.index_tmp, self.index_path, within=self.index_dir)
            write_door.fsync_dir(self.shard_path.parent)
            if self.index_path.parent != self.shard_path.parent:
                write_door.fsync_dir(self.index_path.parent)
        except OSError as e:
            raise self._said(e) from None
        return ShardWriteFigures(len(self._offsets), self._offset, self._digest.hexdigest(), len(index_bytes),
                            hashlib.sha256(index_bytes).hexdigest())

    def close(self) -> None:
        """Remove what an unfinished shard left (its temp files)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        for tmp in (self.shard_tmp, self.index_tmp):
            write_door.remove(tmp, missing_ok=True)

    def __enter__(self) -> ShardSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_records(name: str, output_dir: PathLike, index_dir: PathLike,
                  payloads: Iterable[Sequence[bytes]]) -> ShardWriteFigures:
    """Write one shard and its DALI index from serialized Examples, atomically.

    `payloads` yields each record's payload as parts (written without joining).
    Returns its ShardWriteFigures. The shard and the index appear under their names only
    when both are complete.
    """
    with ShardSink(name, output_dir, index_dir) as sink:
        for payload in payloads:
            sink.add(payload)
        return sink.finish()


class _Output(NamedTuple):
    """What one of a shard task's outputs collects: the records it left out and re-encoded, its resized count."""

    skipped: list
    reencoded: list
    resized: list  # [count], mutable


def _full_size(data: bytes, path: str) -> list[images.StoredImage | InputError]:
    return [images.stored_image(data, path)]


def _storer(resize: ResizeOptions | None) -> Callable[[bytes, str], list[images.StoredImage | InputError]]:
    """image bytes, path -> [StoredImage or InputError] per output: the full-size build, or one per target."""
    if resize is None:
        return _full_size
    return functools.partial(stored_resized, options=resize)


def _payloads(spec: ShardSpec, reader: MemberReader, on_error: OnError, outputs: list[_Output],
              store: Callable[[bytes, str], list[images.StoredImage | InputError]]
              ) -> Iterator[list[tuple[bytes, ...] | None]]:
    """For each image, each output's payload parts (None where it is left out), in order.

    Bad inputs raise (fail) or go to that output's `skipped` (skip). Each image is read once.
    """
    read, classes, image_name, imagenet = reader.read, spec.classes, spec.image_name, spec.imagenet
    for number, entry in enumerate(spec.entries):
        exit_if_orphaned()
        try:
            results = store(*read(number))
        except InputError as e:
            results = [e] * len(outputs)
        assert len(results) == len(outputs)
        synset, text = classes[entry.label]
        payloads: list[tuple[bytes, ...] | None] = []
        for output, stored in zip(outputs, results):
            if isinstance(stored, InputError):
                if on_error == "fail":
                    raise stored
                output.skipped.append({"file": entry.relpath, "label": entry.label, "reason": stored.problem})
                payloads.append(None)
                continue
            note = images.name_disagreement(entry.filename, stored) if imagenet else ""  # slim's lists: ImageNet's
            if stored.reencoded or note:
                output.reencoded.append({"file": entry.relpath, "reencoded": stored.reencoded, "note": note})
            if stored.resized:
                output.resized[0] += 1
            payloads.append(example_parts(stored.data, image_name(entry), stored.height,
                                          stored.width, entry.label, synset, text, entry.boxes,
                                          real_labels=entry.real_labels))
        yield payloads


def codec_of(reencoded: Iterable[dict], resized: int = 0, resize: ResizeOptions | None = None) -> str:
    """What else a shard's bytes depend on: the codec, when it holds re-encoded or resized images (with the
    resampler and filter of `resize`)."""
    if resized:
        return resized_codec(resize.filter) if resize is not None else resized_codec()
    return images.encoder_version() if any(r["reencoded"] for r in reencoded) else ""


def write_shard(spec: ShardSpec, dests: Sequence[Destination], on_error: OnError,
                resize: ResizeOptions | None = None) -> list[ShardWriteResult]:
    """Write one planned shard from one read of its input images to every destination (and upload it, for a
    URL): the full-size build's, or one per target of `resize`, in target order. Its results, in that order."""
    variants = [""] if resize is None else [variant_of(resize.only([t])) for t in resize.targets]
    outputs = [_Output([], [], [0]) for _ in dests]
    with contextlib.ExitStack() as stack, reader_for(spec) as reader:
        folders: list[tuple[str, str]] = []
        for dest in dests:
            if dest.remote:
                staging = stack.enter_context(write_door.scratch_folder("imagenet-build-"))
                folders.append((staging, staging))
            else:
                folders.append((dest.output, dest.index))
        sinks = [stack.enter_context(ShardSink(spec.name, out, index)) for out, index in folders]
        for payloads in _payloads(spec, reader, on_error, outputs, _storer(resize)):
            for sink, payload in zip(sinks, payloads):
                if payload is not None:
                    sink.add(payload)
        figures = [sink.finish() for sink in sinks]
        for dest, (staging, _) in zip(dests, folders):
            if dest.remote:  # shard first, then its index: a listed index always has its shard
                write_door.upload(Path(staging, spec.name), storage.join(dest.output, spec.name), within=dest.output)
                write_door.upload(Path(staging, index_name(spec.name)), storage.join(dest.index, index_name(spec.name)),
                                  within=dest.index)
        input_state = spec.input_state(reader.identities)
    assert len(outputs) == len(figures) == len(variants) == len(dests)
    results = []
    for output, figure, variant in zip(outputs, figures, variants):
        entry = shard_entry(spec.split, spec.name, figure, output.skipped, output.reencoded)
        if resize is not None:
            entry["resized"] = output.resized[0]
        codec = codec_of(output.reencoded, output.resized[0], resize)
        entry["fingerprint"] = spec.fingerprint(on_error, codec, variant)
        results.append(ShardWriteResult(entry, input_state))
    return results


def variant_of(resize: ResizeOptions | None) -> str:
    """The fingerprint's record of a one-target resized build's options ("" for a full-size build)."""
    if resize is None:
        return ""
    (target,) = resize.targets
    return json.dumps(resize.recorded(target), sort_keys=True)


def rebuilt_sha256(spec: ShardSpec, on_error: OnError, resize: ResizeOptions | None = None) -> str:
    """sha256 of the shard the inputs give now, built in memory and not written (--verify-inputs)."""
    digest = hashlib.sha256()
    outputs = [_Output([], [], [0])]
    with reader_for(spec) as reader:
        for (payload,) in _payloads(spec, reader, on_error, outputs, _storer(resize)):
            if payload is None:
                continue
            for part in framed(payload)[0]:
                digest.update(part)
    return digest.hexdigest()
