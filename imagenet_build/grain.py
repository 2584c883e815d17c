"""The public Grain data source, importable as imagenet_build.grain; its code is in imagenet_build.readers:
grain_source.py (the data source), grain_batch.py (a batch function that decodes and augments a batch's images)."""

from imagenet_build.readers.grain_batch import CropBatch
from imagenet_build.readers.grain_source import RecordSource

__all__ = ["CropBatch", "RecordSource"]
