"""The tar reader's edges: a view of an inner tar seeks and reads as a file of its bytes, folder members and a
tar that is not ImageNet's train archive get their own message, and no copy's listing or reading leaves a file
descriptor open."""

import io
import os
import tarfile

import pytest

from conftest import run_cli, shard_files
from helpers import placed, tar_of
from imagenet_build.sources.copies import sample_kinds
from imagenet_build.tools.sample_dataset import make_sample

SYNSETS = ("n01440764", "n01443537")  # the sample's two classes (the first two of the labels file)


def test_an_inner_tar_view_seeks_and_reads_as_a_file_of_its_bytes(tmp_path):
    """RangeFile (a class tar read in place) against BytesIO of the same bytes: every whence, a read past the
    view's end gives nothing (never the bytes after the view), a position before its start is refused."""
    from imagenet_build.sources.tars import RangeFile

    body = bytes(range(100))
    path = tmp_path / "outer"
    path.write_bytes(b"A" * 30 + body + b"Z" * 30)
    steps = [((10, 0), 5), ((7, 1), 4), ((-3, 1), None), ((-20, 2), 6), ((0, 2), 3), ((5, 2), None),
             ((200, 0), 8), ((-1, 1), -1), ((0, 0), 1000)]
    with open(path, "rb") as f:
        view, same = RangeFile(f, 30, len(body)), io.BytesIO(body)
        for (pos, whence), n in steps:
            assert view.seek(pos, whence) == same.seek(pos, whence), (pos, whence)
            assert view.read(n) == same.read(n), (pos, whence, n)
            assert view.tell() == same.tell(), (pos, whence, n)
        for pos, whence in ((-1, 0), (-101, 2), (-1001, 1)):
            with pytest.raises(ValueError, match="negative seek position"):
                view.seek(pos, whence)
        with pytest.raises(ValueError, match="invalid whence"):
            view.seek(0, 3)


@pytest.fixture(scope="module")
def tarballs(tmp_path_factory):
    out = tmp_path_factory.mktemp("tarballs") / "copy"
    make_sample(out, classes=2, per_class=3, validation_per_class=2, tarballs=True)
    return out


def convert_train_tar(sample, archive, out):
    return run_cli("convert", "--train-tar", archive, "--output-dir", out, "--labels-file", sample / "labels.txt",
                   "--train-shards", 1, "--layout-threads", 1, "--workers", 1, "--json")


def error_line(result):
    """The one `error:` line of a failed run (exit 1, no traceback)."""
    lines = result.stderr.splitlines()
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(lines) == 1, result.stderr
    return lines[0]


def class_images(sample, synset):
    return [(p.name, p.read_bytes()) for p in sorted((sample / "train" / synset).glob("*.JPEG"))]


def test_folder_members_of_a_train_tar_are_structure_not_images(tarballs, tmp_path):
    """Folder entries, in the train tar (its class tars under a folder) and in its class tars (the images under
    a <synset>/ folder), are neither images nor files ignored: the shards are the plain train tar's."""
    plain = convert_train_tar(tarballs, tarballs / "ILSVRC2012_img_train.tar", tmp_path / "plain")
    assert plain.exit_code == 0, plain.output
    with_folders = tmp_path / "ILSVRC2012_img_train.tar"
    inner = {s: tar_of([(s, None)] + [(f"{s}/{n}", d) for n, d in class_images(tarballs, s)]) for s in SYNSETS}
    with_folders.write_bytes(tar_of([("train", None)] + [(f"train/{s}.tar", inner[s]) for s in SYNSETS]))
    result = convert_train_tar(tarballs, with_folders, tmp_path / "folders")
    assert result.exit_code == 0, result.output
    assert not any("ignored" in note for note in result.output.splitlines()), result.output
    assert shard_files(tmp_path / "folders") == shard_files(tmp_path / "plain")


def test_a_tar_of_the_extracted_train_folder_is_not_the_train_archive(tarballs, tmp_path):
    """train/<synset>/*.JPEG tarred (folder members and images, no class tars): said to be no train archive."""
    tree = tmp_path / "tree.tar"
    members = [("train", None)]
    for synset in SYNSETS:
        members += [(f"train/{synset}", None)] + [(f"train/{synset}/{n}", d) for n, d in class_images(tarballs, synset)]
    tree.write_bytes(tar_of(members))
    line = error_line(convert_train_tar(tarballs, tree, tmp_path / "out"))
    assert line == f"error: {tree}: holds no <synset>.tar class archives: not the ILSVRC2012 train archive"
    assert not (tmp_path / "out").exists()


def test_an_unrelated_tar_of_tars_is_not_the_train_archive(tarballs, tmp_path):
    """A tar holding tars none of which is a class of the labels file: not taken for a train archive whose
    classes are unknown (one line naming what it holds, nothing built)."""
    other = tmp_path / "backups.tar"
    other.write_bytes(tar_of([("README", b"hi"), ("backup.tar", tar_of([("a.txt", b"x")])),
                              ("old/", None), ("old/more.tar", tar_of([("b.txt", b"y")]))]))
    line = error_line(convert_train_tar(tarballs, other, tmp_path / "out"))
    assert line == (f"error: {other}: holds no <synset>.tar class archive of a class in {tarballs / 'labels.txt'} "
                    "(its tars: backup.tar, old/more.tar): not the ILSVRC2012 train archive, "
                    "or the wrong --labels-file")
    assert not (tmp_path / "out").exists()


def open_descriptors():
    return sorted(os.listdir("/proc/self/fd"))


def list_and_read(source, tmp_path):
    """Every copy's listing and reading, as convert does them: each split scanned, every image read, closed."""
    from imagenet_build.catalog.classes import load_catalog
    from imagenet_build.infra.workers import Workers
    from imagenet_build.plan import SplitPlan
    from imagenet_build.sources import find_copy, reader_for

    catalog = load_catalog(source / "labels.txt")
    copy = find_copy([source])
    read = 0
    with Workers(1) as pool, placed(copy, tmp_path, pool):
        splits = [copy.scan_train(catalog, "fail", pool)] if "train" in copy.splits else []
        if "validation" in copy.splits:
            splits.append(copy.scan_validation(catalog, "fail", pool, lambda: (source / "validation_labels.txt")
                                               .read_text().split(), source / "validation_labels.txt"))
        for split in splits:
            spec = SplitPlan(split, catalog, None, 1, 1).spec(0)
            with reader_for(spec) as reader:
                read += sum(len(reader.read(i)[0]) > 0 for i in range(len(spec.entries)))
    return read


@pytest.mark.parametrize("kind", sample_kinds())
def test_listing_and_reading_a_copy_leaves_no_descriptor_open(tmp_path, kind):
    """A descriptor left open per archive or per read runs a 1,000-class (or 1,024-shard) build out of them:
    the copy listed and read twice (the first warms lazy imports), the open descriptors are those before."""
    source = tmp_path / "copy"
    make_sample(source, kind=kind, tarballs=True, classes=2, per_class=3, validation_per_class=2)
    assert list_and_read(source, tmp_path / "warm") > 0
    before = open_descriptors()
    assert list_and_read(source, tmp_path / "again") > 0
    assert open_descriptors() == before


def test_read_member_gives_the_listed_members_bytes_and_names_what_lies_there_instead(tmp_path):
    """read_member, from a descriptor or a file object: the listed member's bytes and its header's name (a ustar
    prefix joined, bytes that are not UTF-8 escaped); an archive cut since, or another header before the bytes,
    is one error saying what is there."""
    from imagenet_build.infra.errors import InputError
    from imagenet_build.sources.tars import list_members, read_member

    jpeg, other = bytes(range(256)) * 5, b"other" * 300
    long_dir = "d" * 90 + "/" + "e" * 60
    data = tar_of([("a.JPEG", jpeg), ("b.JPEG", other), (f"{long_dir}/c.JPEG", jpeg)], tarfile.USTAR_FORMAT)
    path = tmp_path / "t.tar"
    path.write_bytes(data)
    with open(path, "rb") as f:
        members = list_members(f, len(data), "t.tar")
    (a, a_at, a_size, _, a_crc), (b, b_at, b_size, _, b_crc), (c, c_at, c_size, _, c_crc) = members
    assert c == f"{long_dir}/c.JPEG"
    fd = os.open(path, os.O_RDONLY)
    try:
        for source in (fd, io.BytesIO(data)):
            assert read_member(source, a_at, a_size, a_crc, "t.tar:a.JPEG") == (jpeg, "a.JPEG")
            assert read_member(source, b_at, b_size, b_crc, "t.tar:b.JPEG") == (other, "b.JPEG")
            assert read_member(source, c_at, c_size, c_crc, "t.tar:c") == (jpeg, c)
            with pytest.raises(InputError) as caught:
                read_member(source, b_at, a_size, a_crc, "t.tar:a.JPEG")  # a's entry, b's place
            assert str(caught.value) == (f"t.tar:a.JPEG: the archive changed since it was listed: before its "
                                         f"{a_size} bytes is a header for 'b.JPEG' of {b_size} bytes, not the "
                                         "header listed")
            with pytest.raises(InputError) as caught:
                read_member(source, a_at + 512, 512, a_crc, "t.tar:a.JPEG")  # a's data where its header should be
            assert str(caught.value) == ("t.tar:a.JPEG: the archive changed since it was listed: before its 512 "
                                         "bytes is no plain tar header, not the header listed")
    finally:
        os.close(fd)
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[:c_at + c_size - 1])
    fd = os.open(cut, os.O_RDONLY)
    try:
        with pytest.raises(InputError) as caught:
            read_member(fd, c_at, c_size, c_crc, "cut.tar:c")
        assert str(caught.value) == "cut.tar:c: archive shorter than when it was listed"
    finally:
        os.close(fd)


def test_write_header_writes_what_tarfile_reads_back():
    """write_header: one plain ustar block (0444, mtime 0, a regular file) that _plain_header parses, for a short
    ASCII name; tarfile's GNU blocks for a long or non-ASCII one; each a header tarfile reads as that member."""
    from imagenet_build.sources.tars import _plain_header, header_name, write_header

    for name, size in (("a.JPEG", 0), ("n01440764/n01440764_10026.JPEG", 1234567), ("x" * 100, 8 ** 11 - 1),
                       ("x" * 101, 5), ("é.JPEG", 5), ("\udcff.JPEG", 5)):
        head = write_header(name, size)
        with tarfile.open(fileobj=io.BytesIO(head + bytes(1024)), mode="r:",
                          encoding="utf-8", errors="surrogateescape") as tar:
            info = tar.next()  # the header alone: the data is not there
        assert (info.name, info.size, info.mode, info.mtime, info.type, info.uid, info.gid, info.linkname) == \
            (name, size, 0o444, 0, tarfile.REGTYPE, 0, 0, ""), name
        if len(name) <= 100 and name.isascii():
            assert len(head) == 512 and _plain_header(head) == (name, size, b"0")
            assert head[257:265] == b"ustar\x0000"
        assert header_name(head[-512:]) == name.encode("utf-8", "surrogateescape")[:100].decode("utf-8",
                                                                                               "backslashreplace")
    assert header_name(tar_of([("p/" + "n" * 100, b"")], tarfile.USTAR_FORMAT)[:512]) == "p/" + "n" * 100
    gnu = bytearray(tar_of([("a.JPEG", b"")])[:512])
    gnu[345:357] = b"14567123456\x00"  # an old GNU header's atime where ustar keeps its prefix
    assert header_name(bytes(gnu)) == "a.JPEG"


def listing_error(call, *args, **kwargs):
    """str() of the InputError call(*args, **kwargs) raises."""
    from imagenet_build.infra.errors import InputError

    with pytest.raises(InputError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


def test_the_fast_listing_reads_any_plain_tar_as_tarfile_does_its_small_members_with_it(tmp_path):
    """plain_members: headers at every block of its 4 KiB reads, V7 file and folder types, folder names ending in
    any letter, a checksum of six significant digits (a long ASCII path), a 1 GiB member (sparse here): the
    listing tarfile gives, and with small_data the bytes of every file of one block or less, none of a folder."""
    from imagenet_build.sources.tars import list_members, plain_members

    def tarfile_listing(data):
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            return [(m.name, m.offset_data, m.size, m.isfile()) for m in tar]

    def fast(path, size, **kwargs):
        with open(path, "rb") as f:
            return plain_members(f.fileno(), size, "x.tar", **kwargs)

    sizes = [0, 512, 1, 0, 600, 0, 0, 513, 5, 0, 1200, 511, 0, 3000, 7, 0, 0, 0, 2, 1024, 9]
    members = [(f"m{i}.bin", bytes([i]) * s) for i, s in enumerate(sizes)] + [("nX", None), ("nX/a.JPEG", b"j")]
    members += [("z" * 150 + "/" + "y" * 99, b"long"), ("p/" + "n" * 100, b"a one-letter ustar prefix")]
    every = tar_of(members, tarfile.USTAR_FORMAT)
    at = every.index(b"y" * 99)  # its header: the name's last part, the ustar prefix at 345
    checksum = int(every[at + 148:at + 154], 8)
    assert checksum >= 0o100000
    old = bytearray(tar_of([("v7.bin", b"abc"), ("slash/", b""), ("typed-0/", b"q")], tarfile.USTAR_FORMAT))
    for at, kind in ((0, 0), (1024, 0), (1536, ord("0"))):  # regular files of type NUL, one named like a folder
        old[at + 156] = kind
        old[at + 148:at + 156] = b"%06o\x00 " % (sum(old[at:at + 148]) + sum(old[at + 156:at + 512]) + 8 * 32)
    big = tmp_path / "big.tar"
    with open(big, "wb") as f:
        f.write(tar_of([("small", b"s")])[:1024])
        header = bytearray(tar_of([("big", b"")], tarfile.USTAR_FORMAT)[:512])
        header[124:136] = b"%011o\x00" % (1 << 30)
        header[148:156] = b"%06o\x00 " % (sum(header[:148]) + sum(header[156:]) + 8 * 32)
        f.write(header)
        f.truncate(1024 + 512 + (1 << 30) + 1024)
    for kind, data in (("every block", every), ("v7", bytes(old))):
        path = tmp_path / f"{kind}.tar"
        path.write_bytes(data)
        listed, small = fast(path, len(data), small_data=True)
        assert [m[:4] for m in listed] == tarfile_listing(data), kind
        assert fast(path, len(data))[1] == {}
        assert small == {i: data[m[1]:m[1] + m[2]] for i, m in enumerate(listed) if m[3] and m[2] <= 512}, kind
        assert len(small) >= 2
    with open(big, "rb") as f:
        listed = list_members(f, big.stat().st_size, "big.tar")
    assert [m[:4] for m in listed] == [("small", 512, 1, True), ("big", 1536, 1 << 30, True)]


def test_a_stream_that_ends_before_its_tar_does_is_a_broken_tar():
    """A file object whose reads stop with EOFError (gzip's, where the compressed data is cut) halfway through
    the tar: one error naming the archive and the reader's own words, not a traceback."""
    import gzip

    from imagenet_build.sources.tars import list_members

    data = tar_of([("a.bin", os.urandom(3000)), ("b.bin", os.urandom(3000))])
    compressed = gzip.compress(data)
    cut = gzip.GzipFile(fileobj=io.BytesIO(compressed[: len(compressed) // 2]))
    assert listing_error(list_members, cut, len(data), "t.tar.gz") == (
        "t.tar.gz: broken tar archive (Compressed file ended before the end-of-stream marker was reached)")


def test_a_tar_cut_short_of_its_end_is_said_to_be_truncated_after_its_last_member(tmp_path):
    """A tar read within `size` bytes (an inner tar: bytes follow it in the file) or cut: a member's data reaching
    past it, its end-of-archive marker (two zero blocks) not all inside it, no header at all; each one error naming
    the place and the member before, by the fast listing or tarfile's."""
    from imagenet_build.sources.tars import RangeFile, list_members

    data = tar_of([("a.bin", b"a" * 1024), ("b.bin", b"b" * 100)])  # a: header 0, data 512; b: header 1536
    path = tmp_path / "t.tar"
    path.write_bytes(data + b"\x00" * 4096)

    def error(size, of=None):
        with open(path, "rb") as f:
            return listing_error(list_members, of(f) if of else f, size, "t.tar")

    assert error(2048 + 1024) == "t.tar: truncated: no end-of-archive marker after byte 2560 (after b.bin: cut " \
                                 "there, or its header's size is wrong)"
    assert error(2048 + 512) == error(2048 + 1023) == error(3072 - 1)
    assert error(1536) == "t.tar: truncated: no end-of-archive marker after byte 1536 (after a.bin: cut there, or " \
                          "its header's size is wrong)"
    assert error(1535) == "t.tar: truncated: a.bin needs bytes up to 1536, the archive has 1535"
    assert error(100) == "t.tar: truncated: no end-of-archive marker after byte 0"
    empty_last = tmp_path / "e.tar"
    empty_last.write_bytes(tar_of([("a.bin", b"a" * 1024), ("e", b"")])[:2048])  # cut just after e's header
    with open(empty_last, "rb") as f:
        assert listing_error(list_members, f, 2048, "e.tar") == \
            "e.tar: truncated: no end-of-archive marker after byte 2048 (after e: cut there, or its header's size is " \
            "wrong)"
    after_b = "t.tar: truncated: no end-of-archive marker after byte 2560 (after b.bin: cut there, or its header's " \
              "size is wrong)"
    assert error(2148) == after_b  # b's data ends at the end: no marker after it
    assert listing_error(list_members, io.BytesIO(data[:1536]), 1536, "t.tar") == error(1536)  # by tarfile
    assert listing_error(list_members, io.BytesIO(data[:1535]), 1535, "t.tar") == \
        "t.tar: truncated: a.bin needs bytes up to 1536, the archive has 1535"
    assert list_members(io.BytesIO(bytes(1024)), 1024, "t.tar") == []  # an empty tar: its end marker only
    view = RangeFile(open(path, "rb"), 0, 2560)
    try:
        assert view.read(0) == b"" and view.tell() == 0
        assert view.seek(700) == 700 and view.seek(300) == 300 and view.read(3) == data[300:303]  # from its start
    finally:
        view.origin[0].close()


def test_tar_names_not_utf_8_and_archives_not_there_are_one_error_naming_them(tmp_path):
    from imagenet_build.sources.tars import list_members, outer_members

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT, errors="surrogateescape") as tar:
        info = tarfile.TarInfo("\udcff.JPEG")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
    data = out.getvalue()
    assert listing_error(list_members, io.BytesIO(data), len(data), "x.tar") == \
        "x.tar:\\udcff.JPEG: file name is not UTF-8 (slim's image/filename is UTF-8 text): rename it"
    assert listing_error(outer_members, tmp_path / "none.tar") == f"{tmp_path / 'none.tar'}: archive not found"
    assert listing_error(outer_members, tmp_path) == f"{tmp_path}: is a folder, expected a .tar archive"


@pytest.mark.parametrize("where", ["local", "object store"])
def test_the_archive_reader_reads_members_from_a_file_or_an_object_store(tmp_path, where):
    """ArchiveReader: a local archive read by descriptor, an object (fsspec's memory store here) by ranged reads;
    the same members, names and identities either way."""
    import fsspec

    from imagenet_build.model import ImageEntry, ShardSpec
    from imagenet_build.sources.tars import ArchiveReader, list_members

    jpeg, other = bytes(range(256)) * 5, b"other" * 300
    data = tar_of([("a.JPEG", jpeg), ("b.JPEG", other)])
    if where == "local":
        root = str(tmp_path / "t.tar")
    else:
        root = f"memory://{tmp_path.name}/t.tar"
    with fsspec.open(root, "wb") as f:
        f.write(data)
    listed = list_members(io.BytesIO(data), len(data), "t.tar")
    entries = tuple(ImageEntry(name, 0, (), offset, size, crc) for name, offset, size, _, crc in listed)
    spec = ShardSpec("train", 0, 1, root, ArchiveReader, entries, {0: ("n01440764", "tench")})
    with ArchiveReader(spec) as reader:
        assert [reader.read(i) for i in (1, 0)] == [(other, f"{root}:b.JPEG"), (jpeg, f"{root}:a.JPEG")]
    assert reader.identities == [f"@{listed[1][1]}:{len(other)}", f"@{listed[0][1]}:{len(jpeg)}"]
