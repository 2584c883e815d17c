"""Decide by content whether an image can be stored as it is, and fix the ones that cannot.

An image is stored untouched only when every decoder a build serves reads it as it is:
TensorFlow's and torchvision's (libjpeg-turbo) and DALI's, whose own header parser walks the
markers before libjpeg-turbo decodes (and whose GPU decoder, nvJPEG, takes Huffman coding only).
That is a JPEG whose header DALI's parser can walk (each segment starts with a marker, fill bytes
allowed; every marker up to the image data has a length), baseline, extended or progressive
Huffman coding, 8 bits, 1 or 3 components, complete up to its end-of-image marker; its size is
read from the SOF header (what a full decode reports; EXIF orientation is ignored, as slim ignores
it). A JPEG libjpeg decodes but one of those decoders cannot (extraneous bytes among the header
segments, arithmetic or lossless coding), a CMYK/YCCK JPEG (slim's rule) and every other format Pillow reads
(a PNG behind a .JPEG name) is re-encoded as an RGB JPEG at quality 100, as slim, TFDS and the
TPU converter do for ImageNet's 23 known cases. What no decoder reads (truncated image data, no
image, a header libjpeg stops on) is refused. docs/images.md has the table of decoders and cases.
The header walk is jpeg_header.py's; writing a JPEG with Pillow is jpeg_encode.py's.
"""

from __future__ import annotations

import io
import sys
from typing import Literal, NamedTuple

from imagenet_build.encode import png
from imagenet_build.encode.jpeg_encode import encode_jpeg, to_rgb
from imagenet_build.encode.jpeg_header import (
    EXTRANEOUS,
    NO_LENGTH,
    SHORT_SEGMENT,
    UNKNOWN,
    JpegHeader,
    is_jpeg,
    scan_bytes,
    walk,
)
from imagenet_build.infra.errors import InputError

# The files slim, TFDS and the TPU converter re-encode, found by name (docs/images.md).
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
PILLOW_MAX_IMAGE_PIXELS = 1024 * 1024 * 1024 // 4 // 3  # Pillow's own default Image.MAX_IMAGE_PIXELS
_STORABLE_SOF = {0xC0, 0xC1, 0xC2}  # baseline, extended sequential, progressive (Huffman)

# Why an image that libjpeg decodes is re-encoded although its frame is storable: what DALI's parser does.
DALI_STOPS = {
    EXTRANEOUS: "DALI's parser stops on it (\"Invalid marker\"); libjpeg skips them",
    NO_LENGTH: "DALI's parser reads a length after every marker and loses its place",
    SHORT_SEGMENT: "DALI's parser steps back by its length and stops",
}

ARITHMETIC = "arithmetic-coded JPEG"
_ARITHMETIC = {0xC9, 0xCA}  # sequential and progressive: libjpeg decodes them, nvJPEG does not
LOSSLESS = "lossless JPEG"  # SOF3: libjpeg-turbo 3 decodes it, TensorFlow's decoder does not

Action = Literal["store", "re-encode", "refuse"]
STORE: Action = "store"
REENCODE: Action = "re-encode"
REFUSE: Action = "refuse"


class StoredImage(NamedTuple):
    data: bytes
    height: int
    width: int
    reencoded: str  # "" when stored as is, else why ("CMYK JPEG", "PNG", ...)
    resized: bool = False  # decoded, resized and encoded for a resized build (resize.py)


class Decision(NamedTuple):
    """What a build does with one JPEG's bytes: STORE, REENCODE or REFUSE them, and why."""

    action: Action
    reason: str  # REENCODE: the summary's words ("CMYK JPEG", EXTRANEOUS, ...); REFUSE: the error; STORE: ""
    at: int  # the byte of the image the reason is about (the offending marker or bytes), -1 when none
    header: JpegHeader | None  # None when the header cannot be read
    scan_bytes: int  # bytes of image data up to the end-of-image marker, -1 without one
    readable: bytes  # the bytes as libjpeg reads them: the header without what it skips (what Pillow needs)
    exif_at: int = UNKNOWN  # its EXIF segment, for exif_orientation (Walk.exif_at)


def plain_image_data(reason: str) -> bool:
    """True for a JPEG stored as is ("") or re-encoded only for its header (a DALI_STOPS reason): its image
    data is a plain JPEG's, which libjpeg decodes from `Decision.readable` as any other, scaled too."""
    return reason == "" or reason in DALI_STOPS


def is_storable(header: JpegHeader) -> bool:
    """A frame stored untouched: baseline, extended or progressive Huffman, 8 bits, 1 or 3 components."""
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
    if header.sof in _ARITHMETIC:
        return ARITHMETIC
    if header.sof == 0xC3:
        return LOSSLESS
    if header.sof not in _STORABLE_SOF:
        return f"JPEG with frame type 0x{header.sof:02X}"
    if header.components in (1, 3):
        return f"JPEG of {header.width}x{header.height} in its frame header"  # a zero: the height comes later (DNL)
    return f"JPEG with {header.components} components"


def consequence(reason: str) -> str:
    """What the decoders do with a JPEG stored as it is that the rule re-encodes for `reason` (verify's words)."""
    if reason in DALI_STOPS:
        return DALI_STOPS[reason]
    if reason in ("CMYK JPEG", "YCCK JPEG"):
        return "slim's rule re-encodes these as RGB"
    if reason == ARITHMETIC:
        return "nvJPEG, DALI's GPU decoder, reads Huffman coding only"
    if reason == LOSSLESS:
        return "TensorFlow's decoder does not read it"
    return "TensorFlow's and torchvision's decoders do not read it"


def bomb_pixels() -> int | None:
    """Pillow's decompression-bomb limit: Image.open refuses images of more pixels than this. Read from Pillow
    where it is loaded (a program may have changed it), else its default: a worker that stores every image as
    it is never loads Pillow (~50 ms)."""
    image = sys.modules.get("PIL.Image")
    limit = PILLOW_MAX_IMAGE_PIXELS if image is None else image.MAX_IMAGE_PIXELS
    return 2 * limit if limit else None


def size_problem(header: JpegHeader, data_bytes: int) -> str:
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
    if header.sof in _STORABLE_SOF and data_bytes * 64 < blocks:
        return (f"header claims {header.width}x{header.height} but the image data is {data_bytes:,} bytes, "
                "under 1 bit per 8 blocks of 8x8 pixels (rule: the header lies, a decompression bomb or "
                "a corrupt size)")
    return ""


def decide(data: bytes) -> Decision:
    """The one rule for a JPEG's bytes (data starting FF D8), for convert and verify alike.

    STORE when TensorFlow's, DALI's and torchvision's decoders all read it as it is; REENCODE (with the
    summary's reason) when libjpeg decodes it but one of them cannot, or slim re-encodes its kind;
    REFUSE when no decoder reads it (Pillow's decode, at re-encoding, is the last word on the rest).
    """
    try:
        found = walk(data)
    except ValueError as e:
        return Decision(REFUSE, f"broken JPEG: {e}", -1, None, -1, data)
    header = found.header
    scanned = scan_bytes(data, found.scan)
    if scanned < 0:
        return Decision(REFUSE, "truncated JPEG: no end-of-image marker after the image data", len(data),
                        header, scanned, data)
    problem = size_problem(header, scanned)
    if problem:
        return Decision(REFUSE, problem, -1, header, scanned, data)
    readable = data
    if found.odd:  # what libjpeg reads: the segments it found, without the bytes it skipped
        pieces: list[tuple[int, int]] = []
        walk(data, pieces)
        readable = b"".join([data[:2], *(data[start:end] for start, end in pieces), data[pieces[-1][1] :]])
    if not is_storable(header):
        return Decision(REENCODE, _jpeg_kind(header), found.sof_at, header, scanned, readable, found.exif_at)
    if found.odd:
        return Decision(REENCODE, found.odd, found.odd_at, header, scanned, readable, found.exif_at)
    return Decision(STORE, "", -1, header, scanned, data, found.exif_at)


class PngVerdict(NamedTuple):
    """What the decoders a build serves make of a PNG's bytes: its header, and why one of them cannot read it
    as it is ("" when all read it)."""

    header: png.PngHeader | None  # None where there is a problem
    problem: str
    libpng_reads: bool  # TensorFlow's and DALI's decoders read past the problem; Pillow does not


def judge_png(data: bytes) -> PngVerdict:
    """The one rule for a PNG's bytes (data starting with PNG's signature), for verify and the readers: every
    decoder a build serves reads it when its chunks are whole, in order and with their CRCs, and its image
    data inflates to its rows (png.walk), within Pillow's decompression-bomb limit (the PyTorch reader
    decodes PNGs with Pillow)."""
    try:
        return PngVerdict(png.walk(data, bomb_pixels()), "", False)
    except png.PngError as e:
        return PngVerdict(None, f"PNG: {e}", e.libpng_reads)


def png_consequence(verdict: PngVerdict) -> str:
    """Which decoders cannot read a PNG the rule refuses (verify's words)."""
    if verdict.libpng_reads:
        return ("Pillow, which the PyTorch reader decodes PNGs with, refuses it; TensorFlow's and DALI's decoders "
                "read it")
    return ("TensorFlow's and DALI's decoders stop on it (torchvision's crashes on some), and the PyTorch reader "
            "refuses it")


def readable(data: bytes) -> bytes:
    """An image's bytes as a decoder that needs a clean header (Pillow) should get them: a JPEG's header
    without the bytes libjpeg skips, anything else as it is."""
    return decide(data).readable if is_jpeg(data) else data


def stored_image(data: bytes, path: str) -> StoredImage:
    """The bytes to store for one input file, with their size. Raises InputError."""
    if not data:
        raise InputError(path, "empty file (0 bytes)")
    if is_jpeg(data):
        decision = decide(data)
        if decision.action == REFUSE:
            raise InputError(path, decision.reason)
        if decision.action == STORE:
            assert decision.header is not None
            return StoredImage(data, decision.header.height, decision.header.width, "")
        return reencode(decision.readable, path, decision.reason)
    return reencode(data, path, None)


def reencode(data: bytes, path: str, kind: str | None) -> StoredImage:
    """Decode with Pillow and store as an RGB JPEG, quality 100."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            kind = kind or (image.format or "unknown format")
            image.load()
            rgb = to_rgb(image)
    except UnidentifiedImageError:
        if kind:  # a JPEG Pillow cannot open: no decoder reads it (2 components, 12 bits, ...)
            raise InputError(path, f"cannot decode {kind}: no decoder reads it") from None
        raise InputError(path, "not an image (neither JPEG nor any format Pillow reads)") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise InputError(path, f"cannot decode {kind or 'image'}: {e}") from None
    return StoredImage(encode_jpeg(rgb, path, quality=REENCODE_QUALITY), rgb.height, rgb.width, kind)


def encoder_version() -> str:
    """What re-encoded bytes depend on besides the pixels: Pillow's version and its JPEG library's."""
    import PIL
    from PIL import features

    return f"Pillow {PIL.__version__}, libjpeg {features.version_codec('jpg')}"


def name_disagreement(filename: str, stored: StoredImage) -> str:
    """A note when content and slim's name lists disagree, else "" (docs/images.md)."""
    listed = filename in SLIM_PNG_NAMES or filename in SLIM_CMYK_NAMES
    if stored.reencoded and not listed:
        return f"re-encoded ({stored.reencoded}) but not in slim's list of files to re-encode"
    if listed and not stored.reencoded:
        return "in slim's list of files to re-encode, but its content is a plain JPEG; stored as is"
    return ""
