"""The bytes read are the member listed: the fast tar listing agrees with tarfile's, and every tar and zip reader
refuses a member whose header changed since it was listed."""

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from helpers import placed, tar_of
from imagenet_build.tools.sample_dataset import make_sample


def test_the_fast_tar_listing_agrees_with_tarfiles_and_leaves_it_what_it_cannot_read(tmp_path):
    """list_members parses plain ustar headers itself (~4x faster than tarfile: 25 s of CPU for ImageNet's
    1.28 M images otherwise); for every tar it must give what tarfile gives, errors included."""
    from imagenet_build.infra.errors import InputError
    from imagenet_build.sources.tars import RangeFile, list_members, plain_members

    def listings(data):
        """(the fast listing or None where it gives up, the listing of a local file, tarfile's own)."""
        path = tmp_path / "x.tar"
        path.write_bytes(data)
        outcomes = []
        for reader in ("plain", "file", "tarfile"):
            try:
                if reader == "plain":
                    with open(path, "rb") as f:
                        listed = plain_members(f.fileno(), len(data), "x.tar")
                        outcomes.append(listed and listed[0])
                elif reader == "file":
                    with open(path, "rb") as f:
                        outcomes.append(list_members(f, len(data), "x.tar"))
                else:  # no file descriptor: tarfile's listing
                    outcomes.append(list_members(io.BytesIO(data), len(data), "x.tar"))
            except InputError as e:
                outcomes.append(str(e))
        return outcomes

    jpeg = bytes(range(256)) * 40
    files = [("n01440764_10026.JPEG", jpeg), ("n01440764_10027.JPEG", jpeg[:700]), ("tiny.cls", b"7"),
             ("empty", b"")]
    plain = {
        "gnu": tar_of(files, tarfile.GNU_FORMAT),
        "ustar": tar_of(files, tarfile.USTAR_FORMAT),
        "pax, short names": tar_of(files, tarfile.PAX_FORMAT),
        "folders": tar_of([("train", None), ("train/n01440764", None), ("train/n01440764/a.JPEG", jpeg)],
                        tarfile.GNU_FORMAT),
        "ustar prefix (a 130-character path)": tar_of([("d" * 60 + "/" + "e" * 60 + "/a.JPEG", jpeg)],
                                                    tarfile.USTAR_FORMAT),
    }
    old_folder = bytearray(tar_of([("old/", b"")], tarfile.USTAR_FORMAT))  # a V7 folder: type NUL, a trailing /
    old_folder[156] = 0
    old_folder[148:156] = b"%06o\x00 " % (sum(old_folder[:148]) + sum(old_folder[156:512]) + 8 * 32)
    plain["v7 folder"] = bytes(old_folder)
    (tmp_path / "src").mkdir()
    for name, data in files[:2]:
        (tmp_path / "src" / name).write_bytes(data)
    subprocess.run(["tar", "-cf", str(tmp_path / "gnu.tar"), "-C", str(tmp_path / "src"), "."], check=True)
    plain["GNU tar's own"] = (tmp_path / "gnu.tar").read_bytes()
    for kind, data in plain.items():
        fast, listed, slow = listings(data)
        assert fast == listed == slow and isinstance(slow, list) and slow, kind
    assert [m[0] for m in listings(plain["v7 folder"])[2]] == ["old"]

    others = {  # what the fast listing leaves to tarfile: long names, pax headers, base-256 sizes, bad headers
        "gnu long name": tar_of([("a" * 120 + ".JPEG", jpeg)], tarfile.GNU_FORMAT),
        "pax long name": tar_of([("a" * 120 + ".JPEG", jpeg)], tarfile.PAX_FORMAT),
        "non-ascii name": tar_of([("é.JPEG", jpeg)], tarfile.PAX_FORMAT),
        "a symlink": tar_of([*files[:1], ("link", "n01440764_10026.JPEG")], tarfile.GNU_FORMAT),
        "not a tar": b"\x00" * 10 + b"hello",
        "zeros only": bytes(10240),
        "garbage": b"garbage" * 200,
    }
    for kind, data in others.items():
        fast, listed, slow = listings(data)
        assert fast is None and listed == slow, kind
    assert "not a tar archive" in listings(others["garbage"])[2]

    whole = plain["gnu"]
    end = whole.rindex(b"tiny.cls") + 2 * 512  # the last member's header and data
    cut = {"in an image": whole[:700], "after the last member": whole[:end], "in the end marker": whole[:end + 600]}
    for kind, data in cut.items():
        fast, listed, slow = listings(data)
        assert fast == listed == slow and "truncated" in slow, kind

    # a tar inside a tar (the train archive's class tars), read in place from its offset
    outer = tmp_path / "outer.tar"
    outer.write_bytes(tar_of([("n01440764.tar", whole), ("n01443537.tar", plain["ustar"])], tarfile.GNU_FORMAT))
    with open(outer, "rb") as f:
        inner = list_members(f, outer.stat().st_size, "outer.tar")
        for (name, offset, size, *_), data in zip(inner, (whole, plain["ustar"])):
            assert list_members(RangeFile(f, offset, size), size, name) == listings(data)[2]


# ------------------------------------------------------------------ the bytes read are the member listed


def _damage_header(path, offset, change):
    """The tar header block just before byte `offset` of the file rewritten by change(name, size) -> (name, size),
    with a valid checksum: a tar that disagrees with the listing made before it changed."""
    data = bytearray(path.read_bytes())
    at = offset - 512
    name = data[at:at + 100].split(b"\0", 1)[0].decode()
    new_name, new_size = change(name, int(data[at + 124:at + 135], 8))
    data[at:at + 100] = new_name.encode().ljust(100, b"\0")
    data[at + 124:at + 136] = b"%011o\x00" % new_size
    data[at + 148:at + 156] = b"%06o\x00 " % (sum(data[at:at + 148]) + 8 * 32 + sum(data[at + 156:at + 512]))
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", ["ilsvrc", "wds", "hf"])
@pytest.mark.parametrize("change", ["renamed", "resized"])
def test_every_tar_reader_refuses_a_member_whose_header_changed_since_it_was_listed(tmp_path, kind, change):
    """ILSVRC tarballs, WebDataset shards and a decompressed .tar.gz are read by offset: the header block before
    the data, read with it, must be the one the listing read (read_member), else the bytes are another member's."""
    from imagenet_build.catalog.classes import load_catalog
    from imagenet_build.infra.errors import InputError
    from imagenet_build.infra.workers import Workers
    from imagenet_build.plan import SplitPlan
    from imagenet_build.sources import find_copy, reader_for

    source = tmp_path / "copy"
    make_sample(source, kind=kind, tarballs=True, classes=2, per_class=3, validation_per_class=2)
    catalog = load_catalog(source / "labels.txt")
    copy = find_copy([source])
    with Workers(1) as pool, placed(copy, tmp_path / "out", pool):
        split = copy.scan_train(catalog, "fail", pool)
        spec = SplitPlan(split, catalog, None, 1, 1).spec(0)
        with reader_for(spec) as reader:
            reader.read(0)  # as listed: read
        entry = spec.entries[0]
        if kind == "ilsvrc":
            path = source / "ILSVRC2012_img_train.tar"
        elif kind == "wds":
            path = source / entry.relpath.rsplit("/", 1)[0]
        else:  # the decompressed archive the entry lies in, in the spool
            path = Path(spec.source_root) / sorted(n for n in os.listdir(spec.source_root) if n.endswith(".tar"))[
                entry.offset >> 40]
        offset = entry.offset & ((1 << 40) - 1)
        _damage_header(path, offset, {"renamed": lambda name, size: (name.replace("_", "-", 1), size),
                                      "resized": lambda name, size: (name, size - 1)}[change])
        with reader_for(spec) as reader, pytest.raises(InputError, match="the archive changed since it was listed"):
            reader.read(0)


def test_a_zip_member_read_is_the_one_the_directory_named(tmp_path):
    """member_bytes reads the local header: a directory entry pointing at another member's local header (its
    offset, sizes and CRC copied), a local header whose sizes disagree, or bytes whose CRC-32 is not the
    directory's (stored or deflated) are each refused naming the member."""
    import struct
    import zipfile

    from imagenet_build.infra.errors import InputError
    from imagenet_build.sources.zips import DEFLATED, STORED, member_bytes, pack_member_info, write_zip

    jpeg, other = bytes(range(256)) * 20, bytes(range(255, -1, -1)) * 20
    path = tmp_path / "z.zip"
    write_zip(path, [("a/x.JPEG", jpeg, STORED, False), ("a/y.JPEG", other, STORED, False),
                     ("a/z.JPEG", jpeg, DEFLATED, True)])
    with zipfile.ZipFile(path) as z:
        info = {i.filename: i for i in z.infolist()}
    data = bytearray(path.read_bytes())

    def read(name, as_name=None, **lie):
        i = info[name]
        fields = {**dict(csize=i.compress_size, usize=i.file_size, crc=i.CRC), **lie}
        member_info = pack_member_info(i.compress_type, fields["usize"], fields["crc"])
        shown = as_name or name
        return member_bytes(io.BytesIO(bytes(data)), i.header_offset, fields["csize"], member_info, shown,
                            f"z.zip:{shown}")

    assert read("a/x.JPEG") == jpeg and read("a/z.JPEG") == jpeg
    with pytest.raises(InputError, match=r"z.zip:a/x.JPEG: the local header at byte \d+ is a/y.JPEG's"):
        read("a/y.JPEG", as_name="a/x.JPEG")  # x's entry with y's offset, sizes and CRC
    with pytest.raises(InputError, match=r"its local header says 5120 bytes \(5120 inflated\).*the directory 5121"):
        read("a/x.JPEG", csize=5121, usize=5121)
    with pytest.raises(InputError, match="its local header says .* CRC-32"):
        read("a/x.JPEG", crc=info["a/x.JPEG"].CRC ^ 1)
    with pytest.raises(InputError, match="corrupt: CRC-32 [0-9a-f]+ of its inflated bytes"):
        read("a/z.JPEG", crc=info["a/z.JPEG"].CRC ^ 1)  # a data descriptor's local fields are 0: the CRC decides
    at = info["a/x.JPEG"].header_offset
    data[at + 30 + sum(struct.unpack_from("<2H", data, at + 26)) + 10] ^= 1
    with pytest.raises(InputError, match="z.zip:a/x.JPEG: corrupt: CRC-32 [0-9a-f]+ of its bytes"):
        read("a/x.JPEG")  # stored bytes are CRC-checked too
