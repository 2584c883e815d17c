"""The zip reader's checks, each on a damaged copy of the Kaggle sample's zip: convert --from stops with one
`error:` line saying what is wrong and where (the member where there is one), never a traceback; and nested
files under a class folder are ignored and named, in the zip as in a folder."""

import re
import shutil
import struct
import zipfile

import pytest

from conftest import run_cli
from imagenet_build.sources.kaggle_listing import ZIP_NAME
from imagenet_build.sources.zips import (
    CENTRAL,
    EOCD,
    EOCD64,
    LOCATOR,
    write_zip,
)

TRAIN = "ILSVRC/Data/CLS-LOC/train/"


@pytest.fixture(scope="module")
def kaggle(tmp_path_factory):
    """The Kaggle sample: its zip (Zip64, written by write_zip), labels files beside it."""
    from imagenet_build.tools.sample_dataset import make_sample

    out = tmp_path_factory.mktemp("kaggle") / "copy"
    make_sample(out, kind="kaggle", classes=2, per_class=3, validation_per_class=2)
    return out


class Zip:
    """The zip's bytes, to damage in place, and where its members' fields lie (write_zip's layout: every
    central entry's sizes and offset in its Zip64 extra, then the Zip64 end record, its locator, the end
    record)."""

    def __init__(self, path):
        self.path = path
        self.data = bytearray(path.read_bytes())
        with zipfile.ZipFile(path) as z:
            self.infos = z.infolist()
        self.record = len(self.data) - EOCD.size - LOCATOR.size - EOCD64.size  # the Zip64 end record
        self.cd_offset = struct.unpack_from("<Q", self.data, self.record + 48)[0]
        self.central, pos = {}, self.cd_offset
        for info in self.infos:
            name_len, extra_len, comment_len = struct.unpack_from("<3H", self.data, pos + 28)
            self.central[info.filename] = pos
            pos += CENTRAL.size + name_len + extra_len + comment_len

    def image(self, method, descriptor=False):
        """The first train image stored with `method` (0 stored, 8 deflated) and a data descriptor or not."""
        return next(i for i in self.infos if i.filename.startswith(TRAIN) and i.filename.endswith(".JPEG")
                    and i.compress_type == method and bool(i.flag_bits & 8) == descriptor)

    def zip64(self, name):
        """Where the member's Zip64 extra field starts (kind, length, then size, compressed size, offset)."""
        return self.central[name] + CENTRAL.size + len(name.encode())

    def data_at(self, info):
        """Where the member's data starts: after its local header, name and (local) extra field."""
        name_len, extra_len = struct.unpack_from("<2H", self.data, info.header_offset + 26)
        return info.header_offset + 30 + name_len + extra_len

    def add(self, fmt, at, change):
        struct.pack_into(fmt, self.data, at, change(struct.unpack_from(fmt, self.data, at)[0]))

    def save(self):
        self.path.write_bytes(bytes(self.data))


def short(name):
    return name.rsplit("/", 1)[1]


# damage -> (what it does to the zip, the error line's problem as a regular expression: after `error: <zip>`)
def central_directory_short_of_the_end_record(z):
    z.add("<Q", z.record + 40, lambda size: size - 1)  # the Zip64 end record's directory size
    return r": broken or truncated zip: the central directory \(\d+ bytes at \d+\) does not end where the end " \
           r"record is \(\d+\)"


def central_signature(z):
    third = z.infos[2].filename
    z.data[z.central[third] + 3] ^= 0x40
    return rf": broken zip: central directory entry 3 of {len(z.infos)} is missing or bad"


def local_signature(z):
    info = z.image(0)
    z.data[info.header_offset + 3] ^= 0x40
    return rf":{info.filename}: no zip local header at byte {info.header_offset}: the zip changed since it was " \
           "listed, or is broken"


def central_entry_past_the_directory(z):
    last = z.infos[-1].filename
    z.add("<H", z.central[last] + 32, lambda _: 60)  # a comment the directory does not hold
    return rf": broken zip: central directory entry {len(z.infos)} runs past its end"


def data_past_the_directory(z):
    last = z.infos[-1].filename  # its compressed size 100 bytes more: past the central directory's start
    z.add("<Q", z.zip64(last) + 12, lambda size: size + 100)
    return rf":{last}: broken or truncated zip: its data would run past the central directory \(byte {z.cd_offset}\)"


def zip64_too_few_values(z):
    info = z.image(0)
    z.add("<H", z.zip64(info.filename) + 2, lambda length: length - 8)  # 2 of its 3 values
    return rf":{info.filename}: broken zip: 3 of its 32-bit fields are marked as Zip64, its Zip64 extra field " \
           r"holds 2 value\(s\)"


def stored_sizes_disagree(z):
    info = z.image(0)
    z.add("<Q", z.zip64(info.filename) + 4, lambda size: size + 1)  # its size, not its compressed size
    return rf":{info.filename}: broken zip: stored, but {info.compress_size} bytes stored for {info.file_size + 1}"


def local_size_disagrees(z):
    info = z.image(0)
    z.add("<L", info.header_offset + 18, lambda size: size - 1)  # the local header's compressed size
    return rf":{info.filename}: broken zip: its local header says {info.compress_size - 1} bytes " \
           rf"\({info.file_size} inflated\), CRC-32 {info.CRC:08x}; the directory {info.compress_size} " \
           rf"\({info.file_size}\), {info.CRC:08x}"


def deflate_stream_broken(z):
    info = z.image(8, descriptor=True)
    z.data[z.data_at(info)] = 0x07  # a last block of type 3: no such deflate block
    return rf":{info.filename}: corrupt: its deflated data does not inflate \(.+\)"


def deflate_size_lie(z):
    info = z.image(8, descriptor=True)  # a data descriptor: the local header carries no size to compare
    z.add("<Q", z.zip64(info.filename) + 4, lambda size: size + 1)
    return rf":{info.filename}: corrupt: inflates to {info.file_size} bytes, the zip's directory says " \
           rf"{info.file_size + 1}"


DAMAGES = [central_directory_short_of_the_end_record, central_signature, local_signature,
           central_entry_past_the_directory, data_past_the_directory, zip64_too_few_values, stored_sizes_disagree,
           local_size_disagrees, deflate_stream_broken, deflate_size_lie]


@pytest.mark.parametrize("damage", DAMAGES, ids=[d.__name__ for d in DAMAGES])
def test_a_damaged_zip_is_one_line_saying_what_and_where(kaggle, tmp_path, damage):
    copy = tmp_path / "copy"
    shutil.copytree(kaggle, copy)
    z = Zip(copy / ZIP_NAME)
    problem = damage(z)
    z.save()
    result = run_cli("convert", "--from", z.path, "--output-dir", tmp_path / "out", "--labels-file",
                     copy / "labels.txt", "--validation-labels-file", copy / "validation_labels.txt",
                     "--train-shards", 1, "--validation-shards", 1, "--layout-threads", 1, "--workers", 1)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and re.fullmatch(f"error: {re.escape(str(z.path))}{problem}", lines[0]), \
        (problem, result.stderr)


def test_a_member_read_past_the_zips_end_is_truncated_not_accepted(tmp_path):
    """A deflated member whose compressed size runs past the file's end (the zip cut since it was listed):
    the whole stream may inflate and its CRC-32 agree, but the bytes are not all there."""
    from imagenet_build.infra.errors import InputError
    from imagenet_build.sources.zips import DEFLATED, member_bytes, pack_member_info

    path = tmp_path / "z.zip"
    image = bytes(range(256)) * 20
    write_zip(path, [("a/x.JPEG", image, DEFLATED, True)])
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("a/x.JPEG")
    size = path.stat().st_size
    with open(path, "rb") as f:
        assert member_bytes(f, 0, info.compress_size, pack_member_info(DEFLATED, len(image), info.CRC), "a/x.JPEG",
                            "z.zip:a/x.JPEG") == image
        with pytest.raises(InputError, match=rf"^z.zip:a/x.JPEG: truncated: the zip ends inside this member "
                                             rf"\({size} bytes at \d+\)$"):
            member_bytes(f, 0, size, pack_member_info(DEFLATED, len(image), info.CRC), "a/x.JPEG", "z.zip:a/x.JPEG")


def test_nested_files_under_a_class_folder_are_ignored_and_named_in_the_zip_as_in_a_folder(kaggle, tmp_path):
    """slim takes <synset>/*.JPEG: an image one folder deeper is no image of the class, in a folder copy or in
    Kaggle's zip; both leave it out and name it among the files ignored (a note in the summary)."""
    import json

    with zipfile.ZipFile(kaggle / ZIP_NAME) as z:
        members = [(i.filename, z.read(i), i.compress_type, bool(i.flag_bits & 8)) for i in z.infolist()]
        tree = tmp_path / "tree"
        z.extractall(tree)
    nested = f"{TRAIN}n01440764/extra/n01440764_9.JPEG"
    image = next(d for n, d, *_ in members if n.startswith(TRAIN) and n.endswith(".JPEG"))
    copy = tmp_path / "copy"
    shutil.copytree(kaggle, copy)
    write_zip(copy / ZIP_NAME, members + [(nested, image, 0, False)])
    (tree / nested).parent.mkdir()
    (tree / nested).write_bytes(image)
    found = {}
    for given in (copy / ZIP_NAME, tree):
        result = run_cli("convert", "--from", given, "--output-dir", tmp_path / f"out-{given.name}",
                         "--labels-file", copy / "labels.txt", "--validation-labels-file",
                         copy / "validation_labels.txt", "--train-shards", 1, "--validation-shards", 1,
                         "--layout-threads", 1, "--workers", 1, "--json")
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        ignored = [n for n in summary["notes"] if "file(s) ignored" in n]
        found[given.name] = summary["splits"]["train"]["images"], ignored
    assert found[ZIP_NAME][0] == found["tree"][0] == 6  # the sample's 2 x 3, not the nested one
    assert found[ZIP_NAME][1] == ["train: 1 file(s) ignored (not <synset>/*.JPEG as slim takes them): "
                                  "n01440764/extra/n01440764_9.JPEG"]
    assert found["tree"][1] == ["train: 1 file(s) ignored (not <synset>/*.JPEG as slim takes them): "
                                "n01440764/extra/"]
