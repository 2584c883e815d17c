"""The records of a split as the PyTorch reader finds them, and reading one.

`Records` lists every record of a split by the DALI indexes (each index held to format/dali_index.py's
rule first); `RecordReader` reads one record by a pread at its offset (or a run of them sequentially),
checks its framing and parses slim's Example into a sample dict (a batch's records in one call: a
torch_batch.Batch); `share` cuts an epoch into the contiguous ranges of ranks and workers. torch comes with
the `torch` extra.
"""

from __future__ import annotations

import os
from array import array
from typing import Any, Callable, Sequence

from imagenet_build.format.build_folder import BuildFolder, OpenedSplit
from imagenet_build.format.record_schema import BOX_COORDS, FIRST_LABEL, REAL_LABELS
from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.optional import require
from imagenet_build.readers.record_parse import parse_record
from imagenet_build.readers.torch_batch import Batch, transformed
from imagenet_build.readers.torch_sample_transform import SampleTransform
from imagenet_build.readers.torch_transform import decode_images

torch = require("torch", "imagenet_build.torch (the PyTorch reader)")


class Records:
    """Every record of a split as the DALI indexes list them: shard number, offset and size per record.

    Held in arrays (24 bytes a record: ~30 MB for ImageNet's train split), so
    DataLoader workers forked from the process share them without copying.
    The split is opened as every reader opens a build (format/build_folder.py): the shard set whole and each
    index covering its shard exactly (the rules verify holds a build to), or the dataset is refused before
    anything is read; `opened`: a split opened so already. A folder is a local path or an fsspec URL (s3://,
    gs://: the `s3`, `gcs` extras).
    """

    def __init__(self, folder: str | os.PathLike, split: str = "train", index_dir: str | None = None,
                 opened: OpenedSplit | None = None) -> None:
        if opened is None:  # every index covers its shard, the shard set is whole
            opened = BuildFolder.open(folder, index_dir).split(split)
        self.manifest, self.paths = opened.manifest, opened.paths
        self.shard, self.offset, self.size = array("i"), array("q"), array("q")
        self.starts = []  # first record number of each shard
        for number, entries in enumerate(opened.entries):
            self.starts.append(len(self.offset))
            for offset, size in entries:
                self.shard.append(number)
                self.offset.append(offset)
                self.size.append(size)

    def __len__(self) -> int:
        return len(self.offset)

    def epoch_order(self, shuffle: bool, seed: int, epoch: int) -> Any:
        """The epoch's record numbers (an int64 tensor): in order, or permuted by (seed, epoch)."""
        if not shuffle:
            return torch.arange(len(self), dtype=torch.int64)
        generator = torch.Generator().manual_seed(seed + epoch)  # as DistributedSampler seeds
        return torch.randperm(len(self), generator=generator)


def share(total: int, part: int, parts: int, what: str = "rank") -> tuple[int, int]:
    """[start, end) of part `part` of `parts` contiguous ranges of `total` records; an error if one is empty."""
    if total < parts:
        raise BuildError(f"{total} record(s) for {parts} {what}s: each {what} needs at least one; "
                         "use fewer ranks or workers, or more records")
    return total * part // parts, total * (part + 1) // parts


# Open shards kept per process: ImageNet's 1,024 train shards, all open in each DataLoader worker, would
# pass the usual soft limit of 1,024 descriptors; the least recently read is closed first (an open costs
# microseconds beside a record's read and parse).
MAX_OPEN_SHARDS = 128


class RecordReader:
    """Reads and parses records; file descriptors are opened per process (DataLoader workers fork)."""

    def __init__(self, records: Records, decode: bool, boxes: bool, check_crc: bool,
                 transform: Callable[[Any], Any] | None, real_labels: bool = False) -> None:
        self.records = records
        self.decode = decode
        self.boxes = boxes
        self.real_labels = real_labels
        self.check_crc = check_crc
        self.transform = transform
        self._files: dict[int, Any] = {}  # per shard: a file descriptor, or an object store's file; in order of use
        self._pid = -1

    def __getstate__(self) -> dict:  # a spawned worker opens its own files
        return {**self.__dict__, "_files": {}, "_pid": -1}

    def __del__(self) -> None:
        """Close the files this process opened: a dataset dropped (trainer-check makes one per simulated
        rank) would otherwise keep a descriptor per shard open until the process ends."""
        if getattr(self, "_pid", -1) != os.getpid():
            return  # a forked copy: the files are its parent's
        for f in self._files.values():
            self._close(f)
        self._files = {}

    @staticmethod
    def _close(f: Any) -> None:
        try:
            os.close(f) if isinstance(f, int) else f.close()
        except OSError:
            pass

    def pread(self, shard: int, size: int, offset: int) -> bytes:
        """`size` bytes at `offset` of a shard: one pread of a file, one ranged read of an object."""
        if self._pid != os.getpid():
            self._files, self._pid = {}, os.getpid()
        path = self.records.paths[shard]
        f = self._files.pop(shard, None)
        if f is None:
            if len(self._files) >= MAX_OPEN_SHARDS:  # the least recently read first
                self._close(self._files.pop(next(iter(self._files))))
            try:
                f = read_door.open_read(path, random_access=True) if storage.is_url(path) else read_door.open_fd(path)
            except OSError as e:
                raise BuildError(f"{path}: cannot be opened: {e.strerror or e}") from None
        self._files[shard] = f  # last: the dict's order is the order of use
        if isinstance(f, int):
            return os.pread(f, size, offset)
        f.seek(offset)
        return f.read(size)

    def read(self, number: int) -> dict:
        """Record `number` by one pread at its index offset."""
        return self.transformed(self.sample(number))

    def read_batch(self, numbers: Sequence[int]) -> Batch | list[dict]:
        """Records `numbers`, a batch: with a SampleTransform, made in one call (torch_batch.py: one block of
        memory, each crop resized into its place); else the samples, one by one."""
        if not isinstance(self.transform, SampleTransform):
            return [self.read(number) for number in numbers]
        rows = [self.sample(number) for number in numbers]
        encoded = [row.pop("image") for row in rows]
        return transformed(rows, encoded, [self.where(row) for row in rows], self.transform)

    def sample(self, number: int) -> dict:
        """Record `number`, read and parsed, its image as stored (decoded with decode=True), not transformed."""
        r = self.records
        shard, offset, size = r.shard[number], r.offset[number], r.size[number]
        return self.parsed(shard, offset, size, self.pread(shard, size, offset))

    def parse(self, shard: int, offset: int, size: int, data: bytes) -> dict:
        """A sample from a whole record (header, payload, CRC): `data`, read at the index entry `offset size`."""
        return self.transformed(self.parsed(shard, offset, size, data))

    def parsed(self, shard: int, offset: int, size: int, data: bytes) -> dict:
        """The sample of a whole record, before the transform."""
        path = self.records.paths[shard]
        features, encoded, label, filename = parse_record(path, offset, size, data, self.check_crc)
        sample = {"image": encoded, "label": label, "filename": filename, "shard": path, "offset": offset}
        if self.boxes:
            columns = [features.get(key, []) for key in BOX_COORDS]
            sample["boxes"] = torch.tensor(list(zip(*columns)), dtype=torch.float32).reshape(-1, 4)
        if self.real_labels:
            if REAL_LABELS not in features:
                raise BuildError(f"{path}: byte {offset}: the record carries no {REAL_LABELS}; run imagenet-build "
                                 "verify")
            real = [label - FIRST_LABEL for label in features[REAL_LABELS]]  # 0-based, as "label"
            sample["real_labels"] = torch.tensor(real, dtype=torch.int64)
        if self.decode:
            sample["image"] = decode_images([encoded], "cpu", where=[self.where(sample)])[0]
        return sample

    @staticmethod
    def where(sample: dict) -> str:
        """A record's place, for a message: shard, byte and file name."""
        return f"{sample['shard']}: byte {sample['offset']} ({sample['filename']})"

    def transformed(self, sample: dict) -> dict:
        if isinstance(self.transform, SampleTransform):  # it decodes: a problem named by the record's place
            sample["image"] = self.transform(sample["image"], self.where(sample))
        elif self.transform is not None:
            sample["image"] = self.transform(sample["image"])
        return sample
