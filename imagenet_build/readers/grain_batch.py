"""A Grain batch function that decodes and augments a batch of RecordSource's records in one call, importable as
imagenet_build.grain.CropBatch.

`grain.transforms.Batch(256, batch_fn=CropBatch())` batches the records and crops their images with
imagenet_build.torch's SampleTransform (the per-sample path: the crop drawn first, decoded at its DCT scale,
resized by fast_image_resize, mirrored half the time) straight into the batch: {"image": uint8 [B, 3, size, size],
"label": int64 [B]}. In Grain's worker processes the batch's images are written into Grain's shared memory array
itself (Grain asks a batch function for that by `enable_shared_memory_output`), so they are not stacked and
copied there again, and torch runs on one thread (its OpenMP threads would spin between the images).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from imagenet_build.infra.optional import require


class CropBatch:
    """Grain's batch_fn: RecordSource's records -> {"image": uint8 [B, 3, size, size], "label": int64 [B]},
    each image cropped by `transform` (a SampleTransform with normalise=False; by default the training one)."""

    def __init__(self, transform: Any = None) -> None:
        if transform is None:
            from imagenet_build.readers.torch_sample_transform import SampleTransform

            transform = SampleTransform(normalise=False)
        self.transform = transform
        self.shared = False

    def enable_shared_memory_output(self) -> None:  # Grain calls it where its workers hand batches over
        self.shared = True

    def __call__(self, records: Sequence[dict]) -> dict:
        import numpy as np

        torch = require("torch", "imagenet_build.grain's CropBatch")
        if torch.get_num_threads() != 1:
            torch.set_num_threads(1)
        size = self.transform.size
        shape = (len(records), 3, size, size)
        if self.shared:
            shared = require("grain.python", "imagenet_build.grain's CropBatch in Grain's workers")
            images = shared.SharedMemoryArray(shape, dtype=np.uint8)
        else:
            images = np.empty(shape, np.uint8)
        where = [f"{r['shard']}: byte {r['offset']} ({r['filename']})" for r in records]
        try:
            self.transform.crops([r["image"] for r in records], images, where)
        except BaseException:  # a record that does not decode: its batch's shared memory goes too
            if self.shared:
                images.unlink_on_del()
            raise
        return {"image": images, "label": np.array([r["label"] for r in records], np.int64)}


__all__ = ["CropBatch"]
