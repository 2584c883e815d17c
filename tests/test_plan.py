"""The plan against slim's own algorithm, recomputed here with numpy and the global random."""

import random
from array import array

import numpy as np
import pytest

from imagenet_build import plan
from imagenet_build.catalog.classes import Catalog, load_catalog
from imagenet_build.infra.errors import BuildError, UsageError
from imagenet_build.model import ImageEntry, ShardSpec, SplitInput
from imagenet_build.sources.folders import FolderReader
from imagenet_build.sources.zips import ZipReader


def slim_layout(num_items, num_shards, num_threads):
    """slim's _process_image_files / _process_image_files_batch, reduced to index ranges."""
    spacing = np.linspace(0, num_items, num_threads + 1).astype(int)
    ranges = [[spacing[i], spacing[i + 1]] for i in range(len(spacing) - 1)]
    per_thread = int(num_shards / num_threads)
    shards = []
    for thread in range(num_threads):
        cuts = np.linspace(ranges[thread][0], ranges[thread][1], per_thread + 1).astype(int)
        shards.extend((int(cuts[s]), int(cuts[s + 1])) for s in range(per_thread))
    return shards


@pytest.mark.parametrize(
    "num_items,num_shards,threads",
    [
        (1281167, 1024, 8),
        (50000, 128, 8),
        (1281167, 1024, 16),
        (1000, 10, 5),
        (37, 6, 3),
        (999983, 64, 64),
        (12, 4, 2),
        (48, 48, 4),  # one image per shard: every step exactly 1
        (88, 88, 4),  # 22 a thread: where i / 22 * 22 floors to one less
        (16, 16, 16),  # one image per layout thread too
        (1000, 1000, 8),
        (7, 1, 1),  # one shard, one layout thread: the smallest counts allowed
        (7, 3, 1),
        (7, 2, 2),
    ],
)
def test_layout_matches_slim(num_items, num_shards, threads):
    assert plan.shard_ranges(num_items, num_shards, threads) == slim_layout(num_items, num_shards, threads)


def test_linspace_matches_numpy_over_many_values():
    rng = random.Random(7)
    for _ in range(2000):
        start = rng.randrange(0, 2_000_000)
        stop = start + rng.randrange(0, 2_000_000)
        num = rng.randrange(1, 200)
        assert plan.linspace_int(start, stop, num) == np.linspace(start, stop, num).astype(int).tolist()


def test_linspace_matches_numpy_at_a_step_of_exactly_one():
    """One image per shard: numpy multiplies by the step 1.0 (i / div * delta, its branch for a step of 0,
    floors to one less for 43 of the first 100 counts); a step of 0 (an empty range) too."""
    for count in range(1, 300):
        for start in (0, 1, 1000, 1281167):
            stop = start + count
            expected = np.linspace(start, stop, count + 1).astype(int).tolist()
            assert plan.linspace_int(start, stop, count + 1) == expected == list(range(start, stop + 1))
            assert plan.linspace_int(start, start, count) == np.linspace(start, start, count).astype(int).tolist()


@pytest.mark.parametrize("shards,threads", [(0, 1), (0, 0), (8, 0), (8, -1), (-8, 1)])
def test_shard_ranges_refuse_counts_below_one(shards, threads):
    with pytest.raises(UsageError) as raised:
        plan.shard_ranges(100, shards, threads)
    assert str(raised.value) == "shard and layout-thread counts must be at least 1"


def test_shuffle_is_slims_global_random_with_seed_12345():
    expected = list(range(5000))
    random.seed(12345)
    random.shuffle(expected)
    assert list(plan.shuffled_order(5000)) == expected


def test_shard_names():
    assert plan.shard_name("train", 0, 1024) == "train-00000-of-01024"
    assert plan.shard_name("validation", 127, 128) == "validation-00127-of-00128"


def test_shards_must_be_a_multiple_of_layout_threads():
    with pytest.raises(UsageError) as raised:
        plan.shard_ranges(100, 10, 3)
    assert str(raised.value) == (
        "10 shards cannot be split over 3 layout threads: "
        "the shard count must be a multiple of --layout-threads (slim's rule)"
    )


def test_plan_refuses_empty_shards(sample_dir):
    from imagenet_build.sources import scan_class_folders

    cat = load_catalog(sample_dir / "labels.txt")
    split = scan_class_folders("train", sample_dir / "train", cat, "fail")
    with pytest.raises(BuildError, match="would be empty"):
        plan.SplitPlan(split, cat, {}, 64, 8)


def test_plan_error_counts_the_empty_shards():
    """12 images over 16 shards: slim's cuts leave 4 shards empty, and the message says how many."""
    split = SplitInput("validation", "/data", "flat", FolderReader)
    for i in range(12):
        split.add(f"n{i}.JPEG", 1)
    assert sum(1 for b, e in slim_layout(12, 16, 1) if b == e) == 4
    with pytest.raises(BuildError) as raised:
        plan.SplitPlan(split, small_catalog(), None, 16, 1)
    assert str(raised.value) == (
        "validation: 12 images cannot fill 16 shards (4 would be empty); use fewer --validation-shards"
    )


def small_catalog():
    synsets = ("n01", "n02", "n03")
    return Catalog(synsets=synsets, texts={"n01": "one", "n02": "two", "n03": "three"},
                   label_of={s: i for i, s in enumerate(synsets, start=1)}, labels_file="l", metadata_file="m")


def packed(*boxes):
    return array("d", [v for box in boxes for v in box]).tobytes()


BOXES = {"img3.JPEG": packed((0.1, 0.2, 0.3, 0.4)), "img8.JPEG": packed((0.0, 0.0, 1.0, 1.0), (0.25, 0.5, 0.75, 1.0))}


def expected_specs(split, cat, boxes, num_shards, threads):
    """Each shard's entries as slim lays them out: the global random's shuffle, cut by slim's ranges."""
    order = list(range(len(split)))
    random.seed(12345)
    random.shuffle(order)
    specs = []
    for k, (begin, end) in enumerate(slim_layout(len(split), num_shards, threads)):
        entries = []
        for i in order[begin:end]:
            name = split.relpaths[i].rsplit("/", 1)[-1]
            box = tuple(tuple(array("d", boxes[name])[j : j + 4]) for j in range(0, len(boxes[name]) // 8, 4)) \
                if boxes and name in boxes else ()
            info = split.member_infos[i] if split.member_infos else 0
            where = (split.offsets[i], split.sizes[i], info) if split.offsets else ()
            entries.append(ImageEntry(split.relpaths[i], split.labels[i], box, *where))
        specs.append(ShardSpec(
            split=split.split, index=k, num_shards=num_shards, source_root=split.root, reader=split.reader,
            entries=tuple(entries), classes={e.label: (cat.synset(e.label), cat.text(e.label)) for e in entries},
            source_stamp=split.stamp, imagenet=cat.is_imagenet, member_prefix=split.member_prefix,
        ))
    return specs


def test_plan_specs_of_a_folder_are_slims_layout_with_boxes_and_classes():
    split = SplitInput("train", "/data/train", "folders", FolderReader)
    for i in range(30):
        split.add(f"n0{i % 3 + 1}/img{i}.JPEG", i % 3 + 1)
    cat = small_catalog()
    planned = plan.SplitPlan(split, cat, BOXES, 6, 2)
    assert planned.split == "train" and planned.num_shards == 6 and planned.input is split
    assert planned.names == [f"train-{k:05d}-of-00006" for k in range(6)]
    assert [planned.size(k) for k in range(6)] == [e - b for b, e in slim_layout(30, 6, 2)]
    expected = expected_specs(split, cat, BOXES, 6, 2)
    assert [planned.spec(k) for k in range(6)] == expected
    assert list(planned) == expected
    with_boxes = {e.relpath: e.boxes for s in expected for e in s.entries if e.boxes}
    assert with_boxes == {"n01/img3.JPEG": ((0.1, 0.2, 0.3, 0.4),),
                          "n03/img8.JPEG": ((0.0, 0.0, 1.0, 1.0), (0.25, 0.5, 0.75, 1.0))}
    assert not expected[0].imagenet and expected[0].source_stamp == "" and expected[0].member_prefix == ""


@pytest.mark.parametrize("boxes", [None, {}])
@pytest.mark.parametrize("member_infos", [False, True])
def test_plan_specs_of_an_archive_carry_each_images_byte_range(boxes, member_infos):
    """An archive's entries keep their offset, size and (a zip's) member info; no box file: no boxes."""
    split = SplitInput("validation", "/data/val.zip", "flat", ZipReader, stamp="123 456",
                       member_prefix="val/")
    for i in range(10):
        split.add(f"img{i}.JPEG", 3 - i % 3, (1000 + 10 * i, 7 + i) + ((90 + i,) if member_infos else ()))
    cat = load_catalog()
    planned = plan.SplitPlan(split, cat, boxes, 2, 1)
    expected = expected_specs(split, cat, None, 2, 1)
    assert list(planned) == expected
    entries = [e for s in expected for e in s.entries]
    assert sorted((e.offset, e.size, e.member_info) for e in entries) == [
        (1000 + 10 * i, 7 + i, 90 + i if member_infos else 0) for i in range(10)]
    assert expected[1].imagenet and expected[1].source_stamp == "123 456" and expected[1].member_prefix == "val/"
    assert expected[1].classes == {label: (cat.synsets[label - 1], cat.texts[cat.synsets[label - 1]])
                                   for label in {e.label for e in expected[1].entries}}


@pytest.mark.slow
def test_plan_of_full_imagenet_size_places_every_entry_once():
    """1,281,167 synthetic entries planned into 1024 shards, every entry exactly once."""
    cat = load_catalog()
    split = SplitInput("train", "/", "folders", FolderReader)
    for i in range(1281167):
        split.add(f"{cat.synsets[i % 1000]}/{i}.JPEG", i % 1000 + 1)
    specs = list(plan.SplitPlan(split, cat, {}, 1024, 8))
    assert [s.name for s in specs] == [f"train-{k:05d}-of-01024" for k in range(1024)]
    assert sum(len(s.entries) for s in specs) == 1281167
    assert len({e.relpath for s in specs for e in s.entries}) == 1281167
    assert all(e.label == cat.label_of[e.relpath.split("/")[0]] for e in specs[5].entries)
