"""slim's record: its schema (the 15 keys, their types, which hold one value, ReaL labels' added key) and
its decoding, without TensorFlow. The on-disk contract every reader and verify read records by; the
encoder (encode/example.py) writes them by it.

Decoding uses the protobuf library, with TensorFlow's `example.proto`/`feature.proto` messages
(package `tensorflow`, same field numbers) declared at run time in a private descriptor pool, so that
nothing clashes with TensorFlow's own copy when both are loaded.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

# The 15 keys of every record (docs/convert.md, Records), with their value type.
SCHEMA = {
    "image/height": "int64",
    "image/width": "int64",
    "image/colorspace": "bytes",
    "image/channels": "int64",
    "image/class/label": "int64",
    "image/class/synset": "bytes",
    "image/class/text": "bytes",
    "image/object/bbox/xmin": "float",
    "image/object/bbox/xmax": "float",
    "image/object/bbox/ymin": "float",
    "image/object/bbox/ymax": "float",
    "image/object/bbox/label": "int64",
    "image/format": "bytes",
    "image/filename": "bytes",
    "image/encoded": "bytes",
}


LIST_FIELD = {"bytes": "bytes_list", "float": "float_list", "int64": "int64_list"}  # Feature's oneof per type
BOX_COORDS = tuple(f"image/object/bbox/{c}" for c in ("xmin", "ymin", "xmax", "ymax"))  # a box, in slim's order
BOX_LABEL = "image/object/bbox/label"
IMAGE_KEY, LABEL_KEY = "image/encoded", "image/class/label"  # the image and its label, as TFDS decodes and names them
PER_BOX = frozenset((*BOX_COORDS, BOX_LABEL))  # one value per box; every other key holds exactly one value
ONE_VALUE = frozenset(SCHEMA) - PER_BOX
FIRST_LABEL = 1  # slim's labels are 1-based (0 is background): readers subtract it, verify requires labels >= it
CONSTANTS = {"image/colorspace": b"RGB", "image/channels": 3}  # the same in every record
FORMATS = (b"JPEG", b"PNG")  # image/format: convert stores JPEG; write_arrays stores PNG with lossless=True
# The one feature beyond slim's 15: a validation record's ReaL labels (convert --real-labels), 1-based as
# image/class/label, possibly none; every validation record of such a build has it, no other record does.
REAL_LABELS = "image/class/real_labels"
EXTRA = {REAL_LABELS: "int64"}


@functools.lru_cache(maxsize=None)
def example_message_class() -> Any:
    """The `tensorflow.Example` message class, declared on first use (convert never needs it)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    _F = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(
        name="imagenet_build/tf_example.proto", package="tensorflow", syntax="proto3"
    )

    def message(name: str, *fields: Any, nested: Sequence[Any] = ()) -> Any:
        m = f.message_type.add(name=name)
        for nested_message in nested:
            m.nested_type.add().CopyFrom(nested_message)
        for field in fields:
            m.field.add().CopyFrom(field)
        return m

    def field(
        name: str, number: int, kind: int, label: int = _F.LABEL_OPTIONAL, type_name: str | None = None,
        oneof: int | None = None,
    ) -> Any:
        fd = _F(name=name, number=number, type=kind, label=label)
        if type_name:
            fd.type_name = type_name
        if oneof is not None:
            fd.oneof_index = oneof
        return fd

    repeated = _F.LABEL_REPEATED
    message("BytesList", field("value", 1, _F.TYPE_BYTES, repeated))
    message("FloatList", field("value", 1, _F.TYPE_FLOAT, repeated))  # proto3: packed
    message("Int64List", field("value", 1, _F.TYPE_INT64, repeated))
    feature = message(
        "Feature",
        field("bytes_list", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.BytesList", oneof=0),
        field("float_list", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.FloatList", oneof=0),
        field("int64_list", 3, _F.TYPE_MESSAGE, type_name=".tensorflow.Int64List", oneof=0),
    )
    feature.oneof_decl.add(name="kind")
    entry = descriptor_pb2.DescriptorProto(name="FeatureEntry")
    entry.field.add().CopyFrom(field("key", 1, _F.TYPE_STRING))
    entry.field.add().CopyFrom(field("value", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.Feature"))
    entry.options.map_entry = True
    message(
        "Features",
        field("feature", 1, _F.TYPE_MESSAGE, repeated, type_name=".tensorflow.Features.FeatureEntry"),
        nested=[entry],
    )
    message("Example", field("features", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.Features"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Example"))


_ONE_BYTE = [bytes([n]) for n in range(0x80)]


def varint(n: int) -> bytes:
    """Protobuf's base-128 varint of n (an int64 below 0 as its ten-byte two's complement)."""
    if 0 <= n < 0x80:  # the common cases first: every length but an image's, every label, size and count
        return _ONE_BYTE[n]
    if 0 < n < 0x200000:  # an image's length
        if n < 0x4000:
            return bytes((n & 0x7F | 0x80, n >> 7))
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14))
    if n < 0:
        n += 1 << 64  # int64: two's complement, ten bytes
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_TAG_1, _TAG_2 = b"\x0a", b"\x12"  # fields 1 and 2, length-delimited
ENCODED_KEY_FIELD = _TAG_1 + bytes([len(IMAGE_KEY)]) + IMAGE_KEY.encode()  # a FeatureEntry's key field
FILENAME_KEY_FIELD = b"\x0a\x0eimage/filename"


def one_bytes_entry_head(key_field: bytes, size: int) -> bytes:
    """Everything of a FeatureEntry holding one bytes value of `size` bytes up to that value, as protobuf's
    deterministic serialization writes it: the entry's tag and length, the key field, the Feature's, the
    BytesList's and the value's own tag and length."""
    value_head = _TAG_1 + varint(size)
    list_len = len(value_head) + size
    list_head = _TAG_1 + varint(list_len)
    feature_len = len(list_head) + list_len
    feature_head = _TAG_2 + varint(feature_len)
    return b"".join((_TAG_1, varint(len(key_field) + len(feature_head) + feature_len), key_field, feature_head,
                     list_head, value_head))


class Features:
    """A serialized Example's features, each decoded when asked for: a reader of the image, the label and the file
    name parses no more (a third of decode_example's time on a record of a resized build)."""

    __slots__ = ("_map",)

    def __init__(self, payload: bytes) -> None:
        example = example_message_class()()
        example.ParseFromString(payload)
        self._map = example.features.feature

    def __contains__(self, key: str) -> bool:
        return key in self._map

    def get(self, key: str, default: Any = None) -> Any:
        """The values of `key` as a list, or `default` where the record has no such feature."""
        if key not in self._map:
            return default
        feature = self._map[key]
        kind = feature.WhichOneof("kind")
        return list(getattr(feature, kind).value) if kind else []

    def __getitem__(self, key: str) -> list[Any]:
        values = self.get(key)
        if values is None:
            raise KeyError(key)
        return values


def decode_example(payload: bytes) -> dict[str, list[Any]]:
    """{key: list of values} for every feature of a serialized Example (bytes stay bytes)."""
    example = example_message_class()()
    example.ParseFromString(payload)
    out: dict[str, list[Any]] = {}
    for key, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        out[key] = list(getattr(feature, kind).value) if kind else []
    return out

