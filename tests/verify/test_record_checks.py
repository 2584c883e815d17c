"""Each record check on records made here, one fault a record, held to its exact message (a check that still
fails the record but says the wrong thing, or says nothing useful, fails here)."""

import io

import pytest
from PIL import Image

from helpers import encode_example
from imagenet_build.format.record_schema import example_message_class
from imagenet_build.verify.record import Record
from imagenet_build.verify.record_checks import Crc, Decode, Example, ExifOrientation, Readers
from jpeg_cases import CASES, SIZE, with_exif_orientation
from png_cases import DAMAGED, SOUND

FIELDS = dict(filename="a.jpg", label=3, synset="n00000003", text="three")


def image(width, height, fmt="JPEG"):
    """An image of smooth colours, width x height, as Pillow writes it."""
    out = io.BytesIO()
    Image.linear_gradient("L").convert("RGB").resize((width, height)).save(out, format=fmt)
    return out.getvalue()


def record(encoded=None, width=16, height=8, boxes=(), image_format=b"JPEG", crc_ok=True, edits=None):
    """A record of the image (by default a 16x8 JPEG) with slim's fields, `edits` then set in its Example
    ({key: [values]}, the key's kind kept)."""
    encoded = image(16, 8) if encoded is None else encoded
    payload = encode_example(encoded=encoded, width=width, height=height, boxes=boxes, image_format=image_format,
                             **FIELDS)
    if edits:
        example = example_message_class()()
        example.ParseFromString(payload)
        for key, values in edits.items():
            feature = example.features.feature[key]
            getattr(feature, feature.WhichOneof("kind")).value[:] = values
        payload = example.SerializeToString(deterministic=True)
    return Record(0, 0, payload, crc_ok)


def problems(check, rec):
    return list(check().run_record(rec))


def test_a_sound_record_passes_every_check_down_to_one_pixel_sides():
    assert problems(Example, record()) == [] and problems(Crc, record()) == []
    assert problems(Example, record(image(1, 1), width=1, height=1)) == []  # sides of 1 are positive
    assert problems(Example, record(image(16, 8, "PNG"), image_format=b"PNG")) == []  # write_arrays' lossless PNG


def test_a_payload_whose_crc_fails_is_named_as_corrupt():
    assert problems(Crc, record(crc_ok=False)) == ["payload CRC32C mismatch (corrupt record)"]


@pytest.mark.parametrize("edits, expected", [
    ({"image/colorspace": [b"BGR"]}, "image/colorspace is b'BGR', expected b'RGB'"),
    ({"image/channels": [1]}, "image/channels is 1, expected 3"),
    ({"image/format": [b"GIF"]}, "image/format is b'GIF', expected b'JPEG' (or b'PNG')"),
    ({"image/filename": [b""]}, "image/filename is empty"),
    ({"image/class/synset": [b""]}, "image/class/synset is empty"),
    ({"image/height": [9]}, "JPEG header says 16x8, record says 16x9"),
    ({"image/width": [8]}, "JPEG header says 16x8, record says 8x8"),
])
def test_each_wrong_value_is_named(edits, expected):
    assert problems(Example, record(edits=edits)) == [expected]


@pytest.mark.parametrize("encoded, image_format, expected", [
    (image(16, 8, "PNG"), b"JPEG", "image/encoded is not a JPEG image"),
    (b"not an image at all", b"PNG", "image/encoded is not a PNG image"),
    (image(16, 8)[:-300], b"JPEG", "image/encoded is a broken JPEG: truncated in the header"),
    (image(16, 8)[:-2], b"JPEG", "truncated JPEG: no end-of-image marker after the image data"),  # convert refuses
])
def test_an_image_not_of_its_format_is_named(encoded, image_format, expected):
    assert problems(Example, record(encoded, image_format=image_format)) == [expected]


def test_a_format_that_is_not_text_is_shown_as_far_as_it_reads():
    found = problems(Example, record(b"not an image at all", image_format=b"\xffIF"))
    assert found == [r"image/format is b'\xffIF', expected b'JPEG' (or b'PNG')",
                     "image/encoded is not a \ufffdIF image"]


@pytest.mark.parametrize("boxes, edits, expected", [
    ([(0.1, 0.2, 0.3, 0.4)], {"image/object/bbox/label": []}, "bbox lists of different lengths"),
    ([(0.1, 0.2, 0.3, 0.4)], {"image/object/bbox/label": [4]}, "bbox/label differs from the class label"),
    ([(0.3, 0.2, 0.1, 0.4)], {}, "bbox with xmin > xmax or ymin > ymax"),
    ([(0.1, 0.4, 0.3, 0.2)], {}, "bbox with xmin > xmax or ymin > ymax"),
    ([(0.1, 0.2, 0.3, 0.4), (0.5, 0.5, 0.5, 0.5)], {}, None),  # a box of no width or height is in order
])
def test_each_box_fault_is_named(boxes, edits, expected):
    """(xmin, ymin, xmax, ymax) boxes of the record's own label (3) unless edited."""
    assert problems(Example, record(boxes=boxes, edits=edits)) == ([expected] if expected else [])


def test_deep_decode_names_the_decoded_and_the_recorded_size():
    assert problems(Decode, record()) == []
    assert problems(Decode, record(height=9)) == ["image is 16x8, record says 16x9"]
    (found,) = problems(Decode, record(image(16, 8)[:200]))
    assert found.startswith("image does not decode: "), found


def of_case(case, **kwargs):
    """A record of one of jpeg_cases' JPEGs, its size the record's."""
    return record(CASES[case][0], width=SIZE[0], height=SIZE[1], **kwargs)


@pytest.mark.parametrize("case, expected", [
    ("junk before DQT", "extraneous bytes before a header marker at byte 20 of image/encoded: DALI's parser stops on "
                        "it (\"Invalid marker\"); libjpeg skips them (convert re-encodes such an image)"),
    ("CMYK", "CMYK JPEG (its frame header at byte 87 of image/encoded): slim's rule re-encodes these as RGB "
             "(convert re-encodes such an image)"),
    ("baseline", None),
    ("truncated scan", None),  # refused: the example check's to name
])
def test_a_stored_jpeg_convert_would_reencode_is_named_with_where_and_why(case, expected):
    assert problems(Readers, of_case(case)) == ([expected] if expected else [])


def test_readers_and_exif_orientation_pass_what_is_no_jpeg_or_no_record():
    for rec in (record(image(16, 8, "PNG"), image_format=b"PNG"), record(crc_ok=False),
                record(b"not an image", image_format=b"PNG")):
        assert problems(Readers, rec) == [] and problems(ExifOrientation, rec) == []
    assert problems(ExifOrientation, record(image(16, 8)[:-300])) == []  # no header to read EXIF from


@pytest.mark.parametrize("orientation, turned", [(1, None), (4, "its pixels"), (5, "its shape and pixels"),
                                                 (8, "its shape and pixels")])
def test_an_exif_orientation_is_a_warning_saying_what_the_decoders_disagree_about(orientation, turned):
    rec = record(with_exif_orientation(CASES["baseline"][0], orientation), width=SIZE[0], height=SIZE[1])
    expected = (f"EXIF orientation {orientation}: DALI's decoder applies it and TensorFlow's does not, so they "
                f"disagree about {turned} (convert --resize ... --exif-transpose, or --resize-all, stores it upright "
                "or without EXIF)")
    assert problems(ExifOrientation, rec) == ([expected] if turned else [])


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_stored_png_a_decoder_cannot_read_is_named_by_the_readers_check(case):
    """verify called every PNG sound whatever its chunks held (its first 8 bytes were all it looked at): now a PNG
    the rule refuses is a readers problem naming what is wrong, where, and who cannot read it; the example check
    leaves it to that check."""
    data, words, libpng_reads = DAMAGED[case]
    rec = record(data, width=30, height=21, image_format=b"PNG")
    (found,) = problems(Readers, rec)
    who = ("Pillow, which the PyTorch reader decodes PNGs with, refuses it; TensorFlow's and DALI's decoders read it"
           if libpng_reads else "TensorFlow's and DALI's decoders stop on it (torchvision's crashes on some), and "
                                "the PyTorch reader refuses it")
    assert found.startswith(words) and found.endswith(f": {who}"), found
    assert problems(Example, rec) == []


@pytest.mark.parametrize("case", list(SOUND))
def test_every_sound_png_passes_and_its_header_is_held_to_the_records_size(case):
    assert problems(Readers, record(SOUND[case], width=30, height=21, image_format=b"PNG")) == []
    assert problems(Example, record(SOUND[case], width=30, height=21, image_format=b"PNG")) == []
    assert problems(Example, record(SOUND[case], width=30, height=20, image_format=b"PNG")) == [
        "PNG header says 30x21, record says 30x20"]
