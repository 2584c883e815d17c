"""Record bytes against TensorFlow's own Example and TFRecord writer."""

import io

import pytest

from helpers import FRAMING_DAMAGE, GOOD, encode_example, record, with_length
from imagenet_build.encode import example
from imagenet_build.format import record_schema, tfrecord
from imagenet_build.format.record_schema import decode_example


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


def slim_example(tf, encoded, filename, height, width, label, synset, text, boxes, image_format=b"JPEG",
                 real_labels=None):
    """slim's _convert_to_example, verbatim in structure (and a --real-labels record's one more feature)."""
    xmin, ymin, xmax, ymax = [], [], [], []
    for b in boxes:
        for lst, point in zip([xmin, ymin, xmax, ymax], b):
            lst.append(point)

    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))

    def floats(v):
        return tf.train.Feature(float_list=tf.train.FloatList(value=v))

    def byts(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    real = {} if real_labels is None else {record_schema.REAL_LABELS: ints(real_labels)}
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                **real,
                "image/height": ints([height]),
                "image/width": ints([width]),
                "image/colorspace": byts(b"RGB"),
                "image/channels": ints([3]),
                "image/class/label": ints([label]),
                "image/class/synset": byts(synset.encode()),
                "image/class/text": byts(text.encode()),
                "image/object/bbox/xmin": floats(xmin),
                "image/object/bbox/xmax": floats(xmax),
                "image/object/bbox/ymin": floats(ymin),
                "image/object/bbox/ymax": floats(ymax),
                "image/object/bbox/label": ints([label] * len(xmin)),
                "image/format": byts(image_format),
                "image/filename": byts(filename.encode()),
                "image/encoded": byts(encoded),
            }
        )
    )


@pytest.mark.parametrize(
    "boxes",
    [(), ((0.1, 0.2, 0.3, 0.4),), ((0.0, 0.0, 1.0, 1.0), (0.1234, 0.5, 0.9876, 0.75), (0.3333, 0.1, 0.6667, 0.2))],
    ids=["no-box", "one-box", "three-boxes"],
)
def test_example_equals_slims_example(tf, boxes):
    args = dict(
        encoded=b"\xff\xd8" + bytes(range(256)) * 10,
        filename="n01440764_10026.JPEG",
        height=375,
        width=500,
        label=1,
        synset="n01440764",
        text="tench, Tinca tinca",
        boxes=boxes,
    )
    ours = encode_example(**args)
    theirs = slim_example(tf, **args)
    assert tf.train.Example.FromString(ours) == theirs
    assert ours == theirs.SerializeToString(deterministic=True)
    decoded = decode_example(ours)
    assert decoded["image/object/bbox/label"] == [1] * len(boxes)
    assert len(decoded) == 15


@pytest.mark.parametrize("real_labels", [(), (1,), (3, 250, 1000), (128, 16384, 2**40)],
                         ids=["none", "one", "three", "wide-varints"])
@pytest.mark.parametrize("label,synset,text", [(1, "n01440764", "tench, Tinca tinca"), (999, "n15075141", "t")])
def test_example_with_real_labels_equals_tensorflows(tf, real_labels, label, synset, text):
    """A --real-labels validation record: slim's 15 keys and image/class/real_labels (an empty list included),
    TensorFlow's bytes; the same class's record without it keeps its bytes."""
    args = dict(encoded=b"\xff\xd8" + bytes(range(256)) * 3, filename="ILSVRC2012_val_00000001.JPEG", height=375,
                width=500, label=label, synset=synset, text=text, boxes=())
    ours = encode_example(**args, real_labels=real_labels)
    theirs = slim_example(tf, **args, real_labels=real_labels)
    assert ours == theirs.SerializeToString(deterministic=True)
    decoded = decode_example(ours)
    assert decoded[record_schema.REAL_LABELS] == list(real_labels) and len(decoded) == 16
    assert encode_example(**args) == slim_example(tf, **args).SerializeToString(deterministic=True)


@pytest.mark.parametrize("image_format", [b"JPEG", b"PNG"])
def test_example_of_each_image_format_equals_tensorflows(tf, image_format):
    """write_arrays stores PNG: its image/format is PNG, and the rest of the record as for a JPEG."""
    args = dict(encoded=b"\x89PNG\r\n", filename="0.png", height=32, width=32, label=7, synset="n01443537",
                text="goldfish", boxes=(), image_format=image_format)
    ours = encode_example(**args)
    assert ours == slim_example(tf, **args).SerializeToString(deterministic=True)
    assert decode_example(ours)["image/format"] == [image_format]


ENTRY_VALUES = {
    "bytes": [(), (b"n01440764",), (b"a", b"", b"\x00\xff" * 70)],
    "float": [(), (0.5,), (0.0, 0.1234, 1.0, 0.75)],
    "int64": [(), (3,), (1, 128, -1, 2**63 - 1)],
}


@pytest.mark.parametrize("key", sorted(record_schema.SCHEMA))
def test_each_features_entry_equals_tensorflows(tf, key):
    """One map entry of Features, for every key with no value, one, several: TensorFlow's bytes. (An empty list is
    what a record without boxes holds; the encoder builds those entries once, when it is imported.)"""
    kind = record_schema.SCHEMA[key]
    for values in ENTRY_VALUES[kind]:
        value_list = getattr(tf.train, f"{kind.capitalize()}List")(value=values)  # BytesList, FloatList, Int64List
        feature = tf.train.Feature(**{record_schema.LIST_FIELD[kind]: value_list})
        theirs = tf.train.Features(feature={key: feature}).SerializeToString(deterministic=True)
        assert example._entry(key, values) == theirs, values


def test_decode_gives_no_values_for_a_feature_of_no_kind(tf):
    """A Feature with none of the three lists set (TensorFlow writes one) decodes to [], as an empty list does."""
    record = tf.train.Example(features=tf.train.Features(feature={
        "image/filename": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a.JPEG"])),
        "image/object/bbox/xmin": tf.train.Feature(float_list=tf.train.FloatList(value=[])),
        "image/text": tf.train.Feature(),
    })).SerializeToString()
    assert decode_example(record) == {"image/filename": [b"a.JPEG"], "image/object/bbox/xmin": [], "image/text": []}


VARINT_BOUNDARIES = [0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**63 - 1, -1, -(2**63)]


@pytest.mark.parametrize("value", VARINT_BOUNDARIES)
@pytest.mark.parametrize("key", ["height", "width", "label"])
def test_example_int64_at_every_varint_boundary_equals_tensorflows(tf, key, value):
    """A side of 127 is one varint byte, 128 two (16383/16384 two/three, ...), a negative int64 ten:
    TensorFlow's bytes at each, for a side and for a label (written twice: the class and a box's)."""
    args = dict(encoded=b"\xff\xd8", filename="a.JPEG", height=375, width=500, label=1, synset="n01440764",
                text="tench", boxes=((0.1, 0.2, 0.3, 0.4),))
    args[key] = value
    ours = encode_example(**args)
    assert ours == slim_example(tf, **args).SerializeToString(deterministic=True)
    assert decode_example(ours)[f"image/{'class/' if key == 'label' else ''}{key}"] == [value]


def test_example_lengths_at_every_varint_boundary_equal_tensorflows(tf):
    """The length of every length-delimited field around the image (its bytes, its Feature, its map entry, the
    Features) crosses 127/128 and 16383/16384 as the image grows."""
    args = dict(filename="a.JPEG", height=375, width=500, label=1, synset="n01440764", text="tench", boxes=())
    for size in (*range(0, 140), *range(16384 - 400, 16384 + 10)):
        encoded = bytes(range(256)) * (size // 256) + bytes(size % 256)
        ours = encode_example(encoded=encoded, **args)
        assert ours == slim_example(tf, encoded=encoded, **args).SerializeToString(deterministic=True), size


def test_framing_equals_tensorflow_writer(tf, tmp_path):
    payloads = [b"", b"a", bytes(range(256)) * 400, b"\x00" * 70000]
    ours = io.BytesIO()
    for p in payloads:
        head, foot = tfrecord.frame(p)
        ours.write(head + p + foot)
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for p in payloads:
            writer.write(p)
    assert ours.getvalue() == open(path, "rb").read()
    data = ours.getvalue()
    read = list(tfrecord.read_records(io.BytesIO(data), len(data)))
    assert [p for _, p, _ in read] == payloads and all(ok for _, _, ok in read)
    scanned = list(tfrecord.scan_lengths(io.BytesIO(data), len(data)))
    assert scanned == [(offset, len(p)) for offset, p, _ in read]


@pytest.mark.parametrize("name", list(FRAMING_DAMAGE))
def test_both_readers_refuse_broken_framing_naming_the_offset(name):
    data, offset, message = FRAMING_DAMAGE[name]
    for reader in (tfrecord.scan_lengths, tfrecord.read_records):
        with pytest.raises(tfrecord.FramingError, match=message) as info:
            list(reader(io.BytesIO(data), len(data)))
        assert info.value.offset == offset


EXACT_BREAKS = {  # (data, offset, the whole message) where the framing breaks
    "flipped length CRC": (bytes([GOOD[0] ^ 1]) + GOOD[1:], 0, "length CRC mismatch (corrupt record header)"),
    "sign bit set": (with_length(GOOD, -5), 0, "negative record length -5 (sign bit set)"),
    "length past the end": (with_length(GOOD, 10**6), 0,
                            "record of 1000000 bytes runs past the end of the file (51 bytes)"),
    "truncated last record": (GOOD[:-3], 21, "record of 14 bytes runs past the end of the file (48 bytes)"),
    "7 bytes after the last record": (GOOD + b"garbage", 51, "7 trailing byte(s) that are not a record"),
    "11 bytes after the last record": (GOOD + GOOD[:11], 51, "11 trailing byte(s) that are not a record"),
    # exactly a header left: read as one, the record it announces runs past the end
    "a header and nothing after it": (GOOD + GOOD[:12], 51,
                                      "record of 5 bytes runs past the end of the file (63 bytes)"),
}


@pytest.mark.parametrize("name", list(EXACT_BREAKS))
def test_both_readers_name_the_break_in_full(name):
    """The offset and the whole message (counts included) as a user reads them, from both readers."""
    data, offset, message = EXACT_BREAKS[name]
    for reader in (tfrecord.scan_lengths, tfrecord.read_records):
        with pytest.raises(tfrecord.FramingError) as info:
            list(reader(io.BytesIO(data), len(data)))
        assert (info.value.offset, info.value.message) == (offset, message)
        assert str(info.value) == f"byte {offset}: {message}"


def test_read_records_refuses_a_file_that_shrank_while_read():
    """A file one byte shorter than its size said when listed: the record cut short is named, not a struct error."""
    data = GOOD[:-1]
    reader = tfrecord.read_records(io.BytesIO(data), len(GOOD))
    assert next(reader)[:2] == (0, b"first")
    with pytest.raises(tfrecord.FramingError) as info:
        next(reader)
    assert (info.value.offset, info.value.message) == (21, "file shrank while being read")


class _CountingReads(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.reads: list = []

    def read(self, n=-1):
        self.reads.append(n)
        return super().read(n)


def test_scan_lengths_reads_only_the_headers():
    """Indexing a shard reads 12 bytes per record and seeks over the payloads (not the rest of the file)."""
    data = GOOD + record(bytes(5000))
    f = _CountingReads(data)
    assert list(tfrecord.scan_lengths(f, len(data))) == [(0, 5), (21, 14), (51, 5000)]
    assert f.reads == [12, 12, 12]


def test_flipped_payload_byte_is_a_crc_failure_of_that_record_only():
    data = bytearray(GOOD)
    data[14] ^= 0x20
    read = list(tfrecord.read_records(io.BytesIO(bytes(data)), len(data)))
    assert [ok for _, _, ok in read] == [False, True]


def test_unframe_gives_a_records_payload_or_says_why_not():
    """One record read at its index entry (the PyTorch reader's path): each fault named, CRCs optional."""
    first, second = GOOD[:21], GOOD[21:]
    assert tfrecord.unframe(first) == b"first" and tfrecord.unframe(second) == b"second payload"
    damaged_payload = first[:13] + bytes([first[13] ^ 1]) + first[14:]
    for data, message in ((first[:10], "10 bytes where a record needs at least 16"),
                          (first[:15], "15 bytes where a record needs at least 16"),
                          (first + b"xxxx", "the record is 5 bytes, its index entry says 9"),
                          (bytes([first[0] ^ 1]) + first[1:], "length CRC mismatch (corrupt record header)"),
                          (damaged_payload, "payload CRC mismatch (corrupt record)")):
        with pytest.raises(tfrecord.FramingError) as info:
            tfrecord.unframe(data)
        assert (info.value.offset, info.value.message) == (0, message)  # offset 0: the record's own start
    assert tfrecord.unframe(record(b"")) == b""  # 16 bytes: the smallest record, an empty payload
    assert tfrecord.unframe(damaged_payload, check_crc=False) == b"fhrst"  # unchecked: the bytes as they are
