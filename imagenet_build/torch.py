"""The public PyTorch reader, importable as imagenet_build.torch; its code is in imagenet_build.readers:
torch_dataset.py (the datasets), torch_records.py (a split's records, reading one), torch_transform.py
(decoding and augmenting batches), torch_sample_transform.py (decoding and augmenting one image in a DataLoader
worker, no more of it decoded than the output needs)."""

from imagenet_build.readers.torch_dataset import IterableRecordDataset, RecordDataset, collate
from imagenet_build.readers.torch_records import Records, share
from imagenet_build.readers.torch_sample_transform import SampleTransform, normalise
from imagenet_build.readers.torch_transform import AREA, ASPECT, BatchTransform, decode_images

__all__ = [
    "AREA", "ASPECT", "BatchTransform", "IterableRecordDataset", "RecordDataset", "Records", "SampleTransform",
    "collate", "decode_images", "normalise", "share",
]
