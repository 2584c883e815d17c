"""Zip archives read in place (APPNOTE.TXT): the end records (Zip64 followed), the central directory streamed,
each member's bytes read and checked in a worker, and a Zip64 writer for samples.

A listing streams the central directory in blocks (zipfile.infolist() would hold ~700 B per
member: ~1.4 GB for Kaggle's 2 M members). A member's data starts after its local header,
whose extra field may differ from the central one, so a worker reads the 30-byte local header
first (one more small read at the same place: reading 1.3 M local headers while listing would
be 1.3 M random reads on the driver). The bytes read must be the member the directory named:
the local header's name is the directory's, its method and (where it carries them) sizes and
CRC-32 agree, no member's data runs into the next member's local header (Places), and every
member's CRC-32 is checked, STORED (a byte range, as a tar member is) or DEFLATED (inflated
raw, its size checked too).
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Tuple, Union

from imagenet_build.infra import write_door
from imagenet_build.infra.deflate import deflate_codec
from imagenet_build.infra.errors import InputError, PathLike
from imagenet_build.model import utf8_name
from imagenet_build.sources.tars import ArchiveReader, read_range

if TYPE_CHECKING:
    from imagenet_build.model import ImageEntry, ShardSpec

STORED, DEFLATED = 0, 8
EOCD = struct.Struct("<4s4H2LH")  # end of central directory record
EOCD_SIG, LOCATOR_SIG, EOCD64_SIG = b"PK\x05\x06", b"PK\x06\x07", b"PK\x06\x06"
LOCATOR = struct.Struct("<4sLQL")  # zip64 end of central directory locator
EOCD64 = struct.Struct("<4sQ2H2L4Q")  # zip64 end of central directory record
CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # central directory file header
CENTRAL_SIG, LOCAL_SIG = b"PK\x01\x02", b"PK\x03\x04"
LOCAL = struct.Struct("<4s5H3L2H")  # local file header
LOCAL_SIZE = LOCAL.size  # the local file header's fixed part (30 bytes); name and extra follow
UTF8_FLAG, DESCRIPTOR_FLAG = 0x800, 0x8
HEAD_READ = LOCAL_SIZE + 512  # read with the local header: a small member's data comes with it
FULL32, FULL16 = 0xFFFFFFFF, 0xFFFF

# A zip member's `member_info` (ImageEntry.member_info): DEFLATED flag | inflated size << 32 | CRC-32
DEFLATED_FLAG = 1 << 63
MAX_SIZE = (1 << 31) - 1

# (name, local header offset, compressed size, size, CRC-32, method, flags, name's length in bytes), as the
# central directory lists a member
CentralEntry = Tuple[str, int, int, int, int, int, int, int]
# (name, bytes, method, data descriptor?): a member for write_zip
ZipMember = Tuple[str, bytes, int, bool]


def pack_member_info(method: int, usize: int, crc: int) -> int:
    return (DEFLATED_FLAG if method == DEFLATED else 0) | usize << 32 | crc


def end_record(f: IO[bytes], size: int, where: str) -> tuple[int, int, int]:
    """(central directory offset, its size, member count), Zip64 records followed."""
    tail_size = min(size, EOCD.size + FULL16 + LOCATOR.size)
    f.seek(size - tail_size)
    tail = f.read(tail_size)
    at = tail.rfind(EOCD_SIG)
    while at >= 0 and at + EOCD.size > len(tail):
        at = tail.rfind(EOCD_SIG, 0, at)
    if at < 0:
        raise InputError(where, "not a zip archive, or truncated: no end-of-central-directory record at its end")
    _, disk, cd_disk, _, count, cd_size, cd_offset, _ = EOCD.unpack_from(tail, at)
    eocd_at = size - tail_size + at
    cd_end = eocd_at
    if at >= LOCATOR.size and tail[at - LOCATOR.size:at - LOCATOR.size + 4] == LOCATOR_SIG:
        _, _, record_at, disks = LOCATOR.unpack_from(tail, at - LOCATOR.size)
        f.seek(record_at)
        record = f.read(EOCD64.size)
        if len(record) < EOCD64.size or record[:4] != EOCD64_SIG:
            raise InputError(where, "broken zip: the Zip64 end record is not where its locator says")
        _, _, _, _, disk, cd_disk, _, count, cd_size, cd_offset = EOCD64.unpack(record)
        cd_end = record_at
    if disk or cd_disk:
        raise InputError(where, "a multi-part (split) zip: join the parts into one file first")
    if cd_offset + cd_size != cd_end:
        raise InputError(where, f"broken or truncated zip: the central directory ({cd_size} bytes at {cd_offset}) "
                                f"does not end where the end record is ({cd_end})")
    return cd_offset, cd_size, count


def central_members(f: IO[bytes], cd_offset: int, cd_size: int, count: int, where: str) -> Iterator[CentralEntry]:
    """Yield (name, local header offset, compressed size, size, CRC-32, method, flags, name length) from the
    central directory.

    Streamed in blocks: the real one is ~270 MB for 2 M members.
    """
    f.seek(cd_offset)
    buf, pos, left = b"", 0, cd_size
    for number in range(count):
        if len(buf) - pos < CENTRAL.size + 3 * FULL16:  # room for the longest entry
            more = f.read(min(left, 1 << 22))
            left -= len(more)
            buf, pos = buf[pos:] + more, 0
        if len(buf) - pos < CENTRAL.size or buf[pos:pos + 4] != CENTRAL_SIG:
            raise InputError(where, f"broken zip: central directory entry {number + 1} of {count} is missing or bad")
        (_, _, _, _, _, flags, method, _, _, crc, csize, usize, name_len, extra_len, comment_len,
         _, _, _, offset) = CENTRAL.unpack_from(buf, pos)
        pos += CENTRAL.size
        end = pos + name_len + extra_len + comment_len
        if end > len(buf):
            raise InputError(where, f"broken zip: central directory entry {number + 1} runs past its end")
        name = member_name(buf[pos:pos + name_len], flags, where)
        if FULL32 in (usize, csize, offset):
            usize, csize, offset = _zip64(buf, pos + name_len, extra_len, usize, csize, offset, f"{where}:{name}")
        pos = end
        yield name, offset, csize, usize, crc, method, flags, name_len


def member_name(raw: bytes, flags: int, where: str) -> str:
    """A member's name: UTF-8 where its flags say so (utf8_name: refused if it is not), else cp437 (APPNOTE)."""
    return utf8_name(raw, where, ":") if flags & UTF8_FLAG else raw.decode("cp437")


def _zip64(
    buf: bytes, at: int, extra_len: int, usize: int, csize: int, offset: int, where: str
) -> tuple[int, int, int]:
    """The 64-bit values of the Zip64 extra field, for the 32-bit fields that are 0xFFFFFFFF (in this order).

    where: the zip and the member (errors name both).
    """
    end = at + extra_len
    while at + 4 <= end:
        kind, length = struct.unpack_from("<2H", buf, at)
        at += 4
        if at + length > end:  # a field claiming more bytes than the entry's extra data holds
            break
        if kind == 1:
            needed = (usize, csize, offset).count(FULL32)
            if length // 8 < needed:
                raise InputError(where, f"broken zip: {needed} of its 32-bit fields are marked as Zip64, "
                                        f"its Zip64 extra field holds {length // 8} value(s)")
            values = iter(struct.unpack_from(f"<{length // 8}Q", buf, at))
            usize = next(values) if usize == FULL32 else usize
            csize = next(values) if csize == FULL32 else csize
            offset = next(values) if offset == FULL32 else offset
            return usize, csize, offset
        at += length
    raise InputError(where, "broken zip: 32-bit sizes marked as Zip64, but no Zip64 extra field")


def member_bytes(
    source: Union[int, IO[bytes]], offset: int, csize: int, member_info: int, name: str, where: str,
    head: bytes | None = None,
) -> bytes:
    """The bytes of member `name`, whose local header is at `offset`: a byte range, or inflated; checked.

    The one check of every read from a zip: the bytes read are the member the directory named
    (local_header), and their CRC-32 (and a deflated member's size) are the directory's,
    whether stored or deflated. head: bytes already read from `offset`, to save a read.
    """
    if head is None:
        head = read_range(source, offset, HEAD_READ)
    start = local_header(source, head, offset, name, csize, member_info, where)
    if start + csize <= len(head):
        data = head[start:start + csize]
    else:
        data = read_range(source, offset + start, csize)
    if len(data) != csize:
        raise InputError(where, f"truncated: the zip ends inside this member ({csize} bytes at {offset + start})")
    usize, crc = (member_info >> 32) & MAX_SIZE, member_info & FULL32
    codec = deflate_codec()
    deflated = bool(member_info & DEFLATED_FLAG)
    if deflated:
        data = _inflate(data, usize, where)
    found = codec.crc32(data)
    if found != crc:
        raise InputError(where, f"corrupt: CRC-32 {found:08x} of its {'inflated ' if deflated else ''}bytes, "
                                f"the zip's directory says {crc:08x}")
    return data


def _inflate(data: bytes, usize: int, where: str) -> bytes:
    codec = deflate_codec()
    inflater = codec.decompressobj(-15)
    try:
        out = inflater.decompress(data, usize + 1)
    except codec.error as e:
        raise InputError(where, f"corrupt: its deflated data does not inflate ({e})") from None
    if not inflater.eof or len(out) != usize:
        raise InputError(where, f"corrupt: inflates to {len(out)}{'+' if not inflater.eof else ''} bytes, "
                                f"the zip's directory says {usize}")
    return out


def local_header(
    source: Union[int, IO[bytes]], head: bytes, offset: int, name: str, csize: int, member_info: int, where: str
) -> int:
    """Where the member's data starts, from `offset`: its local header (in `head`, read from `offset`) checked
    against the central directory's entry.

    The name must be the directory's (an entry pointing at another member's local header
    would read that image under this member's label); so must the method, and, where the
    header carries them (not after a data descriptor, whose local fields are 0), the sizes
    and CRC-32.
    """
    if len(head) < LOCAL_SIZE or head[:4] != LOCAL_SIG:
        raise InputError(where, f"no zip local header at byte {offset}: the zip changed since it was listed, "
                                "or is broken")
    _, _, flags, method, _, _, crc, lcsize, lusize, name_len, extra_len = LOCAL.unpack_from(head)
    start = LOCAL_SIZE + name_len + extra_len
    if len(head) < start:  # a long name or extra field
        head = read_range(source, offset, start)
    found = member_name(head[LOCAL_SIZE:LOCAL_SIZE + name_len], flags, where)
    if found != name:
        raise InputError(where, f"the local header at byte {offset} is {found}'s: the zip's directory points this "
                                "member at another member's data")
    if method != (DEFLATED if member_info & DEFLATED_FLAG else STORED):
        raise InputError(where, f"broken zip: its local header says method {method}, the directory "
                                f"{DEFLATED if member_info & DEFLATED_FLAG else STORED}")
    if not flags & DESCRIPTOR_FLAG:
        if FULL32 in (lcsize, lusize):
            lusize, lcsize, _ = _zip64(head, LOCAL_SIZE + name_len, extra_len, lusize, lcsize, 0, where)
        usize, ccrc = (member_info >> 32) & MAX_SIZE, member_info & FULL32
        if (lcsize, lusize, crc) != (csize, usize, ccrc):
            raise InputError(where, f"broken zip: its local header says {lcsize} bytes ({lusize} inflated), CRC-32 "
                                    f"{crc:08x}; the directory {csize} ({usize}), {ccrc:08x}")
    return start


def check_member(path: str, name: str, csize: int, usize: int, method: int, flags: int) -> None:
    """A member a listing takes can be read in place: not encrypted, stored or deflated, a stored one's two
    sizes equal, and no larger than an image can be; InputError naming it otherwise."""
    where = f"{path}:{name}"
    if flags & 1:
        raise InputError(where, "encrypted: cannot be read")
    if method not in (STORED, DEFLATED):
        raise InputError(where, f"compressed with zip method {method}: only stored (0) and deflated (8) members "
                                "can be read in place; unzip the archive and give --from the extracted folder")
    if method == STORED and csize != usize:
        raise InputError(where, f"broken zip: stored, but {csize} bytes stored for {usize}")
    if usize > MAX_SIZE:
        raise InputError(where, f"{usize} bytes: larger than an image can be")


class Places:
    """The one rule for where zip members lie: every member's data (at least its local header's fixed part,
    its name and its compressed size) ends before the next member's local header, the last one's before the
    central directory. A size or offset that lies (one entry pointing at another member, a Zip64 size too
    big) would read another member's bytes.

    Checked as the directory streams by when its entries are in file order, as zip writers write them
    (nothing held); otherwise the directory is read again into two arrays and sorted (16 bytes a member).
    """

    def __init__(self) -> None:
        self.number = 0
        self.previous = (-1, 0, 0)  # (number, start, least end) of the entry before
        self.ordered = True

    def add(self, start: int, end: int) -> tuple[int, int] | None:
        """Note the next entry; (the numbers of two entries that overlap) or None."""
        number, self.number = self.number, self.number + 1
        before, self.previous = self.previous, (number, start, end)
        if start < before[1]:
            self.ordered = False
        elif self.ordered and before[0] >= 0 and before[2] > start:
            return before[0], number
        return None

    def check(self, f: IO[bytes], path: str, directory: tuple[int, int, int], overlap: tuple[int, int] | None
              ) -> None:
        """InputError naming the member(s) whose data runs into another's or past the central directory."""
        if not self.ordered:
            starts, ends = array("Q"), array("Q")
            for _, offset, csize, *_, name_len in central_members(f, *directory, path):
                starts.append(offset)
                ends.append(offset + LOCAL_SIZE + name_len + csize)
            order = sorted(range(len(starts)), key=starts.__getitem__)
            overlap = next(((i, j) for i, j in zip(order, order[1:]) if ends[i] > starts[j]), None)
            self.previous = (order[-1], starts[order[-1]], ends[order[-1]]) if order else (-1, 0, 0)
        if overlap is not None:
            first, second = _names_at(f, path, directory, overlap)
            raise InputError(f"{path}:{first}", f"broken zip: its data runs into {second}'s local header: an offset "
                                                "or size in the directory is wrong")
        number, _, end = self.previous
        if number >= 0 and end > directory[0]:
            (last,) = _names_at(f, path, directory, (number,))
            raise InputError(f"{path}:{last}", f"broken or truncated zip: its data would run past the central "
                                               f"directory (byte {directory[0]})")


def _names_at(f: IO[bytes], path: str, directory: tuple[int, int, int], numbers: tuple[int, ...]) -> list[str]:
    """The names of the central directory's entries `numbers` (read again: only an error needs them)."""
    names = {}
    for number, entry in enumerate(central_members(f, *directory, path)):
        if number in numbers:
            names[number] = entry[0]
    return [names[n] for n in numbers]


class ZipReader(ArchiveReader):
    """A shard's images from the zip: the local header, then the data's byte range (inflated if deflated).

    entry.offset is the member's local header, entry.size its compressed size, entry.member_info
    (pack_member_info) its method, size and CRC-32 from the central directory, and the member's
    name is spec.member_prefix + entry.relpath: member_bytes checks all of them. Read ahead
    as the archive reader does, the local header included.
    """

    @staticmethod
    def span(entry: ImageEntry) -> tuple[int, int]:
        return entry.offset, HEAD_READ + entry.size

    def read(self, number: int) -> tuple[bytes, str]:
        self.read_ahead(number)
        entry = self.spec.entries[number]
        self.identities.append(self.identity(self.spec, entry))
        name = self.spec.member_prefix + entry.relpath
        where = f"{self.spec.source_root}:{name}"
        head = read_range(self._source, entry.offset, HEAD_READ)
        return member_bytes(self._source, entry.offset, entry.size, entry.member_info, name, where, head), where

    @staticmethod
    def identity(spec: ShardSpec, entry: ImageEntry) -> str:
        """Its place, size and CRC-32 in the zip; the zip's own size and mtime are the shard's source_stamp."""
        return f"@{entry.offset}:{entry.size}:{entry.member_info:x}"


def write_zip(path: PathLike, members: Iterable[ZipMember]) -> None:
    """A Zip64 archive of [(name, bytes, method, data descriptor?)], written as large-archive tools do.

    Every central entry carries its sizes and offset in a Zip64 extra field and the end
    records are Zip64 ones (the real zip needs them: 2 M members, ~160 GB); local headers
    carry an extended-timestamp extra field longer than the central one, so a reader that
    took the central extra length for the local one would read the wrong bytes. Members
    with a data descriptor have zeros for CRC and sizes in their local header.
    """
    central: list[bytes] = []
    with write_door.new_file(path) as f:
        for name, data, method, descriptor in members:
            raw = name.encode()
            crc = zlib.crc32(data)
            if method == DEFLATED:
                packer = zlib.compressobj(6, zlib.DEFLATED, -15)
                stored = packer.compress(data) + packer.flush()
            else:
                stored = data
            offset = f.tell()
            flags = 0x8 if descriptor else 0
            local_extra = struct.pack("<2HB2L", 0x5455, 9, 3, 0, 0)  # UT: mtime and atime
            f.write(struct.pack("<4s5H3L2H", LOCAL_SIG, 45, flags, method, 0, 0x21,
                                0 if descriptor else crc, 0 if descriptor else len(stored),
                                0 if descriptor else len(data), len(raw), len(local_extra)))
            f.write(raw + local_extra + stored)
            if descriptor:
                f.write(struct.pack("<4s3L", b"PK\x07\x08", crc, len(stored), len(data)))
            extra = struct.pack("<2H3Q", 1, 24, len(data), len(stored), offset) + struct.pack("<2HBL", 0x5455, 5, 1, 0)
            central.append(struct.pack("<4s4B4HL2L5H2L", CENTRAL_SIG, 45, 3, 45, 0, flags, method, 0, 0x21, crc,
                                       FULL32, FULL32, len(raw), len(extra), 0, 0, 0, 0o100644 << 16, FULL32)
                           + raw + extra)
        cd_offset = f.tell()
        for entry in central:
            f.write(entry)
        cd_size = f.tell() - cd_offset
        record_at = f.tell()
        f.write(EOCD64.pack(EOCD64_SIG, EOCD64.size - 12, 45, 45, 0, 0, len(central), len(central), cd_size,
                            cd_offset))
        f.write(LOCATOR.pack(LOCATOR_SIG, 0, record_at, 1))
        f.write(EOCD.pack(EOCD_SIG, 0, 0, FULL16, FULL16, FULL32, FULL32, 0))
