"""Content-based handling of every kind of input image, each kind generated here."""

import io
import subprocess
import sys

import pytest
from PIL import Image

from imagenet_build.encode import images, jpeg_header
from imagenet_build.encode.images import REFUSE, STORE
from imagenet_build.infra.errors import InputError
from jpeg_cases import CASES, clean, flat, segment, segments, with_exif_orientation


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
    stored = images.stored_image(data, "x.JPEG")
    assert stored.data is data and (stored.width, stored.height) == (40, 30) and stored.reencoded == ""


def test_grayscale_and_progressive_jpegs_are_stored_untouched():
    for data in (jpeg("L"), jpeg(progressive=True), jpeg(optimize=True)):
        stored = images.stored_image(data, "x.JPEG")
        assert stored.data is data and (stored.width, stored.height) == (40, 30)


def test_exif_orientation_is_ignored_size_is_the_frame_size():
    image = Image.new("RGB", (50, 20))
    exif = image.getexif()
    exif[0x0112] = 6
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif.tobytes())
    stored = images.stored_image(out.getvalue(), "x.JPEG")
    assert (stored.width, stored.height) == (50, 20) and not stored.reencoded


def test_cmyk_jpeg_is_reencoded_as_rgb_quality_100():
    stored = images.stored_image(jpeg("CMYK"), "n01739381_1309.JPEG")
    assert stored.reencoded == "CMYK JPEG"
    with Image.open(io.BytesIO(stored.data)) as image:
        assert image.format == "JPEG" and image.mode == "RGB" and image.size == (40, 30)
    header = jpeg_header.walk(stored.data).header
    assert header.components == 3
    assert images.name_disagreement("n01739381_1309.JPEG", stored) == ""
    assert "not in slim's list" in images.name_disagreement("other.JPEG", stored)


@pytest.mark.parametrize(
    "fmt,mode,kind",
    [("PNG", "RGB", "PNG"), ("PNG", "RGBA", "PNG"), ("PNG", "I;16", "PNG"), ("PNG", "P", "PNG"),
     ("GIF", "P", "GIF"), ("BMP", "RGB", "BMP"), ("TIFF", "RGB", "TIFF"), ("WEBP", "RGB", "WEBP")],
)
def test_other_formats_are_reencoded_to_rgb_jpeg(fmt, mode, kind):
    stored = images.stored_image(encoded(fmt, mode), "n02105855_2933.JPEG")
    assert stored.reencoded == kind
    assert (stored.width, stored.height) == (33, 21)
    with Image.open(io.BytesIO(stored.data)) as image:
        assert image.format == "JPEG" and image.mode == "RGB"


def test_sixteen_bit_png_keeps_its_brightness():
    image = Image.new("I;16", (4, 4))
    image.putdata([40000] * 16)
    out = io.BytesIO()
    image.save(out, "PNG")
    stored = images.stored_image(out.getvalue(), "x.JPEG")
    with Image.open(io.BytesIO(stored.data)) as decoded:
        assert abs(decoded.getpixel((1, 1))[0] - 40000 // 256) <= 2


def test_png_listed_by_slim_but_plain_jpeg_is_noted():
    stored = images.stored_image(jpeg(), "n02105855_2933.JPEG")
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
        images.stored_image(data, "some/file.JPEG")
    assert info.value.path == "some/file.JPEG"


def test_a_header_cut_anywhere_or_ending_in_fill_bytes_is_an_input_error():
    """Every prefix of a JPEG's header, alone or followed by 0xFF fill bytes (which may precede any
    marker), is refused as a broken or truncated JPEG: never an IndexError from walking past the end."""
    data = jpeg(size=(40, 30))
    scan = jpeg_header.walk(data).scan
    for cut in range(2, scan):
        for tail in (b"", b"\xff", b"\xff" * 4, b"\xff\xc0"):
            with pytest.raises(InputError, match="broken JPEG|truncated"):
                images.stored_image(data[:cut] + tail, "cut.JPEG")


def test_twelve_bit_and_lossless_frames_are_not_stored_as_is():
    data = bytearray(jpeg())
    sof_at = bytes(data).find(b"\xff\xc0")
    data[sof_at + 1] = 0xC3  # lossless frame: not decodable by common readers as stored
    with pytest.raises(InputError):
        images.stored_image(bytes(data), "x.JPEG")  # Pillow cannot decode it either: a clear error


@pytest.mark.parametrize("case", list(CASES))
def test_each_odd_jpeg_is_stored_reencoded_or_refused_as_the_decoders_read_it(case):
    """One rule: untouched only when TensorFlow's, DALI's and torchvision's decoders all read it; re-encoded
    (saying why) when libjpeg reads it but one of them cannot; refused only when no decoder reads it."""
    data, expected = CASES[case]
    if expected == REFUSE:
        with pytest.raises(InputError) as info:
            images.stored_image(data, "odd/file.jpg")
        assert info.value.path == "odd/file.jpg" and images.decide(data).action != STORE  # Pillow has the last word
        return
    stored = images.stored_image(data, "odd/file.jpg")
    header = jpeg_header.walk(data).header
    assert (stored.width, stored.height) == (header.width, header.height)
    if expected == STORE:
        assert stored.data is data and stored.reencoded == ""
    else:
        assert stored.reencoded == expected and stored.data != data
        again = images.decide(stored.data)  # what was stored is what the rule stores untouched
        assert again.action == STORE and (again.header.width, again.header.height) == (header.width, header.height)


def test_a_reencoded_header_defect_keeps_the_pixels_libjpeg_decodes():
    """The junk libjpeg skips is left out before Pillow decodes (Pillow's open() refuses junk right after SOI):
    the re-encoded image is the clean one re-encoded."""
    clean_bytes = CASES["baseline"][0]
    for case in ("junk before APP0", "TEM marker after SOI", "junk before DQT", "APP segment of length 0"):
        stored = images.stored_image(CASES[case][0], "x.jpg")
        assert stored.data == images.reencode(clean_bytes, "x.jpg", "x").data, case


def test_the_offending_byte_is_named():
    base = CASES["baseline"][0]
    dqt = [pos for marker, pos in segments(base) if marker == 0xDB][0]
    assert images.decide(CASES["junk before DQT"][0])[:3] == (images.REENCODE, jpeg_header.EXTRANEOUS, dqt)
    sof = [pos for marker, pos in segments(base) if marker == 0xC0][0]
    assert images.decide(CASES["RST marker among the header segments"][0])[:3] == (
        images.REENCODE, jpeg_header.NO_LENGTH, sof)
    assert images.decide(CASES["CMYK"][0]).reason == "CMYK JPEG"


def test_hand_built_jpegs_are_what_they_claim():
    """The arithmetic-coded, lossless and 2-component test images are real streams: libjpeg decodes the first
    two to the flat mid-grey they encode."""
    for sof in (0xC9, 0xC3):
        with Image.open(io.BytesIO(flat(3, sof))) as image:
            assert image.size == (16, 16) and image.getextrema() == ((128, 128),) * 3
    header = jpeg_header.walk(flat(2)).header
    assert (header.sof, header.components) == (0xC0, 2)


def test_a_resized_build_decodes_a_jpeg_reencoded_for_its_header_as_libjpeg_reads_it():
    """Pillow refuses junk right after SOI: the resized build decodes the header as libjpeg reads it, as the
    full-size build does, and gets the clean image's pixels."""
    from imagenet_build.encode import resize

    options = resize.ResizeOptions(resize.parse_targets("shorter:24"))
    odd, = resize.stored_resized(CASES["junk before APP0"][0], "x.jpg", options)
    clean, = resize.stored_resized(CASES["baseline"][0], "x.jpg", options)
    assert not isinstance(odd, InputError) and odd.data == clean.data and odd.reencoded == jpeg_header.EXTRANEOUS


def test_the_bomb_limit_of_a_process_without_pillow_loaded_is_pillows_default():
    """A worker that stores every image as it is never loads Pillow: it judges by Pillow's default limit, the
    one Pillow itself applies once loaded."""
    code = ("import sys; from imagenet_build.encode import images; print(images.bomb_pixels(), "
            "'PIL.Image' in sys.modules); from PIL import Image; print(images.bomb_pixels())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    unloaded, loaded = result.stdout.splitlines()
    assert unloaded == f"{loaded} False" and int(loaded) == 2 * Image.MAX_IMAGE_PIXELS


def _exif_variants():
    """Each odd JPEG, and one with an EXIF orientation, with and without odd bytes before its EXIF segment."""
    turned = with_exif_orientation(clean(), 6)
    app1 = [pos for marker, pos in segments(turned) if marker == 0xE1][0]
    yield from ((name, data) for name, (data, _) in CASES.items())
    yield "EXIF orientation 6", turned
    yield "fill bytes before EXIF", turned[:app1] + b"\xff\xff" + turned[app1:]
    yield "junk before EXIF", turned[:app1] + b"\x00\x01" + turned[app1:]
    yield "RST before EXIF", turned[:app1] + b"\xff\xd0" + turned[app1:]
    yield "XMP before EXIF", turned[:app1] + segment(0xE1, b"http://ns.adobe.com/xap/1.0/\x00x") + turned[app1:]


@pytest.mark.parametrize("name, data", list(_exif_variants()), ids=lambda v: v if isinstance(v, str) else "")
def test_the_walks_exif_segment_gives_the_orientation_the_header_gives(name, data):
    """verify takes the EXIF segment's place from the header's walk (decide) where it can: the same orientation as
    reading the header again."""
    decision = images.decide(data)
    if decision.header is not None:
        assert jpeg_header.exif_orientation(data, decision.exif_at) == jpeg_header.exif_orientation(data)
