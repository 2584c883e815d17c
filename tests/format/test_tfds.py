"""Every build opens with TensorFlow Datasets itself (tfds.builder_from_directory): every record with the bytes,
label and boxes TensorFlow's own parse of slim's schema gives, slices that name exactly their records,
show_examples, and the builds of evaluation sets, resized sizes, write_arrays and ReaL labels alike."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import SAMPLE, run_cli, sample_args
from helpers import convert_with_real_labels, read_with_tensorflow
from imagenet_build.tools.sample_dataset import make_sample
from imagenet_build.writer.arrays import write_arrays

tf = pytest.importorskip("tensorflow")
tfds = pytest.importorskip("tensorflow_datasets")

BOXES = ("xmin", "ymin", "xmax", "ymax")
SKIP_IMAGE = {"image/encoded": tfds.decode.SkipDecoding()}  # the stored bytes, undecoded


def slim_records(folder, split):
    """A split's records in shard order, as TensorFlow parses slim's schema (tests/helpers.py)."""
    return [r for path in sorted(Path(folder).glob(f"{split}-*-of-*")) for r in read_with_tensorflow(str(path))]


def tfds_records(builder, split, **options):
    return list(tfds.as_numpy(builder.as_dataset(split=split, shuffle_files=False, **options)))


def names(records):
    return [r["image/filename"] for r in records]


def test_features_json_is_tfds_own_description_of_slims_features(converted):
    synsets = json.loads((converted / "manifest.json").read_text())["synsets"]
    ours = tfds.features.FeatureConnector.from_json(json.loads((converted / "features.json").read_text()))
    text, int64, boxes = tfds.features.Text(), tfds.features.Tensor(shape=(), dtype=np.int64), {
        f"image/object/bbox/{c}": tfds.features.Sequence(np.float32) for c in BOXES}
    want = tfds.features.FeaturesDict({
        "image/encoded": tfds.features.Image(shape=(None, None, 3), encoding_format="jpeg"),
        "image/class/label": tfds.features.ClassLabel(names=["background", *synsets]),
        "image/object/bbox/label": tfds.features.Sequence(np.int64), **boxes,
        **{key: text for key in ("image/class/synset", "image/class/text", "image/colorspace", "image/filename",
                                 "image/format")},
        **{key: int64 for key in ("image/height", "image/width", "image/channels")},
    })
    described = ours.to_json()
    assert "1-based" in described["content"]["features"]["image/class/label"].pop("description")
    assert described == want.to_json()
    assert ours["image/class/label"].names == ["background", *synsets]  # label k: line k of the labels file
    assert ours["image/class/label"].int2str(3) == synsets[2]


@pytest.mark.parametrize("split", ["train", "validation"])
def test_every_record_has_the_bytes_label_and_boxes_tensorflow_parses(converted, split):
    builder = tfds.builder_from_directory(str(converted))
    manifest = json.loads((converted / "manifest.json").read_text())
    shards = [e["records"] for e in manifest["shards"] if e["split"] == split]
    assert builder.info.splits[split].shard_lengths == shards
    assert builder.info.splits[split].num_bytes == manifest["splits"][split]["bytes"]
    want, got = slim_records(converted, split), tfds_records(builder, split, decoders=SKIP_IMAGE)
    assert len(got) == len(want) == sum(shards)
    for ours, slims in zip(got, want):
        assert set(ours) == set(slims)
        for key, value in slims.items():
            np.testing.assert_array_equal(ours[key], value, err_msg=key)
    # decoded by TFDS's Image: the pixels TensorFlow's decoder gives, at the recorded size
    for ours, slims in zip(tfds_records(builder, split), want):
        image = ours["image/encoded"]
        assert image.shape == (slims["image/height"], slims["image/width"], 3) and image.dtype == np.uint8
        np.testing.assert_array_equal(image, tf.io.decode_image(slims["image/encoded"], channels=3).numpy())


def test_slices_and_even_splits_name_exactly_their_records(converted):
    builder = tfds.builder_from_directory(str(converted))
    train, validation = names(slim_records(converted, "train")), names(slim_records(converted, "validation"))
    assert len(train) == 48 and len(validation) == 16
    for split, want in [("train[:10%]", train[:5]),  # 4.8 rounds to the closest: 5
                        ("train[10:20]", train[10:20]), ("train[-3:]", train[-3:]),
                        ("validation[25%:75%]", validation[4:12]), ("validation[10:14]", validation[10:14])]:
        assert names(tfds_records(builder, split, decoders=SKIP_IMAGE)) == want, split
        assert len(builder.as_dataset(split=split)) == len(want), split
    parts = [names(tfds_records(builder, part, decoders=SKIP_IMAGE)) for part in tfds.even_splits("train", 3)]
    assert [len(p) for p in parts] == [16, 16, 16] and sum(parts, []) == train
    image, label = next(iter(builder.as_dataset(split="validation", as_supervised=True)))
    assert image.shape[-1] == 3 and int(label) == slim_records(converted, "validation")[0]["image/class/label"]


def test_show_examples_draws_each_image_captioned_with_its_class(converted, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    builder = tfds.builder_from_directory(str(converted))
    first = slim_records(converted, "train")[:4]
    figure = tfds.show_examples(builder.as_dataset(split="train", shuffle_files=False), builder.info, rows=2, cols=2)
    assert [axes.get_xlabel() for axes in figure.axes] == [
        f"{r['image/class/synset'].decode()} ({r['image/class/label']})" for r in first]
    figure.savefig(tmp_path / "grid.png")
    with Image.open(tmp_path / "grid.png") as picture:
        colours = picture.convert("RGB").getcolors(1 << 20)
    assert colours is not None and len(colours) > 100  # images drawn, not a blank page


def opened(folder):
    """The builder of a folder, and each split's records with the image undecoded, checked against the shards."""
    builder = tfds.builder_from_directory(str(folder))
    records = {}
    for split in builder.info.splits:
        records[split] = tfds_records(builder, split, decoders=SKIP_IMAGE)
        want = slim_records(folder, split)
        assert [r["image/encoded"] for r in records[split]] == [r["image/encoded"] for r in want]
        assert [r["image/class/label"] for r in records[split]] == [r["image/class/label"] for r in want]
    return builder, records


def test_an_evaluation_set_build_opens(tmp_path):
    make_sample(tmp_path / "copy", kind="imagenet-a", **SAMPLE)
    out = tmp_path / "out"
    result = run_cli("convert", "--from", tmp_path / "copy" / "imagenet-a.tar", "--labels-file",
                     tmp_path / "copy" / "labels.txt", "--output-dir", out, "--validation-shards", 2,
                     "--layout-threads", 2, "--workers", 1)
    assert result.exit_code == 0, result.output
    builder, records = opened(out)
    assert list(builder.info.splits) == ["validation"] and len(records["validation"]) > 0
    label = builder.info.features["image/class/label"]
    classes = json.loads((out / "manifest.json").read_text())["num_classes"]
    assert label.num_classes == classes + 1  # the labels file's classes, whichever of them the set holds
    for record in records["validation"]:
        assert label.int2str(record["image/class/label"]) == record["image/class/synset"].decode()


def test_each_resized_build_opens_at_its_size(sample_dir, tmp_path):
    out = tmp_path / "out"
    result = run_cli(*sample_args(sample_dir, out, "--resize", "shorter:32,48", "--workers", 1))
    assert result.exit_code == 0, result.output
    for size in (32, 48):
        builder, records = opened(out / f"shorter-{size}")
        assert builder.info.splits.keys() == {"train", "validation"}
        for image in tfds.as_numpy(builder.as_dataset(split="train")):
            height, width, _ = image["image/encoded"].shape
            assert (height, width) == (image["image/height"], image["image/width"]) and min(height, width) <= size


def test_a_write_arrays_build_opens_its_png_split_pixel_for_pixel(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (30, 8, 12, 3), dtype=np.uint8)
    labels = np.arange(30) % 3
    out = tmp_path / "arrays"
    write_arrays(images, labels, out, "train", 2, class_names=["cat", "dog", "background"], quality=90)
    write_arrays(images[:10], labels[:10], out, "test", 1, lossless=True)
    builder, records = opened(out)
    assert builder.info.splits.keys() == {"train", "test"}
    assert builder.info.features["image/class/label"].names == ["_background", "cat", "dog", "background"]
    for image in tfds.as_numpy(builder.as_dataset(split="test")):
        number = int(image["image/filename"].decode().split("_")[1].split(".")[0])
        np.testing.assert_array_equal(image["image/encoded"], images[number])  # PNG: the very pixels
        assert image["image/class/label"] == labels[number] + 1


def test_a_build_with_real_labels_gives_each_validation_records_list(sample_dir, tmp_path):
    out = convert_with_real_labels(sample_dir, tmp_path, {0: [0, 2], 1: [3]})
    builder = tfds.builder_from_directory(str(out))
    spec = {"image/class/real_labels": tf.io.VarLenFeature(tf.int64)}
    for split in ("train", "validation"):
        payloads = [raw for shard in sorted(out.glob(f"{split}-*")) for raw in tf.data.TFRecordDataset(str(shard))]
        got = tfds_records(builder, split, decoders=SKIP_IMAGE)
        assert len(got) == len(payloads)
        for record, raw in zip(got, payloads):
            parsed = tf.io.parse_single_example(raw, spec)["image/class/real_labels"].values.numpy()
            assert record["image/class/real_labels"].tolist() == parsed.tolist()  # train: none, as TFDS reads it
    held = [r["image/class/real_labels"].tolist() for r in tfds_records(builder, "validation", decoders=SKIP_IMAGE)]
    assert sorted(labels for labels in held if labels) == [[1, 3], [4]]  # 1-based, as image/class/label


def test_the_tfds_verb_makes_an_older_build_open(build):
    written = {name: (build / name).read_bytes() for name in ("features.json", "dataset_info.json")}
    for name in written:
        os.remove(build / name)
    with pytest.raises(OSError, match="dataset info"):  # TFDS's DatasetInfoFileError: no dataset_info.json
        tfds.builder_from_directory(str(build))
    result = run_cli("tfds", build)
    assert result.exit_code == 0, result.output
    assert {name: (build / name).read_bytes() for name in written} == written
    assert len(tfds.builder_from_directory(str(build)).as_dataset(split="train")) == 48
