"""A PNG walked chunk by chunk and its image data inflated as libpng reads them, without decoding pixels.

What `walk` refuses is what stops a decoder a build serves: TensorFlow's and DALI's (libpng) stop
on a PNG whose chunks are cut short or fail their CRC, whose image data does not inflate to its
rows (each with a filter type 0-4), with an unknown critical chunk or no IEND; torchvision's crashes
the process on some of them (a libpng error it does not catch), and Pillow pads an image whose data
ends early with black rows without a word. An ancillary chunk (text, gamma, ...) whose CRC fails is
skipped by libpng and refused by Pillow. Bytes after IEND are read by all. docs/images.md has the
cases and the decoders' words.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterator, NamedTuple

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_CRITICAL = (b"IHDR", b"PLTE", b"IDAT", b"IEND")
# colour type: (channels, the bit depths it may have)
_COLOUR_TYPES = {0: (1, (1, 2, 4, 8, 16)), 2: (3, (8, 16)), 3: (1, (1, 2, 4, 8)), 4: (2, (8, 16)), 6: (4, (8, 16))}
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
_INFLATE_STEP = 1 << 20  # bytes of image data inflated at a time: never the whole image in memory


class PngHeader(NamedTuple):
    """A PNG's IHDR."""

    width: int
    height: int
    bit_depth: int
    colour_type: int
    interlaced: bool


class PngError(ValueError):
    """Why a PNG is not as every decoder needs it. `libpng_reads`: TensorFlow's and DALI's decoders read past
    it (an ancillary chunk's CRC; a size past Pillow's decompression-bomb limit), Pillow does not."""

    def __init__(self, message: str, libpng_reads: bool = False) -> None:
        super().__init__(message)
        self.libpng_reads = libpng_reads


class _Chunk(NamedTuple):
    kind: bytes
    at: int  # the byte of the PNG its length field starts at
    body: memoryview


def is_png(data: bytes) -> bool:
    return data[:8] == PNG_MAGIC


def _name(kind: bytes) -> str:
    return kind.decode("latin-1")


def _critical(kind: bytes) -> bool:
    return not kind[0] & 0x20  # a chunk type's first letter in upper case


def _chunks(data: bytes) -> Iterator[_Chunk]:
    """The chunks up to IEND, each whole and its CRC right; PngError naming the first that is not."""
    view, at = memoryview(data), len(PNG_MAGIC)
    while True:
        if at + 8 > len(data):
            raise PngError(f"no IEND chunk: the PNG ends at byte {len(data)} without it")
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if not (kind.isascii() and kind.isalpha()):
            raise PngError(f"no chunk at byte {at} (a chunk type of {kind!r})")
        if at + 12 + length > len(data):
            raise PngError(f"chunk {_name(kind)} at byte {at} runs past the end of the PNG")
        body = view[at + 8:at + 8 + length]
        if zlib.crc32(body, zlib.crc32(kind)) != struct.unpack(">I", data[at + 8 + length:at + 12 + length])[0]:
            raise PngError(f"chunk {_name(kind)} at byte {at}: CRC mismatch", libpng_reads=not _critical(kind))
        yield _Chunk(kind, at, body)
        if kind == b"IEND":
            return
        at += 12 + length


def _header(chunk: _Chunk, max_pixels: int | None) -> PngHeader:
    """The IHDR's fields, each one a decoder takes; PngError naming the first that is not."""
    if chunk.kind != b"IHDR" or len(chunk.body) != 13:
        raise PngError(f"the first chunk is {_name(chunk.kind)} of {len(chunk.body)} bytes, not IHDR of 13")
    width, height, depth, colour, compression, filtering, interlace = struct.unpack(">IIBBBBB", chunk.body)
    if not (0 < width < 2**31 and 0 < height < 2**31):
        raise PngError(f"IHDR: a size of {width}x{height}")
    if colour not in _COLOUR_TYPES or depth not in _COLOUR_TYPES[colour][1]:
        raise PngError(f"IHDR: colour type {colour} of bit depth {depth}")
    if compression or filtering or interlace > 1:
        raise PngError(f"IHDR: compression {compression}, filter method {filtering}, interlace method {interlace}")
    if max_pixels and width * height > max_pixels:
        raise PngError(f"IHDR claims {width}x{height} = {width * height:,} pixels, beyond Pillow's "
                       f"decompression-bomb limit of {max_pixels:,}", libpng_reads=True)
    return PngHeader(width, height, depth, colour, interlace == 1)


def row_sizes(header: PngHeader) -> Iterator[int]:
    """The bytes of each row of image data, its filter type byte included, pass by pass when interlaced."""
    bits = _COLOUR_TYPES[header.colour_type][0] * header.bit_depth
    passes = _ADAM7 if header.interlaced else ((0, 0, 1, 1),)
    for x0, y0, dx, dy in passes:
        columns, rows = -(-(header.width - x0) // dx), -(-(header.height - y0) // dy)
        if columns > 0 and rows > 0:
            for _ in range(rows):
                yield 1 + -(-columns * bits // 8)


def walk(data: bytes, max_pixels: int | None = None) -> PngHeader:
    """A PNG's header, once its chunks, their order and its image data are as every decoder needs them;
    PngError saying what is not. `max_pixels`: the most pixels its header may claim (checked before any
    image data is inflated)."""
    found = _chunks(data)
    header = _header(next(found), max_pixels)
    image_data: list[memoryview] = []
    seen = [b"IHDR"]
    for chunk in found:
        kind = chunk.kind
        if kind == b"IDAT":
            if image_data and seen[-1] != b"IDAT":
                raise PngError(f"chunk IDAT at byte {chunk.at}: the image data is not in consecutive IDAT chunks")
            if header.colour_type == 3 and b"PLTE" not in seen:
                raise PngError(f"chunk IDAT at byte {chunk.at} before the PLTE chunk a palette image needs")
            image_data.append(chunk.body)
        elif kind in (b"IHDR", b"PLTE") and (kind in seen or image_data):
            raise PngError(f"chunk {_name(kind)} at byte {chunk.at}: a second one, or after the image data")
        elif _critical(kind) and kind not in _CRITICAL:
            raise PngError(f"chunk {_name(kind)} at byte {chunk.at}: a critical chunk no decoder knows")
        seen.append(kind)
    if not image_data:
        raise PngError("no IDAT chunk: the PNG holds no image data")
    _check_image_data(image_data, header)
    return header


def _inflated(image_data: list[memoryview]) -> Iterator[bytes]:
    """The IDAT chunks' data inflated, a block at a time (zlib.error where it does not inflate)."""
    inflater = zlib.decompressobj()
    for piece in image_data:
        pending: bytes | memoryview = piece
        while pending:
            out = inflater.decompress(pending, _INFLATE_STEP)
            pending = inflater.unconsumed_tail
            if out:
                yield out
    while True:  # what zlib holds back when a block filled up as the input ran out
        out = inflater.decompress(b"", _INFLATE_STEP)
        if not out:
            return
        yield out


def _check_image_data(image_data: list[memoryview], header: PngHeader) -> None:
    """The IDAT chunks inflate to at least the header's rows, each starting with a filter type 0-4 (libpng
    ignores what follows the last row); PngError where they do not."""
    rows = row_sizes(header)
    produced = start = number = 0  # bytes inflated; the next row's first byte (its filter type), its number
    size = next(rows)
    blocks = _inflated(image_data)
    while size or produced < start:
        try:
            out = next(blocks, b"")
        except zlib.error as e:
            raise PngError(f"the image data does not inflate after {number} of its rows ({e})") from None
        if not out:
            total = sum(row_sizes(header))
            raise PngError(f"the image data ends after {produced:,} of its {total:,} bytes")
        while size and start < produced + len(out):
            kind = out[start - produced]
            if kind > 4:
                raise PngError(f"row {number + 1} of the image data has filter type {kind} (0 to 4 exist)")
            start, number, size = start + size, number + 1, next(rows, 0)
        produced += len(out)
