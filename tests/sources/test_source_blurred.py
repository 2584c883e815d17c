"""convert --from the face-blurred release: records equal the original build's where the image is the same."""

import gzip
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from PIL import Image

from conftest import SAMPLE, run_cli, run_process, with_boxes
from helpers import expect_one_error_line as expect_error
from helpers import rewrite_tar_gz as rewrite
from imagenet_build.format.record_schema import decode_example
from imagenet_build.format.tfrecord import read_records
from imagenet_build.infra.errors import InputError
from imagenet_build.tools.sample_dataset import make_sample


@pytest.fixture(scope="module")
def blurred(tmp_path_factory):
    out = tmp_path_factory.mktemp("blurred")
    make_sample(out, kind="blurred", **SAMPLE)
    return out


def records(out):
    """{(split, image/filename): (shard, record features)}."""
    found = {}
    for shard in sorted(out.glob("*-of-*")):
        data = shard.read_bytes()
        for _, payload, _ in read_records(io.BytesIO(data), len(data)):
            record = decode_example(payload)
            found[(shard.name.split("-")[0], record["image/filename"][0].decode())] = record
    return found


def test_records_equal_the_original_build_where_the_image_is_the_same(ilsvrc, blurred, tmp_path):
    reference, out = tmp_path / "reference", tmp_path / "out"
    result = run_cli("convert", "--train-tar", ilsvrc / "ILSVRC2012_img_train.tar", "--validation-tar",
                     ilsvrc / "ILSVRC2012_img_val.tar", "--output-dir", reference, *with_boxes(ilsvrc))
    assert result.exit_code == 0, result.output
    result = run_cli("convert", "--from", blurred, "--output-dir", out, *with_boxes(ilsvrc), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["found"].startswith("face-blurred ILSVRC2012 (image-net.org) archives: 47 train, 15 validation")
    assert "validation: 1 image(s) of ILSVRC2012 are not in this release: ILSVRC2012_val_00000016.JPEG" \
        in summary["notes"]
    original, mine = records(reference), records(out)
    assert set(mine) < set(original)
    assert set(original) - set(mine) == {("train", "n01491361_9.JPEG"), ("validation", "ILSVRC2012_val_00000016.JPEG")}
    same = [key for key in mine if mine[key]["image/encoded"] == original[key]["image/encoded"]]
    differ = [key for key in mine if key not in same]
    assert len(same) > 30 and len(differ) > 10  # the sample re-encodes every third RGB image
    for key in same:
        assert mine[key] == original[key], key
    for key in differ:  # re-encoded: the same name, label, synset, text and boxes
        for feature in ("image/class/label", "image/class/synset", "image/class/text", "image/object/bbox/xmin"):
            assert mine[key].get(feature) == original[key].get(feature), (key, feature)
    assert not list(out.glob(".imagenet-build-spool-*"))


def test_expect_imagenet_knows_the_release_totals():
    from imagenet_build.verify.label_checks import expected_totals

    manifest = {"inputs": {"source": {"layout": "face-blurred ILSVRC2012 (image-net.org)"}}, "options": {}}
    assert expected_totals(manifest)[0] == {"train": 1281066, "validation": 49997}


@pytest.fixture
def copy_of(blurred, tmp_path):
    folder = tmp_path / "blurred"
    folder.mkdir()
    for name in ("train_blurred.tar.gz", "val_blurred.tar.gz"):
        shutil.copy(blurred / name, folder / name)
    return folder


def test_a_truncated_archive_is_refused(copy_of, ilsvrc, tmp_path):
    archive = copy_of / "val_blurred.tar.gz"
    archive.write_bytes(archive.read_bytes()[:-100])
    out = tmp_path / "out"
    expect_error(["convert", "--from", copy_of, "--output-dir", out, *with_boxes(ilsvrc)], "val_blurred.tar.gz",
                 "truncated", out=out)


def test_a_class_folder_that_disagrees_with_the_validation_labels(copy_of, ilsvrc, tmp_path):
    def move(members):
        name, data = members[0]
        return [("val_blurred/n01443537/" + name.rsplit("/", 1)[1], data)] + members[1:]

    rewrite(copy_of / "val_blurred.tar.gz", move)
    out = tmp_path / "out"
    expect_error(["convert", "--from", copy_of, "--output-dir", out, *with_boxes(ilsvrc)],
                 "val_blurred/n01443537/ILSVRC2012_val_00000001.jpg", "in class folder n01443537", out=out)


def test_an_empty_class_folder_is_said_to_be_empty(copy_of, ilsvrc, tmp_path):
    """A class folder member with no image below it: its class has no images, said of that folder (named as the
    archive names it), not "no class folder"."""
    archive = copy_of / "train_blurred.tar.gz"
    with tarfile.open(archive) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar if m.isfile()]
    emptied = "train_blurred/n01443537"
    folder = tarfile.TarInfo(emptied)
    folder.type = tarfile.DIRTYPE
    with gzip.GzipFile(archive, "wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        tar.addfile(folder)
        for info, data in members:
            if not info.name.startswith(emptied + "/"):
                tar.addfile(info, io.BytesIO(data))
    out = tmp_path / "out"
    expect_error(["convert", "--from", copy_of, "--output-dir", out, *with_boxes(ilsvrc)],
                 f"{archive}:{emptied}: class folder holds no *.JPEG images", out=out)


def test_with_another_copy_is_refused(blurred, ilsvrc, tmp_path):
    out = tmp_path / "out"
    expect_error(["convert", "--from", blurred / "train_blurred.tar.gz", "--from", ilsvrc / "ILSVRC2012_img_val.tar",
                  "--output-dir", out, *with_boxes(ilsvrc)], "two different copies", out=out)


def test_the_one_train_archive_is_inflated_on_both_workers_with_the_same_bytes(blurred, tmp_path):
    """An archive holding most of the bytes gets that share of the workers as threads (rapidgzip)."""
    import rapidgzip  # noqa: F401  (a dependency on this platform: Linux on x86-64 or ARM)

    from imagenet_build.infra.workers import Workers
    from imagenet_build.sources import find_copy, inflate

    train = str(blurred / "train_blurred.tar.gz")
    copy = find_copy([str(blurred)])
    seen = []

    def recorded(archive, target, threads):
        seen.append((Path(archive).name, threads))
        return inflate.spool_and_list(archive, target, threads)

    copy.spool.task = recorded
    with copy.spool.placed_in(str(tmp_path / "out")) as spool:
        spool.decompress(Workers(2))  # two, in here
    assert seen == [("train_blurred.tar.gz", 2), ("val_blurred.tar.gz", 1)]
    assert inflate._gunzip_parallel(train, str(tmp_path / "two.tar"), 2)
    inflate.gunzip(train, str(tmp_path / "one.tar"))
    assert (tmp_path / "two.tar").read_bytes() == (tmp_path / "one.tar").read_bytes() == gzip.decompress(
        Path(train).read_bytes())


@pytest.mark.parametrize("damage", ["cut in half", "cut before its trailer", "zero padding after", "not gzip"])
def test_a_damaged_archive_on_several_threads_gets_the_one_thread_checks(blurred, tmp_path, capfd, damage):
    from imagenet_build.sources import inflate

    data = (blurred / "train_blurred.tar.gz").read_bytes()
    archive = tmp_path / "train_blurred.tar.gz"
    archive.write_bytes({"cut in half": data[: len(data) // 2], "cut before its trailer": data[:-4],
                         "zero padding after": data + bytes(4096), "not gzip": b"not gzip " * 10000}[damage])
    target = tmp_path / "train_blurred.tar"
    assert not inflate._gunzip_parallel(str(archive), str(target) + ".part", 2)  # rapidgzip declines each
    assert not list(tmp_path.glob("*.tar*.part"))
    if damage == "zero padding after":  # as gzip reads it: accepted
        inflate.gunzip(str(archive), str(target), 2)
        assert target.read_bytes() == gzip.decompress(data)
    else:
        with pytest.raises(InputError, match="truncated|not a valid gzip"):
            inflate.gunzip(str(archive), str(target), 2)
        assert not target.exists()
    assert capfd.readouterr().err == ""  # rapidgzip's own messages are not shown


def test_a_truncated_train_archive_is_one_line_from_a_whole_process(copy_of, ilsvrc, tmp_path):
    """The train archive alone: all the bytes, so both workers' threads inflate it (rapidgzip, then ISA-L)."""
    archive = copy_of / "train_blurred.tar.gz"
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size * 2 // 3])
    out = tmp_path / "out"
    result = run_process("convert", "--from", archive, "--output-dir", out, *with_boxes(ilsvrc), "--workers", 2)
    assert result.returncode == 1 and result.stderr.splitlines() == [result.stderr.strip()], result.stderr
    assert result.stderr.startswith("error: ") and "train_blurred.tar.gz" in result.stderr
    assert "truncated" in result.stderr and not list(out.rglob("*-of-*"))


def test_an_archive_that_compresses_well_is_inflated_on_one_thread(tmp_path):
    """rapidgzip's memory grows with the compression ratio (700 MB for an archive of tiny images that
    inflates 81 times): such an archive takes the one-thread way, with the same bytes."""
    import os

    from imagenet_build.sources import inflate

    picture = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(picture, "JPEG")
    tiny = tmp_path / "tiny.tar.gz"
    photo = tmp_path / "photo.tar.gz"
    for path, data in ((tiny, picture.getvalue()), (photo, os.urandom(100_000))):  # random bytes: as JPEGs inflate
        with gzip.GzipFile(path, "wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
            for k in range(200 if path == photo else 20_000):
                info = tarfile.TarInfo(f"n01440764_{k}_n01440764.JPEG")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    assert inflate._inflates_beyond(str(tiny), inflate.PARALLEL_RATIO)
    assert not inflate._inflates_beyond(str(photo), inflate.PARALLEL_RATIO)
    assert not inflate._gunzip_parallel(str(tiny), str(tmp_path / "tiny.tar.part"), 2)
    assert inflate._gunzip_parallel(str(photo), str(tmp_path / "photo.tar.part"), 2)
    inflate.gunzip(str(tiny), str(tmp_path / "tiny.tar"), 2)
    assert (tmp_path / "tiny.tar").read_bytes() == gzip.decompress(tiny.read_bytes())
