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
The header walk is hand-written: Pillow's open() parses the same markers but
costs several times more per image, and we also want the truncation check.
"""

from __future__ import annotations

import io
from typing import Any, Literal, NamedTuple

from imagenet_build.infra.errors import InputError

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
_NO_LENGTH = set(range(0xD0, 0xD8)) | {0x01}  # RST0..7 and TEM: libjpeg takes them anywhere, alone
# The markers libjpeg reads in a header (any other stops it: "Unsupported marker type"): frames, tables,
# restart interval, APPn, COM, DNL, and the image data's SOS. Those it skips have their length first.
_KNOWN = _SOF_MARKERS | {0xC4, 0xC8, 0xCC, 0xDA, 0xDB, 0xDC, 0xDD, 0xFE} | set(range(0xE0, 0xF0))
_SKIPPED = set(range(0xE0, 0xF0)) | {0xFE, 0xDC}  # APPn, COM, DNL: a length below 2 only skips nothing

# Why an image that libjpeg decodes is re-encoded although its frame is storable: what DALI's parser does.
EXTRANEOUS = "extraneous bytes before a header marker"
NO_LENGTH = "a marker without a length among the header segments"
SHORT_SEGMENT = "a header segment with a length below 2"
DALI_STOPS = {
    EXTRANEOUS: "DALI's parser stops on it (\"Invalid marker\"); libjpeg skips them",
    NO_LENGTH: "DALI's parser reads a length after every marker and loses its place",
    SHORT_SEGMENT: "DALI's parser steps back by its length and stops",
}

ARITHMETIC = "arithmetic-coded JPEG"
_ARITHMETIC = {0xC9, 0xCA}  # sequential and progressive: libjpeg decodes them, nvJPEG does not
LOSSLESS = "lossless JPEG"  # SOF3: libjpeg-turbo 3 decodes it, TensorFlow's decoder does not

STORE, REENCODE, REFUSE = "store", "re-encode", "refuse"


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


class Decision(NamedTuple):
    """What a build does with one JPEG's bytes: STORE, REENCODE or REFUSE them, and why."""

    action: str
    reason: str  # REENCODE: the summary's words ("CMYK JPEG", EXTRANEOUS, ...); REFUSE: the error; STORE: ""
    at: int  # the byte of the image the reason is about (the offending marker or bytes), -1 when none
    header: JpegHeader | None  # None when the header cannot be read
    scan_bytes: int  # bytes of image data up to the end-of-image marker, -1 without one
    readable: bytes  # the bytes as libjpeg reads them: the header without what it skips (what Pillow needs)


class _Walk(NamedTuple):
    header: JpegHeader
    sof_at: int  # offset of the frame header's marker
    scan: int  # offset of the image data
    odd: str  # the first thing in the header DALI's parser cannot take (EXTRANEOUS, ...), or ""
    odd_at: int


def _next_marker(data: bytes, pos: int) -> tuple[int, int, bool]:
    """(marker, its position, whether bytes were skipped to reach it), found as libjpeg finds it: past
    bytes other than 0xFF, 0xFF fill bytes and FF 00 pairs; ValueError where there is none."""
    size = len(data)
    skipped = False
    while True:
        if pos < size and data[pos] != 0xFF:
            skipped = True
            pos = data.find(b"\xff", pos)
            if pos < 0:
                raise ValueError("truncated in the header")
        while pos + 1 < size and data[pos + 1] == 0xFF:  # fill bytes
            pos += 1
        if pos + 1 >= size:  # no marker after the fill bytes
            raise ValueError("truncated in the header")
        if data[pos + 1] != 0:
            return data[pos + 1], pos, skipped
        skipped = True  # FF 00: a stuffed zero outside any image data
        pos += 2


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


def _walk(data: bytes, pieces: list[tuple[int, int]] | None = None) -> _Walk:
    """Walk the markers up to the first SOS as libjpeg does, noting what DALI's parser would stop on;
    `pieces` gets (start, end) of each segment libjpeg reads.

    Raises ValueError with a short reason where libjpeg stops too (no decoder reads the image).
    """
    size = len(data)
    pos = 2
    sof, sof_at, adobe = None, -1, None
    odd, odd_at = "", -1
    while True:
        if pos + 4 <= size and data[pos] == 0xFF and data[pos + 1] in _KNOWN:  # a plain segment: most of them
            marker, at = data[pos + 1], pos
            length = (data[pos + 2] << 8) | data[pos + 3]
            end, why = pos + 2 + length, ""
            if length < 2 or end > size:
                end, why = _segment_end(data, marker, at)
        else:
            marker, at, skipped = _next_marker(data, pos)
            end, why = _segment_end(data, marker, at)
            if skipped and not odd:
                odd, odd_at = EXTRANEOUS, pos
        if why:  # a marker DALI's parser cannot step over: libjpeg goes on right after it
            odd, odd_at = (odd, odd_at) if odd else (why, at)
            pos = end
            continue
        if pieces is not None:
            pieces.append((at, end))
        if marker in _SOF_MARKERS:
            if sof is not None:
                raise ValueError(f"a second frame header at byte {at}")
            sof, sof_at = _frame_header(data, at, marker, end - at - 2), at
        elif marker == 0xEE and end - at >= 16 and data[at + 4 : at + 9] == b"Adobe":
            adobe = data[at + 15]
        elif marker == 0xDA:
            if sof is None:
                raise ValueError("image data before any frame header")
            return _Walk(sof._replace(adobe_transform=adobe), sof_at, end, odd, odd_at)
        pos = end


def _segment_end(data: bytes, marker: int, at: int) -> tuple[int, str]:
    """(where the segment of `marker` at `at` ends, "" or why DALI's parser cannot step over it there).

    Raises ValueError where libjpeg stops: a second SOI, an EOI, a marker it does not know, a segment
    past the end of the file."""
    if marker in _NO_LENGTH:
        return at + 2, NO_LENGTH
    if marker == 0xD8:
        raise ValueError(f"a second start-of-image marker at byte {at}")
    if marker == 0xD9:
        raise ValueError("ends before any image data")
    if marker not in _KNOWN:
        raise ValueError(f"marker 0x{marker:02X} at byte {at}, which libjpeg does not read")
    if at + 4 > len(data):
        raise ValueError("truncated in the header")
    length = (data[at + 2] << 8) | data[at + 3]
    if length < 2:
        if marker in _SKIPPED:  # libjpeg reads the length and skips nothing
            return at + 4, SHORT_SEGMENT
        raise ValueError(f"segment length {length} at byte {at}")
    if at + 2 + length > len(data):
        raise ValueError("truncated in the header")
    return at + 2 + length, ""


def parse_jpeg_header(data: bytes) -> tuple[JpegHeader, int]:
    """(JpegHeader, offset of the image data); ValueError with a short reason where libjpeg stops."""
    walk = _walk(data)
    return walk.header, walk.scan


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
    return header, _scan_bytes(data, scan)


def _scan_bytes(data: bytes, scan: int) -> int:
    # Scan data holds no FF D9 (0xFF is stuffed there), so the last one found from the
    # end is the end-of-image marker; searching backwards finds it at once.
    end = data.rfind(b"\xff\xd9", scan)
    return end - scan if end >= 0 else -1


def decide(data: bytes) -> Decision:
    """The one rule for a JPEG's bytes (data starting FF D8), for convert and verify alike.

    STORE when TensorFlow's, DALI's and torchvision's decoders all read it as it is; REENCODE (with the
    summary's reason) when libjpeg decodes it but one of them cannot, or slim re-encodes its kind;
    REFUSE when no decoder reads it (Pillow's decode, at re-encoding, is the last word on the rest).
    """
    try:
        walk = _walk(data)
    except ValueError as e:
        return Decision(REFUSE, f"broken JPEG: {e}", -1, None, -1, data)
    header = walk.header
    scan_bytes = _scan_bytes(data, walk.scan)
    if scan_bytes < 0:
        return Decision(REFUSE, "truncated JPEG: no end-of-image marker after the image data", len(data),
                        header, scan_bytes, data)
    problem = size_problem(header, scan_bytes)
    if problem:
        return Decision(REFUSE, problem, -1, header, scan_bytes, data)
    readable = data
    if walk.odd:  # what libjpeg reads: the segments it found, without the bytes it skipped
        pieces: list[tuple[int, int]] = []
        _walk(data, pieces)
        readable = b"".join([data[:2], *(data[start:end] for start, end in pieces), data[pieces[-1][1] :]])
    if not is_storable(header):
        return Decision(REENCODE, _jpeg_kind(header), walk.sof_at, header, scan_bytes, readable)
    if walk.odd:
        return Decision(REENCODE, walk.odd, walk.odd_at, header, scan_bytes, readable)
    return Decision(STORE, "", -1, header, scan_bytes, data)


def readable(data: bytes) -> bytes:
    """An image's bytes as a decoder that needs a clean header (Pillow) should get them: a JPEG's header
    without the bytes libjpeg skips, anything else as it is."""
    return decide(data).readable if data[:2] == b"\xff\xd8" else data


def prepare(data: bytes, path: str) -> StoredImage:
    """The bytes to store for one input file, with their size. Raises InputError."""
    if not data:
        raise InputError(path, "empty file (0 bytes)")
    if data[:2] == b"\xff\xd8":
        decision = decide(data)
        if decision.action == REFUSE:
            raise InputError(path, decision.reason)
        if decision.action == STORE:
            assert decision.header is not None
            return StoredImage(data, decision.header.height, decision.header.width, "")
        return reencode(decision.readable, path, decision.reason)
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
        if kind:  # a JPEG Pillow cannot open: no decoder reads it (2 components, 12 bits, ...)
            raise InputError(path, f"cannot decode {kind}: no decoder reads it") from None
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
        if marker in _NO_LENGTH or marker == 0xD8:
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
