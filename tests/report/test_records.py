"""report/records.py on records made here, byte by byte: what a record's head and tail give, how much is read,
and each way a record can fail to be what its index says — each a RecordError in words, never a wrong field."""

import io
import os

import pytest

from helpers import encode_example
from imagenet_build.format.build_folder import BuildFolder
from imagenet_build.format.dali_index import index_text
from imagenet_build.format.record_schema import example_message_class, varint
from imagenet_build.format.tfrecord import OVERHEAD, frame
from imagenet_build.report.records import (
    HEAD,
    LABEL_HEAD,
    TAIL,
    Fields,
    Place,
    RecordError,
    Shards,
    open_shard,
    read_fields,
    read_label,
)

BOXES = [(0.125, 0.25, 0.5, 0.75), (0.0, 0.5, 1.0, 1.0)]


def payload(image=b"\xff\xd8 an image \xff\xd9", label=7, synset="n01440764", text="tench, Tinca tinca",
            filename="n01440764_1.JPEG", boxes=BOXES, **more):
    return encode_example(encoded=image, filename=filename, height=30, width=40, label=label, synset=synset,
                          text=text, boxes=boxes, **more)


class Counted(io.BytesIO):
    """An in-memory shard that counts its reads and the bytes they return."""

    def __init__(self, data):
        super().__init__(data)
        self.reads, self.read_bytes = 0, 0

    def read(self, n=-1):
        data = super().read(n)
        self.reads += 1
        self.read_bytes += len(data)
        return data


def shard_of(*payloads, lead=b""):
    """(the shard's bytes, a Place per record) of framed payloads, after `lead` bytes."""
    data, places = lead, []
    for number, body in enumerate(payloads):
        head, foot = frame(body)
        places.append(Place("shard", "train-00000-of-00001", number, len(data), OVERHEAD + len(body)))
        data += head + body + foot
    return data, places


def fields_of(body, with_image=False, lead=b""):
    data, (place,) = shard_of(body, lead=lead)
    f = Counted(data)
    return read_fields(f, place, with_image=with_image), f


# ------------------------------------------------------------------ what a record gives


@pytest.mark.parametrize("image_size", [10, HEAD + TAIL - 300, HEAD + TAIL + 1, 50_000])
@pytest.mark.parametrize("lead", [b"", bytes(37)])
def test_the_fields_are_the_records_and_only_head_and_tail_are_read(image_size, lead):
    image = bytes(range(256)) * (image_size // 256) + bytes(image_size % 256)
    body = payload(image=image)
    fields, f = fields_of(body, lead=lead)
    assert fields == Fields(7, "n01440764", "tench, Tinca tinca", "n01440764_1.JPEG", 40, 30, BOXES, len(image), None)
    if len(body) <= HEAD + TAIL:
        assert (f.reads, f.read_bytes) == (1, len(body))  # one read of the whole payload
    else:
        assert (f.reads, f.read_bytes) == (2, HEAD + TAIL)  # its head and its tail, nothing between
    whole, f = fields_of(body, with_image=True, lead=lead)
    assert whole == fields._replace(image=image) and f.read_bytes == len(body) + OVERHEAD


def test_a_tail_past_the_bytes_read_is_read_where_it_is():
    """A record whose keys after the image run longer than the tail read: what lies between is read once more."""
    name = "x" * 3000 + ".JPEG"
    body = payload(image=bytes(5000), filename=name)
    fields, f = fields_of(body)
    assert fields.filename == name and fields.encoded_bytes == 5000
    entry = len(b"\x0a\x0eimage/filename\x12\x8f\x17\x0a\x8c\x17\x0a\x89\x17") + len(name)
    assert f.reads == 4  # the head, the tail, then the file name's entry: its first 48 bytes, and whole
    assert f.read_bytes == HEAD + TAIL + 48 + 2 + 1 + entry  # the entry with its tag and length


def test_a_head_past_the_bytes_read_is_read_where_it_is():
    """A class text longer than the head read: the key runs past it, and is read whole from the shard."""
    text = "y" * 1500
    fields, f = fields_of(payload(image=bytes(5000), text=text))
    assert fields.text == text and fields.filename == "n01440764_1.JPEG"
    assert f.reads == 6  # head, tail; the text's entry whole; the next entry's first bytes and whole; the image's


def test_a_payload_of_exactly_head_and_tail_is_one_read_and_an_entry_at_the_tails_start_is_the_tails():
    size = next(k for k in range(2000) if len(payload(image=bytes(k))) == HEAD + TAIL)
    fields, f = fields_of(payload(image=bytes(size)))
    assert fields.encoded_bytes == size and (f.reads, f.read_bytes) == (1, HEAD + TAIL)
    def entry_start(body):  # the file name's map entry: its tag, its length (2 bytes), then its key
        at = body.index(b"\x0a\x0eimage/filename") - 3
        assert body[at] == 0x0A
        return at

    name = next("n" * k + ".JPEG" for k in range(500, 1100)
                if len(body := payload(image=bytes(5000), filename="n" * k + ".JPEG")) - entry_start(body) == TAIL)
    body = payload(image=bytes(5000), filename=name)
    fields, f = fields_of(body)
    assert fields.filename == name and f.reads == 2


def test_a_length_of_ten_bytes_is_read_and_an_eleventh_is_refused():
    fields, _ = fields_of(b"\x0a" + b"\x80" * 9 + b"\x00")  # an Example of no feature, its length in 10 bytes
    assert fields == Fields(None, "", "", "", None, None, [], 0, None)


def test_a_label_read_from_the_first_bytes_alone():
    data, places = shard_of(payload(label=3), payload(label=300, image=bytes(9000)), payload(label=2 ** 40))
    f = Counted(data)
    for place, label in zip(places, (3, 300, 2 ** 40)):
        f.reads = f.read_bytes = 0
        assert read_label(f, place) == label
        assert f.reads == 1 and f.read_bytes == min(LABEL_HEAD, place.size - OVERHEAD)


def test_a_label_past_the_first_bytes_is_read_from_the_whole_head():
    """A text longer than LABEL_HEAD before the label (a build whose keys sort otherwise would do it too): the
    label is still the record's, from its fields."""
    example = example_message_class()()
    example.ParseFromString(payload(label=5))
    example.features.feature["image/class/a_long_key"].bytes_list.value.append(bytes(LABEL_HEAD))
    body = example.SerializeToString(deterministic=True)
    data, (place,) = shard_of(body)
    f = Counted(data)
    assert read_label(f, place) == 5 and f.reads > 1


def test_a_record_without_a_label_or_sizes_gives_none_and_texts_are_decoded_with_replacement():
    example = example_message_class()()
    example.ParseFromString(payload())
    for key in ("image/class/label", "image/width", "image/height", "image/object/bbox/xmin"):
        del example.features.feature[key]
    example.features.feature["image/class/text"].bytes_list.value[:] = [b"caf\xe9"]
    example.features.feature["image/class/synset"].int64_list.value[:] = [5]
    fields, _ = fields_of(example.SerializeToString(deterministic=True))
    assert (fields.label, fields.width, fields.height, fields.boxes) == (None, None, None, [])
    assert fields.text == "caf\ufffd" and fields.synset == "5"
    data, (place,) = shard_of(example.SerializeToString(deterministic=True))
    assert read_label(io.BytesIO(data), place) is None


def test_an_example_of_no_feature_and_one_whose_label_is_a_string():
    fields, _ = fields_of(b"\x0a\x00")
    assert fields == Fields(None, "", "", "", None, None, [], 0, None)
    example = example_message_class()()
    example.features.feature["image/class/label"].bytes_list.value.append(b"7")
    example.features.feature["image/width"].bytes_list.value.append(b"7")
    example.features.feature["image/height"].bytes_list.value.append(b"7")
    body = example.SerializeToString(deterministic=True)
    fields, _ = fields_of(body)
    assert (fields.label, fields.width, fields.height, fields.encoded_bytes, fields.image) == (None, None, None, 0,
                                                                                                 None)
    data, (place,) = shard_of(body)
    f = Counted(data)
    assert read_label(f, place) is None and f.reads > 1  # not a packed int64 in its head: read from its fields


def label_entry(*labels):
    packed = b"".join(varint(label) for label in labels)
    return b"\x0a\x11image/class/label\x12" + varint(len(packed) + 4) + b"\x1a" + varint(len(packed) + 2) + \
        b"\x0a" + varint(len(packed)) + packed


def synset_entry(synset=b"n01440764"):
    return b"\x0a\x12image/class/synset\x12" + varint(len(synset) + 4) + b"\x0a" + varint(len(synset) + 2) + \
        b"\x0a" + varint(len(synset)) + synset


def test_the_label_of_small_records_is_read_from_their_bytes_alone():
    """Records smaller than the first bytes read: only theirs are read (the next record lies after them), the
    label found where its entry ends them, none where they hold none."""
    bodies = [example_of(label_entry(9)), example_of(synset_entry()), example_of(label_entry(4), synset_entry()),
              example_of(synset_entry(), label_entry(6))]
    data, places = shard_of(*bodies)
    f = Counted(data)
    for place, label in zip(places, (9, None, 4, 6)):
        f.reads = f.read_bytes = 0
        assert read_label(f, place) == label == read_fields(io.BytesIO(data), place).label
        if label is not None:
            assert (f.reads, f.read_bytes) == (1, place.size - OVERHEAD)


def test_a_label_the_first_bytes_do_not_give_plainly_is_read_from_the_fields():
    """Two labels packed in the label's Feature, or an entry before it that is not laid out as protobuf writes
    it (its value before its key): the fields are parsed, and the label is theirs."""
    odd = b"\x12\x00\x0a\x01z"  # a map entry of key "z" and an empty Feature, its value first
    for body, label in ((example_of(label_entry(3, 4)), 3), (example_of(odd, label_entry(8)), 8)):
        data, (place,) = shard_of(body)
        f = Counted(data)
        assert read_label(f, place) == label and f.reads > 1


def test_an_image_of_no_bytes():
    fields, _ = fields_of(payload(image=b""), with_image=True)
    assert fields.image == b"" and fields.encoded_bytes == 0 and fields.filename == "n01440764_1.JPEG"


# ------------------------------------------------------------------ what is not a record


def damaged(body, at, value):
    return body[:at] + bytes([value]) + body[at + 1:]


def example_of(*entries):
    """An Example's bytes holding these map entries (each a Features.feature entry's body)."""
    features = b"".join(b"\x0a" + varint(len(entry)) + entry for entry in entries)
    return b"\x0a" + varint(len(features)) + features


@pytest.mark.parametrize("body, message, label_too", [
    (damaged(payload(), 0, 0x12), "not a tf.train.Example", True),  # a damaged first byte
    (b"", "not a tf.train.Example", True),  # no byte at all
    (payload()[:1] + varint(len(payload()) - 2 - 2) + payload()[3:], "not a tf.train.Example", False),  # top short
    (payload() + b"\x00", "not a tf.train.Example", False),  # a byte past the Example: its head still holds the label
    (b"\x0a\x05\x0a\x10abc", "a feature runs past the record", True),
    (b"\x0a\x02\x12\x00", "not a tf.train.Example", True),  # a map entry of another field
    (b"\x0a\x80", "a length runs past the bytes read", True),  # a varint cut short
    (b"\x0a" + b"\xff" * 10 + b"\x01", "a length runs past the bytes read", True),  # a varint past 64 bits
])
def test_bytes_that_are_no_example_are_a_record_error_naming_why(body, message, label_too):
    data, (place,) = shard_of(body)
    reads = [lambda f: read_fields(f, place), lambda f: read_fields(f, place, with_image=True)]
    for read in reads + ([lambda f: read_label(f, place)] if label_too else []):
        with pytest.raises(RecordError, match=f"^{message}"):
            read(io.BytesIO(data))


def test_image_encoded_that_is_not_one_bytes_value():
    example = example_message_class()()
    example.ParseFromString(payload())
    example.features.feature["image/encoded"].int64_list.value.append(1)
    body = example.SerializeToString(deterministic=True)
    with pytest.raises(RecordError, match="^image/encoded is not one bytes value$"):
        fields_of(body)
    encoded = b"\x0a\x0dimage/encoded"
    for value in (b"\x1a\x02\x0a\x00", b"\x12\x02\x12\x00", b"\x12\x02\x0a\x01\x12"):
        with pytest.raises(RecordError, match="^image/encoded is not one bytes value$"):
            fields_of(example_of(encoded + value))
    with pytest.raises(RecordError, match="^image/encoded is not one bytes value$"):
        fields_of(example_of(encoded))  # the key, and the record ends
    fields, _ = fields_of(example_of(encoded + b"\x12\x05\x0a\x03\x0a\x01Z"), with_image=True)
    assert (fields.image, fields.encoded_bytes) == (b"Z", 1)


def test_a_protobuf_that_does_not_parse_is_named():
    with pytest.raises(RecordError, match=r"^not a tf.train.Example \("):
        fields_of(example_of(b"\x0a\x03key\x12\x02\x0a\x05"))  # a Feature whose bytes_list runs past it


def test_an_index_entry_that_is_no_record():
    body = payload()
    data, (place,) = shard_of(body)
    for size in (0, OVERHEAD - 1):
        for read in (read_fields, read_label):
            with pytest.raises(RecordError, match=f"^an index entry of {size} bytes$"):
                read(io.BytesIO(data), place._replace(size=size))
    with pytest.raises(RecordError, match="^the shard ends inside the record$"):
        read_fields(io.BytesIO(data[:-5]), place._replace(size=place.size + 5000))
    with pytest.raises(RecordError, match="^the shard ends inside the record$"):
        read_fields(io.BytesIO(data[:OVERHEAD + 200]), place)
    with pytest.raises(RecordError, match="CRC"):  # read whole: both CRCs checked
        read_fields(io.BytesIO(damaged(data, 20, data[20] ^ 1)), place, with_image=True)
    with pytest.raises(RecordError):  # an entry one byte short is not the record
        read_fields(io.BytesIO(data), place._replace(size=place.size - 1), with_image=True)


# ------------------------------------------------------------------ a build's records by its indexes


def test_shards_number_the_records_across_shards_and_name_an_index_that_does_not_cover_its_shard(tmp_path):
    index = tmp_path / "dali_idx"
    index.mkdir()
    counts = {"train-00000-of-00002": 3, "train-00001-of-00002": 2, "validation-00000-of-00001": 1}
    for name, count in counts.items():
        data, places = shard_of(*[payload(label=k + 1) for k in range(count)])
        (tmp_path / name).write_bytes(data)
        (index / f"{name}.idx").write_text(index_text((p.offset, p.size) for p in places))
    (tmp_path / "test-00000-of-00001").write_bytes(b"")  # of no split asked for below: left out
    shards = Shards(BuildFolder.open(tmp_path, str(index)), ["train", "validation"])
    assert shards.total == 6 and shards.problems == [] and shards.starts == [0, 3, 5]
    assert shards.split_records == {"train": 5, "validation": 1}
    assert shards.records() == counts
    assert [(p.shard, p.number) for p in map(shards.place, range(6))] == [
        ("train-00000-of-00002", 0), ("train-00000-of-00002", 1), ("train-00000-of-00002", 2),
        ("train-00001-of-00002", 0), ("train-00001-of-00002", 1), ("validation-00000-of-00001", 0)]
    assert shards.place(4).path == str(tmp_path / "train-00001-of-00002")
    assert shards.find("train-00001-of-00002", 1) == shards.place(4)
    assert shards.find("train-00000-of-00002", 0) == shards.place(0)
    assert shards.find("train-00001-of-00002", 2) is None and shards.find("train-00001-of-00002", -1) is None
    assert shards.find("nothing", 0) is None
    (index / "train-00000-of-00002.idx").write_text("0 10\n")
    shards = Shards(BuildFolder.open(tmp_path, str(index)), ["validation", "train"])
    assert shards.total == 3 and shards.split_records == {"validation": 1, "train": 2}
    assert [name for name, _ in shards.problems] == ["train-00000-of-00002"]
    assert "train-00000-of-00002.idx" in shards.problems[0][1]
    assert shards.records() == {"validation-00000-of-00001": 1, "train-00001-of-00002": 2}


def test_open_shard_reads_at_offsets_from_a_file_and_refuses_a_fifo_unread(tmp_path):
    from imagenet_build.infra.read_door import NotRegularFile

    path = tmp_path / "shard"
    path.write_bytes(b"0123456789")
    with open_shard(str(path)) as f:
        f.seek(4)
        assert f.read(3) == b"456" and not isinstance(f, io.BufferedReader)  # unbuffered: no read-ahead
    os.mkfifo(tmp_path / "fifo")  # nobody writes to it: a read would wait forever
    with pytest.raises(NotRegularFile, match="fifo: not a regular file \\(a FIFO\\)"):
        open_shard(str(tmp_path / "fifo"))


def test_open_shard_reads_an_object_with_ranged_reads_alone(bucket):
    from imagenet_build.infra import write_door

    url = f"{bucket}/shard"
    write_door.write_bytes(url, b"0123456789")
    with open_shard(url) as f:
        f.seek(4)
        assert f.read(3) == b"456" and f.cache.name == "none"  # exactly the bytes asked, no read-ahead
