"""The tar reader's edges: a view of an inner tar seeks and reads as a file of its bytes, folder members and a
tar that is not ImageNet's train archive get their own message, and no copy's listing or reading leaves a file
descriptor open."""

import io
import os
import tarfile

import pytest

from conftest import run_cli, shard_files
from imagenet_build.sources.copies import sample_layouts
from imagenet_build.tools.sample import make_sample

SYNSETS = ("n01440764", "n01443537")  # the sample's two classes (the first two of the labels file)


def tar_of(members):
    """A GNU tar of [(name, bytes)], (name, None) a folder."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


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
    copy.work_dir = str(tmp_path)
    read = 0
    try:
        with Workers(1) as pool:
            copy.prepare(pool)
            splits = [copy.scan_train(catalog, "fail", pool)]
            if "validation" in copy.splits:
                splits.append(copy.scan_validation(catalog, "fail", pool, lambda: (source / "validation_labels.txt")
                                                   .read_text().split(), source / "validation_labels.txt"))
        for split in splits:
            spec = SplitPlan(split, catalog, None, 1, 1).spec(0)
            with reader_for(spec) as reader:
                read += sum(len(reader.read(i)[0]) > 0 for i in range(len(spec.entries)))
    finally:
        copy.close()
    return read


@pytest.mark.parametrize("layout", sample_layouts())
def test_listing_and_reading_a_copy_leaves_no_descriptor_open(tmp_path, layout):
    """A descriptor left open per archive or per read runs a 1,000-class (or 1,024-shard) build out of them:
    the copy listed and read twice (the first warms lazy imports), the open descriptors are those before."""
    source = tmp_path / "copy"
    make_sample(source, layout=layout, tarballs=True, classes=2, per_class=3, validation_per_class=2)
    assert list_and_read(source, tmp_path / "warm") > 0
    before = open_descriptors()
    assert list_and_read(source, tmp_path / "again") > 0
    assert open_descriptors() == before
