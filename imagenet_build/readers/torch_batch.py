"""Batches of the PyTorch reader: `collate` (a DataLoader's collate_fn for its samples), and `Batch`, a batch made
in one call where a DataLoader asks for a batch's records at once (RecordDataset.__getitems__).

Why a batch in one call: collated sample by sample, each image is copied once more into the batch, and each
tensor of the batch (images, labels, offsets) crosses from a worker to the main process as a storage of its own,
each a file descriptor passed over a socket with an authentication handshake: on 2 cores that hand-over cost
more than resizing the images. A `Batch` holds the labels, the offsets and the images in one block of memory
(shared memory in a worker: the batch crosses as one storage), and each crop goes straight to its place in it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from imagenet_build.infra.optional import require

torch = require("torch", "imagenet_build.torch (the PyTorch reader)")

COUNTS = 2  # int64 columns in a batch's block before the images: labels, offsets


def block(count: int, shape: tuple[int, ...], dtype: Any) -> tuple[Any, Any, Any]:
    """(labels, offsets, images): int64 [count], int64 [count] and `dtype` [count, *shape], one block of memory:
    shared memory in a DataLoader worker (one file descriptor for the whole batch), else ordinary memory."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    head = COUNTS * 8 * count
    head += -head % itemsize
    nbytes = head + count * math.prod(shape) * itemsize
    in_worker = torch.utils.data.get_worker_info() is not None
    storage = torch.UntypedStorage._new_shared(nbytes) if in_worker else torch.UntypedStorage(nbytes)

    def view(kind: Any, start: int, size: tuple[int, ...]) -> Any:
        flat = torch.empty(0, dtype=kind).set_(storage, start, (math.prod(size),), (1,))
        return flat.view(size)

    labels, offsets = view(torch.int64, 0, (count,)), view(torch.int64, count, (count,))
    return labels, offsets, view(dtype, head // itemsize, (count, *shape))


class Batch(Sequence):
    """A batch read in one call: `collate` returns `collated()` as it is; any other collate_fn sees the
    per-sample dicts (each "image" a view of the batch's images)."""

    def __init__(self, rows: list[dict], images: Any, labels: Any, offsets: Any) -> None:
        self.rows, self.images, self.labels, self.offsets = rows, images, labels, offsets  # rows: no "image"
        labels.copy_(torch.tensor([row["label"] for row in rows], dtype=torch.int64))
        offsets.copy_(torch.tensor([row["offset"] for row in rows], dtype=torch.int64))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[i] for i in range(len(self))[k]]
        return {"image": self.images[k], **self.rows[k]}

    def collated(self) -> dict:
        out: dict[str, Any] = {"image": self.images}
        for key in self.rows[0]:  # the samples' keys, in their order
            kept = {"label": self.labels, "offset": self.offsets}
            out[key] = kept[key] if key in kept else column(key, [row[key] for row in self.rows])
        return out


def collate(samples: Sequence[dict]) -> dict:
    """DataLoader's collate_fn for these samples: images stacked when they share a shape, else a list; ReaL labels
    padded with -1 to [B, the most any sample has], so that a batch's ReaL accuracy is one comparison. A `Batch`
    (a batch read in one call) is collated already."""
    if isinstance(samples, Batch):
        return samples.collated()
    return {key: column(key, [s[key] for s in samples]) for key in samples[0]}


def column(key: str, values: list) -> Any:
    """One key's values of a batch's samples, batched."""
    if key in ("label", "offset"):
        return torch.tensor(values, dtype=torch.int64)
    if key == "real_labels":
        return torch.nn.utils.rnn.pad_sequence(values, batch_first=True, padding_value=-1) \
            if any(len(v) for v in values) else torch.empty((len(values), 0), dtype=torch.int64)
    if key == "image" and isinstance(values[0], torch.Tensor) and all(v.shape == values[0].shape for v in values):
        return _stacked(values)
    return values


def _stacked(values: Sequence[Any]) -> Any:
    """The images stacked; in a DataLoader worker straight into shared memory, as PyTorch's default_collate
    stacks, so that the batch is not copied there again on its way to the main process (a batch of 64 float
    images is 38 MB of fresh memory each copy)."""
    if torch.utils.data.get_worker_info() is None:
        return torch.stack(values)
    first = values[0]
    storage = first._typed_storage()._new_shared(len(values) * first.numel(), device=first.device)
    return torch.stack(values, out=first.new(storage).resize_(len(values), *first.shape))





def transformed(rows: list[dict], encoded: list, where: list[str], transform: Any) -> Batch:
    """A batch of `rows` (samples without their image) whose images are `encoded` through `transform`, a
    SampleTransform: its crops resized into the batch's block (uint8), or normalised into it (float32)."""
    from imagenet_build.readers.torch_sample_transform import normalise

    count, size = len(rows), transform.size
    if not transform.normalise:
        labels, offsets, images = block(count, (3, size, size), torch.uint8)
        transform.crops(encoded, images.numpy(), where)
        return Batch(rows, images, labels, offsets)
    labels, offsets, images = block(count, (3, size, size), torch.float32)
    pixels = torch.empty((count, 3, size, size), dtype=torch.uint8)
    transform.crops(encoded, pixels.numpy(), where)
    normalise(pixels, transform.mean, transform.std, out=images)
    return Batch(rows, images, labels, offsets)


__all__ = ["Batch", "block", "collate", "transformed"]
