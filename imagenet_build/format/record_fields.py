"""A record's fields as protobuf reads them, without protobuf's objects for the image where convert wrote it.

verify reads every record of a build; protobuf's Python objects for its 15 features cost more than the
sha256 of its ~110 KB. A record as convert writes it holds its image and its file name each in an entry of one
bytes value, one after the other (protobuf's deterministic serialization: keys sorted); split_record finds the
two by their heads, and the short runs of entries before and after them are parsed by protobuf once each (a
class's entries and a size's repeat across records: part_fields keeps them). Protobuf parses concatenated
fields as the merge of their parts, a later map entry replacing an earlier one of its key, so the fields are
protobuf's own; a payload of any other shape is parsed whole by protobuf.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, Optional, Tuple

from imagenet_build.format.record_schema import (
    ENCODED_KEY_FIELD,
    FILENAME_KEY_FIELD,
    IMAGE_KEY,
    example_message_class,
)

FILENAME_KEY = "image/filename"
Kinds = Dict[str, Optional[str]]  # each feature's key: its list's kind (bytes_list, ...), None where it holds none
Lists = Dict[str, Tuple[Any, ...]]  # each feature's key: its values
Entries = Tuple[Tuple[str, Optional[str], Tuple[Any, ...]], ...]  # (key, kind, values) of each feature
Split = Tuple[bytes, bytes, bytes, bytes]  # the entries before the image's, the image, the file name, the rest


def example_fields(payload: bytes) -> tuple[Kinds, Lists]:
    """Each feature of a serialized Example, its kind and its values (bytes stay bytes); protobuf's DecodeError
    where the payload is not one."""
    split = split_record(payload)
    if split is not None:
        before, after = part_fields(split[0]), part_fields(split[3])
        if before is not None and after is not None:  # merged in order: a later entry replaces an earlier one
            return ({**before[0], IMAGE_KEY: "bytes_list", FILENAME_KEY: "bytes_list", **after[0]},
                    {**before[1], IMAGE_KEY: (split[1],), FILENAME_KEY: (split[2],), **after[1]})
    example = example_message_class()()
    example.ParseFromString(payload)
    entries = _entries(example.features)
    return {key: kind for key, kind, _ in entries}, {key: values for key, _, values in entries}


def split_record(payload: bytes) -> Split | None:
    """(the entries before the image's entry, the image, the file name, the entries after the file name's) of a
    record whose image and file name are one-bytes-value entries, the file name's right after the image's, in one
    Features field that is the whole payload; None for any other payload."""
    try:
        features_len, start = _varint_at(payload, 1)
        key_at = payload.find(ENCODED_KEY_FIELD, start)
        if payload[0] != 0x0A or start + features_len != len(payload) or key_at < 0:
            return None
        entry_at, image_at, image_end = _one_bytes_entry(payload, key_at, ENCODED_KEY_FIELD)
        name_key_at = payload.find(FILENAME_KEY_FIELD, image_end, image_end + 6 + len(FILENAME_KEY_FIELD))
        name_entry_at, name_at, name_end = _one_bytes_entry(payload, name_key_at, FILENAME_KEY_FIELD)
    except IndexError:  # a varint or a tag past the end
        return None
    if entry_at < start or name_key_at < 0 or name_entry_at != image_end:
        return None
    return payload[start:entry_at], payload[image_at:image_end], payload[name_at:name_end], payload[name_end:]


def _varint_at(data: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at `pos` (at most 4 bytes: every length here is below 2**28;
    (-1, pos) for a longer one). IndexError past the end."""
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    for shift, at in ((7, pos + 1), (14, pos + 2), (21, pos + 3)):
        byte = data[at]
        if byte < 0x80:
            return value | byte << shift, at + 1
        value |= (byte & 0x7F) << shift
    return -1, pos


def _one_bytes_entry(payload: bytes, key_at: int, key_field: bytes) -> tuple[int, int, int]:
    """(where the entry starts, where its value starts and ends) of the entry whose key field is at `key_at`
    when it is that key and a Feature of a BytesList of one value and nothing else: the entry's tag and length
    (the shortest varint) before the key, then the Feature's, the BytesList's and the value's tag and length,
    each length that of what follows it in the entry; (-1, -1, -1) where it is not."""
    at = key_at + len(key_field)
    if key_at < 0 or payload[at] != 0x12:
        return -1, -1, -1
    feature_len, at = _varint_at(payload, at + 1)
    entry_end = at + feature_len
    if payload[at] != 0x0A:
        return -1, -1, -1
    list_len, at = _varint_at(payload, at + 1)
    if at + list_len != entry_end or payload[at] != 0x0A:
        return -1, -1, -1
    size, at = _varint_at(payload, at + 1)
    entry_len = entry_end - key_at
    head = _entry_head(entry_len)
    entry_at = key_at - len(head)
    if size < 0 or at + size != entry_end or entry_at < 0 or payload[entry_at:key_at] != head:
        return -1, -1, -1
    return entry_at, at, entry_end


def _entry_head(entry_len: int) -> bytes:
    """A map entry's tag and the shortest varint of its length."""
    head = bytearray(b"\x0a")
    while entry_len > 0x7F:
        head.append(entry_len & 0x7F | 0x80)
        entry_len >>= 7
    head.append(entry_len)
    return bytes(head)


@functools.lru_cache(maxsize=1 << 12)
def part_fields(entries: bytes) -> tuple[Kinds, Lists] | None:
    """The features of a run of whole FeatureEntry fields (a Features message's bytes; a class's, a size's:
    they repeat), parsed by protobuf; None where it does not parse (the payload's whole parse says why) or
    names the image's or the file name's key (the whole parse says which of its entries counts)."""
    features = _features_class()()
    try:
        features.ParseFromString(entries)
    except Exception:  # protobuf's DecodeError
        return None
    found = _entries(features)
    if any(key in (IMAGE_KEY, FILENAME_KEY) for key, _, _ in found):
        return None
    return {key: kind for key, kind, _ in found}, {key: values for key, _, values in found}


def _entries(features: Any) -> Entries:
    """(key, kind, values) of each feature of a parsed Features message."""
    out = []
    for key, feature in features.feature.items():
        kind = feature.WhichOneof("kind")
        out.append((key, kind, tuple(getattr(feature, kind).value) if kind else ()))
    return tuple(out)


@functools.lru_cache(maxsize=None)
def _features_class() -> Any:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(example_message_class().DESCRIPTOR.fields_by_name["features"].message_type)
