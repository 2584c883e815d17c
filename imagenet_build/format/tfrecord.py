"""TFRecord framing, as TensorFlow writes it: length, masked CRC32C of the length, payload, masked CRC32C.

CRC32C comes from google-crc32c (hardware CRC through its C extension): a pure
Python CRC would cost more than everything else per record together.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import IO, Protocol

import google_crc32c

_MASK_DELTA = 0xA282EAD8
_LENGTH = struct.Struct("<Q")
_SIGNED_LENGTH = struct.Struct("<q")
_CRC = struct.Struct("<I")
HEADER_SIZE = 12  # length + its CRC
OVERHEAD = 16  # header + payload CRC


class Readable(Protocol):
    def read(self, n: int, /) -> bytes: ...


class Hash(Protocol):
    def update(self, data: bytes, /) -> None: ...


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    return _mask(google_crc32c.value(data))


def frame(*parts: bytes) -> tuple[bytes, bytes]:
    """(header, footer) bytes that enclose the payload `b"".join(parts)` as one record."""
    record, _ = framed(parts)
    return record[0], record[-1]


def framed(parts: Sequence[bytes]) -> tuple[tuple[bytes, ...], int]:
    """The record of the payload `b"".join(parts)` as parts, (header, *parts, footer), and its size in bytes:
    what a writer writes without joining them."""
    size, crc, extend = 0, 0, google_crc32c.extend
    for part in parts:
        size += len(part)
        crc = extend(crc, part)
    length = _LENGTH.pack(size)
    return (length + _CRC.pack(_mask(google_crc32c.value(length))), *parts, _CRC.pack(_mask(crc))), size + OVERHEAD


class FramingError(ValueError):
    """The file stops being a sequence of records at byte `offset`; nothing after it can be trusted."""

    def __init__(self, offset: int, message: str) -> None:
        self.offset = offset
        self.message = message
        super().__init__(f"byte {offset}: {message}")


def _checked_length(header: bytes, offset: int, size: int) -> int:
    """The payload length a 12-byte header announces, or FramingError."""
    (length,) = _SIGNED_LENGTH.unpack_from(header)
    if masked_crc32c(header[:8]) != _CRC.unpack_from(header, 8)[0]:
        raise FramingError(offset, "length CRC mismatch (corrupt record header)")
    if length < 0:
        raise FramingError(offset, f"negative record length {length} (sign bit set)")
    if offset + OVERHEAD + length > size:
        raise FramingError(
            offset, f"record of {length} bytes runs past the end of the file ({size} bytes)"
        )
    return length


def _trailing(offset: int, size: int) -> FramingError:
    return FramingError(offset, f"{size - offset} trailing byte(s) that are not a record")


def scan_lengths(f: IO[bytes], size: int) -> Iterator[tuple[int, int]]:
    """Yield (offset, payload length) per record, reading only the headers and seeking over payloads.

    Checks each length's CRC; raises FramingError where the framing breaks.
    """
    offset = 0
    while offset < size:
        if size - offset < HEADER_SIZE:
            raise _trailing(offset, size)
        f.seek(offset)
        length = _checked_length(f.read(HEADER_SIZE), offset, size)
        yield offset, length
        offset += OVERHEAD + length


def unframe(record: bytes, check_crc: bool = True) -> bytes:
    """The payload of one whole record (header, payload, CRC) read at an index's offset and size.

    FramingError (offset 0: the record's start) where the bytes are not that record: too short,
    a length other than the size read, or (check_crc) a length or payload CRC that disagrees.
    """
    if len(record) < OVERHEAD:
        raise FramingError(0, f"{len(record)} bytes where a record needs at least {OVERHEAD}")
    (length,) = _SIGNED_LENGTH.unpack_from(record)
    if check_crc and masked_crc32c(record[:8]) != _CRC.unpack_from(record, 8)[0]:
        raise FramingError(0, "length CRC mismatch (corrupt record header)")
    if length + OVERHEAD != len(record):
        raise FramingError(0, f"the record is {length} bytes, its index entry says {len(record) - OVERHEAD}")
    payload = record[HEADER_SIZE:HEADER_SIZE + length]
    if check_crc and masked_crc32c(payload) != _CRC.unpack_from(record, HEADER_SIZE + length)[0]:
        raise FramingError(0, "payload CRC mismatch (corrupt record)")
    return payload


def read_records(f: Readable, size: int, digest: Hash | None = None) -> Iterator[tuple[int, bytes, bool]]:
    """Yield (offset, payload, payload CRC ok) per record, reading every byte once (and feeding each, in order,
    to `digest`): the payload in a read of its own (no copy of it out of a larger read), its CRC with the next
    record's header in another.

    A bad payload CRC is reported per record (the framing still holds); broken
    framing raises FramingError.
    """
    offset, head, value = 0, b"", google_crc32c.value
    while offset < size:
        if size - offset < HEADER_SIZE:
            raise _trailing(offset, size)
        if offset == 0:
            head = f.read(HEADER_SIZE)
            if digest is not None:
                digest.update(head)
        length = _checked_length(head, offset, size)
        end = offset + OVERHEAD + length
        more = HEADER_SIZE if size - end >= HEADER_SIZE else 0  # the next header, where there is one
        payload = f.read(length)
        tail = f.read(4 + more)
        if len(payload) < length or len(tail) < 4:
            raise FramingError(offset, "file shrank while being read")
        if digest is not None:
            digest.update(payload)
            digest.update(tail)
        yield offset, payload, _mask(value(payload)) == _CRC.unpack_from(tail)[0]
        head, offset = tail[4:], end
