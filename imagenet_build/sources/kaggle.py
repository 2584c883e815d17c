"""Kaggle's `imagenet-object-localization-challenge` for --from: the downloaded zip read in place, or its tree.

The download (since 2022) is one Zip64 archive of the ILSVRC CLS-LOC tree and four
`LOC_*` files:
  ILSVRC/Data/CLS-LOC/train/<synset>/<synset>_<n>.JPEG      1,281,167 images
  ILSVRC/Data/CLS-LOC/val/ILSVRC2012_val_<8 digits>.JPEG    50,000, flat
  ILSVRC/Data/CLS-LOC/test/ILSVRC2012_test_<8 digits>.JPEG  100,000, no labels: ignored
  ILSVRC/Annotations/CLS-LOC/train/<synset>/<stem>.xml      544,546 box annotations (Pascal VOC)
  LOC_synset_mapping.txt, LOC_val_solution.csv, LOC_train_solution.csv, LOC_sample_submission.csv
Train labels come from the synset folder, validation labels from the validation labels
file (as for the flat ILSVRC validation folder); LOC_val_solution.csv and
LOC_synset_mapping.txt are checked against them and differences are reported as notes.
Boxes come from the train XML, through the same rules as `bboxes` (slim's).

The zip is read where it lies. The listing streams the central directory into compact
arrays (zipfile.infolist() would hold ~700 B per member: ~1.4 GB for the 2 M members);
a member's data starts after its local header, whose extra field may differ from the
central one, so a worker reads the 30-byte local header first (one more small read at
the same place: reading 1.3 M local headers while listing would be 1.3 M random reads
on the driver). The bytes read must be the member the directory named: the local
header's name is the directory's, its method and (where it carries them) sizes and CRC-32
agree, the listing refuses members whose data would run into the next member's local
header, and every member's CRC-32 is checked, STORED (a byte range, as a tar member is)
or DEFLATED (inflated raw, its size checked too).
The older download (a zip around `imagenet_object_localization_patched2019.tar.gz`) is
refused: a gzip stream has no random access, so it must be unpacked once.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Tuple, Union

from imagenet_build.infra import storage
from imagenet_build.infra.errors import InputError, PathLike, input_errors
from imagenet_build.model import SplitInput, utf8_name
from imagenet_build.sources.base import (
    add_class,
    deflate_codec,
    flat_validation,
    lies_in,
    match_classes,
    require_images,
)
from imagenet_build.sources.copies import Copy, Layout, Piece, listing, register
from imagenet_build.sources.folders import scan_class_folders, scan_validation
from imagenet_build.sources.tars import ArchiveReader, read_range

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.infra.workers import Workers
    from imagenet_build.model import ImageEntry, ShardSpec

NAME = "Kaggle imagenet-object-localization-challenge"
ZIP_NAME = "imagenet-object-localization-challenge.zip"
OLD_TARBALL = "imagenet_object_localization_patched2019.tar.gz"
DATA = "ILSVRC/Data/CLS-LOC/"
TRAIN, VAL, TEST = DATA + "train/", DATA + "val/", DATA + "test/"
ANNOTATIONS = "ILSVRC/Annotations/CLS-LOC/train/"
MAPPING, SOLUTION = "LOC_synset_mapping.txt", "LOC_val_solution.csv"
SYNSET = re.compile(r"^n\d{8}$")
SOLUTION_ID = re.compile(r"^ILSVRC2012_val_(\d{8})$")
UNPACK_OLD = (f"is Kaggle's older download, the images inside {OLD_TARBALL}, which has no random access: "
              f"unpack it once (tar -xzf {OLD_TARBALL}) and give --from the extracted folder (ILSVRC/ and LOC_*)")

# ------------------------------------------------------------------ the zip format (APPNOTE.TXT)

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

# A member's `extra` (ImageEntry.extra): DEFLATED flag | inflated size << 32 | CRC-32
DEFLATED_FLAG = 1 << 63
MAX_SIZE = (1 << 31) - 1

# (name, local header offset, compressed size, size, CRC-32, method, flags, name's length in bytes), as the
# central directory lists a member
CentralEntry = Tuple[str, int, int, int, int, int, int, int]
# (name, bytes, method, data descriptor?): a member for write_zip
ZipMember = Tuple[str, bytes, int, bool]


def pack_extra(method: int, usize: int, crc: int) -> int:
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
            usize, csize, offset = _zip64(buf, pos + name_len, extra_len, usize, csize, offset, where, name)
        pos = end
        yield name, offset, csize, usize, crc, method, flags, name_len


def member_name(raw: bytes, flags: int, where: str) -> str:
    """A member's name: UTF-8 where its flags say so (utf8_name: refused if it is not), else cp437 (APPNOTE)."""
    return utf8_name(raw, where, ":") if flags & UTF8_FLAG else raw.decode("cp437")


def _zip64(
    buf: bytes, at: int, extra_len: int, usize: int, csize: int, offset: int, where: str, name: str
) -> tuple[int, int, int]:
    """The 64-bit values of the Zip64 extra field, for the 32-bit fields that are 0xFFFFFFFF (in this order)."""
    end = at + extra_len
    while at + 4 <= end:
        kind, length = struct.unpack_from("<2H", buf, at)
        at += 4
        if at + length > end:  # a field claiming more bytes than the entry's extra data holds
            break
        if kind == 1:
            values = iter(struct.unpack_from(f"<{length // 8}Q", buf, at))
            try:
                usize = next(values) if usize == FULL32 else usize
                csize = next(values) if csize == FULL32 else csize
                offset = next(values) if offset == FULL32 else offset
            except StopIteration:
                break
            return usize, csize, offset
        at += length
    raise InputError(f"{where}:{name}", "broken zip: 32-bit sizes marked as Zip64, but no Zip64 extra field")


def member_bytes(
    source: Union[int, IO[bytes]], offset: int, csize: int, extra: int, name: str, where: str,
    head: bytes | None = None,
) -> bytes:
    """The bytes of member `name`, whose local header is at `offset`: a byte range, or inflated; checked.

    The one check of every read from a zip: the bytes read are the member the directory named
    (local_header), and their CRC-32 (and a deflated member's size) are the directory's,
    whether stored or deflated. head: bytes already read from `offset`, to save a read.
    """
    if head is None:
        head = read_range(source, offset, HEAD_READ)
    start = local_header(source, head, offset, name, csize, extra, where)
    if start + csize <= len(head):
        data = head[start:start + csize]
    else:
        data = read_range(source, offset + start, csize)
    if len(data) != csize:
        raise InputError(where, f"truncated: the zip ends inside this member ({csize} bytes at {offset + start})")
    usize, crc = (extra >> 32) & MAX_SIZE, extra & FULL32
    codec = deflate_codec()
    deflated = bool(extra & DEFLATED_FLAG)
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
    source: Union[int, IO[bytes]], head: bytes, offset: int, name: str, csize: int, extra: int, where: str
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
    if method != (DEFLATED if extra & DEFLATED_FLAG else STORED):
        raise InputError(where, f"broken zip: its local header says method {method}, the directory "
                                f"{DEFLATED if extra & DEFLATED_FLAG else STORED}")
    if not flags & DESCRIPTOR_FLAG:
        if FULL32 in (lcsize, lusize):
            lusize, lcsize, _ = _zip64(head, LOCAL_SIZE + name_len, extra_len, lusize, lcsize, 0, where, name)
        usize, ccrc = (extra >> 32) & MAX_SIZE, extra & FULL32
        if (lcsize, lusize, crc) != (csize, usize, ccrc):
            raise InputError(where, f"broken zip: its local header says {lcsize} bytes ({lusize} inflated), CRC-32 "
                                    f"{crc:08x}; the directory {csize} ({usize}), {ccrc:08x}")
    return start


# ------------------------------------------------------------------ listing the zip


class Members:
    """Compact columns of a group of members (1.28 M images would be ~300 MB as tuples)."""

    __slots__ = ("names", "offsets", "sizes", "extras")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.offsets, self.sizes, self.extras = array("Q"), array("Q"), array("Q")

    def add(self, name: str, offset: int, csize: int, extra: int) -> None:
        self.names.append(name)
        self.offsets.append(offset)
        self.sizes.append(csize)
        self.extras.append(extra)

    def rows(self) -> Iterator[tuple[str, int, int, int]]:
        """(name, offset, size, extra) of each member; the columns grow together, so unequal lengths are a bug."""
        if not len(self.names) == len(self.offsets) == len(self.sizes) == len(self.extras):
            raise ValueError(f"Members: columns of {len(self.names)}, {len(self.offsets)}, {len(self.sizes)} and "
                             f"{len(self.extras)} entries")
        return zip(self.names, self.offsets, self.sizes, self.extras)

    def items(self) -> list[tuple[str, tuple[int, int, int]]]:
        """[(name, (offset, size, extra))], as add_class and flat_validation take them."""
        return [(name, (offset, size, extra)) for name, offset, size, extra in self.rows()]


@dataclass
class ZipListing:
    """What the zip holds, by role. Each split's part is dropped once it has been scanned."""

    path: str
    stamp: str
    prefix: str = ""  # folder the tree sits in inside the zip ("" for Kaggle's)
    train: dict[str, Members] = field(default_factory=dict)  # synset -> Members
    train_strangers: list[str] = field(default_factory=list)
    validation: Members = field(default_factory=Members)
    xml: dict[str, Members] = field(default_factory=dict)  # synset -> Members (names: stems)
    files: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # LOC_* name -> (offset, size, extra)
    tests: int = 0
    old_tarball: bool = False


def _tree_prefix(name: str) -> str | None:
    """The folder above `ILSVRC/` (or above the LOC_* files) in a member name, or None."""
    at = name.find("ILSVRC/")
    if at >= 0 and (at == 0 or name[at - 1] == "/"):
        return name[:at]
    base = name.rsplit("/", 1)[-1]
    if base in (MAPPING, SOLUTION, OLD_TARBALL):
        return name[: len(name) - len(base)]
    return None


def _open_zip(path: str) -> IO[bytes]:
    return storage.open_read(path, random_access=True)


def looks_like_kaggle(path: str) -> str | None:
    """"zip" or "old" for a Kaggle zip (new or older download), None for another zip; reads members until sure."""
    size = storage.size(path)
    with _open_zip(path) as f:
        try:
            cd_offset, cd_size, count = end_record(f, size, path)
        except InputError:
            if storage.basename(path).startswith(ZIP_NAME[:-4]):
                return "zip"  # its own name says it: the scan reports what is wrong with it
            return None
        found = None
        for name, *_ in central_members(f, cd_offset, cd_size, count, path):
            prefix = _tree_prefix(name)
            if prefix is None or prefix.count("/") > 1:
                continue
            if name.endswith(OLD_TARBALL):
                return "old"
            if name[len(prefix):].startswith("ILSVRC/"):
                return "zip"
            found = found or "maybe"
    return "zip" if found else None


def list_zip(path: str) -> ZipListing:
    """One pass over the central directory, sorting members by role; small files kept by place."""
    with input_errors(path, expected="a zip archive", missing="zip not found"):
        size = storage.size(path)
        result = ZipListing(path, storage.stamp(path))
        places, overlap = Places(), None
        with _open_zip(path) as f:
            cd_offset, cd_size, count = end_record(f, size, path)
            prefix = None
            for name, offset, csize, usize, crc, method, flags, name_len in central_members(f, cd_offset, cd_size,
                                                                                             count, path):
                overlap = overlap or places.add(offset, offset + LOCAL_SIZE + name_len + csize)
                if name.endswith("/"):
                    continue  # a folder entry
                if prefix is None:
                    prefix = _tree_prefix(name)
                    if prefix is None:
                        continue
                if not name.startswith(prefix):
                    continue
                rest = name[len(prefix):]
                role = _role(rest)
                if role is None:
                    continue
                if role == "old":
                    result.old_tarball = True
                    continue
                if role == "test":
                    result.tests += 1
                    continue
                _check_member(path, name, csize, usize, method, flags)
                _add_member(result, role, rest, offset, csize, pack_extra(method, usize, crc))
            places.check(f, path, (cd_offset, cd_size, count), overlap)
        result.prefix = prefix or ""
    return result


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


def _add_member(result: ZipListing, role: str, rest: str, offset: int, csize: int, extra: int) -> None:
    """File a checked member of the tree (`rest`: its name below the prefix) under its role."""
    if role == "train":
        synset, _, base = rest[len(TRAIN):].partition("/")
        if not base:
            result.train_strangers.append(synset)
        elif "/" in base:
            result.train_strangers.append(f"{synset}/{base}")
        else:
            _group(result.train, synset).add(base, offset, csize, extra)
    elif role == "validation":
        result.validation.add(rest[len(VAL):], offset, csize, extra)
    elif role == "xml":
        synset, _, base = rest[len(ANNOTATIONS):].partition("/")
        if base.endswith(".xml") and "/" not in base:
            _group(result.xml, synset).add(base[: -len(".xml")], offset, csize, extra)
    else:
        result.files[rest] = (offset, csize, extra)


def _group(groups: dict[str, Members], synset: str) -> Members:
    """A synset's Members, made on its first member (not setdefault: no new arrays per member)."""
    members = groups.get(synset)
    if members is None:
        members = groups[synset] = Members()
    return members


def _role(rest: str) -> str | None:
    if rest.startswith(TRAIN):
        return "train"
    if rest.startswith(VAL):
        return "validation" if "/" not in rest[len(VAL):] else None
    if rest.startswith(TEST):
        return "test" if "/" not in rest[len(TEST):] else None
    if rest.startswith(ANNOTATIONS):
        return "xml"
    if rest in (MAPPING, SOLUTION):
        return "file"
    if rest == OLD_TARBALL:
        return "old"
    return None


def _check_member(path: str, name: str, csize: int, usize: int, method: int, flags: int) -> None:
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


# ------------------------------------------------------------------ checks against the labels


def solution_notes(lines: Iterable[str], where: str, validation_labels: list[str], labels_file: PathLike) -> list[str]:
    """LOC_val_solution.csv's first synset of each row against the validation labels file.

    Differences are notes (the labels file decides, as for every other copy); an unreadable
    CSV is an error.
    """
    it = iter(lines)
    header = next(it, "").lstrip("\ufeff").strip()
    if header.replace(" ", "") != "ImageId,PredictionString":
        raise InputError(where, f"not Kaggle's {SOLUTION}: its first line is {header[:60]!r}, "
                                "not 'ImageId,PredictionString'")
    differ, outside, rows = [], 0, 0
    for number, line in enumerate(it, start=2):
        line = line.strip()
        if not line:
            continue
        image_id, _, prediction = line.partition(",")
        match = SOLUTION_ID.match(image_id.strip())
        synset = prediction.split(None, 1)[0] if prediction.strip() else ""
        if not match or not SYNSET.match(synset):
            raise InputError(where, f"line {number}: expected 'ILSVRC2012_val_<8 digits>,<synset> <box>...', "
                                    f"got {line[:80]!r}")
        rows += 1
        image = int(match.group(1))
        if not 1 <= image <= len(validation_labels):
            outside += 1
        elif validation_labels[image - 1] != synset:
            differ.append((image, synset))
    notes = []
    if differ:
        differ.sort()
        shown = ", ".join(f"ILSVRC2012_val_{i:08d} ({s} there, {validation_labels[i - 1]} here)"
                          for i, s in differ[:3])
        notes.append(f"{where} disagrees with {labels_file} on {len(differ):,} validation image(s): {shown}"
                     f"{' ...' if len(differ) > 3 else ''}; the labels file's synsets are used")
    if outside:
        notes.append(f"{where} has {outside:,} row(s) for images beyond the {len(validation_labels):,} lines of "
                     f"{labels_file}")
    if rows < len(validation_labels) and not outside:
        notes.append(f"{where} has {rows:,} rows for the {len(validation_labels):,} images of {labels_file}: "
                     "the others were not checked")
    return notes


def mapping_notes(lines: Iterable[str], where: str, catalog: Catalog) -> list[str]:
    """LOC_synset_mapping.txt (line i: class i) against the labels file's order where both list a synset."""
    synsets = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        synset = line.split(None, 1)[0].lstrip("\ufeff")
        if not SYNSET.match(synset):
            raise InputError(where, f"line {number}: expected '<synset> <names>', got {line.strip()[:80]!r}")
        synsets.append(synset)
    both = set(synsets) & set(catalog.synsets)
    theirs = [s for s in synsets if s in both]
    ours = [s for s in catalog.synsets if s in both]
    if theirs == ours:
        return []
    first = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), None)
    if first is None:  # one is the other with more at its end: only a synset listed twice there does that
        twice = sorted({s for s in theirs if theirs.count(s) > 1})
        return [f"{where} lists {', '.join(twice[:3])} more than once: labels follow {catalog.labels_file}"]
    return [f"{where} orders the synsets otherwise than {catalog.labels_file} (from the {first + 1}th shared one: "
            f"{theirs[first]} there, {ours[first]} here): labels follow the labels file"]


# ------------------------------------------------------------------ the zip as a copy


class KaggleZip:
    """The scans and boxes of one Kaggle zip, from one listing of its central directory."""

    def __init__(self, path: str, copy: Copy) -> None:
        self.path, self.copy = path, copy
        self._listing: ZipListing | None = None
        self._mapping_checked = False

    @property
    def listing(self) -> ZipListing:
        if self._listing is None:
            listed = self._listing = list_zip(self.path)
            if listed.old_tarball and not listed.train and not listed.validation.names:
                raise InputError(self.path, UNPACK_OLD)
            if not listed.train:
                raise InputError(self.path, f"holds no {listed.prefix}{TRAIN}<synset>/*.JPEG images: not the whole "
                                            "Kaggle download (a partial or broken zip)")
            if not listed.validation.names:
                raise InputError(self.path, f"holds no {listed.prefix}{VAL}ILSVRC2012_val_*.JPEG images: not the "
                                            "whole Kaggle download (a partial or broken zip)")
            if listed.tests:
                self.copy.notes.append(f"{listed.tests:,} test images ignored: no labels")
        return self._listing

    def _text(self, name: str) -> list[str] | None:
        """A LOC_* file's lines, or None when the zip lacks it."""
        listed = self.listing
        if name not in listed.files:
            return None
        offset, csize, extra = listed.files[name]
        where = f"{self.path}:{listed.prefix}{name}"
        with _open_zip(self.path) as f:
            data = member_bytes(f, offset, csize, extra, listed.prefix + name, where)
        try:
            return data.decode("utf-8-sig").splitlines()
        except UnicodeDecodeError as e:
            raise InputError(where, f"not UTF-8 text ({e})") from None

    def _check_mapping(self, catalog: Catalog) -> None:
        if self._mapping_checked:
            return
        self._mapping_checked = True
        lines = self._text(MAPPING)
        if lines is None:
            self.copy.notes.append(f"{self.path} has no {MAPPING}: its synset order not checked")
        else:
            self.copy.notes.extend(mapping_notes(lines, f"{self.path}:{self.listing.prefix}{MAPPING}", catalog))

    def scan_train(self, catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
        listed = self.listing
        self._check_mapping(catalog)
        root = self.path
        result = SplitInput("train", root, "zip", reader=ZipReader, ignored=list(listed.train_strangers),
                            stamp=listed.stamp, member_prefix=listed.prefix + TRAIN)
        match_classes(result, f"{root}:{listed.prefix}{TRAIN.rstrip('/')}", sorted(listed.train), catalog,
                      on_error, "class folder")
        for label, synset in enumerate(catalog.synsets, start=1):
            members = listed.train.pop(synset, None)
            if members is not None:
                add_class(result, synset, label, members.items(), on_error, "class folder",
                          place=lies_in(f"{root}:{listed.prefix}{TRAIN}{synset}"))
        listed.train.clear()
        require_images(result, root, catalog)
        return result

    def scan_validation(
        self,
        catalog: Catalog,
        on_error: str,
        pool: Workers,
        labels_loader: Callable[[], list[str]],
        labels_file: PathLike,
    ) -> SplitInput:
        listed = self.listing
        self._check_mapping(catalog)
        labels = labels_loader()
        result = SplitInput("validation", self.path, "flat-zip", reader=ZipReader, stamp=listed.stamp,
                            member_prefix=listed.prefix + VAL)
        flat_validation(result, listed.validation.items(), catalog, labels, labels_file, on_error,
                        place=lies_in(f"{self.path}:{listed.prefix}{VAL.rstrip('/')}"))
        listed.validation = Members()
        lines = self._text(SOLUTION)
        where = f"{self.path}:{listed.prefix}{SOLUTION}"
        if lines is None:
            result.notes.append(f"{self.path} has no {SOLUTION}: validation labels not cross-checked")
        else:
            result.notes.extend(solution_notes(lines, where, labels, labels_file))
        return result

    def boxes(self, catalog: Catalog) -> dict[str, bytes]:
        from imagenet_build.catalog.boxes import boxes_to_csv_lines, parse_box_lines

        listed = self.listing
        source = f"{self.path}:{listed.prefix}{ANNOTATIONS.rstrip('/')}"
        if not listed.xml:
            self.copy.notes.append(f"{self.path} holds no {ANNOTATIONS}*.xml: no boxes")
            return {}

        def files(fd: IO[bytes]) -> Iterator[tuple[str, str, bytes]]:
            for synset in sorted(listed.xml):
                for stem, offset, csize, extra in listed.xml[synset].rows():
                    name = f"{listed.prefix}{ANNOTATIONS}{synset}/{stem}.xml"
                    yield synset, stem, member_bytes(fd, offset, csize, extra, name, f"{self.path}:{name}")

        with _open_zip(self.path) as f:
            lines, _, _ = boxes_to_csv_lines(source, catalog.synsets, files=files(f))
        listed.xml.clear()
        return parse_box_lines(lines, source)


# ------------------------------------------------------------------ the extracted tree as a copy


class KaggleTree:
    """The scans and boxes of the folder the zip unpacks to (the folder scans, the LOC_* checks)."""

    def __init__(self, root: str, copy: Copy) -> None:
        self.root, self.copy = root, copy
        self._mapping_checked = False
        for split in (TRAIN, VAL):
            if not os.path.isdir(os.path.join(root, split)):
                raise InputError(os.path.join(root, split.rstrip("/")),
                                 "not found: not the whole Kaggle download (a partial copy)")
        test = os.path.join(root, TEST)
        if os.path.isdir(test):
            tests = sum(1 for entry in os.scandir(test) if entry.name.endswith(".JPEG"))
            if tests:
                copy.notes.append(f"{tests:,} test images ignored: no labels")

    def _text(self, name: str) -> list[str] | None:
        path = os.path.join(self.root, name)
        if not os.path.isfile(path):
            return None
        with input_errors(path, expected="a text file", missing="not found"), open(path, encoding="utf-8-sig") as f:
            return f.read().splitlines()

    def _check_mapping(self, catalog: Catalog) -> None:
        if self._mapping_checked:
            return
        self._mapping_checked = True
        lines = self._text(MAPPING)
        path = os.path.join(self.root, MAPPING)
        if lines is None:
            self.copy.notes.append(f"no {path}: its synset order not checked")
        else:
            self.copy.notes.extend(mapping_notes(lines, path, catalog))

    def scan_train(self, catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
        self._check_mapping(catalog)
        return scan_class_folders("train", os.path.join(self.root, TRAIN), catalog, on_error)

    def scan_validation(
        self,
        catalog: Catalog,
        on_error: str,
        pool: Workers,
        labels_loader: Callable[[], list[str]],
        labels_file: PathLike,
    ) -> SplitInput:
        self._check_mapping(catalog)
        labels = labels_loader()
        result = scan_validation(os.path.join(self.root, VAL), catalog, lambda: labels, labels_file, on_error)
        lines = self._text(SOLUTION)
        path = os.path.join(self.root, SOLUTION)
        if lines is None:
            result.notes.append(f"no {path}: validation labels not cross-checked")
        else:
            result.notes.extend(solution_notes(lines, path, labels, labels_file))
        return result

    def boxes(self, catalog: Catalog) -> dict[str, bytes]:
        from imagenet_build.catalog.boxes import boxes_to_csv_lines, parse_box_lines

        folder = os.path.join(self.root, ANNOTATIONS)
        if not os.path.isdir(folder):
            self.copy.notes.append(f"no {folder}: no boxes")
            return {}
        lines, _, _ = boxes_to_csv_lines(folder, catalog.synsets)
        return parse_box_lines(lines, folder)


# ------------------------------------------------------------------ --from


def identify(path: str) -> list[Piece]:
    base = storage.basename(path)
    if base == OLD_TARBALL:
        return [Piece(NAME, "old", path)]
    if base.lower().endswith(".zip") and (storage.is_url(path) or os.path.isfile(path)):
        kind = looks_like_kaggle(path)
        return [Piece(NAME, "zip" if kind == "zip" else "old", path)] if kind else []
    if storage.is_url(path) or not os.path.isdir(path):
        return []
    names = listing(path)
    if base == "ILSVRC" and os.path.isdir(os.path.join(path, DATA)):
        return [Piece(NAME, "tree", os.path.dirname(os.path.abspath(path)))]
    if names.get("ILSVRC") and os.path.isdir(os.path.join(path, DATA)):
        return [Piece(NAME, "tree", path)]
    if ZIP_NAME in names and not names[ZIP_NAME]:
        return [Piece(NAME, "zip", os.path.join(path, ZIP_NAME))]
    if OLD_TARBALL in names:
        return [Piece(NAME, "old", os.path.join(path, OLD_TARBALL))]
    return []


def assemble(pieces: list[Piece]) -> Copy:
    roles = {piece.role: piece.path for piece in pieces}
    if "old" in roles:
        raise InputError(roles["old"], UNPACK_OLD)
    if len(roles) > 1:
        from imagenet_build.infra.errors import UsageError

        raise UsageError(f"--from was given both the Kaggle zip {roles['zip']} and an extracted tree "
                         f"{roles['tree']}; give one of them")
    copy = Copy(NAME, "")
    source: KaggleZip | KaggleTree
    if "zip" in roles:
        source = KaggleZip(roles["zip"], copy)
        copy.description = "Kaggle zip"
    else:
        source = KaggleTree(roles["tree"], copy)
        copy.description = "Kaggle folders"
    copy.scan_train = source.scan_train
    copy.scan_validation = source.scan_validation
    copy.boxes = source.boxes
    return copy


# ------------------------------------------------------------------ reading in a worker


class ZipReader(ArchiveReader):
    """A shard's images from the zip: the local header, then the data's byte range (inflated if deflated).

    entry.offset is the member's local header, entry.size its compressed size, entry.extra
    (pack_extra) its method, size and CRC-32 from the central directory, and the member's
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
        return member_bytes(self._source, entry.offset, entry.size, entry.extra, name, where, head), where

    @staticmethod
    def identity(spec: ShardSpec, entry: ImageEntry) -> str:
        """Its place, size and CRC-32 in the zip; the zip's own size and mtime are the shard's source_stamp."""
        return f"@{entry.offset}:{entry.size}:{entry.extra:x}"



# ------------------------------------------------------------------ the sample, shaped as Kaggle's zip


def write_zip(path: PathLike, members: Iterable[ZipMember]) -> None:
    """A Zip64 archive of [(name, bytes, method, data descriptor?)], written as large-archive tools do.

    Every central entry carries its sizes and offset in a Zip64 extra field and the end
    records are Zip64 ones (the real zip needs them: 2 M members, ~160 GB); local headers
    carry an extended-timestamp extra field longer than the central one, so a reader that
    took the central extra length for the local one would read the wrong bytes. Members
    with a data descriptor have zeros for CRC and sizes in their local header.
    """
    central: list[bytes] = []
    with open(path, "wb") as f:
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


def sample_members(ilsvrc_sample: PathLike) -> list[ZipMember]:
    """The sample's tree as Kaggle lays it out: [(member name, bytes, method, data descriptor?)].

    Which are stored and which deflated (Kaggle's choice for the real zip is not known, so both):
    - LOC_* files and XML annotations: deflated;
    - train JPEGs: stored, but every third of a class deflated, with a data descriptor;
    - validation JPEGs: deflated for odd image numbers, stored for even ones;
    - test JPEGs: stored.
    Folder entries (`.../`) come before their files, as `zip -r` writes them.
    """
    import xml.etree.ElementTree as ET
    from pathlib import Path

    from imagenet_build.catalog.classes import DEFAULT_METADATA_FILE, read_labels_file, read_metadata_file

    sample = Path(ilsvrc_sample)
    synsets = read_labels_file(sample / "labels.txt")
    texts = read_metadata_file(DEFAULT_METADATA_FILE)
    val_labels = (sample / "validation_labels.txt").read_text().split()
    members: list[ZipMember] = []

    def folder(name: str) -> None:
        members.append((name, b"", STORED, False))

    text = "".join(f"{s} {texts.get(s, s)}\n" for s in synsets)
    members.append((MAPPING, text.encode(), DEFLATED, False))
    rows = []
    for number, synset in enumerate(val_labels, start=1):
        rows.append((synset, f"ILSVRC2012_val_{number:08d},{synset} 0 0 {10 + number} {20 + number} "))
    rows.sort()  # not in image order, as Kaggle's is not
    members.append((SOLUTION, ("ImageId,PredictionString\n" + "".join(r + "\n" for _, r in rows)).encode(),
                    DEFLATED, False))
    train_rows = []
    for xml in sorted((sample / "bbox").glob("*/*.xml")):
        root = ET.fromstring(xml.read_bytes())
        boxes = " ".join(f"{o.findtext('name')} " + " ".join(o.findtext(f"bndbox/{k}", "") for k in
                                                              ("xmin", "ymin", "xmax", "ymax"))
                         for o in root.iter("object"))
        train_rows.append(f"{xml.stem},{boxes}\n")
    members.append(("LOC_train_solution.csv", ("ImageId,PredictionString\n" + "".join(train_rows)).encode(),
                    DEFLATED, False))
    for kind in ("Annotations", "Data"):
        folder(f"ILSVRC/{kind}/")
        folder(f"ILSVRC/{kind}/CLS-LOC/")
    folder(TRAIN)
    for synset in synsets:
        folder(f"{TRAIN}{synset}/")
        for n, image in enumerate(sorted((sample / "train" / synset).iterdir())):
            deflated = n % 3 == 2
            members.append((f"{TRAIN}{synset}/{image.name}", image.read_bytes(), DEFLATED if deflated else STORED,
                            deflated))
    folder(VAL)
    for image in sorted((sample / "validation").iterdir()):
        number = int(image.stem.rsplit("_", 1)[1])
        members.append((f"{VAL}{image.name}", image.read_bytes(), DEFLATED if number % 2 else STORED, False))
    folder(TEST)
    tests = sorted((sample / "validation").iterdir())[:3]
    for number, image in enumerate(tests, start=1):
        members.append((f"{TEST}ILSVRC2012_test_{number:08d}.JPEG", image.read_bytes(), STORED, False))
    folder(ANNOTATIONS)
    for synset in synsets:
        xmls = sorted((sample / "bbox" / synset).glob("*.xml"))
        if xmls:
            folder(f"{ANNOTATIONS}{synset}/")
        for xml in xmls:
            members.append((f"{ANNOTATIONS}{synset}/{xml.name}", xml.read_bytes(), DEFLATED, False))
    members.append(("LOC_sample_submission.csv", ("ImageId,PredictionString\n" + "".join(
        f"ILSVRC2012_test_{n:08d},{synsets[0]} 0 0 10 10\n" for n in range(1, len(tests) + 1))).encode(),
        DEFLATED, False))
    return members


def write_sample(ilsvrc_sample: PathLike, out: PathLike) -> None:
    """`imagenet-object-localization-challenge.zip`, shaped as Kaggle's download, from the ILSVRC sample."""
    from pathlib import Path

    from imagenet_build.sources.samples import enough_for

    enough_for(len(list(Path(ilsvrc_sample).glob("validation/*.JPEG"))), 1, "validation", "kaggle")

    write_zip(Path(out) / ZIP_NAME, sample_members(ilsvrc_sample))


register(Layout(NAME, identify, assemble, short="kaggle", write_sample=write_sample))

__all__ = ["KaggleTree", "KaggleZip", "ZipReader", "list_zip", "member_bytes", "write_zip"]
