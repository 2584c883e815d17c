"""The plan against slim's own algorithm, recomputed here with numpy and the global random."""

import random

import numpy as np
import pytest

from imagenet_build import plan
from imagenet_build.infra.errors import BuildError, UsageError


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
    with pytest.raises(BuildError, match="multiple of --layout-threads"):
        plan.shard_ranges(100, 10, 3)


def test_plan_refuses_empty_shards(sample_dir):
    from imagenet_build.catalog.classes import load_catalog
    from imagenet_build.sources import scan_class_folders

    cat = load_catalog(sample_dir / "labels.txt")
    split = scan_class_folders("train", sample_dir / "train", cat, "fail")
    with pytest.raises(BuildError, match="would be empty"):
        plan.SplitPlan(split, cat, {}, 64, 8)


@pytest.mark.slow
def test_plan_of_full_imagenet_size_places_every_entry_once():
    """1,281,167 synthetic entries planned into 1024 shards, every entry exactly once."""
    from imagenet_build.catalog.classes import load_catalog
    from imagenet_build.model import SplitInput
    from imagenet_build.sources.folders import FolderReader

    cat = load_catalog()
    split = SplitInput("train", "/", "folders", FolderReader)
    for i in range(1281167):
        split.add(f"{cat.synsets[i % 1000]}/{i}.JPEG", i % 1000 + 1)
    specs = list(plan.SplitPlan(split, cat, {}, 1024, 8))
    assert [s.name for s in specs] == [f"train-{k:05d}-of-01024" for k in range(1024)]
    assert sum(len(s.entries) for s in specs) == 1281167
    assert len({e.relpath for s in specs for e in s.entries}) == 1281167
    assert all(e.label == cat.label_of[e.relpath.split("/")[0]] for e in specs[5].entries)
