"""The public DALI pipeline over a build, importable as imagenet_build.dali; its code is
imagenet_build.readers.dali_pipeline."""

from imagenet_build.readers.dali_pipeline import (
    DLE_MEAN,
    DLE_STD,
    IMAGE_SIZE,
    READER_NAME,
    pipeline,
    training_pipeline,
)

__all__ = ["DLE_MEAN", "DLE_STD", "IMAGE_SIZE", "READER_NAME", "pipeline", "training_pipeline"]
