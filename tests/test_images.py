"""Content-based handling of every kind of input image, each kind generated here."""

import io

import pytest
from PIL import Image

from imagenet_build import images
from imagenet_build.errors import InputError


def jpeg(mode="RGB", size=(40, 30), **save):
    out = io.BytesIO()
    Image.new(mode, size, "red" if mode != "L" else 128).save(out, "JPEG", **save)
    return out.getvalue()


def encoded(fmt, mode="RGB", size=(33, 21), **save):
    out = io.BytesIO()
    Image.new(mode, size).save(out, fmt, **save)
    return out.getvalue()


def test_rgb_jpeg_is_stored_untouched_with_header_size():
    data = jpeg(size=(40, 30))
    stored = images.prepare(data, "x.JPEG")
    assert stored.data is data and (stored.width, stored.height) == (40, 30) and stored.reencoded == ""


def test_grayscale_and_progressive_jpegs_are_stored_untouched():
    for data in (jpeg("L"), jpeg(progressive=True), jpeg(optimize=True)):
        stored = images.prepare(data, "x.JPEG")
        assert stored.data is data and (stored.width, stored.height) == (40, 30)


def test_exif_orientation_is_ignored_size_is_the_frame_size():
    image = Image.new("RGB", (50, 20))
    exif = image.getexif()
    exif[0x0112] = 6
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif.tobytes())
    stored = images.prepare(out.getvalue(), "x.JPEG")
    assert (stored.width, stored.height) == (50, 20) and not stored.reencoded


def test_cmyk_jpeg_is_reencoded_as_rgb_quality_100():
    stored = images.prepare(jpeg("CMYK"), "n01739381_1309.JPEG")
    assert stored.reencoded == "CMYK JPEG"
    with Image.open(io.BytesIO(stored.data)) as image:
        assert image.format == "JPEG" and image.mode == "RGB" and image.size == (40, 30)
    header, _ = images.parse_jpeg_header(stored.data)
    assert header.components == 3
    assert images.name_disagreement("n01739381_1309.JPEG", stored) == ""
    assert "not in slim's list" in images.name_disagreement("other.JPEG", stored)


@pytest.mark.parametrize(
    "fmt,mode,kind",
    [("PNG", "RGB", "PNG"), ("PNG", "RGBA", "PNG"), ("PNG", "I;16", "PNG"), ("PNG", "P", "PNG"),
     ("GIF", "P", "GIF"), ("BMP", "RGB", "BMP"), ("TIFF", "RGB", "TIFF"), ("WEBP", "RGB", "WEBP")],
)
def test_other_formats_are_reencoded_to_rgb_jpeg(fmt, mode, kind):
    stored = images.prepare(encoded(fmt, mode), "n02105855_2933.JPEG")
    assert stored.reencoded == kind
    assert (stored.width, stored.height) == (33, 21)
    with Image.open(io.BytesIO(stored.data)) as image:
        assert image.format == "JPEG" and image.mode == "RGB"


def test_sixteen_bit_png_keeps_its_brightness():
    image = Image.new("I;16", (4, 4))
    image.putdata([40000] * 16)
    out = io.BytesIO()
    image.save(out, "PNG")
    stored = images.prepare(out.getvalue(), "x.JPEG")
    with Image.open(io.BytesIO(stored.data)) as decoded:
        assert abs(decoded.getpixel((1, 1))[0] - 40000 // 256) <= 2


def test_png_listed_by_slim_but_plain_jpeg_is_noted():
    stored = images.prepare(jpeg(), "n02105855_2933.JPEG")
    assert "content is a plain JPEG" in images.name_disagreement("n02105855_2933.JPEG", stored)


@pytest.mark.parametrize(
    "data,message",
    [
        (b"", "empty file"),
        (b"hello, not an image at all", "not an image"),
        (jpeg()[:300], "truncated"),
        (jpeg()[:-2], "truncated JPEG"),
        (b"\xff\xd8\xff\xd9", "broken JPEG"),
        (b"\xff\xd8\x00\x00\x00\x00\x00", "broken JPEG"),
        (encoded("PNG")[:60], "cannot decode"),
    ],
    ids=["zero-byte", "text", "cut-in-header", "cut-in-scan", "eoi-only", "garbage-after-soi", "cut-png"],
)
def test_bad_files_raise_input_error_naming_the_file(data, message):
    with pytest.raises(InputError, match=message) as info:
        images.prepare(data, "some/file.JPEG")
    assert info.value.path == "some/file.JPEG"


def test_a_header_cut_anywhere_or_ending_in_fill_bytes_is_an_input_error():
    """Every prefix of a JPEG's header, alone or followed by 0xFF fill bytes (which may precede any
    marker), is refused as a broken or truncated JPEG: never an IndexError from walking past the end."""
    data = jpeg(size=(40, 30))
    _, scan = images.parse_jpeg_header(data)
    for cut in range(2, scan):
        for tail in (b"", b"\xff", b"\xff" * 4, b"\xff\xc0"):
            with pytest.raises(InputError, match="broken JPEG|truncated"):
                images.prepare(data[:cut] + tail, "cut.JPEG")


def test_twelve_bit_and_lossless_frames_are_not_stored_as_is():
    data = bytearray(jpeg())
    sof_at = bytes(data).find(b"\xff\xc0")
    data[sof_at + 1] = 0xC3  # lossless frame: not decodable by common readers as stored
    with pytest.raises(InputError):
        images.prepare(bytes(data), "x.JPEG")  # Pillow cannot decode it either: a clear error
