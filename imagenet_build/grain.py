"""The public Grain data source, importable as imagenet_build.grain; its code is in imagenet_build.readback:
grain_source.py."""

from imagenet_build.readback.grain_source import RecordSource

__all__ = ["RecordSource"]
