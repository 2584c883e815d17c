"""trainer-check --show's picture on synthetic batches: each tile is the image fed, un-normalised, under
the caption of its label; the rows are capped; the file is refused before a run when it cannot be written.

The readers' loops feeding it (DALI, PyTorch) are held to it end to end in test_trainer_show.py.
"""

import numpy as np
import pytest
from PIL import Image

from helpers import expect_error
from imagenet_build.trainercheck.show_grid import (
    STEPS,
    TILES,
    BatchCapture,
    caption,
    class_names,
    read_legend,
    write_grid,
)

MEAN, STD = (90.0, 140.5, 60.25), (40.0, 75.5, 20.0)  # not the defaults: the picture takes the ones given
MANIFEST = {"synsets": ["n01440764", "n01443537", "daisy"]}  # two ImageNet classes, one class folder's name


def fed(count, height=24, width=40, seed=0):
    """`count` random uint8 images, and the same normalised as a reader feeds them (NHWC float32)."""
    pixels = np.random.default_rng(seed).integers(0, 256, (count, height, width, 3), dtype=np.uint8)
    return pixels, ((pixels - np.float32(MEAN)) / np.float32(STD)).astype(np.float32)


def tile(path, legend, row, k):
    x, y, w, h = legend["rows"][row]["tiles"][k]["box"]
    with Image.open(path) as picture:
        return np.asarray(picture.convert("RGB"))[y:y + h, x:x + w]


def drawn(capture, tmp_path, manifest=MANIFEST):
    path = tmp_path / "batches.png"
    assert write_grid(path, capture, manifest, "a reader, train split, cpu") == str(path)
    return path, read_legend(path)


def test_each_tile_is_the_image_fed_un_normalised(tmp_path):
    capture = BatchCapture(MEAN, STD)
    first, first_fed = fed(5, seed=1)
    capture.step(first_fed, np.array([0, 1, 2, 0, 1]))
    subset, subset_fed = fed(3, seed=2)
    capture.subset(subset_fed, np.array([2, 2, 1]))
    path, legend = drawn(capture, tmp_path)
    assert [row["title"] for row in legend["rows"]] == [
        "training step 1: 5 images", "the overfit check's fixed subset (evaluation crop): 3 images"]
    for k in range(5):  # (x - mean) / std in float32, then x * std + mean: back within rounding
        assert np.abs(tile(path, legend, 0, k).astype(int) - first[k]).max() <= 1
    for k in range(3):
        assert np.abs(tile(path, legend, 1, k).astype(int) - subset[k]).max() <= 1
    assert legend["mean"] == list(MEAN) and legend["std"] == list(STD)


def test_rows_and_tiles_are_capped_and_the_subset_is_the_first_batch_given(tmp_path):
    capture = BatchCapture(MEAN, STD)
    batches = [fed(12, seed=s) for s in range(STEPS + 2)]
    for _, images in batches:
        capture.step(images, np.zeros(12, dtype=np.int64))
    capture.subset(fed(12, seed=50)[1], np.ones(12, dtype=np.int64))
    capture.subset(fed(12, seed=51)[1], np.ones(12, dtype=np.int64))  # the overfit loop feeds it again: kept once
    path, legend = drawn(capture, tmp_path)
    assert len(legend["rows"]) == STEPS + 1
    assert [len(row["tiles"]) for row in legend["rows"]] == [TILES] * (STEPS + 1)
    assert legend["rows"][STEPS - 1]["title"] == f"training step {STEPS}: {TILES} of 12 images"
    assert np.abs(tile(path, legend, STEPS - 1, 0).astype(int) - batches[STEPS - 1][0][0]).max() <= 1
    assert np.abs(tile(path, legend, STEPS, 0).astype(int) - fed(12, seed=50)[0][0]).max() <= 1


def test_pixels_never_normalised_or_with_swapped_channels_look_wrong(tmp_path):
    """What the picture shows for two faults: raw 0-255 pixels fed come out white; an image fed as
    B G R shows its red as blue (the picture keeps the channel order the model got)."""
    red = np.zeros((1, 16, 16, 3), dtype=np.uint8)
    red[..., 0] = 200
    capture = BatchCapture(MEAN, STD)
    capture.step(np.full((1, 16, 16, 3), 30, dtype=np.float32), np.array([0]))  # a dark grey never normalised
    capture.step(((red[..., ::-1] - np.float32(MEAN)) / np.float32(STD)).astype(np.float32), np.array([0]))
    path, legend = drawn(capture, tmp_path)
    assert tile(path, legend, 0, 0).min() == 255
    swapped = tile(path, legend, 1, 0).astype(int)
    assert abs(swapped[..., 2].mean() - 200) <= 1 and swapped[..., 0].max() == 0


def test_captions_give_the_label_as_trained_and_its_class():
    classes = class_names(MANIFEST)
    assert classes == [("n01440764", "tench, Tinca tinca"), ("n01443537", "goldfish, Carassius auratus"),
                       ("daisy", "daisy")]
    assert caption(0, classes) == "0 n01440764\ntench, Tinca tinca"
    assert caption(2, classes) == "2 daisy"  # a class folder's name is its own text
    assert caption(3, classes) == "3\nno such class (0..2)"  # e.g. labels stored 0-based, shifted to -1
    assert caption(-1, classes) == "-1\nno such class (0..2)"
    assert class_names(None) is None and caption(7, None) == "7"  # a folder of shards with no manifest


def test_the_captions_drawn_are_the_labels_fed(tmp_path):
    capture = BatchCapture(MEAN, STD)
    capture.step(fed(4)[1], np.array([1, 0, 5, 2]))
    path, legend = drawn(capture, tmp_path)
    assert [t["caption"] for t in legend["rows"][0]["tiles"]] == [
        "1 n01443537\ngoldfish, Carassius auratus", "0 n01440764\ntench, Tinca tinca", "5\nno such class (0..2)",
        "2 daisy"]
    with Image.open(path) as picture:
        pixels = np.asarray(picture.convert("L"))
    for t in legend["rows"][0]["tiles"]:  # the text is there: dark pixels under each tile, on white paper
        x, y, w, h = t["box"]
        assert pixels[y + h + 1:y + h + 30, x:x + w].min() < 100


def test_no_training_step_is_said_so(tmp_path):
    path, legend = drawn(BatchCapture(MEAN, STD), tmp_path)
    assert legend["rows"] == [] and Image.open(path).size[0] > 0


def test_the_picture_is_written_atomically(tmp_path):
    """The PNG appears whole under its name, replacing an older one; no temporary file stays beside it."""
    (tmp_path / "batches.png").write_bytes(b"an older picture")
    capture = BatchCapture(MEAN, STD)
    capture.step(fed(2)[1], np.array([0, 1]))
    path, _ = drawn(capture, tmp_path)
    assert Image.open(path).format == "PNG" and [p.name for p in tmp_path.iterdir()] == ["batches.png"]


@pytest.mark.parametrize("where,problem", [
    ("missing/batches.png", "folder {tmp}/missing does not exist"),
    ("a-file/batches.png", "{tmp}/a-file is not a folder"),
    ("", "is a folder; give a file name"),
])
def test_a_picture_that_cannot_be_written_is_refused_before_the_run(tmp_path, where, problem):
    """Checked while the options are read: here the build folder does not even exist, and the run
    (which would say so) never starts."""
    (tmp_path / "a-file").write_text("")
    target = tmp_path / where if where else tmp_path
    expect_error(["trainer-check", tmp_path / "no-build", "--show", target], 1,
                 f"error: {target}: {problem.format(tmp=tmp_path)}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
