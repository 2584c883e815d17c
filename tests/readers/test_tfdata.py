"""tf.data's reader (imagenet_build.tfdata) on shards of a ramp image made here, where each pixel holds its own
column (red) and row (green): the output shows exactly which part of the image a crop took, so the evaluation
crop is held to its pixels and slim's random crop to its area, aspect and mirror, and the file listing and
arguments to their messages."""

import io
import sys

import pytest
from PIL import Image

from helpers import encode_example, write_shard
from imagenet_build.infra.errors import BuildError

tf = pytest.importorskip("tensorflow")
np = pytest.importorskip("numpy")

from imagenet_build.tfdata import list_files, make_dataset  # noqa: E402

HEIGHT, WIDTH = 160, 240
SHARD = "train-00000-of-00001"


@pytest.fixture(scope="module")
def ramp_shard(tmp_path_factory):
    """A shard of 200 records of one lossless 240x160 ramp image, label 3 (1-based), no boxes."""
    folder = tmp_path_factory.mktemp("ramp")
    (folder / "dali_idx").mkdir()
    ramp = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    ramp[..., 0], ramp[..., 1] = np.arange(WIDTH)[None, :], np.arange(HEIGHT)[:, None]
    out = io.BytesIO()
    Image.fromarray(ramp).save(out, format="PNG")
    payloads = [encode_example(encoded=out.getvalue(), image_format=b"PNG", filename=f"{k}.png", height=HEIGHT,
                               width=WIDTH, label=3, synset="n3", text="three") for k in range(200)]
    write_shard(folder, SHARD, payloads)
    return str(folder / SHARD)


def test_evaluation_resizes_the_shorter_side_to_256_224ths_and_takes_the_centre(ramp_shard):
    """224 output: the shorter side 160 -> 256 (x 1.6), the longer 240 -> 384; the centre 224 starts at row 16 and
    column 80. Bilinear on a ramp is exact: each output pixel holds the source place it samples."""
    dataset = make_dataset([ramp_shard], training=False, batch_size=3, image_size=224, mean=(1, 2, 3),
                           std=(2, 4, 1))
    images, labels = next(iter(dataset))
    assert images.shape == (3, 224, 224, 3) and labels.numpy().tolist() == [2, 2, 2]  # 0-based
    image = images.numpy()[0]
    at = np.arange(224) + 0.5
    assert np.abs(image[0, :, 0] - ((at + 80) / 1.6 - 0.5 - 1) / 2).max() < 1e-4  # (x - mean) / std
    assert np.abs(image[:, 0, 1] - ((at + 16) / 1.6 - 0.5 - 2) / 4).max() < 1e-4
    assert np.all(image[..., 2] == -3)


def crops(dataset):
    """(area, aspect, mirrored) of each training crop, from the ramp's values at the output's edges."""
    found = []
    for images, _ in dataset:
        for image in images.numpy():
            red, green = image[..., 0], image[..., 1]
            size = image.shape[0]
            width = (red.max() - red.min()) * size / (size - 1)
            height = (green.max() - green.min()) * size / (size - 1)
            found.append((width * height / (WIDTH * HEIGHT), width / height, red[:, 0].mean() > red[:, -1].mean()))
    return np.array(found, float)


def test_training_crops_are_slims_area_and_aspect_and_half_are_mirrored(ramp_shard):
    """No boxes: the whole image is the box, of which a crop covers at least a tenth (min_object_covered), up to
    all of it; aspects from 3:4 to 4:3; about half mirrored. 200 crops of a 240x160 image."""
    dataset = make_dataset([ramp_shard], training=True, batch_size=50, image_size=32, mean=(0, 0, 0),
                           std=(1, 1, 1), repeat=False, seed=0)
    area, aspect, mirrored = crops(dataset).T
    assert len(area) == 200
    assert 0.09 <= area.min() < 0.15 and 0.6 < area.max() <= 1.01 and np.mean(area > 0.95) < 0.05
    assert 0.72 <= aspect.min() < 0.8 and 1.25 < aspect.max() <= 1.37  # sides rounded to whole pixels
    assert 0.3 < mirrored.mean() < 0.7


def test_training_repeats_and_drops_the_remainder_by_default_and_evaluation_does_not(ramp_shard):
    training = make_dataset([ramp_shard], training=True, batch_size=64, image_size=8)
    assert [int(labels.shape[0]) for _, labels in training.take(5)] == [64] * 5  # past 200 records: repeated
    evaluation = make_dataset([ramp_shard], training=False, batch_size=64, image_size=8)
    assert [int(labels.shape[0]) for _, labels in evaluation] == [64, 64, 64, 8]
    told = make_dataset([ramp_shard], training=True, repeat=False, drop_remainder=False, batch_size=64, image_size=8)
    assert [int(labels.shape[0]) for _, labels in told.take(8)] == [64, 64, 64, 8]  # given overrides training's
    told = make_dataset([ramp_shard], training=False, repeat=True, drop_remainder=False, batch_size=64, image_size=8)
    assert [int(labels.shape[0]) for _, labels in told.take(5)] == [64] * 5
    told = make_dataset([ramp_shard], training=False, repeat=False, drop_remainder=True, batch_size=64, image_size=8)
    assert [int(labels.shape[0]) for _, labels in told] == [64, 64, 64]
    unaugmented = make_dataset([ramp_shard], training=True, augment=False, batch_size=2, image_size=224)
    image = next(iter(unaugmented))[0].numpy()[0]  # the evaluation crop, normalised by the readers' defaults
    mean, std = (123.68, 116.28, 103.53), (58.395, 57.120, 57.385)
    assert np.abs(image[0, :3, 0] - ((np.arange(3) + 80.5) / 1.6 - 0.5 - mean[0]) / std[0]).max() < 1e-4
    assert np.all(np.abs(image[..., 2] + mean[2] / std[2]) < 1e-5)


def test_files_are_listed_from_a_list_a_pattern_or_a_folder(tmp_path):
    for name in ("train-00001-of-00002", "train-00000-of-00002", "validation-00000-of-00001"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "train-00000-of-00002.idx").write_bytes(b"")  # an index beside its shard: not a shard
    train = [str(tmp_path / "train-00000-of-00002"), str(tmp_path / "train-00001-of-00002")]
    assert list_files((tmp_path / "b", tmp_path / "a")) == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert list_files(str(tmp_path / "train-*")) == train
    assert list_files(tmp_path) == train and list_files(tmp_path, training=False) == [
        str(tmp_path / "validation-00000-of-00001")]


@pytest.mark.parametrize("where, message", [
    ("s3://bucket/build", "s3://bucket/build: make_dataset lists local folders and glob patterns; give it the list "
                          "of the shards' URLs for TensorFlow to open"),
    ("{tmp}/nothing-*", "no TFRecord files match {tmp}/nothing-*"),
    ("{tmp}", "{tmp}: holds no train shards (train-NNNNN-of-NNNNN)"),
])
def test_what_lists_no_shards_is_one_line(tmp_path, where, message):
    with pytest.raises(BuildError) as caught:  # the tool's own error, as every reader raises it
        list_files(where.format(tmp=tmp_path))
    assert str(caught.value) == message.format(tmp=tmp_path)


@pytest.mark.parametrize("workers, index, message", [
    (2, 2, "worker_index 2 is not in [0, 2)"),
    (2, -1, "worker_index -1 is not in [0, 2)"),
    (2, 0, "1 files cannot be shared by 2 workers: each worker needs at least one (convert with more shards, or "
           "use fewer workers)"),
])
def test_workers_are_checked(ramp_shard, workers, index, message):
    with pytest.raises(BuildError) as caught:
        make_dataset([ramp_shard], training=False, batch_size=1, num_workers=workers, worker_index=index)
    assert str(caught.value) == message
    assert make_dataset([ramp_shard], training=False, batch_size=1, num_workers=1, worker_index=0) is not None


def test_a_missing_tensorflow_is_one_line(ramp_shard, monkeypatch):
    from imagenet_build.infra.errors import BuildError

    monkeypatch.setitem(sys.modules, "tensorflow", None)
    with pytest.raises(BuildError) as caught:
        make_dataset([ramp_shard], training=False, batch_size=1)
    assert str(caught.value).startswith("imagenet_build.tfdata needs TensorFlow, which is not installed"), caught.value


@pytest.fixture(scope="module")
def jpeg_ramp_shard(tmp_path_factory):
    """200 records of the ramp as a JPEG (quality 100, no chroma subsampling), each with one box: its lower
    right quarter."""
    folder = tmp_path_factory.mktemp("jpeg-ramp")
    (folder / "dali_idx").mkdir()
    ramp = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    ramp[..., 0], ramp[..., 1] = np.arange(WIDTH)[None, :], np.arange(HEIGHT)[:, None]
    out = io.BytesIO()
    Image.fromarray(ramp).save(out, format="JPEG", quality=100, subsampling=0)
    payloads = [encode_example(encoded=out.getvalue(), filename=f"{k}.jpg", height=HEIGHT, width=WIDTH, label=3,
                               synset="n3", text="three", boxes=[(0.5, 0.5, 1.0, 1.0)]) for k in range(200)]
    write_shard(folder, SHARD, payloads)
    return str(folder / SHARD)


@pytest.mark.parametrize("decode_crop", [True, False])
def test_a_jpegs_crop_is_decoded_alone_and_honours_its_boxes(jpeg_ramp_shard, decode_crop):
    """A JPEG's crop drawn from its header and decoded alone (decode_and_crop_jpeg), or cut from the whole image
    (decode_crop=False): either way slim's law, each crop covering at least a tenth of the record's box (the lower
    right quarter: red from 120, green from 80), aspects 3:4 to 4:3, about half mirrored."""
    dataset = make_dataset([jpeg_ramp_shard], training=True, batch_size=50, image_size=32, mean=(0, 0, 0),
                           std=(1, 1, 1), repeat=False, seed=0, decode_crop=decode_crop)
    images = np.concatenate([batch.numpy() for batch, _ in dataset])
    assert len(images) == 200
    red, green = images[..., 0], images[..., 1]
    left, right = red.min(axis=(1, 2)), red.max(axis=(1, 2))
    top, bottom = green.min(axis=(1, 2)), green.max(axis=(1, 2))
    covered = np.clip(right - np.maximum(left, 120), 0, None) * np.clip(bottom - np.maximum(top, 80), 0, None)
    # a tenth of the box (960 pixels), less what the edges' resize samples take off; a crop drawn without the
    # box lies anywhere, away from it too
    assert np.all(covered > 0.05 * 120 * 80) and np.median(covered) > 0.2 * 120 * 80
    area, aspect, mirrored = crops([(tf.constant(images), None)]).T
    assert 0.04 <= area.min() and area.max() <= 1.02 and 0.7 <= aspect.min() and aspect.max() <= 1.4
    assert 0.3 < mirrored.mean() < 0.7
