"""convert --from the face-blurred release: records equal the original build's where the image is the same."""

import io
import json
import shutil

import pytest

from conftest import SAMPLE, run_cli, with_boxes
from helpers import expect_one_error_line as expect_error
from helpers import rewrite_tar_gz as rewrite
from imagenet_build.example import decode_example
from imagenet_build.sample import make_sample
from imagenet_build.tfrecord import read_records


@pytest.fixture(scope="module")
def blurred(tmp_path_factory):
    out = tmp_path_factory.mktemp("blurred")
    make_sample(out, layout="blurred", **SAMPLE)
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
    from imagenet_build.verify import expected_totals

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


def test_with_another_copy_is_refused(blurred, ilsvrc, tmp_path):
    out = tmp_path / "out"
    expect_error(["convert", "--from", blurred / "train_blurred.tar.gz", "--from", ilsvrc / "ILSVRC2012_img_val.tar",
                  "--output-dir", out, *with_boxes(ilsvrc)], "two different copies", out=out)
