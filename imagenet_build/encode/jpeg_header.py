"""Read a JPEG's header from its bytes: the markers walked as libjpeg walks them, and what DALI's parser
would stop on; the size of its image data; its EXIF orientation.

Hand-written: Pillow's open() parses the same markers but costs several times more per image, and we
also want the truncation check. What the walk's findings mean for a build (store, re-encode, refuse)
is images.py's rule.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

SOF_MARKERS = set(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_NO_LENGTH = set(range(0xD0, 0xD8)) | {0x01}  # RST0..7 and TEM: libjpeg takes them anywhere, alone
# The markers libjpeg reads in a header (any other stops it: "Unsupported marker type"): frames, tables,
# restart interval, APPn, COM, DNL, and the image data's SOS. Those it skips have their length first.
_KNOWN = SOF_MARKERS | {0xC4, 0xC8, 0xCC, 0xDA, 0xDB, 0xDC, 0xDD, 0xFE} | set(range(0xE0, 0xF0))
_SKIPPED = set(range(0xE0, 0xF0)) | {0xFE, 0xDC}  # APPn, COM, DNL: a length below 2 only skips nothing
_PASSED = _KNOWN - SOF_MARKERS - {0xDA, 0xE1, 0xEE}  # segments walk steps over, noting nothing of them

# What in a header libjpeg steps over but DALI's parser cannot (images.py says what each does to DALI).
EXTRANEOUS = "extraneous bytes before a header marker"
NO_LENGTH = "a marker without a length among the header segments"
SHORT_SEGMENT = "a header segment with a length below 2"


NO_EXIF, UNKNOWN = -1, -2  # Walk.exif_at: the header holds none as exif_orientation reads it; not known


def is_jpeg(data: bytes) -> bool:
    """Whether bytes are a JPEG's: they start with the start-of-image marker, FF D8."""
    return data[:2] == b"\xff\xd8"


class JpegHeader(NamedTuple):
    sof: int
    precision: int
    height: int
    width: int
    components: int
    adobe_transform: object  # None when there is no Adobe APP14 segment


class Walk(NamedTuple):
    """What walking a JPEG's header found."""

    header: JpegHeader
    sof_at: int  # offset of the frame header's marker
    scan: int  # offset of the image data
    odd: str  # the first thing in the header DALI's parser cannot take (EXTRANEOUS, ...), or ""
    odd_at: int
    exif_at: int = UNKNOWN  # the EXIF segment exif_orientation reads: its offset, NO_EXIF, or UNKNOWN


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


def _frame_header(data: bytes, pos: int, marker: int, length: int) -> tuple[int, int, int, int, int]:
    """(marker, precision, height, width, components) of the frame header at `pos`."""
    if length < 8:
        raise ValueError("bad frame header")
    return marker, data[pos + 4], (data[pos + 5] << 8) | data[pos + 6], (data[pos + 7] << 8) | data[pos + 8], \
        data[pos + 9]


def walk(data: bytes, pieces: list[tuple[int, int]] | None = None) -> Walk:
    """Walk the markers up to the first SOS as libjpeg does, noting what DALI's parser would stop on;
    `pieces` gets (start, end) of each segment libjpeg reads.

    Raises ValueError with a short reason where libjpeg stops too (no decoder reads the image).
    """
    size = len(data)
    pos = 2
    sof: tuple[int, int, int, int, int] | None = None
    sof_at, adobe = -1, None
    odd, odd_at = "", -1
    plain, exif_at = True, NO_EXIF  # every segment so far one after the other, as exif_orientation reads them
    while True:
        pos = _passed(data, pos, pieces)
        if pos + 4 <= size and data[pos] == 0xFF and data[pos + 1] in _KNOWN:  # a plain segment: most of them
            marker, at = data[pos + 1], pos
            end = pos + 2 + ((data[pos + 2] << 8) | data[pos + 3])
            why = ""
            if end < pos + 4 or end > size:  # a length below 2, or past the end
                end, why = _segment_end(data, marker, at)
                plain = False
        else:
            plain = False
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
        if marker in SOF_MARKERS:
            if sof is not None:
                raise ValueError(f"a second frame header at byte {at}")
            sof, sof_at = _frame_header(data, at, marker, end - at - 2), at
        elif marker == 0xEE or marker == 0xE1:
            adobe, exif_at = _app_segment(data, at, end, adobe, exif_at if plain or exif_at >= 0 else UNKNOWN)
        elif marker == 0xDA:
            if sof is None:
                raise ValueError("image data before any frame header")
            exif_at = exif_at if plain or exif_at >= 0 else UNKNOWN
            return Walk(JpegHeader(*sof, adobe), sof_at, end, odd, odd_at, exif_at)
        pos = end


def _passed(data: bytes, pos: int, pieces: list[tuple[int, int]] | None) -> int:
    """Where the run of plain segments from `pos` that walk notes nothing of ends (tables, APPn but APP1 and
    APP14, COM: most of a header): the next segment to look at."""
    size = len(data)
    while pos + 4 <= size and data[pos] == 0xFF and data[pos + 1] in _PASSED:
        end = pos + 2 + ((data[pos + 2] << 8) | data[pos + 3])
        if end < pos + 4 or end > size:  # a length below 2, or past the end: walk's general case
            return pos
        if pieces is not None:
            pieces.append((pos, end))
        pos = end
    return pos


def _app_segment(data: bytes, at: int, end: int, adobe: object, exif_at: int) -> tuple[object, int]:
    """(adobe, exif_at) after an APP1 or APP14 segment at `at`: an Adobe segment's colour transform, the first
    EXIF segment's offset (where exif_at is still NO_EXIF)."""
    if data[at + 1] == 0xEE and end - at >= 16 and data[at + 4 : at + 9] == b"Adobe":
        return data[at + 15], exif_at
    if data[at + 1] == 0xE1 and exif_at == NO_EXIF and data[at + 4 : at + 10] == b"Exif\0\0":
        return adobe, at
    return adobe, exif_at


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


def scan_bytes(data: bytes, scan: int) -> int:
    """Bytes of image data from `scan` up to the end-of-image marker, -1 without one."""
    # Scan data holds no FF D9 (0xFF is stuffed there), so the last one found from the
    # end is the end-of-image marker; searching backwards finds it at once.
    end = data.rfind(b"\xff\xd9", scan)
    return end - scan if end >= 0 else -1


def exif_orientation(data: bytes, exif_at: int = UNKNOWN) -> int:
    """The EXIF orientation (1..8) of a JPEG, 1 when it has none or it cannot be read. `exif_at`: where its
    EXIF segment is, as the header's Walk found it (NO_EXIF: none), UNKNOWN to read the header here.

    DALI's decoder applies it and TensorFlow's ignores it, so the two disagree about the
    shape of an image whose orientation is 5..8 (and about the pixels for 2..8).
    """
    at = _exif_segment(data) if exif_at == UNKNOWN else exif_at
    if at < 0:
        return 1
    return _tiff_orientation(data[at + 10 : at + 2 + ((data[at + 2] << 8) | data[at + 3])])


def _exif_segment(data: bytes) -> int:
    """Where the first EXIF segment of a JPEG's header is, stepping from segment to segment; NO_EXIF."""
    pos, size = 2, len(data)
    while pos + 4 <= size and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker in _NO_LENGTH or marker == 0xD8:
            pos += 2
            continue
        if marker == 0xDA or marker == 0xD9:
            return NO_EXIF
        if marker == 0xE1 and data[pos + 4 : pos + 10] == b"Exif\0\0":
            return pos
        pos = pos + 2 + ((data[pos + 2] << 8) | data[pos + 3])
    return NO_EXIF


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
