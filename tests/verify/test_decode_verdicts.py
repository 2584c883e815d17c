"""verify --deep decodes a JPEG at libjpeg's 1/8 scale, and gives the verdict Pillow's full decode gives, word for
word, on every image the project knows: the odd JPEGs (jpeg_cases), the PNGs sound and damaged (png_cases), and
clean JPEGs of each kind damaged here at many places (cut short anywhere, bytes flipped or zeroed in the image
data, bytes or markers put into it, header bytes changed, odd sampling factors). libjpeg's warnings (which a
full decode steps over too) are the same at both scales: an independent decoder (simplejpeg, which stops at the
first warning) says so for every one of them."""

import io
import random
import re

import pytest
import simplejpeg
from PIL import Image

from imagenet_build.encode.images import decide
from imagenet_build.encode.jpeg_header import is_jpeg, walk
from imagenet_build.verify.record_checks import SCALED_FRAMES, decode_problem
from jpeg_cases import CASES, clean, segments
from png_cases import DAMAGED, SOUND


def full_decode_problem(encoded, height, width):
    """The decider verify --deep had before: Pillow's full decode, its size after decoding."""
    try:
        with Image.open(io.BytesIO(encoded)) as image:
            image.load()
            size = image.size
    except Exception as e:
        return f"image does not decode: {e}"
    if size != (width, height):
        return f"image is {size[0]}x{size[1]}, record says {width}x{height}"
    return ""


def _photo(size=(160, 120)):
    """Smooth gradients under noise: image data of many different Huffman codes."""
    rng = random.Random(1)
    width, height = size
    pixels = bytes(min(255, max(0, (x * 255 // width + y * 255 // height) // 2 + rng.randrange(-40, 40)))
                   for y in range(height) for x in range(width) for _ in range(3))
    out = io.BytesIO()
    Image.frombytes("RGB", size, pixels).save(out, "JPEG", quality=85)
    return out.getvalue()


BASES = {
    "baseline 4:2:0": clean(),
    "4:2:2": clean(subsampling=1),
    "4:4:4": clean(subsampling=0),
    "grayscale": clean("L"),
    "progressive": clean(progressive=True),
    "restart markers": clean(restart_marker_blocks=1),
    "CMYK": clean("CMYK"),
    "photo": _photo(),
    "photo, progressive": Image.open(io.BytesIO(_photo())).save(out := io.BytesIO(), "JPEG", quality=85,
                                                                 progressive=True) or out.getvalue(),
    "odd size (13x7)": clean(size=(13, 7)),
}


def _scan_start(data):
    return walk(data).scan


def _sampling(data, factors):
    """data with its frame header's sampling factors (one byte per component, as listed) replaced."""
    ((_, at),) = [(m, p) for m, p in segments(data) if m == 0xC0 or m == 0xC2]
    out = bytearray(data)
    for k, factor in enumerate(factors):
        out[at + 11 + 3 * k] = factor
    return bytes(out)


def damaged(name, data):
    """(what, bytes) of one clean JPEG damaged in every way the test knows, at places spread over it."""
    rng = random.Random(name)
    scan, size = _scan_start(data), len(data)
    yield "whole", data
    for cut in sorted({*range(2, size, max(1, size // 40)), scan - 1, scan, scan + 1, size - 1, size - 2, size - 3}):
        yield f"cut at {cut}", data[:cut]
    spots = [rng.randrange(scan, size - 2) for _ in range(24)]
    for at in spots[:10]:
        yield f"byte {at} flipped", data[:at] + bytes([data[at] ^ rng.randrange(1, 256)]) + data[at + 1:]
    for at in spots[10:13]:
        yield f"16 bytes zeroed at {at}", data[:at] + bytes(16) + data[at + 16:]
    for at in spots[13:16]:
        yield f"junk put at {at}", data[:at] + bytes(rng.randrange(256) for _ in range(3)) + data[at:]
    for at, marker in zip(spots[16:], (0xD0, 0xD3, 0xD7, 0xD9, 0xC4, 0xDA, 0xD8, 0xFE)):
        yield f"marker {marker:02X} put at {at}", data[:at] + bytes([0xFF, marker]) + data[at:]
    yield "end-of-image marker lost", data[:-2]
    yield "junk after the end", data + b"\x00\xff\x00junk"
    for marker, at in segments(data)[1:]:
        body = at + 4 + rng.randrange(max(1, (data[at + 2] << 8 | data[at + 3]) - 2))
        yield f"header byte {body} of segment {marker:02X} changed", \
            data[:body] + bytes([data[body] ^ 0x5A]) + data[body + 1:]
    components = data[[p for m, p in segments(data) if m in (0xC0, 0xC2)][0] + 9]
    # luma's against chroma's: some integral, some not (libjpeg refuses a fractional ratio, even where a decode
    # to grayscale would never upsample that component), some past the blocks an MCU may hold
    odd = {1: [(0x22,), (0x31,), (0x44,)], 3: [(0x22, 0x21, 0x11), (0x21, 0x12, 0x11), (0x31, 0x11, 0x11),
                                                 (0x33, 0x21, 0x11), (0x42, 0x21, 0x11), (0x11, 0x22, 0x11),
                                                 (0x32, 0x11, 0x11), (0x44, 0x22, 0x11), (0x31, 0x21, 0x11),
                                                 (0x32, 0x21, 0x11), (0x23, 0x12, 0x11), (0x41, 0x31, 0x11)],
           4: [(0x22, 0x11, 0x11, 0x22), (0x31, 0x11, 0x11, 0x11)]}
    for factors in odd.get(components, []):
        yield f"sampling factors {' '.join(f'{f:02X}' for f in factors)}", _sampling(data, factors)


def corpus():
    """(name, bytes, recorded height, recorded width) of every image the test judges."""
    for name, (data, _) in CASES.items():
        yield name, data, *_recorded(data)
    for name, data in SOUND.items():
        yield name, data, *_recorded(data)
    for name, (data, _, _) in DAMAGED.items():
        yield name, data, 21, 30
    for base, data in BASES.items():
        height, width = _recorded(data)
        for what, bytes_ in damaged(base, data):
            yield f"{base}: {what}", bytes_, height, width
    whole = BASES["baseline 4:2:0"]
    yield "a recorded size other than the image's", whole, 47, 64


def _recorded(data):
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.height, image.width
    except Exception:
        return 48, 64


CORPUS = list(corpus())


def _same(message):
    """A message as two decodes of the same bytes can agree on it: a BytesIO's address left out."""
    return re.sub(r"object at 0x[0-9a-f]+", "object", message)


def test_the_corpus_holds_every_kind_of_verdict():
    verdicts = [full_decode_problem(data, height, width) for _, data, height, width in CORPUS]
    assert len(CORPUS) > 900
    assert sum(not v for v in verdicts) > 200  # images that decode (odd ones, damaged ones libjpeg steps over)
    kinds = {v.split(":")[0].split(" (")[0] for v in verdicts if v}
    assert any(v.startswith("image does not decode: image file is truncated") for v in verdicts)
    assert any(v.startswith("image does not decode: broken data stream") for v in verdicts)
    assert any(v.startswith("image does not decode: cannot identify image file") for v in verdicts)
    assert any(v.startswith("image is ") for v in verdicts), kinds


@pytest.mark.parametrize("chunk", range(4))
def test_the_scaled_decode_gives_the_full_decodes_verdict_word_for_word(chunk):
    differ = []
    for name, data, height, width in CORPUS[chunk::4]:
        frame = decide(data).header if is_jpeg(data) else None  # as verify's record has it (Record.decision)
        before, now = full_decode_problem(data, height, width), decode_problem(data, height, width, frame)
        if _same(before) != _same(now):
            differ.append((name, before, now))
    assert not differ, differ[:5]


def test_the_scaled_decode_is_an_eighth_of_each_side():
    """What saves the time: Pillow's draft asks libjpeg for 1/8 of each side (every block's DC alone)."""
    with Image.open(io.BytesIO(BASES["photo"])) as image:
        image.draft(None, (1, 1))
        image.load()
        assert image.size == (20, 15)


def _first_warning(data, scaled):
    """simplejpeg's outcome, stopping at libjpeg's first warning: "ok" or its message."""
    try:
        simplejpeg.decode_jpeg(data, min_height=1 if scaled else 0, min_width=1 if scaled else 0, strict=True)
    except ValueError as e:
        return str(e)
    return "ok"


def _scaled_frame(data):
    """Whether verify decodes these bytes scaled: a JPEG whose frame libjpeg decodes scaled."""
    header = decide(data).header if is_jpeg(data) else None
    return header is not None and header.sof in SCALED_FRAMES


def test_libjpegs_warnings_are_the_same_at_an_eighth_of_each_side():
    """(simplejpeg, like Pillow, writes a lossless JPEG's full-size rows into a buffer of the scaled size: the
    reason verify decodes only DCT frames scaled, and this test asks only about them.)"""
    jpegs = [(name, data) for name, data, _, _ in CORPUS if _scaled_frame(data)]
    outcomes = [(name, _first_warning(data, False), _first_warning(data, True)) for name, data in jpegs]
    assert sum("Corrupt JPEG data" in full for _, full, _ in outcomes) > 50  # warnings met, of several kinds
    assert len({re.sub(r"[0-9]+", "N", full) for _, full, _ in outcomes if "Corrupt JPEG data" in full}) >= 3
    assert [o for o in outcomes if o[1] != o[2]] == []

