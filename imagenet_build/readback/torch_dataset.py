"""PyTorch readers for the shards, without TensorFlow.

`RecordDataset` is map-style: record i is found by its offset in the DALI index
and read with one `pread`, so any order costs the same. `IterableRecordDataset`
streams: each reader takes a contiguous run of records and reads it
sequentially, shuffling in a buffer. Both parse slim's Example with the
project's own decoder and yield dicts: "image" (decoded CHW uint8, or the stored
JPEG bytes with decode=False), "label" (0-based), "filename", "shard" and
"offset" (where the record lies), and "boxes" on request.

Sharding: the records of one epoch (the shards in name order, each in its
index's order; permuted by (seed, epoch) when shuffling) are cut into
contiguous ranges, one per rank, as DALI cuts them; the iterable dataset cuts
each rank's range again per DataLoader worker, and the map-style one leaves the
workers to the DataLoader. Every record is read exactly once an epoch across
ranks x workers; ranges differ by at most one record.

`BatchTransform` decodes a batch and augments it (slim's random crop area and
aspect ranges, resize, mirror, normalise) on the device it is given: the CPU
path and the GPU path (nvJPEG through torchvision) are the same code.

torch and torchvision come with the `torch` extra; only this module and
torch_trainer.py import them.
"""

from __future__ import annotations

import math
import os
import random
from array import array
from typing import Any, Callable, Iterator, Sequence

from imagenet_build.build.manifest import read_manifest
from imagenet_build.encode.example import decode_example
from imagenet_build.format.dali_index import index_entries
from imagenet_build.format.naming import index_dir_of, index_path, no_shards_message, split_shards
from imagenet_build.format.tfrecord import FramingError, unframe
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.optional import require
from imagenet_build.readback.checks import DLE_MEAN, DLE_STD  # every reader's defaults, one home

torch = require("torch", "imagenet_build.torch (the PyTorch reader)")

AREA = (0.05, 1.0)  # slim's random crop: fraction of the image's area
ASPECT = (0.75, 1.33)  # and width / height


# ------------------------------------------------------------------ the records of a split


class Records:
    """Every record of a split as the DALI indexes list them: shard number, offset and size per record.

    Held in arrays (24 bytes a record: ~30 MB for ImageNet's train split), so
    DataLoader workers forked from the process share them without copying.
    Each index must cover its shard exactly (dali_index.index_entries, the rule
    verify holds indexes to), or the dataset is refused before anything is read.
    A folder is a local path or an fsspec URL (s3://, gs://: the `s3`, `gcs` extras).
    """

    def __init__(self, folder: str | os.PathLike, split: str = "train", index_dir: str | None = None) -> None:
        folder = os.fspath(folder)  # str: a URL stays one (pathlib folds s3:// into s3:/)
        if not storage.is_url(folder) and not os.path.isdir(folder):
            raise BuildError(f"{folder}: not a folder")
        try:
            manifest = read_manifest(folder)
        except ValueError as e:
            raise BuildError(str(e)) from None
        self.manifest = manifest
        index_dir = index_dir_of(folder, manifest, index_dir)
        self.paths = split_shards(folder, split)
        if not self.paths:
            raise BuildError(no_shards_message(folder, f"{split} shards ({split}-NNNNN-of-NNNNN)"))
        self.shard, self.offset, self.size = array("i"), array("q"), array("q")
        self.starts = []  # first record number of each shard
        for number, path in enumerate(self.paths):
            self.starts.append(len(self.offset))
            for offset, size in index_entries(path, index_path(path, index_dir)):
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


# ------------------------------------------------------------------ one record


class _Reader:
    """Reads and parses records; file descriptors are opened per process (DataLoader workers fork)."""

    def __init__(self, records: Records, decode: bool, boxes: bool, check_crc: bool,
                 transform: Callable[[Any], Any] | None) -> None:
        self.records = records
        self.decode = decode
        self.boxes = boxes
        self.check_crc = check_crc
        self.transform = transform
        self._files: dict[int, Any] = {}  # per shard: a file descriptor, or an object store's file
        self._pid = -1

    def __getstate__(self) -> dict:  # a spawned worker opens its own files
        return {**self.__dict__, "_files": {}, "_pid": -1}

    def pread(self, shard: int, size: int, offset: int) -> bytes:
        """`size` bytes at `offset` of a shard: one pread of a file, one ranged read of an object."""
        if self._pid != os.getpid():
            self._files, self._pid = {}, os.getpid()
        path = self.records.paths[shard]
        if shard not in self._files:
            self._files[shard] = (storage.open_read(path, random_access=True) if storage.is_url(path)
                                  else os.open(path, os.O_RDONLY))
        f = self._files[shard]
        if isinstance(f, int):
            return os.pread(f, size, offset)
        f.seek(offset)
        return f.read(size)

    def read(self, number: int) -> dict:
        """Record `number` by one pread at its index offset."""
        r = self.records
        shard, offset, size = r.shard[number], r.offset[number], r.size[number]
        return self.parse(shard, offset, size, self.pread(shard, size, offset))

    def parse(self, shard: int, offset: int, size: int, data: bytes) -> dict:
        """A sample from a whole record (header, payload, CRC): `data`, read at the index entry `offset size`."""
        path = self.records.paths[shard]
        if len(data) < size:
            raise BuildError(f"{path}: byte {offset}: the index points past the end of the file; "
                             "run imagenet-build verify")
        try:
            payload = unframe(data, self.check_crc)
        except FramingError as e:
            raise BuildError(f"{path}: byte {offset}: {e.message}; run imagenet-build verify") from None
        try:
            features = decode_example(payload)
            encoded = features["image/encoded"][0]
            label = features["image/class/label"][0] - 1  # records are 1-based
            filename = features["image/filename"][0].decode()
        except Exception as e:  # not slim's Example: a message, not a traceback
            raise BuildError(f"{path}: byte {offset}: not slim's Example ({type(e).__name__}: {e}); "
                             "run imagenet-build verify") from None
        sample = {"image": encoded, "label": label, "filename": filename, "shard": path, "offset": offset}
        if self.boxes:
            columns = [features.get(f"image/object/bbox/{c}", []) for c in ("xmin", "ymin", "xmax", "ymax")]
            sample["boxes"] = torch.tensor(list(zip(*columns)), dtype=torch.float32).reshape(-1, 4)
        if self.decode:
            sample["image"] = decode_images([encoded], "cpu", where=[f"{path}: byte {offset} ({filename})"])[0]
        if self.transform is not None:
            sample["image"] = self.transform(sample["image"])
        return sample


# ------------------------------------------------------------------ the datasets


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
                 check_crc: bool = True) -> None:
        _check_rank(rank, world_size)
        self.records = Records(folder, split, index_dir)
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.shuffle = split == "train" if shuffle is None else shuffle
        self._reader = _Reader(self.records, decode, boxes, check_crc, transform)
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
                 index_dir: str | None = None, check_crc: bool = True) -> None:
        _check_rank(rank, world_size)
        self.records = Records(folder, split, index_dir)
        share(len(self.records), rank, world_size)
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.shuffle = split == "train" if shuffle is None else shuffle
        self.shuffle_buffer = shuffle_buffer
        self._reader = _Reader(self.records, decode, boxes, check_crc, transform)
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
            with (storage.open_read(path) if storage.is_url(path) else open(path, "rb", buffering=1 << 20)) as f:
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


def collate(samples: Sequence[dict]) -> dict:
    """DataLoader's collate_fn for these samples: images stacked when they share a shape, else a list."""
    out: dict[str, Any] = {}
    for key in samples[0]:
        values = [s[key] for s in samples]
        if key in ("label", "offset"):
            out[key] = torch.tensor(values, dtype=torch.int64)
        elif key == "image" and isinstance(values[0], torch.Tensor) and all(
                v.shape == values[0].shape for v in values):
            out[key] = torch.stack(values)
        else:
            out[key] = values
    return out


# ------------------------------------------------------------------ decoding and augmentation


def decode_images(encoded: Sequence[bytes | Any], device: str = "cpu", where: Sequence[str] | None = None) -> list:
    """JPEGs (bytes or uint8 tensors) to RGB CHW uint8 tensors on `device`, batched (nvJPEG on "cuda").

    Grayscale JPEGs come out with three channels (the stored CMYK and PNG images
    were re-encoded as RGB JPEG when the shards were written).
    """
    io = require("torchvision.io", "decoding images in imagenet_build.torch")
    data = [e if isinstance(e, torch.Tensor) else torch.frombuffer(bytearray(e), dtype=torch.uint8) for e in encoded]
    try:
        return io.decode_jpeg(data, mode=io.ImageReadMode.RGB, device=device)
    except RuntimeError as e:
        if len(data) > 1:  # find which one, for the message
            for k, one in enumerate(data):
                decode_images([one], device, where=[where[k]] if where else [f"image {k} of the batch"])
        what = where[0] if where else "an image"
        raise BuildError(f"{what}: does not decode as JPEG ({str(e).splitlines()[0][:200]})") from None


class BatchTransform:
    """Decode a batch of stored JPEGs and augment it on `device`: float32 NCHW, normalised.

    Training: slim's random crop (area 0.05-1 of the image, aspect 0.75-1.33,
    area drawn uniformly and aspect log-uniformly as DALI does, 100 attempts,
    else the whole image), resize to size x size (bilinear, antialiased), random
    mirror. Evaluation: resize the shorter side to `resize`, centre size x size.
    Then (x - mean) / std per channel, in 0-255 units. Random draws come from a
    CPU generator seeded with `seed`, so a run is repeatable on either device.
    """

    def __init__(self, device: str = "cpu", training: bool = True, size: int = 224, resize: int = 256,
                 mean: Sequence[float] = DLE_MEAN, std: Sequence[float] = DLE_STD,
                 area: tuple[float, float] = AREA, aspect: tuple[float, float] = ASPECT, attempts: int = 100,
                 seed: int = 0, channels_last: bool = False) -> None:
        self.device = torch.device(device)
        self.training, self.size, self.resize = training, size, resize
        self.area, self.aspect, self.attempts = area, aspect, attempts
        self.channels_last = channels_last
        self.mean = torch.tensor(mean, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, encoded: Sequence[bytes | Any]) -> Any:
        images = [self.crop_resize(image) for image in decode_images(encoded, str(self.device))]
        if self.training:
            flips = (torch.rand(len(images), generator=self.generator) < 0.5).tolist()
            images = [image.flip(-1) if flip else image for image, flip in zip(images, flips)]
        out = torch.stack(images).float().sub_(self.mean).div_(self.std)
        return out.contiguous(memory_format=torch.channels_last) if self.channels_last else out

    def crop_box(self, height: int, width: int) -> tuple[int, int, int, int]:
        """(top, left, height, width) of the training crop of an image of this size."""
        g, area = self.generator, height * width
        log_lo, log_hi = math.log(self.aspect[0]), math.log(self.aspect[1])
        for _ in range(self.attempts):
            u = torch.rand(4, generator=g, dtype=torch.float64).tolist()
            target = area * (self.area[0] + (self.area[1] - self.area[0]) * u[0])
            ratio = math.exp(log_lo + (log_hi - log_lo) * u[1])
            w, h = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
            if 0 < w <= width and 0 < h <= height:
                return int(u[2] * (height - h + 1)), int(u[3] * (width - w + 1)), h, w
        return 0, 0, height, width

    def crop_resize(self, image: Any) -> Any:
        """One CHW uint8 image to 3 x size x size uint8 (torchvision's resize: its uint8 fast path on the CPU)."""
        functional = require("torchvision.transforms.v2.functional", "augmenting images in imagenet_build.torch")
        height, width = image.shape[-2:]
        if self.training:
            top, left, h, w = self.crop_box(height, width)
            return functional.resized_crop(image, top, left, h, w, [self.size, self.size], antialias=True)
        scale = self.resize / min(height, width)
        h, w = max(self.size, round(height * scale)), max(self.size, round(width * scale))
        return functional.center_crop(functional.resize(image, [h, w], antialias=True), [self.size, self.size])


__all__ = [
    "AREA", "ASPECT", "BatchTransform", "IterableRecordDataset", "RecordDataset", "Records", "collate",
    "decode_images", "share",
]
