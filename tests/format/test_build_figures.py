"""format/build_figures.py: a build's figures computed once from its shard entries (the totals, each split's
figures and label counts, the resized count) and the one assembler of a manifest, convert's and write_arrays'."""

from imagenet_build.format.build_figures import (
    assemble,
    figures_of,
    label_counts,
    manifest_base,
    recorded_label_counts,
    resized_count,
    split_figures,
    split_totals,
    totals,
)
from imagenet_build.format.manifest import FORMAT, SHARD_INPUTS


def entry(split, name, records, size, skipped=0, reencoded=(), **more):
    return {"split": split, "name": name, "records": records, "bytes": size,
            "skipped": [{"file": f"s{k}", "label": 1, "reason": "broken"} for k in range(skipped)],
            "reencoded": list(reencoded), **more}


CMYK = {"file": "a.JPEG", "reencoded": True, "note": "CMYK"}
NOTED = {"file": "b.JPEG", "reencoded": False, "note": "EXIF orientation"}  # noted, stored as it is
SHARDS = [entry("train", "train-00000-of-00002", 3, 300, skipped=2, reencoded=[CMYK, NOTED]),
          entry("train", "train-00001-of-00002", 4, 410, reencoded=[CMYK, CMYK]),
          entry("validation", "validation-00000-of-00001", 5, 520, skipped=1)]


def test_the_figures_of_shards_count_them_and_sum_their_records_and_bytes():
    assert figures_of(SHARDS) == {"shards": 3, "records": 12, "bytes": 1230}
    assert figures_of(iter(SHARDS[:2])) == {"shards": 2, "records": 7, "bytes": 710}  # any iterable, read once
    assert figures_of([]) == {"shards": 0, "records": 0, "bytes": 0}


def test_the_totals_count_left_out_and_reencoded_images_and_only_a_resized_builds_resized_ones():
    assert totals(SHARDS) == {"records": 12, "bytes": 1230, "skipped": 3, "reencoded": 3}
    resized = [dict(SHARDS[0], resized=2), dict(SHARDS[1], resized=0), SHARDS[2]]  # one entry without the count
    assert totals(resized) == {"records": 12, "bytes": 1230, "skipped": 3, "reencoded": 3, "resized": 2}
    assert resized_count(resized) == 2 and resized_count([SHARDS[2]]) == 0


def test_label_counts_are_recorded_by_label_without_empty_ones_and_read_back():
    assert list(label_counts({10: 2, 2: 5, 7: 0}).items()) == [("2", 5), ("10", 2)]  # sorted as numbers
    manifest = {"splits": {"train": {"label_counts": {"2": 5, "10": 2, "²": 1}}, "validation": {}}}
    assert recorded_label_counts(manifest, "train") == {2: 5, 10: 2}  # a name that is no label left out
    assert recorded_label_counts(manifest, "validation") is None
    assert recorded_label_counts(manifest, "test") is None and recorded_label_counts({}, "train") is None


def test_a_splits_figures_are_its_shards_done_and_its_inputs_left_out():
    done = split_figures(4, SHARDS[:2], [("x.JPEG", "empty"), ("y.JPEG", "not an image")], None)
    assert done == {"shards": 4, "shards_done": 2, "records": 7, "bytes": 710,
                    "left_out": [{"file": "x.JPEG", "reason": "empty"}, {"file": "y.JPEG", "reason": "not an image"}]}
    finished = split_figures(2, SHARDS[:2], [], {3: 4, 1: 3, 2: 0})
    assert finished["left_out"] == [] and list(finished["label_counts"].items()) == [("1", 3), ("3", 4)]


def test_a_splits_totals_are_its_own_shards_and_its_listings_left_out():
    manifest = {"shards": SHARDS, "splits": {"train": {"left_out": [{"file": "x", "reason": "r"}] * 2},
                                             "validation": {}}}
    assert split_totals(manifest, "train") == {"records": 7, "bytes": 710, "skipped": 2, "reencoded": 3,
                                               "left_out": 2}
    assert split_totals(manifest, "validation") == {"records": 5, "bytes": 520, "skipped": 1, "reencoded": 0,
                                                    "left_out": 0}
    assert split_totals(manifest, "test")["left_out"] == 0  # a split the manifest does not list


def test_the_one_assembler_builds_the_manifest_from_its_base_its_splits_and_its_shards():
    base = manifest_base({"train_shards": 2}, {"source": {"kind": "folders"}}, ["n01", "n02", "n03"])
    assert base == {"format": FORMAT, "options": {"train_shards": 2}, "inputs": {"source": {"kind": "folders"}},
                    "num_classes": 3, "synsets": ["n01", "n02", "n03"]}
    splits = {"train": split_figures(2, SHARDS[:2], [], {1: 7})}
    manifest = assemble(base, splits, SHARDS[:2], complete=True, input_states={"train-00000-of-00002": "s0"})
    assert manifest == {**base, "complete": True, "splits": splits, "shards": SHARDS[:2],
                        "inputs": {"source": {"kind": "folders"}, SHARD_INPUTS: {"train-00000-of-00002": "s0"}},
                        "totals": totals(SHARDS[:2])}
    assert SHARD_INPUTS not in base["inputs"]  # the base is not changed
    partial = assemble(base, splits, SHARDS[:1], complete=False)
    assert partial["complete"] is False and partial["inputs"] == base["inputs"] and partial["shards"] == SHARDS[:1]
