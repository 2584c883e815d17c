"""Deflate data inflated, by zlib or ISA-L (the same bytes, ISA-L faster where installed), and the one reading of
a gzip stream every gzip input goes through: the archives of a .tar.gz copy (sources/inflate.py) and the box
archive (catalog/boxes.py).

A gzip stream read by tarfile's own "r|gz" is not checked: its CRC-32 and length are never
compared, and a stream cut short ends where the data ends, so a truncated box archive gave a
build with a third of its boxes and exit 0. Here every gzip member's CRC-32 and length are
checked (zlib's and ISA-L's gzip mode do) and the stream must reach its end marker.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import IO, Any, Callable, NamedTuple

from imagenet_build.infra.errors import InputError

# Compressed bytes read at a time, and decompressed bytes made at a time (whatever the compression ratio).
# Buffers that stay in the CPU's cache: ISA-L on a 200 MB archive, 64 KiB / 256 KiB, 256 KiB / 1 MiB and
# 32 KiB / 128 KiB all took 0.59-0.72 s of CPU (their order changed from one series to the next); 1 MiB /
# 4 MiB 0.84 s.
CHUNK = 256 << 10
MAX_OUT = 1 << 20
GZIP = 31  # zlib's wbits for a gzip header and trailer (CRC-32 and length checked)


class DeflateCodec(NamedTuple):
    decompressobj: Callable[..., Any]
    error: Any  # the exception class its decompressobj raises
    crc32: Callable[..., int]


@functools.lru_cache(maxsize=None)
def deflate_codec() -> DeflateCodec:
    """zlib's decompressobj, error and crc32 as ISA-L (package isal) gives them where installed, else zlib's.

    The same bytes either way. ISA-L, on one core here: a gzipped ImageNet-like tar 0.60 s against
    0.75 s for 200 MB in one call (streamed, 0.59 against 0.67 s, within this machine's noise); 2,000
    deflated JPEGs (a Kaggle zip's members) inflated and CRC-checked at 395 against 347 MB/s.
    """
    try:
        from isal import isal_zlib
    except ImportError:
        import zlib

        return DeflateCodec(zlib.decompressobj, zlib.error, zlib.crc32)
    return DeflateCodec(isal_zlib.decompressobj, isal_zlib.error, isal_zlib.crc32)


def gunzip_chunks(raw: IO[bytes], where: str) -> Iterator[bytes]:
    """The decompressed bytes of the gzip stream `raw` (read as a stream), chunk by chunk; InputError naming
    `where` when the stream is empty, is not gzip, fails its CRC-32 or length, or ends before its end marker.

    Concatenated gzip members (pigz, cat a.gz b.gz) are one stream, as gzip reads them; zero
    padding after the last one is allowed, as gzip allows it.
    """
    decompressobj, error, _ = deflate_codec()
    inflate, seen = decompressobj(GZIP), False
    while True:
        chunk = raw.read(CHUNK)
        if not chunk:
            break
        while chunk:
            if inflate.eof:  # one gzip member ended: another follows, or zero padding
                if not chunk.strip(b"\0"):
                    break
                inflate = decompressobj(GZIP)
            try:
                out = inflate.decompress(chunk, MAX_OUT)
            except error as e:
                raise InputError(where, f"not a valid gzip file ({e})") from None
            seen = True
            if out:
                yield out
            chunk = inflate.unused_data if inflate.eof else inflate.unconsumed_tail
    if not seen:
        raise InputError(where, "empty file: not a gzip file")
    if not inflate.eof:
        raise InputError(where, "truncated: the gzip data ends before its end marker (an interrupted download?)")


class GunzipReader:
    """gunzip_chunks as a file to read from start to end (tarfile's stream mode reads it): each check of a
    gzip stream, made as it is read."""

    def __init__(self, raw: IO[bytes], where: str) -> None:
        self._chunks = gunzip_chunks(raw, where)
        self._held = b""

    def read(self, n: int = -1) -> bytes:
        parts, size = [self._held], len(self._held)
        while n < 0 or size < n:
            chunk = next(self._chunks, b"")
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        data = b"".join(parts)
        if n < 0:
            self._held = b""
            return data
        self._held = data[n:]
        return data[:n]

    def rest(self) -> bytes:
        """What is left of the stream, read to its end (so that its checks are made)."""
        return self.read()


class _Prefixed:
    """A stream whose first bytes were read already: those, then the rest."""

    def __init__(self, head: bytes, raw: IO[bytes]) -> None:
        self._head, self._raw = head, raw

    def read(self, n: int = -1) -> bytes:
        head, self._head = self._head, b""
        if n < 0:
            return head + self._raw.read()
        if len(head) > n:
            head, self._head = head[:n], head[n:]
        return head + (self._raw.read(n - len(head)) if n > len(head) else b"")


def maybe_gunzip(raw: IO[bytes], where: str) -> GunzipReader | _Prefixed:
    """The stream decompressed and checked (GunzipReader) where it is gzip (its first bytes say so), else as is."""
    head = raw.read(2)
    if head == b"\x1f\x8b":
        return GunzipReader(_Prefixed(head, raw), where)  # type: ignore[arg-type]
    return _Prefixed(head, raw)
