"""An archive's listing (member names, offsets, sizes: ~60 bytes an image before compression), kept in the
output folder for a rerun: such a rerun plans from it without decompressing the archive (spool.py).

Kept in `.imagenet-build-listings/`, one file per archive path, with the archive's path, size
and modification time: a listing is used only while they are the same, and the archive is
decompressed again, as on a first run, where the file is missing, another archive's, or does
not parse.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zlib
from array import array
from typing import Any, List, Tuple

from imagenet_build.format.naming import LISTINGS_NAME
from imagenet_build.infra import read_door, storage, write_door
from imagenet_build.infra.jsonfile import parse_json

# (member names, data offsets, sizes, is a regular file, header CRCs, [(member, problem)] of members left out)
# of one decompressed archive (a parquet file's rows: see hf_parquet)
Listing = Tuple[List[str], "array[int]", "array[int]", "array[int]", "array[int]", List[Tuple[str, str]]]

LISTING_FORMAT = 2  # 2: with each member's header CRC-32


def _key(archive: str) -> str:
    """An archive's path as its kept listing names it: its real path, or its URL."""
    return archive if storage.is_url(archive) else os.path.realpath(archive)


def listing_path(work_dir: str, archive: str) -> str:
    """Where an archive's listing is kept: one file per archive path, in the output's listings folder."""
    digest = hashlib.sha256(_key(archive).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return os.path.join(work_dir, LISTINGS_NAME, f"{storage.basename(archive)}-{digest}")


def _listing_body(listed: Listing) -> bytes:
    """A listing's columns as bytes: name lengths, names, offsets, sizes, regular-file flags, header CRCs, then
    the members left out (the parquet reader's disagreeing rows) as JSON."""
    names, offsets, sizes, files, crcs, left_out = listed
    encoded = [name.encode("utf-8", "surrogatepass") for name in names]
    lengths = array("Q", map(len, encoded))
    return b"".join([len(names).to_bytes(8, "little"), lengths.tobytes(), b"".join(encoded), offsets.tobytes(),
                     sizes.tobytes(), files.tobytes(), crcs.tobytes(), json.dumps(left_out).encode()])


def _head(archive: str, stamp_now: str) -> dict[str, Any]:
    """What a kept listing must say to be used: its format, the archive's path and stamp, the byte order."""
    return {"format": LISTING_FORMAT, "archive": _key(archive), "stamp": stamp_now, "byteorder": sys.byteorder}


def digest(listed: Listing) -> str:
    """sha256 of a listing's body: what a kept listing and the archive's listing now are compared by."""
    return hashlib.sha256(_listing_body(listed)).hexdigest()


def encode_listing(archive: str, stamp_now: str, listed: Listing) -> bytes:
    """An archive's listing as kept in the output: a JSON head (the archive, its stamp) and the body, compressed."""
    head = json.dumps(_head(archive, stamp_now)).encode()
    return zlib.compress(head + b"\n" + _listing_body(listed), 1)


def read_listing(work_dir: str, archive: str, stamp_now: str) -> tuple[Listing, str] | None:
    """(the listing, sha256 of its body) an earlier run kept of `archive` as it is now, or None (no listing, another
    stamp, or a file that does not parse: the archive is then decompressed as on a first run)."""
    if not work_dir:
        return None
    try:
        head, body = zlib.decompress(read_door.read_bytes(listing_path(work_dir, archive))).split(b"\n", 1)
        meta = parse_json(head, archive)
        if meta != _head(archive, stamp_now):
            return None
        return _parse_listing(body), hashlib.sha256(body).hexdigest()
    except (OSError, ValueError, zlib.error, IndexError):
        return None


def _parse_listing(body: bytes) -> Listing:
    count = int.from_bytes(body[:8], "little")
    at = 8
    lengths = array("Q")
    lengths.frombytes(body[at:at + 8 * count])
    at += 8 * count
    names = []
    for length in lengths:
        names.append(body[at:at + length].decode("utf-8", "surrogatepass"))
        at += length
    columns: list[array[int]] = []
    for code in ("Q", "Q", "b", "Q"):
        column = array(code)
        width = column.itemsize * count
        column.frombytes(body[at:at + width])
        if len(column) != count:
            raise ValueError("listing cut short")
        columns.append(column)
        at += width
    offsets, sizes, files, crcs = columns
    left_out = [(str(member), str(problem)) for member, problem in parse_json(body[at:], "listing")]
    return names, offsets, sizes, files, crcs, left_out


def write_listings(listings: dict[str, bytes]) -> None:
    """Write listings to keep ({path: encode_listing's bytes}), each atomically."""
    for path, data in listings.items():
        work_dir = os.path.dirname(os.path.dirname(path))  # the output folder, which holds the listings' folder
        write_door.make_folder(os.path.dirname(path), within=work_dir)
        write_door.write_bytes(path, data, within=work_dir)
