"""A record read by index, judged and parsed the one way every by-index reader parses one (the PyTorch reader,
the Grain source): the bytes the index says, whole; the framing and its CRCs (format/tfrecord.py); slim's
Example (format/record_schema.py), of which only the features asked for are decoded (the image, the label and the
file name; the boxes or ReaL labels where a reader wants them). Each problem is one BuildError naming shard and
byte. No torch, no Grain.
"""

from __future__ import annotations

from typing import NamedTuple

from imagenet_build.format.record_schema import FIRST_LABEL, Features
from imagenet_build.format.tfrecord import FramingError, unframe
from imagenet_build.infra.errors import BuildError


class ParsedRecord(NamedTuple):
    features: Features  # slim's Example, each feature decoded when asked for
    encoded: bytes  # the stored image
    label: int  # 0-based, as a loss takes it
    filename: str


def parse_record(path: str, offset: int, size: int, data: bytes, check_crc: bool = True) -> ParsedRecord:
    """A whole record (header, payload, CRC), `data`, read at the index entry `offset size` of shard `path`."""
    if len(data) < size:
        raise BuildError(f"{path}: byte {offset}: the index points past the end of the file; "
                         "run imagenet-build verify")
    try:
        payload = unframe(data, check_crc)
    except FramingError as e:
        raise BuildError(f"{path}: byte {offset}: {e.message}; run imagenet-build verify") from None
    try:
        features = Features(payload)
        encoded = features["image/encoded"][0]
        label = features["image/class/label"][0] - FIRST_LABEL
        filename = features["image/filename"][0].decode()
    except Exception as e:  # not slim's Example: a message, not a traceback
        raise BuildError(f"{path}: byte {offset}: not slim's Example ({type(e).__name__}: {e}); "
                         "run imagenet-build verify") from None
    return ParsedRecord(features, encoded, label, filename)
