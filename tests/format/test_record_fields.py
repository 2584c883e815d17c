"""A record's fields read around its image (format/record_fields.py) are protobuf's own: on every record convert
writes (with boxes, ReaL labels, a PNG, a long file name) and on thousands of payloads damaged or reshaped here
(bytes flipped, cut, put in; an entry repeated, moved or of another kind; a field protobuf skips), the fields or
the error are the whole parse's; verify's record (verify/record.py) is the same either way."""

import random
import struct

import pytest

from helpers import encode_example
from imagenet_build.format import record_fields
from imagenet_build.format.record_schema import example_message_class
from imagenet_build.verify import record as verify_record
from imagenet_build.verify.record import Record

IMAGE = b"\xff\xd8" + bytes(range(256)) * 40 + b"\xff\xd9"


def _example(**more):
    fields = dict(encoded=IMAGE, filename="n01440764_10026.JPEG", height=375, width=500, label=1,
                  synset="n01440764", text="tench, Tinca tinca")
    return encode_example(**{**fields, **more})


RECORDS = {
    "plain": _example(),
    "boxes": _example(boxes=[(0.1, 0.2, 0.5, 0.6), (0.0, 0.0, 1.0, 1.0)]),
    "ReaL labels": _example(real_labels=[1, 5, 999]),
    "no ReaL label": _example(real_labels=[]),
    "a PNG": _example(image_format=b"PNG", filename="train_00000001.png"),
    "a long file name": _example(filename="x" * 300 + ".JPEG"),
    "a large label and size": _example(label=70000, height=65500, width=1),
    "an empty image": _example(encoded=b""),
    "a small image": _example(encoded=b"\xff\xd8\xff\xd9"),
}


def protobufs(payload):
    """(kinds, lists) of the whole parse, or its error."""
    try:
        example = example_message_class()()
        example.ParseFromString(payload)
    except Exception as e:
        return f"error: {e}"
    entries = record_fields._entries(example.features)
    return {k: kind for k, kind, _ in entries}, {k: values for k, _, values in entries}


def ours(payload):
    try:
        return record_fields.example_fields(payload)
    except Exception as e:
        return f"error: {e}"


def _entry(key, feature):
    key_field = b"\x0a" + bytes([len(key)]) + key.encode()
    body = key_field + b"\x12" + bytes([len(feature)]) + feature
    return b"\x0a" + bytes([len(body)]) + body


def _with_entry(payload, entry, at_end=True):
    """payload with one more map entry (at the end, or first), its Features length made right."""
    length, start = record_fields._varint_at(payload, 1)
    features = payload[start:] + entry if at_end else entry + payload[start:]
    out = bytearray(b"\x0a")
    n = len(features)
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out) + bytes([n]) + features


def reshaped():
    """(name, payload) of every record reshaped in ways a writer other than convert might."""
    height_twice = _entry("image/height", b"\x1a\x03\x0a\x01\x07")  # int64_list [7]
    for name, payload in RECORDS.items():
        yield name, payload
        yield f"{name}, image/height again at the end", _with_entry(payload, height_twice)
        yield f"{name}, image/height again first", _with_entry(payload, height_twice, at_end=False)
        yield f"{name}, image/encoded again", _with_entry(payload, _entry("image/encoded", b"\x0a\x03\x0a\x01z"))
        yield f"{name}, image/filename again", _with_entry(payload, _entry("image/filename", b"\x0a\x03\x0a\x01z"))
        yield f"{name}, a key of no schema", _with_entry(payload, _entry("other", b"\x12\x00"))
        yield f"{name}, a feature of no list", _with_entry(payload, _entry("image/width", b""))
        yield f"{name}, a field protobuf skips", payload + b"\x10\x01"
        yield f"{name}, features twice", payload + payload
        yield f"{name}, nothing but its features", payload[payload.index(b"\x0a", 1):]


def damaged(payload, rng, count):
    for _ in range(count):
        at = rng.randrange(len(payload))
        kind = rng.randrange(4)
        if kind == 0:
            yield payload[:at] + bytes([payload[at] ^ (1 << rng.randrange(8))]) + payload[at + 1:]
        elif kind == 1:
            yield payload[:at]
        elif kind == 2:
            yield payload[:at] + bytes([rng.randrange(256)]) + payload[at:]
        else:  # in the heads, where the lengths are
            head = min(at, 400) if at < len(payload) // 2 else len(payload) - 1 - min(len(payload) - 1 - at, 200)
            yield payload[:head] + bytes([rng.randrange(256)]) + payload[head + 1:]


def test_every_record_convert_writes_is_read_around_its_image():
    for name, payload in RECORDS.items():
        assert record_fields.split_record(payload) is not None, name
        assert ours(payload) == protobufs(payload), name


@pytest.mark.parametrize("name, payload", list(reshaped()), ids=lambda v: v if isinstance(v, str) else "")
def test_a_reshaped_record_reads_as_protobuf_reads_it(name, payload):
    assert ours(payload) == protobufs(payload)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_a_damaged_record_reads_as_protobuf_reads_it(name):
    rng = random.Random(name)
    differ = [(bytes_[:80], ours(bytes_), protobufs(bytes_))
              for bytes_ in damaged(RECORDS[name], rng, 600) if ours(bytes_) != protobufs(bytes_)]
    assert not differ, differ[:3]


def _records(payload, monkeypatch):
    """verify's record of a payload read around its image, and read whole."""
    fast = Record(0, 0, payload, True)
    with monkeypatch.context() as patched:
        patched.setattr(verify_record, "split_record", lambda payload: None)
        whole = Record(0, 0, payload, True)
    return [(r.readable, r.unreadable, r.one, r.lists, r.kinds) for r in (fast, whole)]


def test_verifys_record_is_the_same_read_around_its_image_or_whole(monkeypatch):
    rng = random.Random(7)
    payloads = [p for _, p in reshaped()] + [d for p in RECORDS.values() for d in damaged(p, rng, 100)]
    payloads.append(RECORDS["plain"].replace(struct.pack("B", 3) + b"RGB", struct.pack("B", 3) + b"BGR"))
    readable = 0
    for payload in payloads:
        fast, whole = _records(payload, monkeypatch)
        assert fast == whole, payload[:80]
        readable += fast[0]
    assert 20 < readable < len(payloads)  # both kinds met

