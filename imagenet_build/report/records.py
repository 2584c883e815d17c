"""A build's records found by their DALI indexes, and read only as far as the page needs them.

slim's Example is serialized with its keys sorted, so a record's head holds the class (label, synset,
text) and the image's length, and its tail the file name, the size and the boxes; the image lies
between. A record read for its fields is two small reads, its head and its tail; only a record shown
as a thumbnail is read whole (and its CRCs checked). Nothing here passes over every payload.
"""

from __future__ import annotations

import bisect
from typing import IO, NamedTuple

from imagenet_build.format.build_folder import BuildFolder
from imagenet_build.format.record_schema import decode_example, varint
from imagenet_build.format.tfrecord import HEADER_SIZE, OVERHEAD, FramingError, unframe
from imagenet_build.infra import read_door, storage

HEAD = 1024  # bytes read from a record's start: the keys before image/encoded, and its length
LABEL_HEAD = 128  # bytes read from a record's start for its label alone (image/class/label is its second key)
TAIL = 1024  # bytes read from its end: the keys after it (file name, size, a few boxes)
_ENCODED = b"image/encoded"
_LABEL = b"image/class/label"


class Place(NamedTuple):
    """Where one record is: its shard (path and name), its number there, and its index entry."""

    path: str
    shard: str
    number: int
    offset: int
    size: int


class Fields(NamedTuple):
    """What a page shows of one record; `image` only when it was read whole."""

    label: int | None
    synset: str
    text: str
    filename: str
    width: int | None
    height: int | None
    boxes: list[tuple[float, float, float, float]]  # xmin, ymin, xmax, ymax, relative
    encoded_bytes: int
    image: bytes | None


class RecordError(ValueError):
    """A record that is not what its index entry says, or not an Example this page can read."""


class Shards:
    """A build's records in order (its splits' shards by name, each shard's records by index), addressed by
    one number 0..total-1. A shard whose index does not cover it is left out and named in `problems`."""

    def __init__(self, build: BuildFolder, splits: list[str]) -> None:
        self.places: list[tuple[str, str, list[tuple[int, int]]]] = []  # (path, name, index entries)
        self.problems: list[tuple[str, str]] = []  # (file, what is wrong)
        self.starts: list[int] = []
        self.split_records = {split: 0 for split in splits}  # by the indexes (shards whose index is refused: none)
        total = 0
        for split in splits:
            for shard in build.indexed(split):  # each index checked against its shard, as every reader checks it
                if shard.entries is None:
                    self.problems.append((storage.basename(shard.path), shard.problem))
                    continue
                self.places.append((shard.path, storage.basename(shard.path), shard.entries))
                self.starts.append(total)
                self.split_records[split] += len(shard.entries)
                total += len(shard.entries)
        self.total = total

    def records(self) -> dict[str, int]:
        """{shard name: its records, by its index} of each shard whose index covers it."""
        return {name: len(entries) for _, name, entries in self.places}

    def place(self, k: int) -> Place:
        """The k-th record of the build."""
        at = bisect.bisect_right(self.starts, k) - 1
        path, name, entries = self.places[at]
        number = k - self.starts[at]
        offset, size = entries[number]
        return Place(path, name, number, offset, size)

    def find(self, shard: str, number: int) -> Place | None:
        """The record `number` of the shard named `shard`, where its index lists it."""
        for path, name, entries in self.places:
            if name == shard and 0 <= number < len(entries):
                return Place(path, name, number, *entries[number])
        return None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise RecordError("a length runs past the bytes read")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


class _Payload:
    """A record's payload, read where asked: from the head and tail read first, else one read more."""

    def __init__(self, f: IO[bytes], start: int, length: int, whole: bytes | None) -> None:
        self.f, self.start, self.length = f, start, length
        if whole is not None:
            self.head, self.tail_at, self.tail = whole, length, b""
        elif length <= HEAD + TAIL:
            self.head, self.tail_at, self.tail = self._read(0, length), length, b""
        else:
            self.head, self.tail_at = self._read(0, HEAD), length - TAIL
            self.tail = self._read(self.tail_at, TAIL)

    def _read(self, at: int, n: int) -> bytes:
        self.f.seek(self.start + at)
        data = self.f.read(n)
        if len(data) != n:
            raise RecordError("the shard ends inside the record")
        return data

    def get(self, at: int, n: int) -> bytes:
        n = max(0, min(n, self.length - at))
        if at + n <= len(self.head):
            return self.head[at:at + n]
        if at >= self.tail_at:
            return self.tail[at - self.tail_at:at - self.tail_at + n]
        return self._read(at, n)


def _encoded_value(entry: bytes) -> tuple[int, int]:
    """(offset in the entry, length) of the image bytes, from an image/encoded map entry's first bytes:
    its key, then its Feature's bytes_list holding one value."""
    pos = 0
    for tag in (0x0A, 0x12, 0x0A, 0x0A):
        if pos >= len(entry) or entry[pos] != tag:
            raise RecordError("image/encoded is not one bytes value")
        length, pos = _varint(entry, pos + 1)
        if pos == 2:  # the key: stepped over
            pos += length
    return pos, length


def _entries(payload: _Payload, with_image: bool) -> tuple[bytes, int, bytes | None]:
    """(the Features message without image/encoded, the image's length, the image when asked)."""
    first = payload.get(0, 11)
    if first[:1] != b"\x0a":
        raise RecordError("not a tf.train.Example")
    top, pos = _varint(first, 1)
    if pos + top != payload.length:
        raise RecordError("not a tf.train.Example")
    kept: list[bytes] = []
    encoded_len, image = 0, None
    end = payload.length
    while pos < end:
        head = payload.get(pos, 48)
        if head[:1] != b"\x0a":
            raise RecordError("not a tf.train.Example")
        length, body = _varint(head, 1)
        body += pos
        if body + length > end:
            raise RecordError("a feature runs past the record")
        if head[body - pos:body - pos + 2 + len(_ENCODED)] == b"\x0a" + bytes([len(_ENCODED)]) + _ENCODED:
            at, encoded_len = _encoded_value(head[body - pos:])
            image = payload.get(body + at, encoded_len) if with_image else None
        else:
            kept.append(payload.get(pos, body - pos + length))
        pos = body + length
    return b"".join(kept), encoded_len, image


def _one(fields: dict[str, list], key: str, default: object = None) -> object:
    values = fields.get(key) or [default]
    return values[0]


def read_fields(f: IO[bytes], place: Place, with_image: bool = False) -> Fields:
    """One record's fields; with_image: read whole, its CRCs checked, the image kept. RecordError when the
    bytes are not the record the index says or not an Example."""
    if place.size < OVERHEAD:
        raise RecordError(f"an index entry of {place.size} bytes")
    whole = None
    if with_image:
        f.seek(place.offset)
        try:
            whole = unframe(f.read(place.size))
        except FramingError as e:
            raise RecordError(e.message) from None
    payload = _Payload(f, place.offset + HEADER_SIZE, place.size - OVERHEAD, whole)
    features, encoded_len, image = _entries(payload, with_image)
    try:
        fields = decode_example(b"\x0a" + varint(len(features)) + features)
    except Exception as e:  # protobuf raises its own DecodeError types
        raise RecordError(f"not a tf.train.Example ({e})") from None
    boxes = list(zip(*(fields.get(f"image/object/bbox/{c}", []) for c in ("xmin", "ymin", "xmax", "ymax"))))
    label = _one(fields, "image/class/label")
    width, height = _one(fields, "image/width"), _one(fields, "image/height")
    return Fields(
        label=label if isinstance(label, int) else None,
        synset=_text(_one(fields, "image/class/synset", b"")),
        text=_text(_one(fields, "image/class/text", b"")),
        filename=_text(_one(fields, "image/filename", b"")),
        width=width if isinstance(width, int) else None,
        height=height if isinstance(height, int) else None,
        boxes=[tuple(float(v) for v in box) for box in boxes],  # type: ignore[misc]
        encoded_bytes=encoded_len,
        image=image,
    )


def _label_in(head: bytes) -> int | None:
    """The label, from a record's first bytes: its map entries walked up to image/class/label, whose Feature
    holds one packed int64; None where the bytes are not that (the whole Example is parsed then, and says why
    where it is no Example). RecordError for a length that runs past the bytes."""
    if head[:1] != b"\x0a":
        return None
    _, pos = _varint(head, 1)
    while pos < len(head) and head[pos] == 0x0A:
        length, body = _varint(head, pos + 1)
        end = body + length
        if head[body:body + 1] != b"\x0a" or end > len(head):
            return None
        key_length, key_at = _varint(head, body + 1)
        if head[key_at:key_at + key_length] == _LABEL:
            value = head[key_at + key_length:end]
            at = 0
            for tag in (0x12, 0x1A, 0x0A):  # Feature.value, Feature.int64_list, Int64List.value (packed)
                if value[at:at + 1] != bytes([tag]):
                    return None
                _, at = _varint(value, at + 1)
            label, at = _varint(value, at)
            return label if at == len(value) else None
        pos = end
    return None


def read_label(f: IO[bytes], place: Place) -> int | None:
    """A record's label, from its first LABEL_HEAD bytes where it lies there (slim's key order), else from
    its fields; RecordError as read_fields."""
    if place.size < OVERHEAD:
        raise RecordError(f"an index entry of {place.size} bytes")
    f.seek(place.offset + HEADER_SIZE)
    try:
        label = _label_in(f.read(min(LABEL_HEAD, place.size - OVERHEAD)))
    except RecordError:  # a length running past the bytes read: the record is parsed whole
        label = None
    return read_fields(f, place).label if label is None else label


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def open_shard(path: str) -> IO[bytes]:
    """A shard opened for reads at offsets (local, or an object store's ranged reads)."""
    if storage.is_url(path):
        return read_door.open_read(path, random_access=True)
    return read_door.open_read(path, buffering=0)
