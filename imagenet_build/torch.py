"""The public PyTorch reader, importable as imagenet_build.torch; its code is in imagenet_build.readback:
torch_dataset.py (the datasets), torch_records.py (a split's records, reading one), torch_transform.py
(decoding and augmenting batches)."""

from imagenet_build.readback.torch_dataset import IterableRecordDataset, RecordDataset, collate
from imagenet_build.readback.torch_records import Records, share
from imagenet_build.readback.torch_transform import AREA, ASPECT, BatchTransform, decode_images

__all__ = [
    "AREA", "ASPECT", "BatchTransform", "IterableRecordDataset", "RecordDataset", "Records", "collate",
    "decode_images", "share",
]
