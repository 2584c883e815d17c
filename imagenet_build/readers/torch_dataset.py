"""PyTorch readers for the shards, without TensorFlow.

`RecordDataset` is map-style: record i is found by its offset in the DALI index
and read with one `pread`, so any order costs the same. `IterableRecordDataset`
streams: each reader takes a contiguous run of records and reads it
sequentially, shuffling in a buffer. Both parse slim's Example with the
project's own decoder and yield dicts: "image" (decoded CHW uint8, or the stored
JPEG bytes with decode=False), "label" (0-based), "filename", "shard" and
"offset" (where the record lies), "boxes" on request, and with real_labels=True
"real_labels": the record's ReaL labels (a validation record of a build made with
convert --real-labels), 0-based as "label", an int64 tensor of any length (none
where ReaL gives the image no label); `collate` pads them to [B, L] with -1.

Sharding: the records of one epoch (the shards in name order, each in its
index's order; permuted by (seed, epoch) when shuffling) are cut into
contiguous ranges, one per rank, as DALI cuts them; the iterable dataset cuts
each rank's range again per DataLoader worker, and the map-style one leaves the
workers to the DataLoader. Every record is read exactly once an epoch across
ranks x workers; ranges differ by at most one record.

The records of a split and reading one are torch_records.py's; `collate` and a batch read in one call,
torch_batch.py's; decoding and augmenting a batch (`BatchTransform`), torch_transform.py's.
torch and torchvision come with the `torch` extra; only readers/ and trainercheck/ import them.
"""

from __future__ import annotations

import os
import random
from typing import Any, Callable, Iterator, Sequence

from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.optional import require
from imagenet_build.readers.carries_real_labels import require_real_labels
from imagenet_build.readers.torch_batch import Batch, collate
from imagenet_build.readers.torch_records import RecordReader, Records, share

torch = require("torch", "imagenet_build.torch (the PyTorch reader)")


class _SharedEpoch:
    """The epoch set_epoch sets, held in shared memory: DataLoader workers read it when they use it,
    so persistent workers (persistent_workers=True), started once, follow every set_epoch too."""

    def _share_epoch(self) -> None:
        self._epoch = torch.zeros((), dtype=torch.int64).share_memory_()

    @property
    def epoch(self) -> int:
        return int(self._epoch)

    def set_epoch(self, epoch: int) -> None:
        self._epoch.fill_(int(epoch))


# torch comes from require() at run time, so mypy sees a value, not a module whose classes are types
class RecordDataset(_SharedEpoch, torch.utils.data.Dataset):  # type: ignore[name-defined]
    """Map-style: this rank's records of one epoch, each read by one pread at its index offset.

    Call set_epoch(e) before each epoch (as with DistributedSampler); with
    shuffle (default for train) the order is a permutation by (seed, epoch),
    the same on every rank, so ranks stay disjoint. Use it with a plain
    DataLoader (no sampler needed): the DataLoader shares the indices among
    its workers, persistent or not (each finds the epoch's order when it reads).
    """

    def __init__(self, folder: str | os.PathLike, split: str = "train", *, rank: int = 0, world_size: int = 1,
                 decode: bool = True, boxes: bool = False, shuffle: bool | None = None, seed: int = 0,
                 transform: Callable[[Any], Any] | None = None, index_dir: str | None = None,
                 check_crc: bool = True, real_labels: bool = False) -> None:
        _check_rank(rank, world_size)
        self.records = Records(folder, split, index_dir)
        if real_labels:
            require_real_labels(self.records.paths)
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.shuffle = split == "train" if shuffle is None else shuffle
        self._reader = RecordReader(self.records, decode, boxes, check_crc, transform, real_labels)
        self._range = share(len(self.records), self.rank, self.world_size)
        self._share_epoch()
        self._order_epoch = -1
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        self._current_order()  # here, so that workers forked after it inherit the order

    def _current_order(self) -> Any:
        """This rank's record numbers in the epoch's order, recomputed where the epoch changed."""
        epoch = self.epoch
        if epoch != self._order_epoch:
            start, end = self._range
            self._order = self.records.epoch_order(self.shuffle, self.seed, epoch)[start:end]
            self._order_epoch = epoch
        return self._order

    def __len__(self) -> int:
        return self._range[1] - self._range[0]

    def __getitem__(self, i: int) -> dict:
        return self._reader.read(int(self._current_order()[i]))

    def __getitems__(self, indices: Sequence[int]) -> Batch | list[dict]:
        """A batch's samples in one call (a DataLoader with a batch_size asks so): with a SampleTransform, a
        `Batch`, which `collate` takes as it is (torch_batch.py)."""
        order = self._current_order()
        return self._reader.read_batch([int(order[i]) for i in indices])


class IterableRecordDataset(_SharedEpoch, torch.utils.data.IterableDataset):  # type: ignore[name-defined]
    """Streaming: this rank's and this DataLoader worker's contiguous run of records, read sequentially.

    With shuffle (default for train) the shards' order is permuted by (seed,
    epoch) before the runs are cut, and records pass through a shuffle buffer
    of `shuffle_buffer` seeded by (seed, epoch, rank, worker). Call
    set_epoch(e) before each epoch (persistent workers see it too).
    """

    def __init__(self, folder: str | os.PathLike, split: str = "train", *, rank: int = 0, world_size: int = 1,
                 decode: bool = True, boxes: bool = False, shuffle: bool | None = None, seed: int = 0,
                 shuffle_buffer: int = 1000, transform: Callable[[Any], Any] | None = None,
                 index_dir: str | None = None, check_crc: bool = True, real_labels: bool = False) -> None:
        _check_rank(rank, world_size)
        self.records = Records(folder, split, index_dir)
        if real_labels:
            require_real_labels(self.records.paths)
        share(len(self.records), rank, world_size)
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.shuffle = split == "train" if shuffle is None else shuffle
        self.shuffle_buffer = shuffle_buffer
        self._reader = RecordReader(self.records, decode, boxes, check_crc, transform, real_labels)
        self._share_epoch()

    def _stream(self, epoch: int) -> list[int]:
        """The shards in this epoch's order."""
        order = list(range(len(self.records.paths)))
        if self.shuffle:
            random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return order

    def runs(self, worker: int = 0, workers: int = 1, epoch: int | None = None) -> list[tuple[int, int, int]]:
        """(shard, first record, end record) runs of this rank's and worker's part of an epoch's stream
        (by default the epoch set_epoch set)."""
        r = self.records
        part, parts = self.rank * workers + worker, self.world_size * workers
        start, end = share(len(r), part, parts, "rank x worker")
        runs, position = [], 0
        for shard in self._stream(self.epoch if epoch is None else epoch):
            first = r.starts[shard]
            count = (r.starts[shard + 1] if shard + 1 < len(r.starts) else len(r)) - first
            lo, hi = max(start, position), min(end, position + count)
            if lo < hi:
                runs.append((shard, first + lo - position, first + hi - position))
            position += count
        return runs

    def __iter__(self) -> Iterator[dict]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        epoch = self.epoch  # read once: the stream and the buffer's seed of one epoch
        samples = self._read_runs(self.runs(worker, workers, epoch))
        if not self.shuffle or self.shuffle_buffer <= 1:
            return samples
        rng = random.Random((self.seed * 1_000_003 + epoch) * 65_537 + self.rank * 257 + worker)
        return _shuffled(samples, self.shuffle_buffer, rng)

    def _read_runs(self, runs: list[tuple[int, int, int]]) -> Iterator[dict]:
        r = self.records
        for shard, first, end in runs:
            path = r.paths[shard]
            with read_door.open_read(path, buffering=-1 if storage.is_url(path) else 1 << 20) as f:
                f.seek(r.offset[first])
                for number in range(first, end):
                    size = r.size[number]
                    yield self._reader.parse(shard, r.offset[number], size, f.read(size))


def _shuffled(samples: Iterator[dict], size: int, rng: random.Random) -> Iterator[dict]:
    buffer: list[dict] = []
    for sample in samples:
        if len(buffer) < size:
            buffer.append(sample)
            continue
        k = rng.randrange(size)
        yield buffer[k]
        buffer[k] = sample
    rng.shuffle(buffer)
    yield from buffer


def _check_rank(rank: int, world_size: int) -> None:
    if world_size < 1 or not 0 <= rank < world_size:
        raise BuildError(f"rank {rank} of world_size {world_size}: need 0 <= rank < world_size")


__all__ = ["IterableRecordDataset", "RecordDataset", "collate"]
