"""The PyTorch reader (imagenet_build.torch) and trainer-check --framework torch, on the CPU.

Every record once across simulated ranks x DataLoader workers, values equal to
TensorFlow's parse of the same records, CPU decode equal to Pillow's, and the
trainer check passing on the sample and failing on planted faults.
"""

import gc
import io
import json
import os
import random
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from conftest import run_cli, run_process
from helpers import (
    SHARD,
    edit_record,
    expect_error,
    index_lines,
    read_with_tensorflow,
    set_index,
    trainer_report,
)
from imagenet_build.format.dali_index import record_entries
from imagenet_build.infra.errors import BuildError

# TensorFlow (imported by other test modules of this process) and triton, which torch imports when it
# is installed, each carry their own LLVM: loading triton after TensorFlow crashes the process. These
# tests compile nothing with triton, so torch runs here without it.
sys.modules.setdefault("triton", None)
torch = pytest.importorskip("torch")
# torchvision 0.29 marks its image decoding deprecated (in favour of TorchCodec); it still works
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")
pytest.importorskip("torchvision")

from imagenet_build.readback.torch_dataset import _shuffled  # noqa: E402
from imagenet_build.torch import (  # noqa: E402
    AREA,
    ASPECT,
    BatchTransform,
    IterableRecordDataset,
    RecordDataset,
    collate,
    decode_images,
)


def all_records(folder, split):
    """{(shard path, offset)} of every record, from the shards' own framing."""
    return {(str(p), offset) for p in sorted(folder.glob(f"{split}-*-of-*")) for offset, _ in record_entries(str(p))}


def read_all(dataset_class, folder, split, world_size, workers=2, epoch=0, **kwargs):
    """[(rank, shard, offset, filename)] of one epoch over every rank, each through a DataLoader with workers."""
    got = []
    for rank in range(world_size):
        dataset = dataset_class(folder, split, rank=rank, world_size=world_size, decode=False, **kwargs)
        dataset.set_epoch(epoch)
        loader = torch.utils.data.DataLoader(dataset, batch_size=5, num_workers=workers, collate_fn=collate)
        for batch in loader:
            got += [(rank, s, o, f) for s, o, f in zip(batch["shard"], batch["offset"].tolist(), batch["filename"])]
    return got


def message(call):
    """The BuildError message of call()."""
    with pytest.raises(BuildError) as caught:
        call()
    return str(caught.value)


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("dataset_class", [RecordDataset, IterableRecordDataset])
def test_every_record_once_across_ranks_and_workers(converted, dataset_class, world_size):
    for split in ("train", "validation"):
        got = read_all(dataset_class, converted, split, world_size)
        sources = Counter((s, o) for _, s, o, _ in got)
        assert set(sources) == all_records(converted, split) and set(sources.values()) == {1}, split
        assert len({f for *_, f in got}) == len(got)
        sizes = Counter(rank for rank, *_ in got)
        assert len(sizes) == world_size and max(sizes.values()) - min(sizes.values()) <= 1


@pytest.mark.parametrize("dataset_class", [RecordDataset, IterableRecordDataset])
def test_order_is_deterministic_per_seed_and_epoch(converted, dataset_class):
    order = lambda **kw: [f for *_, f in read_all(dataset_class, converted, "train", 2, workers=0, **kw)]  # noqa: E731
    assert order(epoch=1) == order(epoch=1)
    assert order(epoch=1) != order(epoch=2) and sorted(order(epoch=1)) == sorted(order(epoch=2))
    assert order(epoch=1) != order(epoch=1, seed=7)
    assert order(epoch=1, shuffle=False) == order(epoch=2, shuffle=False)


@pytest.mark.parametrize("dataset_class", [RecordDataset, IterableRecordDataset])
def test_set_epoch_reaches_persistent_workers(converted, dataset_class):
    """DataLoader(persistent_workers=True) starts its 2 workers once: each epoch's order is still the
    one set_epoch sets, the same as with workers started anew for every epoch."""
    def orders(persistent):
        buffer = {"shuffle_buffer": 4} if dataset_class is IterableRecordDataset else {}
        dataset = dataset_class(converted, "train", decode=False, shuffle=True, **buffer)
        loader = torch.utils.data.DataLoader(dataset, batch_size=5, num_workers=2, collate_fn=collate,
                                             persistent_workers=persistent)
        epochs = []
        for epoch in (1, 2, 3):
            dataset.set_epoch(epoch)
            epochs.append([f for batch in loader for f in batch["filename"]])
        return epochs

    persistent = orders(True)
    assert persistent == orders(False)
    assert len(set(map(tuple, persistent))) == 3 and len({frozenset(o) for o in persistent}) == 1


def test_values_equal_tensorflows_parse(converted):
    pytest.importorskip("tensorflow")

    for split in ("train", "validation"):
        ours = list(RecordDataset(converted, split, decode=False, boxes=True, shuffle=False))
        theirs = [r for p in sorted(converted.glob(f"{split}-*-of-*")) for r in read_with_tensorflow(str(p))]
        assert len(ours) == len(theirs) == {"train": 48, "validation": 16}[split]
        for mine, tf in zip(ours, theirs):
            assert mine["image"] == tf["image/encoded"]
            assert mine["label"] == tf["image/class/label"] - 1
            assert mine["filename"] == tf["image/filename"].decode()
            boxes = np.array([tf[f"image/object/bbox/{c}"] for c in ("xmin", "ymin", "xmax", "ymax")],
                             dtype=np.float32).T.reshape(-1, 4)
            assert np.array_equal(mine["boxes"].numpy(), boxes)
    assert any(len(s["boxes"]) for s in RecordDataset(converted, "train", decode=False, boxes=True))


def test_cpu_decode_equals_pillow(converted):
    """Grayscale, progressive, EXIF-rotated and the re-encoded CMYK and PNG images among them."""
    raw = {s["filename"]: s["image"] for s in RecordDataset(converted, "train", decode=False)}
    modes = set()
    for sample in IterableRecordDataset(converted, "train"):
        with Image.open(io.BytesIO(raw[sample["filename"]])) as image:
            modes.add(image.mode)
            expected = np.asarray(image.convert("RGB")).transpose(2, 0, 1)
        assert sample["image"].dtype == torch.uint8
        assert np.array_equal(sample["image"].numpy(), expected), sample["filename"]
    assert modes == {"RGB", "L"}


def test_batch_transform_crop_ranges_and_repeatability(converted):
    transform = BatchTransform("cpu", seed=3)
    for height, width in [(100, 100), (375, 500), (500, 60)]:
        for _ in range(200):
            top, left, h, w = transform.crop_box(height, width)
            assert 0 <= top <= height - h and 0 <= left <= width - w
            if (h, w) != (height, width):
                assert AREA[0] * 0.9 <= h * w / (height * width) <= AREA[1]
                assert ASPECT[0] * 0.9 <= w / h <= ASPECT[1] * 1.1
    encoded = [s["image"] for s in RecordDataset(converted, "train", decode=False, shuffle=False)][:8]
    a, b = BatchTransform("cpu", seed=1)(encoded), BatchTransform("cpu", seed=1)(encoded)
    assert a.shape == (8, 3, 224, 224) and a.dtype == torch.float32 and torch.equal(a, b)
    assert not torch.equal(a, BatchTransform("cpu", seed=2)(encoded))
    evaluation = BatchTransform("cpu", training=False, mean=(0, 0, 0), std=(1, 1, 1))(encoded)
    assert evaluation.shape == (8, 3, 224, 224) and 0 <= float(evaluation.min()) and float(evaluation.max()) <= 255


def uniform_distance(values, lo, hi):
    """Kolmogorov-Smirnov distance between the values and the uniform distribution on [lo, hi]."""
    u = np.sort((np.asarray(values) - lo) / (hi - lo))
    n = len(u)
    return float(np.max(np.maximum(np.arange(1, n + 1) / n - u, u - np.arange(n) / n)))


def test_random_crop_spreads_over_slims_area_and_aspect():
    """4000 crops of a 500x375 image: areas from 5 % to the whole, aspects from 3:4 to 4:3, almost no fallback.
    Below half the area every aspect fits, so there the draws are held to their laws: area uniform, aspect
    log-uniform (these seeded draws are 0.02 from both laws; drawn uniformly, the aspects are 0.09 away)."""
    transform = BatchTransform("cpu", seed=5)
    height, width = 375, 500
    boxes = np.array([transform.crop_box(height, width) for _ in range(4000)])
    h, w = boxes[:, 2], boxes[:, 3]
    area, aspect = h * w / (height * width), w / h
    assert np.mean((h == height) & (w == width)) < 0.01  # fallbacks to the whole image are rare here
    assert AREA[0] * 0.97 <= area.min() < 0.06 and 0.95 < area.max() <= AREA[1]
    assert np.mean(area < 0.15) > 0.08 and np.mean(area > 0.8) > 0.02  # the low and the high deciles are drawn
    assert ASPECT[0] * 0.98 <= aspect.min() < 0.77 and 1.30 < aspect.max() <= ASPECT[1] * 1.02
    small = area < 0.5
    assert small.sum() > 2000
    assert uniform_distance(area[small], AREA[0], 0.5) < 0.04
    assert uniform_distance(np.log(aspect[small]), np.log(ASPECT[0]), np.log(ASPECT[1])) < 0.04


@pytest.mark.parametrize("height, width", [(1, 1000), (1000, 2)])
def test_random_crop_falls_back_to_the_whole_image_where_no_crop_fits(height, width):
    """No box of 5 % of the area or more with an aspect from 3:4 to 4:3 fits in a 1x1000 or a 1000x2 image."""
    transform = BatchTransform("cpu", seed=0)
    assert {transform.crop_box(height, width) for _ in range(20)} == {(0, 0, height, width)}


def test_random_crop_positions_cover_every_place_evenly():
    """A 7x7 crop of a 10x10 image lies at each of the 4 x 4 places, about equally often."""
    transform = BatchTransform("cpu", area=(0.49, 0.49), aspect=(1, 1), seed=0)
    boxes = [transform.crop_box(10, 10) for _ in range(800)]
    assert {(h, w) for _, _, h, w in boxes} == {(7, 7)}
    for place in (Counter(top for top, *_ in boxes), Counter(left for _, left, *_ in boxes)):
        assert sorted(place) == [0, 1, 2, 3] and min(place.values()) > 150, place
    assert len(Counter((top, left) for top, left, *_ in boxes)) == 16  # top and left drawn apart


def test_random_crop_draws_boxes_as_wide_or_high_as_the_image_and_one_pixel_sides():
    """Areas 0.5-1 of a 10x10 image, square: the whole image is drawn (areas from 0.9025) about a fifth of
    the time, not only as the fallback; a 2x2 image gives 1x1 boxes too."""
    transform = BatchTransform("cpu", area=(0.5, 1.0), aspect=(1, 1), seed=0)
    whole = np.mean([transform.crop_box(10, 10)[2:] == (10, 10) for _ in range(400)])
    assert 0.12 < whole < 0.28, whole
    tiny = BatchTransform("cpu", seed=0)
    assert (1, 1) in {tiny.crop_box(2, 2)[2:] for _ in range(100)}


SEED_0_CROPS = [(9, 41, 325, 383), (8, 32, 357, 316), (55, 97, 260, 279), (42, 186, 312, 263),
                (18, 142, 206, 228), (92, 187, 219, 226)]


def test_seeded_crops_stay_the_same_from_release_to_release():
    """A seeded run crops as it did: the default transform (seed 0, 100 attempts) gives these boxes of a 375x500
    image, then the fallback of a 1x1000 image after its 100 attempts, then this box. Any change to the draws
    (their number, precision or order, the attempts, the defaults) changes every seeded run's augmentation."""
    for transform in (BatchTransform("cpu"), BatchTransform("cpu", seed=0, attempts=100)):
        assert [transform.crop_box(375, 500) for _ in SEED_0_CROPS] == SEED_0_CROPS
        assert transform.crop_box(1, 1000) == (0, 0, 1, 1000)
        assert transform.crop_box(375, 500) == (100, 284, 139, 150)


@pytest.mark.parametrize("module, what, call", [
    ("torchvision.transforms.v2.functional", "augmenting images in imagenet_build.torch",
     lambda: BatchTransform("cpu").crop_resize(torch.zeros((3, 8, 8), dtype=torch.uint8))),
    ("torchvision.io", "decoding images in imagenet_build.torch", lambda: decode_images([b"\xff\xd8"])),
])
def test_a_missing_torchvision_is_one_line(monkeypatch, module, what, call):
    monkeypatch.setitem(sys.modules, module, None)
    text = message(call)
    assert text.startswith(f"{what} needs torchvision, which is not installed") and "\n" not in text, text


@pytest.mark.parametrize("height, width", [(1, 1), (2, 2), (3, 1), (2, 5)])
def test_random_crop_of_a_tiny_image_is_never_empty(height, width):
    """Rounding a small area's sides can give 0: such a draw is refused, never returned as an empty box."""
    transform = BatchTransform("cpu", area=(0.01, 1.0), seed=0)
    for _ in range(300):
        top, left, h, w = transform.crop_box(height, width)
        assert 0 < h <= height - top and 0 < w <= width - left


def jpeg(height, width, seed=0):
    """A JPEG of smooth random colours (no symmetry), and its decoded CHW uint8 tensor."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(small).resize((width, height), Image.BILINEAR).save(out, format="JPEG", quality=95)
    return out.getvalue(), decode_images([out.getvalue()])[0]


def test_training_mirrors_about_half_the_images():
    """The whole-image crop (area 1, aspect 1 of a square image) resized, mirrored or not: 64 images,
    each exactly the resized image or its mirror, about half of them mirrored; repeatable by seed."""
    from torchvision.transforms.v2 import functional

    encoded, image = jpeg(96, 96)
    resized = functional.resized_crop(image, 0, 0, 96, 96, [32, 32], antialias=True).float()
    transform = BatchTransform("cpu", size=32, area=(1, 1), aspect=(1, 1), mean=(0, 0, 0), std=(1, 1, 1), seed=4)
    out = transform([encoded] * 64)
    mirrored = [torch.equal(o, resized.flip(-1)) for o in out]
    assert all(m or torch.equal(o, resized) for o, m in zip(out, mirrored))
    assert 20 <= sum(mirrored) <= 44, sum(mirrored)


def test_the_defaults_are_the_cpu_training_224_and_evaluation_from_256():
    """BatchTransform() augments on the CPU for training; with training=False it resizes the shorter side to
    256 and keeps the centre 224 x 224 (docs/readers.md)."""
    encoded, image = jpeg(300, 400)
    default = BatchTransform()
    assert default.device == torch.device("cpu") and default.training and default.crop_resize(image).shape == (
        3, 224, 224)
    evaluation = BatchTransform(training=False)
    assert torch.equal(evaluation([encoded]), BatchTransform("cpu", training=False, size=224, resize=256)([encoded]))
    assert not torch.equal(evaluation([encoded]), BatchTransform("cpu", training=False, size=224, resize=257)(
        [encoded]))


@pytest.mark.parametrize("height, width, resize, size, top, left, h, w", [
    (300, 400, 150, 100, 25, 50, 150, 200),  # shorter side to 150, then the centre 100 x 100
    (400, 300, 150, 100, 50, 25, 200, 150),
    (100, 400, 50, 64, 0, 68, 64, 200),  # the shorter side never below size
])
def test_evaluation_resizes_the_shorter_side_and_takes_the_centre(height, width, resize, size, top, left, h, w):
    """Evaluation: the shorter side resized to `resize`, the centre size x size kept; then (x - mean) / std
    per channel with the defaults shared by every reader; channels_last changes the layout, not the values."""
    from torchvision.transforms.v2 import functional

    from imagenet_build.readback.checks import DLE_MEAN, DLE_STD

    encoded, image = jpeg(height, width)
    expected = functional.resize(image, [h, w], antialias=True)[:, top:top + size, left:left + size]
    transform = BatchTransform("cpu", training=False, size=size, resize=resize)
    assert torch.equal(transform.crop_resize(image), expected)
    mean, std = torch.tensor(DLE_MEAN).view(3, 1, 1), torch.tensor(DLE_STD).view(3, 1, 1)
    out = transform([encoded])
    assert out.shape == (1, 3, size, size) and torch.allclose(out[0], (expected.float() - mean) / std, atol=1e-5)
    last = BatchTransform("cpu", training=False, size=size, resize=resize, channels_last=True)([encoded])
    assert torch.equal(last, out) and last.is_contiguous(memory_format=torch.channels_last)
    assert not out.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("dataset_class", [RecordDataset, IterableRecordDataset])
def test_collate_stacks_decoded_images(converted, dataset_class):
    """Decoded images of one size (here resized by a transform) come out of a DataLoader as one uint8
    N x 3 x H x W tensor, each equal to the sample read alone; images of different sizes as a list."""
    resized = BatchTransform("cpu", training=False, size=32, resize=36).crop_resize
    alone = {s["filename"]: s["image"] for s in RecordDataset(converted, "validation", transform=resized)}
    dataset = dataset_class(converted, "validation", transform=resized)
    batches = list(torch.utils.data.DataLoader(dataset, batch_size=5, num_workers=2, collate_fn=collate))
    assert sorted(name for b in batches for name in b["filename"]) == sorted(alone)
    for batch in batches:
        images = batch["image"]
        assert isinstance(images, torch.Tensor) and images.dtype == torch.uint8
        assert images.shape == (len(batch["filename"]), 3, 32, 32)
        for name, image in zip(batch["filename"], images):
            assert torch.equal(image, alone[name]), name
    samples = [s for s in dataset_class(converted, "validation")][:6]
    assert len({tuple(s["image"].shape) for s in samples}) > 1
    images = collate(samples)["image"]
    assert isinstance(images, list) and all(torch.equal(a, s["image"]) for a, s in zip(images, samples))


def open_descriptors():
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd (Linux)")
@pytest.mark.parametrize("dataset_class", [RecordDataset, IterableRecordDataset])
def test_reading_holds_at_most_one_descriptor_per_shard(converted, dataset_class):
    """Reading a split, twice, leaves open at most one descriptor per shard (the map-style reader keeps one
    per shard for its preads, the streaming one only the shard it reads), never one per record read; a
    dataset dropped closes its own."""
    before = open_descriptors()
    dataset = dataset_class(converted, "train", decode=False)
    built = open_descriptors()  # the shared epoch's memory may hold one
    shards = len(dataset.records.paths)
    assert built - before <= 1 and shards < len(dataset.records) // 4
    counts = []
    for _ in range(2):
        for _ in dataset:
            counts.append(open_descriptors() - built)
    assert len(counts) == 2 * len(dataset.records) and max(counts) <= shards
    del dataset
    gc.collect()
    assert open_descriptors() == before


def test_a_split_of_more_shards_than_kept_open_reads_whole_within_the_cap(converted, monkeypatch):
    """ImageNet's 1,024 train shards would pass a soft limit of 1,024 descriptors in every worker: the
    map-style reader keeps at most MAX_OPEN_SHARDS open, closing the least recently read, and still reads
    every record right (here a cap of 2 over the sample's 4 shards, in shuffled order)."""
    import imagenet_build.readback.torch_records as torch_records

    monkeypatch.setattr(torch_records, "MAX_OPEN_SHARDS", 2)
    expected = {s["filename"]: s["label"] for s in RecordDataset(converted, "train", decode=False, shuffle=False)}
    before = open_descriptors()
    dataset = RecordDataset(converted, "train", decode=False)
    built = open_descriptors()
    got, most = {}, 0
    for sample in dataset:
        got[sample["filename"]] = sample["label"]
        most = max(most, open_descriptors() - built)
    assert got == expected and len(dataset.records.paths) == 4 and most == 2
    del dataset
    gc.collect()
    assert open_descriptors() == before


def test_a_shard_that_cannot_be_opened_is_one_line(build):
    dataset = RecordDataset(build, "train", decode=False, shuffle=False)
    (build / SHARD).chmod(0)
    if os.access(build / SHARD, os.R_OK):  # root reads anything: take the file away instead
        (build / SHARD).unlink()
    assert message(lambda: dataset[dataset.records.starts[1]]) in {  # the first record of SHARD, the second shard
        f"{dataset.records.paths[1]}: cannot be opened: {reason}" for reason in ("Permission denied",
                                                                              "No such file or directory")}


def test_too_few_records_and_bad_rank_are_clear_errors(converted):
    with pytest.raises(BuildError, match="for 100 ranks"):
        RecordDataset(converted, "validation", rank=0, world_size=100)
    with pytest.raises(BuildError, match="rank 3 of world_size 3"):
        IterableRecordDataset(converted, "validation", rank=3, world_size=3)
    dataset = IterableRecordDataset(converted, "validation", world_size=8)
    with pytest.raises(BuildError, match="16 record.s. for 24 rank x workers"):
        dataset.runs(worker=0, workers=3)


def test_undecodable_image_names_the_record(build):
    def garble(example):
        example.features.feature["image/encoded"].bytes_list.value[0] = b"\xff\xd8 not a jpeg"

    edit_record(build, SHARD, 0, garble)
    dataset = RecordDataset(build, "train", shuffle=False)
    first = dataset.records.starts[1]
    raw = RecordDataset(build, "train", shuffle=False, decode=False)
    where = f"{dataset.records.paths[1]}: byte 0 ({raw[first]['filename']})"
    assert re.fullmatch(re.escape(where) + r": does not decode as JPEG \(.+\)", message(lambda: dataset[first]))
    for batch, what in [([raw[first - 1]["image"], raw[first]["image"]], "image 1 of the batch"),
                        ([raw[first]["image"]], "an image")]:
        assert re.fullmatch(what + r": does not decode as JPEG \(.+\)", message(lambda b=batch: decode_images(b)))


def test_bad_index_lines_and_records_are_named_where_they_are(build):
    """The reader parses indexes and unframes records with verify's own code: each fault one error naming
    the file and the line or byte; an index whose last line lacks its newline reads as DALI reads it."""
    lines = index_lines(build)
    second = int(lines[1].split()[0])
    set_index(build, lines[:-1] + [lines[-1].rstrip("\n")])
    assert len(RecordDataset(build, "train", shuffle=False, decode=False)) == 48
    set_index(build, lines[:2] + ["12 x\n"] + lines[3:])
    with pytest.raises(BuildError, match=f"{SHARD}.idx: line 3: not '<offset> <size>'"):
        RecordDataset(build, "train")
    # entries that still cover the shard exactly, but cut at the wrong place: found when the record is read
    (o1, s1), (o2, s2) = (map(int, line.split()) for line in lines[:2])
    set_index(build, [f"{o1} {s1 + 4}\n", f"{o2 + 4} {s2 - 4}\n"] + lines[2:])
    dataset = RecordDataset(build, "train", shuffle=False, decode=False)
    first = dataset.records.starts[1]
    with pytest.raises(BuildError, match=f"{SHARD}: byte 0: the record is .* bytes, its index entry says"):
        dataset[first]
    set_index(build, lines[:-1] + [lines[-1].split()[0] + " 999999\n"])
    with pytest.raises(BuildError, match=f"{SHARD}.idx: line {len(lines)}: the last entry ends at byte .* "
                                         "it runs past the end of the shard"):
        RecordDataset(build, "train", shuffle=False, decode=False)
    set_index(build, lines)
    shard = bytearray((build / SHARD).read_bytes())
    shard[second + 20] ^= 0x55  # in the second record's payload
    (build / SHARD).write_bytes(bytes(shard))
    for dataset_class in (RecordDataset, IterableRecordDataset):
        dataset = dataset_class(build, "train", shuffle=False, decode=False)
        with pytest.raises(BuildError, match=f"{SHARD}: byte {second}: payload CRC mismatch"):
            list(dataset)
    assert len(list(RecordDataset(build, "train", shuffle=False, decode=False, check_crc=False))) == 48
    shard[4] ^= 0x01  # the first record's length: its CRC no longer matches
    (build / SHARD).write_bytes(bytes(shard))
    with pytest.raises(BuildError, match=f"{SHARD}: byte 0: length CRC mismatch"):
        list(RecordDataset(build, "train", shuffle=False, decode=False))


def test_what_is_not_a_build_is_named_in_one_line(converted, tmp_path):
    """A missing folder, a folder whose manifest is not ours, a build without the split: each its own line."""
    missing = tmp_path / "missing"
    assert message(lambda: RecordDataset(missing)) == f"{missing}: not a folder"
    (tmp_path / "manifest.json").write_text("{not json")
    assert message(lambda: RecordDataset(tmp_path)).startswith(f"{tmp_path / 'manifest.json'}: not valid JSON (")
    assert message(lambda: IterableRecordDataset(converted, "test")) == (
        f"{converted}: holds no test shards (test-NNNNN-of-NNNNN)")


def test_the_streams_seeded_order_stays_the_same_from_release_to_release(converted):
    """The iterable reader's shards and shuffle buffer for a (seed, epoch, rank, worker) are drawn as they were:
    a change of the seeding changes every seeded run's order. The sample's train split: 4 shards of 12."""
    rank_1 = IterableRecordDataset(converted, "train", decode=False, world_size=2, rank=1, shuffle_buffer=4)
    assert rank_1.runs(epoch=1) == [(2, 24, 36), (1, 12, 24)]
    assert rank_1.runs(worker=1, workers=2, epoch=3) == [(1, 12, 24)]
    seed_7 = IterableRecordDataset(converted, "train", decode=False, seed=7)
    assert seed_7.runs(epoch=0) == [(3, 36, 48), (0, 0, 12), (2, 24, 36), (1, 12, 24)]
    rank_1.set_epoch(1)
    assert [s["filename"] for s in rank_1][:6] == ["n01484850_8.JPEG", "n01443537_10.JPEG", "n01484850_3.JPEG",
                                                   "n01491361_10.JPEG", "n01484850_4.JPEG", "n01443537_4.JPEG"]
    assert IterableRecordDataset(converted, "train").shuffle_buffer == 1000  # docs/readers.md's default


def test_the_shuffle_buffer_holds_its_size_and_gives_every_sample_once():
    """A buffer of 3 holds 3 samples before it gives one; what is left at the end comes out shuffled too."""
    consumed = []

    def samples():
        for k in range(10):
            consumed.append(k)
            yield k

    out = _shuffled(samples(), 3, random.Random(0))
    first = next(out)
    assert len(consumed) == 4  # 3 held, and the 4th takes the place of the one given
    assert [first, *out] == [1, 3, 0, 4, 2, 6, 8, 5, 7, 9]
    assert list(_shuffled(iter(range(5)), 10, random.Random(0))) == [2, 1, 0, 4, 3]  # never full


@pytest.mark.parametrize("seed, epoch", [(0, 0), (0, 3), (7, 1)])
def test_shuffled_order_is_distributed_samplers(converted, seed, epoch):
    """With one rank the map-style reader's epoch is DistributedSampler's permutation for (seed, epoch)."""
    names = [s["filename"] for s in RecordDataset(converted, "train", decode=False, shuffle=False)]
    dataset = RecordDataset(converted, "train", decode=False, seed=seed)
    dataset.set_epoch(epoch)
    sampler = torch.utils.data.DistributedSampler(names, num_replicas=1, rank=0, shuffle=True, seed=seed)
    sampler.set_epoch(epoch)
    assert [dataset[i]["filename"] for i in range(len(dataset))] == [names[i] for i in sampler]


def test_as_many_ranks_as_records_each_read_one(converted):
    """16 validation records over 16 ranks: one each; over 17, or 24 rank x workers, one line saying so."""
    got = [[s["filename"] for s in RecordDataset(converted, "validation", rank=r, world_size=16, decode=False)]
           for r in range(16)]
    assert all(len(names) == 1 for names in got) and len({n for names in got for n in names}) == 16
    assert message(lambda: RecordDataset(converted, "validation", world_size=17)) == (
        "16 record(s) for 17 ranks: each rank needs at least one; use fewer ranks or workers, or more records")
    dataset = IterableRecordDataset(converted, "validation", world_size=8)
    assert message(lambda: dataset.runs(worker=0, workers=3)) == (
        "16 record(s) for 24 rank x workers: each rank x worker needs at least one; "
        "use fewer ranks or workers, or more records")


def test_a_record_that_is_not_slims_example_or_a_shard_cut_short_is_one_line(build):
    """Found when the record is read: a record without an image, a bad header, a shard cut after the
    dataset was made; each names the shard and the record's byte, and says what to run."""
    def no_image(example):
        del example.features.feature["image/encoded"]

    edit_record(build, SHARD, 0, no_image)
    dataset = RecordDataset(build, "train", shuffle=False, decode=False)
    first, path = dataset.records.starts[1], dataset.records.paths[1]
    assert message(lambda: dataset[first]) == (
        f"{path}: byte 0: not slim's Example (KeyError: 'image/encoded'); run imagenet-build verify")
    shard = bytearray((build / SHARD).read_bytes())
    shard[4] ^= 0x01
    (build / SHARD).write_bytes(bytes(shard))
    assert message(lambda: dataset[first]) == (
        f"{path}: byte 0: length CRC mismatch (corrupt record header); run imagenet-build verify")
    last = dataset.records.starts[2] - 1
    offset = dataset.records.offset[last]
    (build / SHARD).write_bytes(bytes(shard[:-1]))
    assert message(lambda: dataset[last]) == (
        f"{path}: byte {offset}: the index points past the end of the file; run imagenet-build verify")


# ------------------------------------------------------------------ trainer-check --framework torch


def check(folder, *extra):
    return trainer_report(folder, "--framework", "torch", "--device", "cpu", "--steps", 4, *extra)


@pytest.mark.slow
def test_torch_trainer_check_passes_on_the_sample(converted):
    code, report, failed = check(converted, "--num-shards", 3)
    assert code == 0 and report["ok"] and not failed, report["checks"]
    assert {c["name"] for c in report["checks"]} == {
        "epoch", "ranks", "labels", "batches", "normalisation", "loss", "overfit"}
    assert report["device"] == "cpu" and report["framework"] == "torch" and report["records"] == 48
    assert report["images_per_second"] > 0 and report["training_images_per_second"] > 0
    assert report["overfit_loss"]["last"] < 0.5 * report["overfit_loss"]["first"]


@pytest.mark.parametrize("asked,gpu,cores,records,batch,used,note", [
    (None, False, 16, 1000, 16, 2, ""),  # the reader's defaults (the registry's): 2 on the CPU, 8 on a GPU
    (None, True, 16, 1000, 256, 4, ""),  # ... cut silently to the batches of an epoch (1000 in 256s: 4)
    (None, True, 4, 100000, 256, 4, ""),
    (8, False, 16, 1000, 16, 8, ""),
    (0, False, 16, 1000, 16, 0, ""),
    (1000, False, 2, 48, 16, 2, "--workers 1000: 2 used, one per usable core (more would only contend)"),
    (6, False, 16, 48, 16, 3, "--workers 6: 3 used, one per batch of an epoch (48 records in batches of 16; more "
                              "would sit idle)"),
    (3, False, 2, 48, 48, 1, "--workers 3: 1 used, one per batch of an epoch (48 records in batches of 48; more "
                             "would sit idle)"),
])
def test_dataloader_workers_are_bounded_by_the_cores_and_the_batches(monkeypatch, asked, gpu, cores, records,
                                                                    batch, used, note):
    """--workers 1000 started ~530 processes (10 GB, minutes to stop), and more workers than cores made PyTorch
    warn on every loader: the count is cut to the usable cores and to an epoch's batches, a note says so."""
    from imagenet_build.readback import torch_loader

    monkeypatch.setattr(torch_loader.os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert torch_loader.usable_cores() == cores
    from imagenet_build.readback.readers import with_defaults
    from imagenet_build.readback.torch_check import READER

    default = with_defaults(READER, gpu, {"workers": None})["workers"]
    assert torch_loader.worker_count(asked, default, records, batch) == (used, note)


def test_trainer_check_with_more_workers_than_cores_notes_the_cut_and_torch_says_nothing(converted):
    """trainer-check --workers 1000 as a whole process: the report's workers are the usable cores (or the
    batches), a note says why, and PyTorch's 4-line warning about more workers than cores is gone."""
    from imagenet_build.readback.torch_loader import usable_cores

    result = run_process("trainer-check", converted, "--framework", "torch", "--device", "cpu", "--steps", 2,
                         "--batch-size", 16, "--workers", 1000, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    used = min(usable_cores(), 3)  # 48 records in batches of 16
    assert report["workers"] == used and report["notes"] == [
        f"--workers 1000: {used} used, " + ("one per usable core (more would only contend)" if used < 3 else
                                            "one per batch of an epoch (48 records in batches of 16; more would "
                                            "sit idle)")]
    assert "Warning" not in result.stderr and "worker processes in total" not in result.stderr, result.stderr
    text = run_process("trainer-check", converted, "--framework", "torch", "--device", "cpu", "--steps", 2,
                       "--batch-size", 16, "--workers", 1000)
    assert text.stdout.splitlines()[-2:] == [f"note: {report['notes'][0]}", "OK: the data trains"], text.stdout


def test_torch_trainer_check_refuses_a_short_index(build):
    lines = index_lines(build)
    set_index(build, lines[:-2])
    expect_error(["trainer-check", build, "--framework", "torch", "--device", "cpu", "--steps", 2], 1,
                 f"{SHARD}.idx: line {len(lines) - 2}: the last entry ends", f"(the index of {build / SHARD})")


def test_bad_data_met_by_a_dataloader_worker_is_one_line(build):
    """PyTorch rebuilds a worker's error with the worker's traceback in its message: not shown to the user."""
    shard = bytearray((build / SHARD).read_bytes())
    shard[12 + 40] ^= 0x55  # a byte of the first record's payload: its CRC no longer matches
    (build / SHARD).write_bytes(bytes(shard))
    line = expect_error(["trainer-check", build, "--framework", "torch", "--device", "cpu", "--steps", 2,
                         "--workers", 2], 1, SHARD, "CRC")
    assert "Traceback" not in line and "worker process" not in line


def test_usage_errors_and_a_missing_extra_are_one_line(converted):
    result = run_cli("trainer-check", converted, "--framework", "torch", "--compare-tf")
    assert result.exit_code == 2 and "--compare-tf goes with --framework dali" in result.output
    result = run_cli("trainer-check", converted, "--framework", "dali-torch", "--compare-tf")
    assert result.exit_code == 2 and "--compare-tf goes with --framework dali-tf" in result.output
    result = run_cli("trainer-check", converted, "--framework", "dali-torch", "--workers", 0)
    assert result.exit_code == 2 and "--workers 0: dali-torch takes at least 1" in result.output
    hide_torch = ("import sys; sys.modules['torch'] = None; from imagenet_build.cli import main; "
                  f"sys.argv = ['imagenet-build', 'trainer-check', {str(converted)!r}, '--framework', 'torch']; main()")
    result = subprocess.run([sys.executable, "-c", hide_torch], capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: trainer-check --framework torch needs PyTorch, which is not installed: "
        "in a clone of imagenet-build, pip install -c constraints.txt '.[torch]'"]


def test_object_store_folders_are_read(converted, bucket):
    """A build in an S3 bucket (a real S3 protocol server on loopback) reads as the local folder does,
    DataLoader workers included; its indexes are held to the same rule."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(bucket)
    fs.put(str(converted), f"{root}/imagenet", recursive=True)
    url = f"{bucket}/imagenet"
    for dataset_class in (RecordDataset, IterableRecordDataset):
        local = read_all(dataset_class, converted, "train", 2, shuffle=False)
        remote = read_all(dataset_class, url, "train", 2, shuffle=False)
        assert [(r, s.replace(url, str(converted)), o, f) for r, s, o, f in remote] == local
    image = RecordDataset(url, "validation", shuffle=False)[0]["image"]
    assert torch.equal(image, RecordDataset(converted, "validation", shuffle=False)[0]["image"])
    lines = index_lines(converted)
    fs.pipe_file(f"{root}/imagenet/dali_idx/{SHARD}.idx", "".join(lines[:-1]).encode())
    with pytest.raises(BuildError, match=f"{SHARD}.idx: line {len(lines) - 1}: .*the index of {url}/{SHARD}"):
        RecordDataset(url, "train")


@pytest.mark.parametrize("lossless", [False, True], ids=["JPEG", "PNG"])
def test_trainer_check_reads_any_split_write_arrays_writes(tmp_path, lossless):
    """write_arrays writes any split name (test, ...), as JPEG or PNG: trainer-check --split reads each of them
    (PNG records stopped it: "does not decode as JPEG")."""
    from imagenet_build import write_arrays

    images = np.random.default_rng(0).integers(0, 255, (12, 32, 32, 3), dtype=np.uint8)
    write_arrays(images, np.arange(12) % 4, tmp_path, "test", 2, lossless=lossless)
    code, report, failed = check(tmp_path, "--split", "test", "--steps", 2, "--batch-size", 4, "--workers", 0)
    assert report["records"] == 12 and report["split"] == "test" and not {"epoch", "ranks", "labels"} & failed
    assert not {"batches", "normalisation"} & failed, report["checks"]


def test_a_batch_that_does_not_decode_names_the_image_given_for_it_and_the_decoders_words():
    """decode_images finds which image of a batch fails and names it by the `where` given for it, with the
    decoder's own first line (not a placeholder), so that the record can be found."""
    good = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 200, 30)).save(good, "JPEG")
    with pytest.raises(BuildError) as caught:
        decode_images([good.getvalue(), b"\xff\xd8 not a jpeg"], where=["a.JPEG at 0", "b.JPEG at 99"])
    text = str(caught.value)
    assert text.startswith("b.JPEG at 99: does not decode as JPEG (") and "(None)" not in text, text
    assert len(text) > len("b.JPEG at 99: does not decode as JPEG ()") + 5
