"""The checks of each record's fields: crc, example, readers, decode, and the exif-orientation warning."""

from __future__ import annotations

import io
from typing import Iterable

from imagenet_build.encode.images import DALI_STOPS, REENCODE, REFUSE, consequence, png_consequence
from imagenet_build.encode.jpeg_header import JpegHeader, exif_orientation
from imagenet_build.format.record_schema import BOX_COORDS, BOX_LABEL, CONSTANTS, FORMATS
from imagenet_build.verify.check import Mode
from imagenet_build.verify.record import Record, RecordCheck


class Crc(RecordCheck):
    name, rank = "crc", 20
    covers = "payload CRC32C of every record"

    def run_record(self, record: Record) -> Iterable[str]:
        return () if record.crc_ok else ("payload CRC32C mismatch (corrupt record)",)


class Example(RecordCheck):
    name, rank = "example", 60
    covers = "every record a slim Example: 15 keys, their types, sane values"

    def run_record(self, record: Record) -> Iterable[str]:
        if not record.readable:
            return record.unreadable
        return _value_problems(record) + _encoded_problems(record) + _box_problems(record)


def _value_problems(record: Record) -> list[str]:
    """The single values: size, the constant fields, the format, the names."""
    found = []
    one = record.one
    height, width = one["image/height"], one["image/width"]
    if height <= 0 or width <= 0:
        found.append(f"height/width {height}x{width} not positive")
    for key, expected in CONSTANTS.items():
        if one[key] != expected:
            found.append(f"{key} is {one[key]!r}, expected {expected!r}")
    if one["image/format"] not in FORMATS:
        found.append(f"image/format is {one['image/format']!r}, expected b'JPEG' (or b'PNG')")
    for key in ("image/class/synset", "image/class/text", "image/filename"):
        if not one[key]:
            found.append(f"{key} is empty")
    return found


def _encoded_problems(record: Record) -> list[str]:
    """The image is of its format; its header agrees with the record's size, and convert would store a JPEG."""
    image_format = record.one["image/format"]
    height, width = record.one["image/height"], record.one["image/width"]
    decision = record.decision
    if decision is None:
        verdict = record.png
        if image_format != b"PNG" or verdict is None:
            return [f"image/encoded is not a {image_format.decode(errors='replace')} image"]
        size = (verdict.header.height, verdict.header.width) if verdict.header else (height, width)
        if size != (height, width):  # a PNG the readers cannot read is the readers check's
            return [f"PNG header says {size[1]}x{size[0]}, record says {width}x{height}"]
        return []
    header = decision.header
    if header is None:
        return [f"image/encoded is a {decision.reason}"]
    found = []
    if (header.height, header.width) != (height, width):
        found.append(f"JPEG header says {header.width}x{header.height}, record says {width}x{height}")
    if decision.action == REFUSE:
        found.append(decision.reason)
    return found


def _box_problems(record: Record) -> list[str]:
    """The box lists: one length, values in [0, 1], the class's label, corners in order."""
    boxes = [record.lists[key] for key in BOX_COORDS]
    box_labels = record.lists[BOX_LABEL]
    if not box_labels and not any(boxes):  # no box: most records
        return []
    if len({len(b) for b in boxes} | {len(box_labels)}) != 1:
        return ["bbox lists of different lengths"]
    if any(not 0.0 <= v <= 1.0 for column in boxes for v in column):
        return ["bbox value outside [0, 1]"]
    label = record.one["image/class/label"]
    if any(v != label for v in box_labels):
        return ["bbox/label differs from the class label"]
    if any(xmin > xmax or ymin > ymax for xmin, ymin, xmax, ymax in zip(*boxes)):
        return ["bbox with xmin > xmax or ymin > ymax"]
    return []


class Readers(RecordCheck):
    """A stored image a decoder we serve cannot read as it is: a JPEG convert would re-encode, a PNG the rule
    refuses (encode/images.py, for both)."""

    name, rank = "readers", 70
    covers = ("every image one every reader reads: a JPEG convert stores untouched (TensorFlow's, DALI's and "
              "torchvision's decoders), a PNG whole")

    def run_record(self, record: Record) -> Iterable[str]:
        if not record.readable:
            return ()
        verdict = record.png
        if verdict is not None and verdict.problem:
            return (f"{verdict.problem}: {png_consequence(verdict)}",)
        decision = record.decision
        if decision is None or decision.action != REENCODE:
            return ()
        at = f"byte {decision.at} of image/encoded"
        where = f"at {at}" if decision.reason in DALI_STOPS else f"(its frame header at {at})"
        return (f"{decision.reason} {where}: {consequence(decision.reason)} (convert re-encodes such an image)",)


class Decode(RecordCheck):
    name, rank = "decode", 90
    covers = "every image decodes to its recorded height and width (--deep)"

    @classmethod
    def runs(cls, mode: Mode) -> bool:
        return mode.deep

    def run_record(self, record: Record) -> Iterable[str]:
        if not record.readable:
            return ()
        frame = record.decision.header if record.decision is not None else None
        problem = decode_problem(record.one["image/encoded"], record.one["image/height"], record.one["image/width"],
                                 frame)
        return (problem,) if problem else ()


SCALED_FRAMES = {0xC0, 0xC1, 0xC2, 0xC9, 0xCA}  # DCT frames, Huffman or arithmetic: what libjpeg decodes scaled


def decode_problem(encoded: bytes, height: int, width: int, frame: JpegHeader | None = None) -> str:
    """Why Pillow cannot decode an image to the recorded size, or "". `frame`: a JPEG's frame header as libjpeg
    reads it (jpeg_header.walk's), None for any other image.

    A JPEG is decoded at libjpeg's 1/8 scale (Pillow's draft): libjpeg still reads and entropy-decodes every
    byte of every scan, with the same suspending source, so it stops where a full decode stops (data that
    ends early, an error in a header or a scan) and steps over what a full decode steps over (its warnings);
    only the inverse DCT (each block's DC alone), the upsampling and the colour conversion shrink, to 1/64 of
    the pixels. Only a DCT frame whose size Pillow read as libjpeg reads it: libjpeg decodes a lossless
    JPEG at full size whatever the scale asked, into Pillow's buffer of the scaled size. Its size is the frame
    header's, which a full decode reports. Anything else decodes in full.
    """
    from PIL import Image

    try:
        with Image.open(io.BytesIO(encoded)) as image:
            size = image.size
            scaled = (frame is not None and frame.sof in SCALED_FRAMES and (frame.width, frame.height) == size
                      and image.draft(None, (1, 1)) is not None)
            if scaled:  # libjpeg handed the bytes at once, not 64 KB at a time: it suspends where it would anyway
                image.decodermaxblock = len(encoded) + 1
            image.load()
            if not scaled:
                size = image.size
    except Exception as e:  # Pillow raises many kinds for a broken image
        return f"image does not decode: {e}"
    if size != (width, height):
        return f"image is {size[0]}x{size[1]}, record says {width}x{height}"
    return ""


class ExifOrientation(RecordCheck):
    name, rank, warning = "exif-orientation", 200, True
    covers = "stored JPEGs with an EXIF orientation: DALI's decoder turns them, TensorFlow's does not"

    def run_record(self, record: Record) -> Iterable[str]:
        decision = record.decision if record.readable else None
        if decision is None or decision.header is None:
            return ()
        orientation = exif_orientation(record.one["image/encoded"], decision.exif_at)
        if orientation == 1:
            return ()
        turned = "its shape and pixels" if orientation >= 5 else "its pixels"
        return (f"EXIF orientation {orientation}: DALI's decoder applies it and TensorFlow's does not, so they "
                f"disagree about {turned} (convert --resize ... --exif-transpose, or --resize-all, stores it "
                "upright or without EXIF)",)
