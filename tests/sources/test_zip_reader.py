"""The zip reader's parts (sources/zips.py) on zips made here: the end record after any comment, a central
directory streamed, names in UTF-8 or cp437, zip64 values in order, what is listed, overlapping members, the
local header checked against the directory, a deflated member held to its size, write_zip's zip64 layout."""

import io
import shutil
import struct
import zipfile
import zlib

import pytest

from imagenet_build.sources.zips import (
    CENTRAL,
    CENTRAL_SIG,
    EOCD,
    EOCD64,
    EOCD_SIG,
    FULL32,
    LOCATOR,
    LOCATOR_SIG,
    write_zip,
)


def zip_of(members, comment=b"", force_zip64=False):
    """The bytes of a zip written by zipfile: [(name, bytes, method)], and a comment after its end record."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data, method in members:
            info = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
            info.compress_type = method
            with z.open(info, "w", force_zip64=force_zip64) as member:
                member.write(data)
        z.comment = comment
    return out.getvalue()


def directory_of(data, comment):
    """(central directory offset, its size, member count) of a zip_of zip: its end record is just before the
    comment it was given; the directory ends where that record starts."""
    at = len(data) - len(comment) - EOCD.size
    count, cd_size, cd_offset = EOCD.unpack_from(data, at)[4:7]
    assert data[at:at + 4] == EOCD_SIG and cd_offset + cd_size == at
    return cd_offset, cd_size, count


def input_error(call, *args, **kwargs):
    """str() of the InputError call(*args, **kwargs) raises."""
    from imagenet_build.infra.errors import InputError

    with pytest.raises(InputError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


def test_the_end_record_is_found_after_any_comment_and_never_in_one():
    """The end record is the last signature with a whole record after it: a signature in a member's data or in
    the last 21 bytes of a comment is not it, a comment may be 65,535 bytes long (a Zip64 one too: the locator
    is then the tail's first bytes), and an empty zip's record is its first byte."""
    from imagenet_build.sources.zips import end_record

    image = b"\xff\xd8" + EOCD_SIG + bytes(40) + b"\xff\xd9"  # the signature inside a stored member
    cases = {
        "plain": ([("a/x.JPEG", image, 0), ("a/y.JPEG", image * 3, 8)], b""),
        "a signature at the comment's end": ([("a/x.JPEG", image, 0)], b"note " + EOCD_SIG + b"!"),
        "the longest comment": ([("a/x.JPEG", image, 0)], b"c" * 0xFFFF),
        "empty, a signature in its comment": ([], EOCD_SIG),
    }
    for kind, (members, comment) in cases.items():
        data = zip_of(members, comment)
        assert end_record(io.BytesIO(data), len(data), "z.zip") == directory_of(data, comment), kind
    path = io.BytesIO()
    write_zip_to(path, [("a/x.JPEG", image, 0, False), ("a/y.JPEG", image, 8, True)])
    zip64 = path.getvalue()
    expected = end_record(io.BytesIO(zip64), len(zip64), "z.zip")
    assert expected[2] == 2
    long_comment = zip64[:-2] + struct.pack("<H", 0xFFFF) + b"c" * 0xFFFF
    assert end_record(io.BytesIO(long_comment), len(long_comment), "z.zip") == expected


def write_zip_to(out, members):
    """write_zip's bytes, into the BytesIO `out`."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/z.zip"
        write_zip(path, members)
        with open(path, "rb") as f:
            out.write(f.read())


def test_an_end_record_that_is_missing_split_or_pointing_nowhere_is_one_error_naming_the_zip():
    from imagenet_build.sources.zips import end_record

    def error(data):
        return input_error(end_record, io.BytesIO(data), len(data), "z.zip")

    no_end = "z.zip: not a zip archive, or truncated: no end-of-central-directory record at its end"
    plain = zip_of([("a/x.JPEG", b"jpeg", 0)])
    assert error(b"garbage" * 10) == no_end
    assert error(EOCD_SIG + bytes(10)) == no_end  # a signature with no whole record after it
    assert error(plain[:-1]) == no_end
    for field in (4, 6):  # this disk's number, the directory's disk
        split = bytearray(plain)
        struct.pack_into("<H", split, len(plain) - EOCD.size + field, 1)
        assert error(bytes(split)) == "z.zip: a multi-part (split) zip: join the parts into one file first"
    out = io.BytesIO()
    write_zip_to(out, [("a/x.JPEG", b"jpeg", 0, False)])
    zip64 = bytearray(out.getvalue())
    locator = len(zip64) - EOCD.size - LOCATOR.size
    for record_at in (0, locator - EOCD64.size - 1, len(zip64) - 10):  # a local header, a byte off, past the end
        moved = bytearray(zip64)
        struct.pack_into("<Q", moved, locator + 8, record_at)
        assert error(bytes(moved)) == "z.zip: broken zip: the Zip64 end record is not where its locator says"
    tiny = LOCATOR.pack(LOCATOR_SIG, 0, 0, 1) + EOCD.pack(EOCD_SIG, 0, 0, 0, 0, 0, 0, 0)  # a locator at byte 0
    assert error(tiny) == "z.zip: broken zip: the Zip64 end record is not where its locator says"


def central_entry(name, offset, csize, usize, crc=0, method=0, flags=0, extra=b"", comment=b""):
    """One central directory entry (APPNOTE 4.3.12), its name as raw bytes."""
    return CENTRAL.pack(CENTRAL_SIG, 45, 3, 45, 0, flags, method, 0, 0x21, crc, csize, usize, len(name), len(extra),
                        len(comment), 0, 0, 0, offset) + name + extra + comment


def test_a_central_directory_larger_than_a_read_is_streamed_entry_by_entry():
    """Entries of every length (a 65,535-byte comment, an extra field before the Zip64 one, an empty last name)
    across the 4 MiB reads: each as written; a directory short of its count, or cut inside an entry, is an error
    naming the entry."""
    from imagenet_build.sources.zips import central_members

    expected, raw = [], []
    for i in range(600):
        name = f"train/n{i:08d}/" + "x" * (i % 7) * 40 + f"{i}.JPEG"
        offset, csize, usize = 1000 * i + (i % 3), 500 + i, 600 + 2 * i
        if i % 5 == 1:  # its sizes and offset in a Zip64 field, after a timestamp field
            extra = struct.pack("<2HBL", 0x5455, 5, 1, 0) + struct.pack("<2H3Q", 1, 24, usize, csize, offset)
            fields = (FULL32, FULL32, FULL32)
        else:
            extra, fields = b"", (csize, usize, offset)
        raw.append(central_entry(name.encode(), fields[2], fields[0], fields[1], crc=i, method=8 * (i % 2),
                                 flags=0x800 * (i % 2), extra=extra, comment=b"c" * (0xFFFF if i % 4 == 3 else i)))
        expected.append((name, offset, csize, usize, i, 8 * (i % 2), 0x800 * (i % 2), len(name.encode())))
    raw.append(central_entry(b"", 7, 0, 0))  # exactly the fixed part left at the directory's end
    expected.append(("", 7, 0, 0, 0, 0, 0, 0))
    directory = b"PK\x03\x04" * 3 + b"".join(raw)
    assert len(directory) > 2 * (1 << 22)
    f = io.BytesIO(directory)
    assert list(central_members(f, 12, len(directory) - 12, len(raw), "z.zip")) == expected
    assert input_error(lambda: list(central_members(f, 12, len(directory) - 12, len(raw) + 1, "z.zip"))) == \
        f"z.zip: broken zip: central directory entry {len(raw) + 1} of {len(raw) + 1} is missing or bad"
    assert input_error(lambda: list(central_members(f, 12, len(directory) - 32, len(raw), "z.zip"))) == \
        f"z.zip: broken zip: central directory entry {len(raw)} of {len(raw)} is missing or bad"


def test_a_members_name_is_utf_8_where_its_flag_says_so_else_cp437():
    """APPNOTE appendix D: without bit 11 a name is cp437 (0x82 is é); with it, UTF-8, and bytes that are not are
    refused naming the zip and the name, in the directory as in a local header."""
    from imagenet_build.sources.zips import STORED, member_bytes, member_name, pack_member_info

    assert member_name(b"caf\x82.JPEG", 0, "z.zip") == "café.JPEG"
    assert member_name("café.JPEG".encode(), 0x800, "z.zip") == "café.JPEG"
    not_utf8 = "file name is not UTF-8 (slim's image/filename is UTF-8 text): rename it"
    assert input_error(member_name, b"caf\x82.JPEG", 0x800, "z.zip") == f"z.zip:caf\\x82.JPEG: {not_utf8}"
    directory = central_entry(b"caf\x82.JPEG", 0, 4, 4, flags=0x800)
    from imagenet_build.sources.zips import central_members

    assert input_error(lambda: list(central_members(io.BytesIO(directory), 0, len(directory), 1, "z.zip"))) == \
        f"z.zip:caf\\x82.JPEG: {not_utf8}"
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0x800, 0, 0, 0x21, zlib.crc32(b"jpeg"), 4, 4, 9, 0)
    data = local + b"caf\x82.JPEG" + b"jpeg"
    assert input_error(member_bytes, io.BytesIO(data), 0, 4, pack_member_info(STORED, 4, zlib.crc32(b"jpeg")),
                       "a/café.JPEG", "z.zip:a/café.JPEG") == f"z.zip:a/café.JPEG:caf\\x82.JPEG: {not_utf8}"


def test_zip64_values_are_taken_in_order_for_the_fields_that_ask_for_them():
    """The Zip64 field's values go to the 32-bit fields that are 0xFFFFFFFF, in the order size, compressed size,
    offset, after any other field; a field too short, cut, or none at all is an error naming the member."""
    from imagenet_build.sources.zips import _zip64

    other = struct.pack("<2H5s", 0x5455, 5, b"\x01time")
    junk = b"J" * 30  # the entry's fixed part and name before its extra field
    cases = [  # (extra field, (size, compressed size, offset) as the fixed fields say, what they are)
        (struct.pack("<2H3Q", 1, 24, 11, 22, 33), (FULL32, FULL32, FULL32), (11, 22, 33)),
        (other + struct.pack("<2H2Q", 1, 16, 22, 33), (5, FULL32, FULL32), (5, 22, 33)),
        (other + struct.pack("<2HQ", 1, 8, 11), (FULL32, 6, 7), (11, 6, 7)),
        (struct.pack("<2HQ", 1, 8, 33) + other, (5, 6, FULL32), (5, 6, 33)),
        (struct.pack("<2H3Q", 1, 24, 11, 22, 33), (FULL32, 6, 7), (11, 6, 7)),  # more values than asked for
    ]
    for extra, fields, values in cases:
        buf = junk + extra + b"JUNK"
        assert _zip64(buf, len(junk), len(extra), *fields, "z.zip:a/x.JPEG") == values, (extra, fields)

    def error(extra, fields=(FULL32, FULL32, FULL32), after=b""):
        return input_error(_zip64, junk + extra + after, len(junk), len(extra), *fields, "z.zip:a/x.JPEG")

    none = "z.zip:a/x.JPEG: broken zip: 32-bit sizes marked as Zip64, but no Zip64 extra field"
    assert error(b"") == none
    assert error(other) == none  # the extra field ends the buffer: nothing is read past it
    assert error(other, after=struct.pack("<2H3Q", 1, 24, 11, 22, 33)) == none  # a Zip64 field past its end
    assert error(struct.pack("<2H2Q", 1, 24, 11, 22)) == none  # a field claiming 24 bytes, 16 there
    assert error(struct.pack("<2H", 0x9999, 0x8000) + struct.pack("<2H3Q", 1, 24, 11, 22, 33)) == none
    assert error(struct.pack("<2H", 1, 0)) == \
        "z.zip:a/x.JPEG: broken zip: 3 of its 32-bit fields are marked as Zip64, its Zip64 extra field holds " \
        "0 value(s)"
    assert error(struct.pack("<2HQ", 1, 8, 11), (FULL32, FULL32, 7)) == \
        "z.zip:a/x.JPEG: broken zip: 2 of its 32-bit fields are marked as Zip64, its Zip64 extra field holds " \
        "1 value(s)"


def test_only_a_plain_stored_or_deflated_member_no_larger_than_an_image_is_listed():
    from imagenet_build.sources.zips import MAX_SIZE, check_member

    for method, flags, csize, usize in ((0, 0, 9, 9), (8, 0x808, 5, 9), (0, 0x800, MAX_SIZE, MAX_SIZE)):
        check_member("z.zip", "a/x.JPEG", csize, usize, method, flags)
    refusals = {
        (0, 1, 9, 9): "encrypted: cannot be read",
        (8, 0x809, 5, 9): "encrypted: cannot be read",
        (12, 0, 5, 9): "compressed with zip method 12: only stored (0) and deflated (8) members can be read in "
                       "place; unzip the archive and give --from the extracted folder",
        (0, 0, 9, 10): "broken zip: stored, but 9 bytes stored for 10",
        (8, 0, 5, MAX_SIZE + 1): f"{MAX_SIZE + 1} bytes: larger than an image can be",
    }
    for (method, flags, csize, usize), problem in refusals.items():
        assert input_error(check_member, "z.zip", "a/x.JPEG", csize, usize, method, flags) == \
            f"z.zip:a/x.JPEG: {problem}"


def zip_listed(tmp_path, order, grow=None, by=0):
    """A zip of a, b, c (stored, in that order in the file) whose central directory lists them in `order`, the
    compressed size of member `grow` `by` bytes larger; its path."""
    data = bytearray(zip_of([(name, name.encode() * 40, 0) for name in ("a", "b", "c")]))
    cd_offset, cd_size, count = directory_of(bytes(data), b"")
    entries, pos = {}, cd_offset
    for _ in range(count):
        name_len, extra_len, comment_len = struct.unpack_from("<3H", data, pos + 28)
        entry = bytearray(data[pos:pos + CENTRAL.size + name_len + extra_len + comment_len])
        if entry[CENTRAL.size:CENTRAL.size + name_len] == (grow or "").encode():
            struct.pack_into("<L", entry, 20, struct.unpack_from("<L", entry, 20)[0] + by)
        entries[entry[CENTRAL.size:CENTRAL.size + name_len].decode()] = bytes(entry)
        pos += len(entry)
    data[cd_offset:cd_offset + cd_size] = b"".join(entries[name] for name in order)
    path = tmp_path / f"{''.join(order)}-{grow}.zip"
    path.write_bytes(bytes(data))
    return path


def test_members_overlapping_or_past_the_directory_are_found_in_any_listed_order(tmp_path):
    """Places: zipfile's members lie end to end (a local header starts where the data before it ends), listed in
    file order or not; a size reaching one byte into the next member, or into the central directory, names the
    member (and the one it runs into), whichever order the directory lists them in."""
    from imagenet_build.sources.kaggle_listing import list_zip

    for order in ("abc", "bca", "cab", "acb"):
        list_zip(str(zip_listed(tmp_path, order)))  # no error
        for grow, into in (("a", "b"), ("b", "c")):
            path = zip_listed(tmp_path, order, grow, 1)
            assert input_error(list_zip, str(path)) == f"{path}:{grow}: broken zip: its data runs into {into}'s " \
                                                       "local header: an offset or size in the directory is wrong"
        path = zip_listed(tmp_path, order, "c", 1)
        cd_offset = directory_of(path.read_bytes(), b"")[0]
        assert input_error(list_zip, str(path)) == f"{path}:c: broken or truncated zip: its data would run past the " \
                                                   f"central directory (byte {cd_offset})"


def test_a_members_local_header_is_read_whole_and_checked_against_the_directory(tmp_path):
    """member_bytes: a name longer than the first read (read again), Zip64 sizes in the local header (zipfile's
    force_zip64) taken from its Zip64 field and compared, a local header with nothing after it, and each
    disagreement with the directory one error naming the member."""
    import os

    from imagenet_build.sources.zips import DEFLATED, LOCAL_SIZE, STORED, member_bytes, pack_member_info

    image = bytes(range(256)) * 12
    long_name = "train/n01440764/" + "l" * 600 + ".JPEG"
    path = tmp_path / "z.zip"
    write_zip(path, [(long_name, image, STORED, False), ("a/y.JPEG", image, DEFLATED, False)])
    zip64 = zip_of([("a/s.JPEG", image, STORED), ("a/d.JPEG", image, DEFLATED)], force_zip64=True)
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
    with zipfile.ZipFile(io.BytesIO(zip64)) as z:
        infos64 = z.infolist()
    assert struct.unpack_from("<2L", zip64, infos64[0].header_offset + 18) == (FULL32, FULL32)

    def read(source, info, name=None, **lie):
        fields = {**dict(csize=info.compress_size, usize=info.file_size, crc=info.CRC, method=info.compress_type),
                  **lie}
        name = name or info.filename
        return member_bytes(source, info.header_offset, fields["csize"],
                            pack_member_info(fields["method"], fields["usize"], fields["crc"]), name, f"z.zip:{name}")

    fd = os.open(path, os.O_RDONLY)
    try:
        assert [read(fd, info) for info in infos] == [image, image]
    finally:
        os.close(fd)
    assert [read(io.BytesIO(zip64), info) for info in infos64] == [image, image]
    s, d = infos64
    assert input_error(read, io.BytesIO(zip64), s, None, csize=s.compress_size + 1, usize=s.file_size + 1) == \
        f"z.zip:a/s.JPEG: broken zip: its local header says {s.compress_size} bytes ({s.file_size} inflated), " \
        f"CRC-32 {s.CRC:08x}; the directory {s.compress_size + 1} ({s.file_size + 1}), {s.CRC:08x}"
    assert input_error(read, io.BytesIO(zip64), d, None, usize=d.file_size - 1) == \
        f"z.zip:a/d.JPEG: broken zip: its local header says {d.compress_size} bytes ({d.file_size} inflated), " \
        f"CRC-32 {d.CRC:08x}; the directory {d.compress_size} ({d.file_size - 1}), {d.CRC:08x}"
    assert input_error(read, io.BytesIO(zip64), s, None, method=DEFLATED) == \
        "z.zip:a/s.JPEG: broken zip: its local header says method 0, the directory 8"
    assert input_error(read, io.BytesIO(zip64), d, None, method=STORED, csize=d.file_size) == \
        "z.zip:a/d.JPEG: broken zip: its local header says method 8, the directory 0"
    assert input_error(read, io.BytesIO(zip64), d, "a/s.JPEG") == \
        f"z.zip:a/s.JPEG: the local header at byte {d.header_offset} is a/d.JPEG's: the zip's directory points " \
        "this member at another member's data"
    no_zip64 = bytearray(zip64)
    struct.pack_into("<H", no_zip64, s.header_offset + LOCAL_SIZE + len(b"a/s.JPEG"), 0x9999)  # another field's id
    assert input_error(read, io.BytesIO(bytes(no_zip64)), s) == \
        "z.zip:a/s.JPEG: broken zip: 32-bit sizes marked as Zip64, but no Zip64 extra field"  # named once
    empty = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0x21, 0, 0, 0, 0, 0)
    assert len(empty) == LOCAL_SIZE
    assert member_bytes(io.BytesIO(empty), 0, 0, pack_member_info(STORED, 0, 0), "", "z.zip:", empty) == b""


def test_a_deflated_member_inflating_to_more_than_its_size_is_refused_at_one_byte_more(tmp_path):
    """Inflating stops one byte past the directory's size: the error says so (N+), never inflates the rest."""
    from imagenet_build.sources.zips import DEFLATED, member_bytes, pack_member_info

    image = bytes(range(256)) * 12
    data = zip_of([("a/d.JPEG", image, DEFLATED)])
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        (info,) = z.infolist()
    local = bytearray(data)
    struct.pack_into("<L", local, info.header_offset + 22, len(image) - 10)  # the local header agrees
    assert input_error(member_bytes, io.BytesIO(bytes(local)), 0, info.compress_size,
                       pack_member_info(DEFLATED, len(image) - 10, info.CRC), "a/d.JPEG", "z.zip:a/d.JPEG") == \
        f"z.zip:a/d.JPEG: corrupt: inflates to {len(image) - 9}+ bytes, the zip's directory says {len(image) - 10}"


def test_write_zip_writes_the_zip64_layout_large_archive_tools_write(tmp_path):
    """The sample's zip, as Kaggle's is: every central entry's sizes and offset in its Zip64 field before a
    5-byte timestamp field, local timestamp fields of 9 bytes, data descriptors where asked, Unix 0644 files of
    1980-01-01 made by and needing version 4.5, one disk; zipfile and unzip read it back. Its bytes are pinned:
    a change to the layout is a change to every sample and must be made here on purpose."""
    import hashlib
    import random
    import subprocess

    draw = random.Random(1)  # text that deflate's level 6 and 7 compress differently
    words = [bytes(draw.choice(b"abcdefghij") for _ in range(draw.randint(2, 9))) for _ in range(300)]
    text = b" ".join(draw.choice(words) for _ in range(2000))
    members = [("a/x.JPEG", b"x" * 100, 0, False), ("a/y.JPEG", text, 8, True)]
    path = tmp_path / "z.zip"
    write_zip(path, members)
    data = path.read_bytes()
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
        infos = z.infolist()
        assert [(i.filename, z.read(i), i.compress_type, bool(i.flag_bits & 8)) for i in infos] == members
    for info in infos:
        assert (info.date_time, info.external_attr, info.create_system, info.create_version, info.extract_version,
                info.volume, info.internal_attr) == ((1980, 1, 1, 0, 0, 0), 0o100644 << 16, 3, 45, 45, 0, 0)
        assert info.extra == struct.pack("<2H3Q", 1, 24, info.file_size, info.compress_size, info.header_offset) + \
            struct.pack("<2HBL", 0x5455, 5, 1, 0)
        local = struct.unpack_from("<4s5H3L2H", data, info.header_offset)
        sizes = (0, 0, 0) if info.flag_bits & 8 else (info.CRC, info.compress_size, info.file_size)
        assert local == (b"PK\x03\x04", 45, info.flag_bits, info.compress_type, 0, 0x21, *sizes, 8, 13)
        assert data[info.header_offset + 38:info.header_offset + 51] == struct.pack("<2HB2L", 0x5455, 9, 3, 0, 0)
    y = infos[1]
    after = y.header_offset + 51 + y.compress_size
    assert data[after:after + 16] == struct.pack("<4s3L", b"PK\x07\x08", y.CRC, y.compress_size, y.file_size)
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert data[y.header_offset + 51:after] == packer.compress(text) + packer.flush()  # level 6, raw deflate
    if shutil.which("unzip"):
        subprocess.run(["unzip", "-tq", str(path)], check=True, capture_output=True)
    assert hashlib.sha256(data).hexdigest() == "158d0ef73178dd4194e3c67ded29bfbaee6a5f0ddc58083460caa7ccf16282e8"
