"""slim's `tf.train.Example` encoded deterministically, without TensorFlow: the write path's half of the
record; its schema and its decoding, which the readers share, are format/record_schema.py's.

Encoding is hand-written (see encode_example_parts) and gives the bytes of
protobuf's deterministic mode: map keys sorted, so the same record always gives
the same bytes.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from typing import Any

from imagenet_build.format.record_schema import (
    CONSTANTS,
    ENCODED_KEY_FIELD,
    EXTRA,
    FILENAME_KEY_FIELD,
    IMAGE_KEY,
    PER_BOX,
    REAL_LABELS,
    SCHEMA,
    one_bytes_entry_head,
    varint,
)


def _field(number: int, body: bytes) -> bytes:
    """A length-delimited field: tag, length, body."""
    return bytes([number << 3 | 2]) + varint(len(body)) + body


def _list(kind: str, values: Sequence[Any]) -> bytes:
    """The body of a Feature holding a BytesList, FloatList or Int64List."""
    if kind == "bytes":
        body = b"".join(_field(1, v) for v in values)
        return _field(1, body)
    if kind == "float":
        body = _field(1, struct.pack(f"<{len(values)}f", *values)) if values else b""
        return _field(2, body)
    body = _field(1, b"".join(varint(v) for v in values)) if values else b""
    return _field(3, body)


def _entry(key: str, values: Sequence[Any]) -> bytes:
    """One map entry of Features: key -> Feature holding `values` of the key's type."""
    return _field(1, _field(1, key.encode()) + _field(2, _list(SCHEMA[key], values)))


@functools.lru_cache(maxsize=1 << 12)
def _class_entries(label: int, synset: str, text: str) -> tuple[bytes, bytes]:
    """The entries sorted before image/encoded, all fixed by the class: those before image/class/real_labels's
    place and those after it."""
    values: dict[str, tuple[Any, ...]] = {
        "image/channels": (CONSTANTS["image/channels"],),
        "image/class/label": (label,),
        "image/class/synset": (synset.encode(),),
        "image/class/text": (text.encode(),),
        "image/colorspace": (CONSTANTS["image/colorspace"],),
    }
    assert list(values) == _BEFORE_ENCODED
    entries = [_entry(k, v) for k, v in values.items()]
    return b"".join(entries[:_REAL_AT]), b"".join(entries[_REAL_AT:])


@functools.lru_cache(maxsize=1 << 12)
def _joined_class_entries(label: int, synset: str, text: str) -> bytes:
    """_class_entries as one, for a record without ReaL labels (every record but a --real-labels validation one)."""
    return b"".join(_class_entries(label, synset, text))


@functools.lru_cache(maxsize=1 << 14)
def _real_labels_entry(values: tuple[int, ...]) -> bytes:
    """The image/class/real_labels entry; most images share their list (one label) with many others."""
    return _field(1, _field(1, REAL_LABELS.encode()) + _field(2, _list(EXTRA[REAL_LABELS], values)))


_ENCODED_KEY = IMAGE_KEY
_KEYS = sorted(SCHEMA)  # deterministic protobuf writes map entries sorted by key
_BEFORE_ENCODED = _KEYS[: _KEYS.index(_ENCODED_KEY)]
_REAL_AT = sorted(_BEFORE_ENCODED + [REAL_LABELS]).index(REAL_LABELS)  # its place among them (after class/label)
_BOX_KEYS = sorted(PER_BOX)  # label, xmax, xmin, ymax, ymin: the order _box_entries writes its columns in
assert _KEYS[_KEYS.index(_ENCODED_KEY) + 1 :] == [
    "image/filename", "image/format", "image/height", *_BOX_KEYS, "image/width"
]
_FORMAT_ENTRY = _entry("image/format", (b"JPEG",))
_NO_BOX_ENTRIES = b"".join(_entry(k, ()) for k in _BOX_KEYS)
_TAG_1 = bytes([1 << 3 | 2])  # field 1, length-delimited
assert ENCODED_KEY_FIELD == _field(1, _ENCODED_KEY.encode()) and FILENAME_KEY_FIELD == _field(1, b"image/filename")


def _box_entries(label: int, boxes: Sequence[Sequence[float]]) -> bytes:
    if not boxes:
        return _NO_BOX_ENTRIES
    xmin, ymin, xmax, ymax = (tuple(b[i] for b in boxes) for i in range(4))
    columns: tuple[tuple[Any, ...], ...] = ((label,) * len(boxes), xmax, xmin, ymax, ymin)
    return b"".join(_entry(k, v) for k, v in zip(_BOX_KEYS, columns))


@functools.lru_cache(maxsize=1 << 10)
def _filename_head(size: int) -> bytes:
    """The image/filename entry's head for a name of `size` bytes (names' lengths repeat)."""
    return one_bytes_entry_head(FILENAME_KEY_FIELD, size)


@functools.lru_cache(maxsize=1 << 12)
def _size_entries(image_format: bytes, height: int, width: int) -> tuple[bytes, bytes]:
    """The entries after image/filename fixed by the image's format and size: those before the box entries'
    place and those after it."""
    head = _FORMAT_ENTRY if image_format == b"JPEG" else _entry("image/format", (image_format,))
    return head + _entry("image/height", (height,)), _entry("image/width", (width,))


def example_parts(encoded: bytes, filename: str, height: int, width: int, label: int, synset: str, text: str,
                  boxes: Sequence[Sequence[float]] = (), image_format: bytes = b"JPEG",
                  real_labels: Sequence[int] | None = None) -> tuple[bytes, bytes, bytes]:
    """encode_example_parts with its arguments by position: what convert calls for every image."""
    if real_labels is None:
        before = _joined_class_entries(label, synset, text)
    else:
        head, tail = _class_entries(label, synset, text)
        before = b"".join((head, _real_labels_entry(tuple(real_labels)), tail))
    name = filename.encode()
    sized, width_entry = _size_entries(image_format, height, width)
    after = b"".join((_filename_head(len(name)), name, sized,
                      _box_entries(label, boxes) if boxes else _NO_BOX_ENTRIES, width_entry))
    # the image/encoded entry: its length prefixes wrap the image bytes, written apart
    entry_head = one_bytes_entry_head(ENCODED_KEY_FIELD, len(encoded))
    features_len = len(before) + len(entry_head) + len(encoded) + len(after)
    return b"".join((_TAG_1, varint(features_len), before, entry_head)), encoded, after


def encode_example_parts(
    *,
    encoded: bytes,
    filename: str,
    height: int,
    width: int,
    label: int,
    synset: str,
    text: str,
    boxes: Sequence[Sequence[float]] = (),
    image_format: bytes = b"JPEG",
    real_labels: Sequence[int] | None = None,
) -> tuple[bytes, bytes, bytes]:
    """slim's Example for one image, serialized, as (head, encoded, tail) to write without a copy.

    `head + encoded + tail` is byte for byte what protobuf's deterministic
    serialization of the same `tf.train.Example` gives (the tests hold it to
    TensorFlow's). Hand-written rather than through the protobuf library: going
    through message objects costs ~30 us a record and one more copy of every
    image, about a tenth of the whole conversion; here the entries shared by
    many records are built once, and the others' length prefixes written directly.
    `real_labels` (None: no such feature) adds image/class/real_labels.
    """
    return example_parts(encoded, filename, height, width, label, synset, text, boxes, image_format, real_labels)
