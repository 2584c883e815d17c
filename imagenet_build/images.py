"""Decide by content whether an image can be stored as it is, and fix the ones that cannot.

A baseline or progressive 8-bit JPEG with 1 or 3 components is stored untouched,
its size read from the SOF header (what a full decode reports; EXIF orientation is
ignored, as slim ignores it). Everything else that Pillow can read — CMYK/YCCK
JPEGs, PNGs behind a .JPEG name, other formats — is re-encoded as an RGB JPEG at
quality 100, as slim, TFDS and the TPU converter do for ImageNet's 23 known cases.
The header walk is hand-written: Pillow's open() parses the same markers but
costs several times more per image, and we also want the truncation check.
"""

from __future__ import annotations

import io
from typing import Any, Literal, NamedTuple

from imagenet_build.errors import InputError

# The files slim, TFDS and the TPU converter re-encode, found by name (REFERENCE §2).
SLIM_PNG_NAMES = frozenset({"n02105855_2933.JPEG"})
SLIM_CMYK_NAMES = frozenset(
    name + ".JPEG"
    for name in (
        "n01739381_1309 n02077923_14822 n02447366_23489 n02492035_15739 n02747177_10752 "
        "n03018349_4028 n03062245_4620 n03347037_9675 n03467068_12171 n03529860_11437 "
        "n03544143_17228 n03633091_5218 n03710637_5125 n03961711_5286 n04033995_2932 "
        "n04258138_17003 n04264628_27969 n04336792_7448 n04371774_5854 n04596742_4225 "
        "n07583066_647 n13037406_4650"
    ).split()
)

REENCODE_QUALITY = 100
JPEG_MAX_SIDE = 65500  # libjpeg's JPEG_MAX_DIMENSION: the largest side it writes
_STORABLE_SOF = {0xC0, 0xC1, 0xC2}  # baseline, extended sequential, progressive (Huffman)
_SOF_MARKERS = set(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE = set(range(0xD0, 0xD8)) | {0x01, 0xD8}


class JpegHeader(NamedTuple):
    sof: int
    precision: int
    height: int
    width: int
    components: int
    adobe_transform: object  # None when there is no Adobe APP14 segment


class StoredImage(NamedTuple):
    data: bytes
    height: int
    width: int
    reencoded: str  # "" when stored as is, else why ("CMYK JPEG", "PNG", ...)
    resized: bool = False  # decoded, resized and encoded for a resized build (resize.py)


def _next_marker(data: bytes, pos: int) -> tuple[int, int]:
    """(marker, its position) at `pos`, past any fill bytes; ValueError where there is none."""
    size = len(data)
    if pos + 4 > size:
        raise ValueError("truncated in the header")
    if data[pos] != 0xFF:
        raise ValueError(f"no marker at byte {pos}")
    while pos + 1 < size and data[pos + 1] == 0xFF:  # fill bytes
        pos += 1
    if pos + 4 > size:  # fill bytes up to the end: no marker and length after them
        raise ValueError("truncated in the header")
    return data[pos + 1], pos


def _frame_header(data: bytes, pos: int, marker: int, length: int) -> JpegHeader:
    if length < 8:
        raise ValueError("bad frame header")
    return JpegHeader(
        sof=marker,
        precision=data[pos + 4],
        height=(data[pos + 5] << 8) | data[pos + 6],
        width=(data[pos + 7] << 8) | data[pos + 8],
        components=data[pos + 9],
        adobe_transform=None,
    )


def parse_jpeg_header(data: bytes) -> tuple[JpegHeader, int]:
    """Walk the markers up to the first SOS. Returns (JpegHeader, offset of scan data).

    Raises ValueError with a short reason when the stream is not a well-formed JPEG.
    """
    size = len(data)
    pos = 2
    sof = None
    adobe = None
    while True:
        marker, pos = _next_marker(data, pos)
        if marker in _STANDALONE:
            pos += 2
            continue
        if marker == 0xD9:
            raise ValueError("ends before any image data")
        length = (data[pos + 2] << 8) | data[pos + 3]
        end = pos + 2 + length
        if length < 2 or end > size:
            raise ValueError("truncated in the header")
        if marker in _SOF_MARKERS:
            sof = _frame_header(data, pos, marker, length)
        elif marker == 0xEE and length >= 14 and data[pos + 4 : pos + 9] == b"Adobe":
            adobe = data[pos + 15]
        elif marker == 0xDA:
            if sof is None:
                raise ValueError("image data before any frame header")
            return sof._replace(adobe_transform=adobe), end
        pos = end


def is_storable(header: JpegHeader) -> bool:
    """A JPEG stored untouched: baseline or progressive, 8 bits, 1 or 3 components."""
    return (
        header.sof in _STORABLE_SOF
        and header.precision == 8
        and header.components in (1, 3)
        and header.height > 0
        and header.width > 0
    )


def _jpeg_kind(header: JpegHeader) -> str:
    if header.components == 4:
        return "YCCK JPEG" if header.adobe_transform == 2 else "CMYK JPEG"
    if header.precision != 8:
        return f"{header.precision}-bit JPEG"
    if header.sof not in _STORABLE_SOF:
        return f"JPEG with frame type 0x{header.sof:02X}"
    return f"JPEG with {header.components} components"


def bomb_pixels() -> int | None:
    """Pillow's decompression-bomb limit: Image.open refuses images of more pixels than this."""
    from PIL import Image

    return 2 * Image.MAX_IMAGE_PIXELS if Image.MAX_IMAGE_PIXELS else None


def size_problem(header: JpegHeader, scan_bytes: int) -> str:
    """Why a JPEG's header size cannot be believed, or "".

    Two rules: more pixels than Pillow's decompression-bomb limit; or less entropy-coded
    data than 1 bit per 8 blocks of 8x8 pixels. Every Huffman-coded block costs at least
    about 1 bit (a flat 4000x4000 image saved by Pillow, optimised: 2 bits a block), so
    such a file's header lies (65500x65500 over 66x113 pixels of data, say) and a reader
    would ask the decoder for gigabytes. Arithmetic-coded JPEGs are re-encoded, not judged here.
    """
    pixels = header.width * header.height
    limit = bomb_pixels()
    if limit and pixels > limit:
        return (f"header claims {header.width}x{header.height} = {pixels:,} pixels, beyond Pillow's "
                f"decompression-bomb limit of {limit:,}")
    blocks = -(-header.width // 8) * -(-header.height // 8)
    if header.sof in _STORABLE_SOF and scan_bytes * 64 < blocks:
        return (f"header claims {header.width}x{header.height} but the image data is {scan_bytes:,} bytes, "
                "under 1 bit per 8 blocks of 8x8 pixels (rule: the header lies, a decompression bomb or "
                "a corrupt size)")
    return ""


def jpeg_facts(data: bytes) -> tuple[JpegHeader, int]:
    """(JpegHeader, bytes of image data up to the end-of-image marker, or -1 without one); ValueError."""
    header, scan = parse_jpeg_header(data)
    # Scan data holds no FF D9 (0xFF is stuffed there), so the last one found from the
    # end is the end-of-image marker; searching backwards finds it at once.
    end = data.rfind(b"\xff\xd9", scan)
    return header, (end - scan if end >= 0 else -1)


def prepare(data: bytes, path: str) -> StoredImage:
    """The bytes to store for one input file, with their size. Raises InputError."""
    if not data:
        raise InputError(path, "empty file (0 bytes)")
    if data[:2] == b"\xff\xd8":
        try:
            header, scan_bytes = jpeg_facts(data)
        except ValueError as e:
            raise InputError(path, f"broken JPEG: {e}") from None
        if scan_bytes < 0:
            raise InputError(path, "truncated JPEG: no end-of-image marker after the image data")
        problem = size_problem(header, scan_bytes)
        if problem:
            raise InputError(path, problem)
        if is_storable(header):
            return StoredImage(data, header.height, header.width, "")
        return reencode(data, path, _jpeg_kind(header))
    return reencode(data, path, None)


def to_rgb(image: Any) -> Any:
    """RGB pixels as TensorFlow's decode_*(channels=3) gives them: alpha dropped, 16 bits cut to 8."""
    if image.mode.startswith("I;16"):
        image = image.convert("I")
    if image.mode == "I":
        image = image.point(lambda v: v * (1 / 256)).convert("L")
    return image if image.mode == "RGB" else image.convert("RGB")  # convert() would copy an RGB image


def reencode(data: bytes, path: str, kind: str | None) -> StoredImage:
    """Decode with Pillow and store as an RGB JPEG, quality 100."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            kind = kind or (image.format or "unknown format")
            image.load()
            rgb = to_rgb(image)
    except UnidentifiedImageError:
        raise InputError(path, "not an image (neither JPEG nor any format Pillow reads)") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise InputError(path, f"cannot decode {kind or 'image'}: {e}") from None
    return StoredImage(encode_jpeg(rgb, path, quality=REENCODE_QUALITY), rgb.height, rgb.width, kind)


def jpeg_size_problem(width: int, height: int) -> str:
    """Why a JPEG cannot hold an image of this size, or ""."""
    return f"a JPEG holds at most {JPEG_MAX_SIDE:,} pixels a side" if max(width, height) > JPEG_MAX_SIDE else ""


def encode_jpeg(image: Any, path: str, **options: Any) -> bytes:
    """`image` saved as JPEG with Pillow's `options`; an image JPEG cannot hold, or any failure of the
    encoder, is an InputError naming `path` (the per-image error path: named, skippable)."""
    problem = jpeg_size_problem(image.width, image.height)
    if problem:  # libjpeg would fail with "broken data stream", after a line of its own on stderr
        raise InputError(path, f"{image.width:,}x{image.height:,} pixels: {problem}, so it cannot be stored as "
                               "slim's JPEG")
    out = io.BytesIO()
    try:
        image.save(out, format="JPEG", **options)
    except (OSError, ValueError) as e:
        raise InputError(path, f"cannot encode as JPEG: {e}") from None
    return out.getvalue()


def exif_orientation(data: bytes) -> int:
    """The EXIF orientation (1..8) of a JPEG, 1 when it has none or it cannot be read.

    DALI's decoder applies it and TensorFlow's ignores it, so the two disagree about the
    shape of an image whose orientation is 5..8 (and about the pixels for 2..8).
    """
    pos, size = 2, len(data)
    while pos + 4 <= size and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker in _STANDALONE:
            pos += 2
            continue
        if marker == 0xDA or marker == 0xD9:
            return 1
        end = pos + 2 + ((data[pos + 2] << 8) | data[pos + 3])
        if marker == 0xE1 and data[pos + 4 : pos + 10] == b"Exif\0\0":
            return _tiff_orientation(data[pos + 10 : end])
        pos = end
    return 1


def _tiff_orientation(tiff: bytes) -> int:
    """Tag 0x0112 of the first IFD of an EXIF TIFF block, 1 when absent or malformed."""
    orders: dict[bytes, Literal["little", "big"]] = {b"II": "little", b"MM": "big"}
    order = orders.get(tiff[:2])
    if order is None or len(tiff) < 8:
        return 1

    def number(at: int, width: int) -> int:
        return int.from_bytes(tiff[at : at + width], order) if at + width <= len(tiff) else -1

    ifd = number(4, 4)
    count = number(ifd, 2)
    for k in range(max(count, 0)):
        entry = ifd + 2 + 12 * k
        if number(entry, 2) == 0x0112:
            value = number(entry + 8, 2)
            return value if 1 <= value <= 8 else 1
    return 1


def encoder_version() -> str:
    """What re-encoded bytes depend on besides the pixels: Pillow's version and its JPEG library's."""
    import PIL
    from PIL import features

    return f"Pillow {PIL.__version__}, libjpeg {features.version_codec('jpg')}"


def name_disagreement(filename: str, stored: StoredImage) -> str:
    """A note when content and slim's name lists disagree, else "" (REFERENCE §2)."""
    listed = filename in SLIM_PNG_NAMES or filename in SLIM_CMYK_NAMES
    if stored.reencoded and not listed:
        return f"re-encoded ({stored.reencoded}) but not in slim's list of files to re-encode"
    if listed and not stored.reencoded:
        return "in slim's list of files to re-encode, but its content is a plain JPEG; stored as is"
    return ""
