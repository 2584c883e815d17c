"""TFRecord framing (REFERENCE §6): length, masked CRC32C of the length, payload, masked CRC32C.

CRC32C comes from google-crc32c (hardware CRC through its C extension): a pure
Python CRC would cost more than everything else per record together.
"""

import struct

import google_crc32c

_MASK_DELTA = 0xA282EAD8
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
HEADER_SIZE = 12  # length + its CRC
OVERHEAD = 16  # header + payload CRC


def _mask(crc):
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def masked_crc32c(data):
    return _mask(google_crc32c.value(data))


def frame(*parts):
    """(header, footer) bytes that enclose the payload `b"".join(parts)` as one record."""
    length = _LENGTH.pack(sum(len(p) for p in parts))
    crc = 0
    for part in parts:
        crc = google_crc32c.extend(crc, part)
    return length + _CRC.pack(masked_crc32c(length)), _CRC.pack(_mask(crc))


def iter_records(f):
    """Yield (offset, payload) for each record of an open binary file; ValueError on bad framing."""
    offset = 0
    while True:
        header = f.read(HEADER_SIZE)
        if not header:
            return
        if len(header) < HEADER_SIZE:
            raise ValueError(f"truncated record header at byte {offset}")
        (length,) = _LENGTH.unpack_from(header)
        (length_crc,) = _CRC.unpack_from(header, 8)
        if masked_crc32c(header[:8]) != length_crc:
            raise ValueError(f"length CRC mismatch at byte {offset}")
        body = f.read(length + 4)
        if len(body) < length + 4:
            raise ValueError(f"truncated record at byte {offset}")
        payload = body[:length]
        if masked_crc32c(payload) != _CRC.unpack_from(body, length)[0]:
            raise ValueError(f"payload CRC mismatch in the record at byte {offset}")
        yield offset, payload
        offset += OVERHEAD + length
