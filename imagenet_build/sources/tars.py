"""Uncompressed tar archives read in place: member tables from the headers, each member read by its offset.

Every image in an uncompressed tar is a contiguous byte range of the file. Listing reads only
the headers (plain ustar ones parsed here, anything else by tarfile, which seeks over member
data), so nothing is extracted and no archive is held in memory; a worker then reads each image
with one pread, its header block with it, checked against the listing (read_member): the
ILSVRC2012 tarballs, a decompressed .tar.gz (spool.py) and WebDataset shards are all read so.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
import zlib
from typing import IO, TYPE_CHECKING, NamedTuple, Tuple, Union

from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import InputError, PathLike, input_errors
from imagenet_build.model import utf8_name
from imagenet_build.sources.copy_rules import MemberReader, will_need

if TYPE_CHECKING:
    from imagenet_build.model import ImageEntry, ShardSpec

# (name, data offset, data size, is a regular file, CRC-32 of its header block: what read_member checks)
Member = Tuple[str, int, int, bool, int]

BLOCK = tarfile.BLOCKSIZE
ZERO_BLOCK = bytes(BLOCK)
USTAR = b"ustar\x00"
WINDOW = 8 * BLOCK
MAX_SYMLINKS = 40  # symlinks followed in a row before a chain is a loop (Linux's ELOOP limit)


class RangeFile:
    """A read-only, seekable view of bytes [start, start + size) of a file: an inner tar in place."""

    def __init__(self, f: IO[bytes], start: int, size: int) -> None:
        self._f, self._start, self._size, self._pos = f, start, size, 0

    def read(self, n: int | None = -1) -> bytes:
        left = max(0, self._size - self._pos)  # past the view's end: nothing, never the bytes after it
        n = left if n is None or n < 0 else min(n, left)
        self._f.seek(self._start + self._pos)
        data = self._f.read(n)
        self._pos += len(data)
        return data

    def seek(self, pos: int, whence: int = 0) -> int:
        """As a file's seek: from the view's start (whence 0), the position (1) or the view's end (2)."""
        if whence not in (0, 1, 2):
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        target = pos + (0, self._pos, self._size)[whence]
        if target < 0:  # before the view's start: the bytes before it are not the view's
            raise ValueError(f"negative seek position {target}")
        self._pos = target
        return self._pos

    def tell(self) -> int:
        return self._pos

    @property
    def origin(self) -> tuple[IO[bytes], int]:
        """(the file, where the view starts in it)."""
        return self._f, self._start


def list_members(f: IO[bytes] | RangeFile, size: int, where: str) -> list[Member]:
    """[(name, data offset, data size, is a regular file, header CRC)] of a tar held in file-like `f` of `size` bytes.

    InputError when it is not a tar or is truncated (tarfile itself takes a cut
    archive for a short one: the end-of-archive blocks are checked here), or when a
    name is not UTF-8 (utf8_name). A local file's plain ustar headers are parsed
    directly (plain_members); anything else by tarfile, which also reports what is wrong.
    """
    base, start = f.origin if isinstance(f, RangeFile) else (f, 0)
    try:
        fd = base.fileno()
    except (AttributeError, OSError, ValueError):  # an object store's file: no descriptor
        fd = None
    listed = plain_members(fd, size, where, start) if fd is not None else None
    if listed is not None:
        return listed[0]
    members: list[Member] = []
    links: list[Link] = []
    end = 0
    try:
        # RangeFile has the read, seek and tell that reading takes, not the write and close of typeshed's protocol
        with tarfile.open(fileobj=f, mode="r:") as tar:  # type: ignore[call-overload]
            for member in tar:
                if member.offset_data + member.size > size:
                    raise InputError(where, f"truncated: {member.name} needs bytes up to "
                                            f"{member.offset_data + member.size}, the archive has {size}")
                utf8_name(member.name, where, ":")
                if member.islnk() or member.issym():
                    links.append(Link(len(members), member.name, member.linkname, member.islnk()))
                elif not (member.isreg() or member.isdir()) or member.issparse():
                    raise InputError(f"{where}:{member.name}", _not_a_file(member))
                members.append((member.name, member.offset_data, member.size, member.isfile(), 0))
                end = member.offset_data + -(-member.size // BLOCK) * BLOCK
    except tarfile.ReadError as e:
        raise InputError(where, f"not a tar archive ({e})") from None
    except (tarfile.TarError, EOFError) as e:
        raise InputError(where, f"broken tar archive ({e})") from None
    f.seek(end)
    if f.read(2 * BLOCK) != bytes(2 * BLOCK):
        raise _no_end(where, end, members)
    for i, (name, offset, length, is_file, _) in enumerate(members):  # the header blocks tarfile did not keep
        f.seek(offset - BLOCK)
        members[i] = (name, offset, length, is_file, zlib.crc32(f.read(BLOCK)))
    return resolve_links(members, links, where) if links else members


class Link(NamedTuple):
    """A link member as listed: its number among the members, its name, what it names, a hard link or a symlink."""

    number: int
    name: str
    target: str
    hard: bool


def _not_a_file(member: tarfile.TarInfo) -> str:
    """Why a member that is neither a file, a folder nor a link is refused (list_members)."""
    if member.issparse():
        return ("a sparse file (GNU tar --sparse): its bytes in the archive are not the file's; "
                "archive it again without --sparse")
    kind = ("a FIFO (named pipe)" if member.isfifo() else "a character device" if member.ischr()
            else "a block device" if member.isblk() else f"a member of tar type {member.type.decode('latin-1')!r}")
    return (f"{kind}, not a file: extracted it is no image (reading a FIFO or device waits forever or never "
            "ends, as in a folder); remove it from the archive")


def resolve_links(members: list[Member], links: list[Link], where: str) -> list[Member]:
    """The members with each link given the bytes `tar x` gives its file: the one rule for links in a tar.

    A hard link is extracted as a file holding its target's bytes (the member of that name
    listed before it), so it is listed as that member's data under its own name; a symlink
    extracted and read as a folder copy reads it (scan_folder follows links) is the member its
    path names, relative to the link's folder. So an archive gives the records of the folder
    `tar x` makes of it. Refused in one line naming the link: a target the archive does not
    hold (before it, for a hard link), one outside the archive (an absolute path, or `..` past
    its top: extracted, it would read whatever that path holds on the machine), a folder, or a
    chain of symlinks that does not end.
    """
    resolved = list(members)
    hard = {link.number: link for link in links if link.hard}
    soft = [link for link in links if not link.hard]
    seen: dict[str, int] = {}
    for number, member in enumerate(members):  # hard links first: each names a member before it
        link = hard.get(number)
        if link is not None:
            target = seen.get(posixpath.normpath(link.target))
            if target is None:
                raise InputError(f"{where}:{link.name}", f"a hard link to {link.target}, which the archive does "
                                                         "not hold before it (tar x could not extract it)")
            if any(s.number == target for s in soft):
                raise InputError(f"{where}:{link.name}", f"a hard link to the symlink {link.target}: "
                                                         "link the file itself")
            resolved[number] = (link.name, *resolved[target][1:])
        seen[posixpath.normpath(member[0])] = number
    for link in soft:
        resolved[link.number] = (link.name, *resolved[_symlink_target(link, links, seen, where)][1:])
    for link in links:
        if not resolved[link.number][3]:
            raise InputError(f"{where}:{link.name}", f"a link to the folder {link.target}: only a file can be an "
                                                     "image; give the folder's images themselves")
    return resolved


def _symlink_target(link: Link, links: list[Link], numbers: dict[str, int], where: str) -> int:
    """The number of the member a symlink ends at (following symlinks to symlinks, as the file system does)."""
    symlinks = {other.number: other for other in links if not other.hard}
    current = link
    for _ in range(MAX_SYMLINKS):
        # relative to the link's folder; an absolute target stays absolute (posixpath.join keeps it)
        path = posixpath.normpath(posixpath.join(posixpath.dirname(posixpath.normpath(current.name)),
                                                 current.target))
        if path.startswith("/") or path == ".." or path.startswith("../"):
            raise InputError(f"{where}:{link.name}", f"a symlink to {link.target}, outside the archive: "
                                                     "extracted, it would read whatever that path holds here, not "
                                                     "an image of the archive; remove it, or archive its file")
        number = numbers.get(path)
        if number is None:
            raise InputError(f"{where}:{link.name}", f"a symlink to {link.target}, which the archive does not hold")
        if number not in symlinks:
            return number
        current = symlinks[number]
    raise InputError(f"{where}:{link.name}", f"a symlink to {link.target}: a chain of over {MAX_SYMLINKS} "
                                             "symlinks, or a loop")


def plain_members(
    fd: int, size: int, where: str, start: int = 0, small_data: bool = False
) -> tuple[list[Member], dict[int, bytes]] | None:
    """(members as list_members gives them, {member number: bytes} of members of one block or less where
    `small_data`, else {}), or None.

    Of the tar of `size` bytes at `start` in the open file `fd` (offsets from `start`). tarfile
    costs 19 us a header of the ILSVRC train archive's class tars (~100 us of a WebDataset
    shard's): 24 s of CPU for ImageNet's 1.28 M images. Tars written by GNU tar or Python's
    tarfile with short ASCII names have plain ustar headers, parsed here in 6 us with one pread
    per member, which also brings a small member's data along if asked (a WebDataset sample's
    .cls, usually its .json; not kept otherwise: 1.28 M tiny images would be held). None —
    anything else (pax or GNU long-name headers, base-256 sizes, a bad checksum) — leaves the
    file to tarfile's listing, which says what is wrong.
    """
    members: list[Member] = []
    small: dict[int, bytes] = {}
    window, window_start = b"", 0
    pos = 0
    while True:
        if not window_start <= pos <= window_start + len(window) - 2 * BLOCK:
            # a member's header and the next one's are often in one window (small members, WebDataset's
            # .cls and .json): one read for them, not two
            window, window_start = read_range(fd, start + pos, WINDOW), pos
        buf = window[pos - window_start: pos - window_start + 2 * BLOCK]
        head = buf[:BLOCK]
        if pos == 0 and (len(head) < BLOCK or head == ZERO_BLOCK):
            return None  # no first header: tarfile says what the file is
        if len(head) < BLOCK or pos + BLOCK > size:
            raise _no_end(where, pos, members)
        if head == ZERO_BLOCK:
            if buf[BLOCK:] != ZERO_BLOCK or pos + 2 * BLOCK > size:
                raise _no_end(where, pos, members)
            return members, small
        header = _plain_header(head)
        if header is None:
            return None
        name, length, kind = header
        data = pos + BLOCK
        if data + length > size:
            raise InputError(where, f"truncated: {name} needs bytes up to {data + length}, the archive has {size}")
        is_folder = kind == b"5" or (kind == b"\x00" and name.endswith("/"))  # as tarfile reads them
        if is_folder:
            name = name.rstrip("/")
        is_file = not is_folder
        if small_data and is_file and length <= BLOCK:
            small[len(members)] = buf[BLOCK:BLOCK + length]
        members.append((name, data, length, is_file, zlib.crc32(head)))
        pos = data + -(-length // BLOCK) * BLOCK


def _no_end(where: str, pos: int, members: list[Member]) -> InputError:
    """The error for a tar with no end-of-archive marker (or header) at byte `pos`, naming the member before it."""
    after = f" (after {members[-1][0]}: cut there, or its header's size is wrong)" if members else ""
    return InputError(where, f"truncated: no end-of-archive marker after byte {pos}{after}")


def _plain_header(head: bytes) -> tuple[str, int, bytes] | None:
    """(name, data size, type flag) of a plain ustar header block: a file or folder, ASCII name, octal size.

    None for anything else (see plain_members), including a bad checksum.
    """
    try:
        checksum = int(head[148:156].replace(b"\x00", b" ").strip() or b"0", 8)
        kind = head[156:157]
        if head[124] & 0x80 or kind not in (b"0", b"\x00", b"5"):
            return None
        length = int(head[124:136].replace(b"\x00", b" ").strip() or b"0", 8)
        raw = head[:100].split(b"\x00", 1)[0]
        if head[257:263] == USTAR and head[345] != 0:
            raw = head[345:500].split(b"\x00", 1)[0] + b"/" + raw
        name = raw.decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return None
    if checksum != sum(head) - sum(head[148:156]) + 8 * 32:
        return None
    return name, length, kind


def outer_members(archive: PathLike) -> list[Member]:
    """Members of an archive file on disk or in an object store."""
    archive = str(archive)
    with input_errors(archive, expected="a .tar archive", missing="archive not found"):
        size = storage.size(archive)
        with read_door.open_read(archive, random_access=True) as f:
            return list_members(f, size, archive)


def read_member(source: Union[int, IO[bytes]], offset: int, size: int, header_crc: int,
                where: str) -> tuple[bytes, str]:
    """(the `size` bytes of the tar member whose data starts at `offset`, its name as its header gives it).

    The one check of every reader of a tar (the ILSVRC tarballs, a decompressed .tar.gz,
    WebDataset shards): the bytes read are the member the listing named. Its header block,
    just before its data and read with it in one read, must be the one the listing read (its
    CRC-32, `header_crc`: name, size and all), else the archive changed since it was listed.
    """
    buf = read_range(source, offset - BLOCK, size + BLOCK)
    if len(buf) != size + BLOCK:
        raise InputError(where, "archive shorter than when it was listed")
    head = buf[:BLOCK]
    if zlib.crc32(head) != header_crc:
        header = _plain_header(head)
        found = (f"a header for {header[0]!r} of {header[1]} bytes" if header else "no plain tar header")
        raise InputError(where, f"the archive changed since it was listed: before its {size} bytes is {found}, "
                                "not the header listed")
    return buf[BLOCK:], header_name(head)


def write_header(name: str, size: int) -> bytes:
    """A tar header for a member of `size` bytes named `name`: one plain ustar block (what _plain_header parses)
    for a short ASCII name, in ~2 us; tarfile's (long-name blocks first, its last block the header) otherwise."""
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) > 100 or not raw.isascii():
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = size, 0, 0o444
        return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    digits = b"%011o" % size
    checksum = b"%06o\x00 " % (_HEADER_SUM + sum(raw) + sum(digits))
    return b"".join((raw, bytes(100 - len(raw)), _HEADER_MIDDLE, digits, _HEADER_TIME, checksum, _HEADER_TAIL))


# write_header's fixed fields: mode, uid, gid (before the size); mtime 0; after the checksum a regular file's type,
# no link name, the ustar magic and version, and zeros to the block's end
_HEADER_MIDDLE = b"0000444\x000000000\x000000000\x00"
_HEADER_TIME = b"\x00" + b"0" * 11 + b"\x00"
_HEADER_TAIL = b"0" + bytes(100) + USTAR + b"00" + bytes(BLOCK - 265)
_HEADER_SUM = sum(_HEADER_MIDDLE) + sum(_HEADER_TIME) + 8 * 32 + sum(_HEADER_TAIL)


def header_name(head: bytes) -> str:
    """The member name a tar header block holds (ustar prefix included), bytes that are not UTF-8 escaped.

    For a long name (GNU or pax) the block holds its first 100 characters, which still tell it.
    """
    name = head[:100].split(b"\x00", 1)[0]
    if head[257:263] == USTAR and head[345]:
        name = head[345:500].split(b"\x00", 1)[0] + b"/" + name
    return name.decode("utf-8", "backslashreplace")


def read_range(source: Union[int, IO[bytes]], offset: int, size: int) -> bytes:
    """size bytes at offset: of an open fd (pread), or of a file object (seek + read: object stores)."""
    if not isinstance(source, int):
        source.seek(offset)
        return source.read(size)
    fd = source
    data = os.pread(fd, size, offset)
    while len(data) < size:
        more = os.pread(fd, size - len(data), offset + len(data))
        if not more:
            break
        data += more
    return data


class ArchiveReader(MemberReader):
    """A shard's images by byte range from their archive: one pread each (a ranged read in an object store).

    Announces the next READ_AHEAD ranges to the kernel, as the folder reader does.
    """

    def __init__(self, spec: ShardSpec) -> None:
        super().__init__(spec)
        root = spec.source_root
        # an fd (pread) for a local archive, a file object for an object store
        self._source: int | IO[bytes] = self.open_remote(root) if storage.is_url(root) else read_door.open_fd(root)

    @staticmethod
    def open_remote(url: str) -> IO[bytes]:
        return read_door.open_read(url, random_access=True)

    @staticmethod
    def span(entry: ImageEntry) -> tuple[int, int]:
        """The bytes a read of the entry touches, (start, length): announced to the kernel ahead."""
        return entry.offset - BLOCK, BLOCK + entry.size

    def announce(self, number: int, entry: ImageEntry) -> None:
        if isinstance(self._source, int):
            will_need(self._source, *self.span(entry))

    def close(self) -> None:
        if isinstance(self._source, int):
            os.close(self._source)
        else:
            self._source.close()

    def read(self, number: int) -> tuple[bytes, str]:
        self.read_ahead(number)
        entry = self.spec.entries[number]
        self.identities.append(self.identity(self.spec, entry))
        where = f"{self.spec.source_root}:{self.spec.member_prefix}{entry.relpath}"  # as the archive names it
        return read_member(self._source, entry.offset, entry.size, entry.member_info, where)[0], where

    @staticmethod
    def identity(spec: ShardSpec, entry: ImageEntry) -> str:
        """Its place in the archive; the archive's own size and mtime are the shard's source_stamp."""
        return f"@{entry.offset}:{entry.size}"

