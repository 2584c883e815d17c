"""Every kind of tar member, in every copy read from a tar: the records `tar x` gives, or one line naming it.

A tar holds more than files: hard links, symlinks, FIFOs, devices, folders. Each copy read from
a tar (TAR_COPIES, held to the registry of `sample --layout` by
test_every_registered_copy_kind_says_whether_it_reads_tars) gets one image member replaced by each
kind; convert --from must then give the shards of the same copy as GNU tar extracts it and
archives it again (`tar x`, then `tar c --dereference --hard-dereference`: a link becomes the
file it gave), or refuse in one line naming the member. The rule lives once, in
sources/tars.py (list_members, resolve_links); docs/copies.md says it.
"""

import gzip
import io
import posixpath
import shutil
import subprocess
import tarfile

import pytest

from conftest import run_cli, shard_files
from imagenet_build.sources.copies import sample_kinds

SHARDS = ["--train-shards", 2, "--validation-shards", 1, "--layout-threads", 1, "--workers", 1]
KINDS = ("regular", "hard link", "symlink", "FIFO", "device", "directory")
REFUSED = {"FIFO": "a FIFO", "device": "a character device"}

# ------------------------------------------------------------------ the tars of each copy, and where they lie


class TarCopy:
    """A copy read from tars: its copy kind, the tar altered (inside `outer` where it is a class tar of the
    train archive), and how it is converted (--from the copy, or --train-tar as ImageNet-21k is)."""

    def __init__(self, copy_kind, tar, outer=None, train_tar=False):
        self.copy_kind, self.tar, self.outer, self.train_tar = copy_kind, tar, outer, train_tar

    def read(self, root):
        """The altered tar's bytes, decompressed."""
        data = (root / (self.outer or self.tar)).read_bytes()
        if self.outer:
            data = tar_entries(data)[self.tar][1]
        return gzip.decompress(data) if self.tar.endswith(".gz") else data

    def write(self, root, data):
        """The altered tar written back in its place (gzipped, or into its outer archive, as it came)."""
        if self.tar.endswith(".gz"):
            data = gzip.compress(data, mtime=0)
        if self.outer:
            outer = root / self.outer
            entries = tar_entries(outer.read_bytes())
            entries[self.tar] = (entries[self.tar][0], data)
            outer.write_bytes(retar(entries.values()))
        else:
            (root / self.tar).write_bytes(data)

    def convert_args(self, root, out):
        common = ["--output-dir", out, "--labels-file", root / "labels.txt", *SHARDS]
        if self.train_tar:
            return ["convert", "--train-tar", root / self.outer, "--bounding-box-file", root / "bboxes.csv", *common]
        return ["convert", "--from", root, "--validation-labels-file", root / "validation_labels.txt",
                "--bounding-box-file", root / "bboxes.csv", *common]


FIRST_CLASS = "n01440764.tar"  # the sample's first class tar
# name -> the copy read from tars; every tar-reading path of sources/ has its row
TAR_COPIES = {
    "ILSVRC2012 train archive (a class tar)": TarCopy("ilsvrc", FIRST_CLASS, outer="ILSVRC2012_img_train.tar"),
    "ILSVRC2012 train archive (the outer tar)": TarCopy("ilsvrc", "ILSVRC2012_img_train.tar"),
    "ILSVRC2012 validation archive": TarCopy("ilsvrc", "ILSVRC2012_img_val.tar"),
    "ImageNet-21k (--train-tar)": TarCopy("ilsvrc", FIRST_CLASS, outer="fall11_whole.tar", train_tar=True),
    "WebDataset shard": TarCopy("wds", "imagenet1k-train-0000.tar"),
    "Hugging Face .tar.gz": TarCopy("hf", "data/train_images_0.tar.gz"),
    "face-blurred .tar.gz": TarCopy("blurred", "train_blurred.tar.gz"),
    "ImageNetV2 .tar.gz": TarCopy("imagenet-v2", "imagenetv2-matched-frequency.tar.gz"),
    "ImageNet-A .tar": TarCopy("imagenet-a", "imagenet-a.tar"),
    "ImageNet-R .tar": TarCopy("imagenet-r", "imagenet-r.tar"),
}
NO_TAR = {"kaggle": "a zip", "hf-parquet": "parquet files", "imagenet-sketch": "a zip"}


def test_every_registered_copy_kind_says_whether_it_reads_tars():
    """A copy registered for `sample --layout` has a row above, or says what it is read from instead."""
    assert sorted({c.copy_kind for c in TAR_COPIES.values()} | set(NO_TAR)) == sorted(sample_kinds())


# ------------------------------------------------------------------ tars, written and altered


def tar_entries(data):
    """{name: (TarInfo, bytes or None)} of a tar, in order."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: (m, tar.extractfile(m).read() if m.isfile() else None) for m in tar}


def retar(entries):
    """A GNU tar of [(TarInfo, bytes or None)]."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in entries:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def member(name, kind, target=None):
    info = tarfile.TarInfo(name)
    info.mtime, info.mode = 0, 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.type = kind
    if target is not None:
        info.linkname = target
    if kind == tarfile.CHRTYPE:
        info.devmajor, info.devminor = 1, 3
    return info


def altered(data, kind):
    """(the tar with its second image replaced by a member of `kind` (a link to its first image), that member's
    name); "directory" adds the second image's folder (or a folder "extra") before it."""
    entries = list(tar_entries(data).values())
    images = [i for i, (info, _) in enumerate(entries) if info.isfile() and not info.name.endswith((".cls", ".json",
                                                                                                  ".txt"))]
    first, second = entries[images[0]][0].name, entries[images[1]][0].name
    replaced = {
        "regular": lambda: entries[images[1]],
        "hard link": lambda: (member(second, tarfile.LNKTYPE, first), None),
        "symlink": lambda: (member(second, tarfile.SYMTYPE, posixpath.relpath(first, posixpath.dirname(second)
                                                                              or ".")), None),
        "FIFO": lambda: (member(second, tarfile.FIFOTYPE), None),
        "device": lambda: (member(second, tarfile.CHRTYPE), None),
        "directory": lambda: entries[images[1]],
    }[kind]()
    entries[images[1]] = replaced
    if kind == "directory":
        entries.insert(images[1], (member(posixpath.dirname(second) or "extra", tarfile.DIRTYPE), None))
    return retar(entries), second


def tar_x_then_c(data, work):
    """The tar as GNU tar extracts it and archives it again, links dereferenced: the files `tar x` gives."""
    names = list(tar_entries(data))
    folder = work / "extracted"
    folder.mkdir()
    (work / "in.tar").write_bytes(data)
    subprocess.run(["tar", "-xf", work / "in.tar", "-C", folder], check=True)
    subprocess.run(["tar", "-c", "--format=gnu", "--no-recursion", "--dereference", "--hard-dereference",
                    "-f", work / "out.tar", "-C", folder, *names], check=True)
    return (work / "out.tar").read_bytes()


# ------------------------------------------------------------------ the test


def fresh(small_copy, copy, at):
    """A copy of the copy kind's small sample at `at` (ImageNet-21k's: the ILSVRC train archive as fall11_whole.tar)."""
    shutil.copytree(small_copy(copy.copy_kind), at)
    if copy.train_tar:
        shutil.copy(at / "ILSVRC2012_img_train.tar", at / copy.outer)
    return at


CASES = [(name, kind) for name in TAR_COPIES for kind in KINDS]


@pytest.mark.parametrize("name,kind", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_a_member_of_each_kind_gives_what_tar_x_gives_or_one_line_naming_it(small_copy, tmp_path, name, kind):
    copy = TAR_COPIES[name]
    root = fresh(small_copy, copy, tmp_path / "copy")
    data, second = altered(copy.read(root), kind)
    copy.write(root, data)
    result = run_cli(*copy.convert_args(root, tmp_path / "out"))
    if kind in REFUSED:
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert f":{second}: {REFUSED[kind]}" in lines[0], lines[0]
        return
    assert result.exit_code == 0, result.output
    expected = fresh(small_copy, copy, tmp_path / "expected")
    work = tmp_path / "tar"
    work.mkdir()
    copy.write(expected, tar_x_then_c(data, work))
    again = run_cli(*copy.convert_args(expected, tmp_path / "expected-out"))
    assert again.exit_code == 0, again.output
    built, wanted = shard_files(tmp_path / "out"), shard_files(tmp_path / "expected-out")
    assert built and built == wanted
    if kind in ("hard link", "symlink"):  # the link's name carries its target's bytes: not the clean build
        clean = fresh(small_copy, copy, tmp_path / "clean")
        assert run_cli(*copy.convert_args(clean, tmp_path / "clean-out")).exit_code == 0
        assert shard_files(tmp_path / "clean-out") != built


# ------------------------------------------------------------------ links `tar x` cannot make into an image here

IMAGE = b"\xff\xd8 an image's bytes"


def links_tar(*more):
    """A tar of a/x.jpg and a/b/ (a folder), then the members `more`."""
    folder = member("a/b", tarfile.DIRTYPE)
    return retar([(member("a/x.jpg", tarfile.REGTYPE), IMAGE), (folder, None), *((m, None) for m in more)])


OUTSIDE = ("outside the archive: extracted, it would read whatever that path holds here, not an image of the "
           "archive; remove it, or archive its file")
NOT_A_FILE = (", not a file: extracted it is no image (reading a FIFO or device waits forever or never ends, as in a "
              "folder); remove it from the archive")


@pytest.mark.parametrize("more,problem", [
    ((member("a/y.jpg", tarfile.SYMTYPE, "../../etc/hostname"),), "a symlink to ../../etc/hostname, " + OUTSIDE),
    ((member("a/y.jpg", tarfile.SYMTYPE, "../.."),), "a symlink to ../.., " + OUTSIDE),
    ((member("a/y.jpg", tarfile.SYMTYPE, "/etc/hostname"),), "a symlink to /etc/hostname, " + OUTSIDE),
    ((member("a/y.jpg", tarfile.SYMTYPE, "z.jpg"),), "a symlink to z.jpg, which the archive does not hold"),
    ((member("a/y.jpg", tarfile.SYMTYPE, "b"),),
     "a link to the folder b: only a file can be an image; give the folder's images themselves"),
    ((member("a/y.jpg", tarfile.SYMTYPE, "w.jpg"), member("a/w.jpg", tarfile.SYMTYPE, "y.jpg")),
     "a symlink to w.jpg: a chain of over 40 symlinks, or a loop"),
    ((member("a/y.jpg", tarfile.LNKTYPE, "a/z.jpg"), member("a/z.jpg", tarfile.REGTYPE)),
     "a hard link to a/z.jpg, which the archive does not hold before it (tar x could not extract it)"),
    ((member("a/y.jpg", tarfile.LNKTYPE, "a/b"),),
     "a link to the folder a/b: only a file can be an image; give the folder's images themselves"),
    ((member("a/s.jpg", tarfile.SYMTYPE, "x.jpg"), member("a/y.jpg", tarfile.LNKTYPE, "a/s.jpg")),
     "a hard link to the symlink a/s.jpg: link the file itself"),
    ((member("a/y.jpg", tarfile.BLKTYPE),), "a block device" + NOT_A_FILE),
    ((member("a/y.jpg", b"9"),), "a member of tar type '9'" + NOT_A_FILE),
    ((member("a/y.jpg", tarfile.GNUTYPE_SPARSE),),  # GNU tar --sparse's: the bytes that follow are not the file's
     "a sparse file (GNU tar --sparse): its bytes in the archive are not the file's; archive it again without "
     "--sparse"),
    ((member("a/y.jpg", tarfile.CONTTYPE),), None),  # a contiguous file is a file
], ids=["climbs out", "climbs to ..", "absolute", "to nothing", "to a folder", "a loop", "hard link forward",
        "hard link to a folder", "hard link to a symlink", "block device", "unknown type", "sparse",
        "contiguous file"])
def test_a_link_tar_x_cannot_make_an_image_of_is_one_error_naming_it(tmp_path, more, problem):
    from imagenet_build.infra.errors import InputError
    from imagenet_build.sources.tars import outer_members

    path = tmp_path / "t.tar"
    path.write_bytes(links_tar(*more))
    if problem is None:
        assert [m[:4] for m in outer_members(path)][-1][0] == "a/y.jpg"
        return
    with pytest.raises(InputError) as raised:
        outer_members(path)
    assert raised.value.path == f"{path}:a/y.jpg"
    assert raised.value.problem == problem


def test_links_are_listed_as_the_members_they_name_with_their_header_for_read_member(tmp_path):
    """A hard link, a symlink, a symlink to a symlink and one to a hard link in another folder all read as
    a/x.jpg's bytes (read_member checks the header before them: a/x.jpg's), under their own names."""
    from imagenet_build.sources.tars import outer_members, read_member

    path = tmp_path / "t.tar"
    path.write_bytes(links_tar(member("./a/h.jpg", tarfile.LNKTYPE, "a/x.jpg"),
                               member("a/b/s.jpg", tarfile.SYMTYPE, "../x.jpg"),
                               member("a/t.jpg", tarfile.SYMTYPE, "b/s.jpg"),
                               member("c/u.jpg", tarfile.SYMTYPE, "../a/h.jpg")))
    members = outer_members(path)
    assert [m[0] for m in members] == ["a/x.jpg", "a/b", "./a/h.jpg", "a/b/s.jpg", "a/t.jpg", "c/u.jpg"]
    assert [m[3] for m in members] == [True, False, True, True, True, True]
    with open(path, "rb") as f:
        for name, offset, size, _, crc in members[2:]:
            assert members[0][1:] == (offset, size, True, crc)
            assert read_member(f.fileno(), offset, size, crc, name) == (IMAGE, "a/x.jpg")


def test_a_member_read_names_itself_as_the_archive_does_where_its_bytes_are_not_the_ones_listed(tmp_path):
    """ArchiveReader's line for a member that changed since the listing: the archive, the top folder the listing
    cut (member_prefix), the member."""
    from imagenet_build.infra.errors import InputError
    from imagenet_build.model import ImageEntry, ShardSpec
    from imagenet_build.sources.tars import ArchiveReader, outer_members

    path = tmp_path / "t.tar"
    path.write_bytes(links_tar())
    name, offset, size, _, crc = outer_members(path)[0]
    spec = ShardSpec("validation", 0, 1, str(path), ArchiveReader, (ImageEntry("x.jpg", 1, (), offset, size, crc ^ 1),),
                     {1: ("n01440764", "tench")}, member_prefix="a/")
    with ArchiveReader(spec) as reader, pytest.raises(InputError) as raised:
        reader.read(0)
    assert raised.value.path == f"{path}:a/x.jpg" and "changed since it was listed" in raised.value.problem
