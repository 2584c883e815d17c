"""Straight from the ILSVRC2012 archives: convert --train-tar/--validation-tar/--bbox-tar, and each archive damaged
(bboxes: tests/catalog/test_bboxes.py; prepare-val: tests/tools/test_prepare_val.py)."""

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from conftest import run_cli, tree_digest
from imagenet_build.tools.sample_dataset import make_sample


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    out = tmp_path_factory.mktemp("archives")
    make_sample(out, classes=4, per_class=12, validation_per_class=4, tarballs=True)
    return out


def common(sample):
    return ["--labels-file", sample / "labels.txt", "--validation-labels-file", sample / "validation_labels.txt",
            "--train-shards", 4, "--validation-shards", 2, "--layout-threads", 2, "--workers", 1]


def shards_and_indexes(out):
    digest = tree_digest(out)
    manifest = json.loads(digest and (Path(out) / "manifest.json").read_text())
    digest.pop("manifest.json")
    manifest.pop("inputs")  # says where the images came from: the only thing allowed to differ
    return digest, manifest


def test_convert_from_archives_is_byte_identical_to_folders(archives, tmp_path):
    folders = run_cli("convert", "--train-dir", archives / "train", "--validation-dir", archives / "validation",
                      "--bounding-box-file", archives / "bboxes.csv", "--output-dir", tmp_path / "folders",
                      *common(archives))
    assert folders.exit_code == 0, folders.output
    tars = run_cli("convert", "--train-tar", archives / "ILSVRC2012_img_train.tar",
                   "--validation-tar", archives / "ILSVRC2012_img_val.tar",
                   "--bbox-tar", archives / "ILSVRC2012_bbox_train_v2.tar.gz",
                   "--output-dir", tmp_path / "tars", *common(archives), "--json")
    assert tars.exit_code == 0, tars.output
    assert json.loads(tars.stdout)["splits"]["train"]["layout"] == "tar"
    assert shards_and_indexes(tmp_path / "tars") == shards_and_indexes(tmp_path / "folders")
    mixed = run_cli("convert", "--train-tar", archives / "ILSVRC2012_img_train.tar",
                    "--validation-dir", archives / "validation", "--bounding-box-file", archives / "bboxes.csv",
                    "--output-dir", tmp_path / "mixed", *common(archives))
    assert mixed.exit_code == 0, mixed.output
    assert shards_and_indexes(tmp_path / "mixed") == shards_and_indexes(tmp_path / "folders")


def test_bbox_tar_given_the_folder_holding_the_archive_reads_the_archive(archives, tmp_path):
    summaries = []
    for given in (archives / "ILSVRC2012_bbox_train_v2.tar.gz", archives):
        out = tmp_path / given.name
        result = run_cli("convert", "--train-dir", archives / "train", "--bbox-tar", given, "--output-dir", out,
                         *common(archives)[:2], "--train-shards", 4, "--layout-threads", 2, "--workers", 1, "--json")
        assert result.exit_code == 0, result.output
        summaries.append(json.loads(result.stdout)["boxes"])
    assert summaries[0] == summaries[1] and summaries[0]["images_with_boxes"] > 0
    assert shards_and_indexes(tmp_path / archives.name) == shards_and_indexes(
        tmp_path / "ILSVRC2012_bbox_train_v2.tar.gz")


def test_convert_from_archives_with_two_workers(archives, tmp_path):
    from conftest import run_process

    result = run_process("convert", "--train-tar", archives / "ILSVRC2012_img_train.tar",
                         "--output-dir", tmp_path / "two", *common(archives)[:2], "--train-shards", 4,
                         "--layout-threads", 2, "--workers", 2)
    assert result.returncode == 0, result.stderr
    one = run_cli("convert", "--train-dir", archives / "train", "--output-dir", tmp_path / "one",
                  *common(archives)[:2], "--train-shards", 4, "--layout-threads", 2, "--workers", 1)
    assert one.exit_code == 0
    assert shards_and_indexes(tmp_path / "two") == shards_and_indexes(tmp_path / "one")


def rewrite_train_tar(path, change):
    """Rebuild a tar-of-tars with change(name, data) -> (name, data) or None for each inner member."""
    members = {}
    with tarfile.open(path) as outer:
        for member in outer:
            members[member.name] = outer.extractfile(member).read()
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as outer:
        for name, data in members.items():
            changed = change(name, data)
            if changed is None:
                continue
            info = tarfile.TarInfo(changed[0])
            info.size = len(changed[1])
            outer.addfile(info, io.BytesIO(changed[1]))


def inner_with(data, member, content):
    """An inner class tar with one member's content replaced."""
    source = tarfile.open(fileobj=io.BytesIO(data))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for m in source:
            body = content if m.name == member else source.extractfile(m).read()
            info = tarfile.TarInfo(m.name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return out.getvalue()


def expect_convert_error(sample, *args, fragments, code=1):
    result = run_cli("convert", "--output-dir", sample.parent / "out-bad", *args, *common(sample))
    assert result.exit_code == code, result.output
    line = result.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in line, line


@pytest.fixture
def archive_copy(archives, tmp_path):
    copy = tmp_path / "archives"
    copy.mkdir()
    for name in ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar", "labels.txt", "validation_labels.txt"):
        shutil.copy(archives / name, copy / name)
    return copy


def test_truncated_archives(archive_copy):
    for name, option in (("ILSVRC2012_img_train.tar", "--train-tar"), ("ILSVRC2012_img_val.tar", "--validation-tar")):
        path = archive_copy / name
        data = path.read_bytes()
        path.write_bytes(data[: len(data) * 2 // 3])
        expect_convert_error(archive_copy, option, path, fragments=[name, "truncated"])
        path.write_bytes(data)


def test_missing_inner_class_tar(archive_copy):
    train = archive_copy / "ILSVRC2012_img_train.tar"
    rewrite_train_tar(train, lambda name, data: None if name == "n01443537.tar" else (name, data))
    expect_convert_error(archive_copy, "--train-tar", train, fragments=["no class archive", "n01443537"])


def test_inner_tar_that_is_not_a_tar(archive_copy):
    train = archive_copy / "ILSVRC2012_img_train.tar"
    rewrite_train_tar(train, lambda name, data: (name, b"garbage" * 100) if name == "n01484850.tar" else (name, data))
    expect_convert_error(archive_copy, "--train-tar", train, fragments=["n01484850.tar", "not a tar archive"])


def test_member_that_is_not_a_jpeg(archive_copy):
    train = archive_copy / "ILSVRC2012_img_train.tar"
    rewrite_train_tar(train, lambda name, data: (name, inner_with(data, "n01440764_7.JPEG", b"not an image"))
                      if name == "n01440764.tar" else (name, data))
    expect_convert_error(archive_copy, "--train-tar", train,
                         fragments=["ILSVRC2012_img_train.tar:n01440764/n01440764_7.JPEG", "not an image"])


def test_swapped_archives(archive_copy):
    expect_convert_error(archive_copy, "--train-tar", archive_copy / "ILSVRC2012_img_val.tar",
                         fragments=["validation archive", "swap"])
    expect_convert_error(archive_copy, "--validation-tar", archive_copy / "ILSVRC2012_img_train.tar",
                         fragments=["train archive", "swap"])


def test_not_an_archive_and_both_sources_for_one_split(archive_copy, sample_dir):
    (archive_copy / "x.tar").write_bytes(b"\x00" * 10 + b"hello")
    expect_convert_error(archive_copy, "--train-tar", archive_copy / "x.tar", fragments=["x.tar"])
    expect_convert_error(archive_copy, "--train-tar", archive_copy / "ILSVRC2012_img_train.tar",
                         "--train-dir", sample_dir / "train", fragments=["not both"], code=2)


# ------------------------------------------------------------------ tar listing
