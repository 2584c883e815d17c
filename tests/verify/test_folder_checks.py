"""The checks across a folder (the shard set, the manifest, the labels, ImageNet's totals) on folders made here as
verify's driver sees them, each held to its exact findings: the file or record it names and what it says."""

from collections import Counter

import pytest

from imagenet_build.verify.check import Mode
from imagenet_build.verify.folder import Folder
from imagenet_build.verify.folder_checks import ManifestCheck, ShardSet
from imagenet_build.verify.label_checks import EmptyClasses, Imagenet, Labels, expected_totals
from imagenet_build.verify.record import Record
from imagenet_build.verify.shard import ShardVerifyFigures

TRAIN, VAL = "train-00000-of-00001", "validation-00000-of-00001"
FULL = Mode(quick=False, deep=False, expect_imagenet=False, manifest=True)


def figures(name, records=2, size=100, sha="", index_sha="i"):
    """A shard's figures; its sha256 (by default) and its entry's (below) are its name."""
    return ShardVerifyFigures(name, records, size, sha if sha != "" else name, index_sha)


def entry(name, split="train", records=2, size=100, index_sha="i"):
    return {"name": name, "split": split, "records": records, "bytes": size, "sha256": name, "index_sha256": index_sha}


def manifest(entries=None, **more):
    """A complete build's manifest of the entries (by default one train and one validation shard), its split
    figures and totals the entries' sums."""
    entries = [entry(TRAIN), entry(VAL, "validation")] if entries is None else entries
    splits = {}
    for e in entries:
        split = splits.setdefault(e["split"], {"shards": 0, "records": 0, "bytes": 0})
        split["shards"] += 1
        split["records"] += e["records"]
        split["bytes"] += e["bytes"]
    totals = {"records": sum(e["records"] for e in entries), "bytes": sum(e["bytes"] for e in entries)}
    return {"complete": True, "shards": entries, "splits": splits, "totals": totals, **more}


def folder(results=None, manifest=None, mode=FULL, seen=None, split_counts=None):
    results = {TRAIN: figures(TRAIN), VAL: figures(VAL)} if results is None else results
    by_split = {}
    for name in results:
        by_split.setdefault(name.split("-")[0], []).append((0, f"/b/{name}"))
    return Folder("/b", "/b/dali_idx", manifest, mode, by_split, results, seen or {}, split_counts or {}, [])


def findings(check, f):
    return [tuple(finding) for finding in check().run_folder(f)]


def messages(check, f):
    return [finding[3] for finding in findings(check, f)]


def test_a_sound_folder_passes_every_folder_check():
    f = folder(manifest=manifest(num_classes=2), split_counts={"train": Counter({1: 1, 2: 1}),
                                                              "validation": Counter({1: 1, 2: 1})})
    assert findings(ShardSet, f) == findings(ManifestCheck, f) == findings(Labels, f) == [] and f.notes == []
    assert findings(EmptyClasses, f) == []


def test_a_copy_of_a_shard_is_found_past_a_shard_without_a_digest():
    results = {"train-00000-of-00003": figures("train-00000-of-00003", sha=None),  # broken framing: no digest
               "train-00001-of-00003": figures("train-00001-of-00003", sha="a"),
               "train-00002-of-00003": figures("train-00002-of-00003", sha="a")}
    assert findings(ShardSet, folder(results)) == [("train-00002-of-00003", None, None, "the same bytes as "
                                                    "train-00001-of-00003: its records would be read twice an epoch")]


@pytest.mark.parametrize("ended, expected", [
    (dict(ended="failed", error="broken.jpg: not a JPEG"), "convert failed: broken.jpg: not a JPEG"),
    (dict(ended="failed"), "convert failed: no error recorded"),
    (dict(ended="interrupted"), "convert was interrupted (run the same command again to resume)"),
    ({}, "convert stopped without a word (killed, or it crashed); run the same command again to resume"),
])
def test_an_incomplete_build_says_how_its_convert_ended(ended, expected):
    m = manifest(**ended)
    m["complete"] = False
    m["splits"]["train"]["records"] = 1  # the figures of an incomplete build are not summed
    assert findings(ManifestCheck, folder(manifest=m)) == [("manifest.json", None, None,
                                                            f"the build is not complete: {expected}")]


@pytest.mark.parametrize("result, expected", [
    (figures(TRAIN, records=3), [(TRAIN, "3 records, manifest says 2")]),
    (figures(TRAIN, size=99), [(TRAIN, "99 bytes, manifest says 100")]),
    (figures(TRAIN, sha="b"), [(TRAIN, "sha256 differs from the manifest's")]),
    (figures(TRAIN, index_sha="j"), [(f"{TRAIN}.idx", "index sha256 differs from the manifest's")]),
    (figures(TRAIN, index_sha=None), []),  # no index, nothing to compare
])
def test_each_shard_against_its_manifest_entry(result, expected):
    f = folder({TRAIN: result, VAL: figures(VAL)}, manifest())
    assert [(file, message) for file, _, _, message in findings(ManifestCheck, f)] == expected


def test_quick_compares_counts_and_sizes_only_and_says_so():
    quick = FULL._replace(quick=True)
    f = folder({TRAIN: figures(TRAIN, sha="b", index_sha="j"), VAL: figures(VAL, records=5)}, manifest(), quick)
    assert messages(ManifestCheck, f) == ["5 records, manifest says 2"]
    assert f.notes == ["--quick: sha256 and label counts against the manifest not checked"]


def test_an_index_the_manifest_has_no_sum_for_differs():
    m = manifest()
    del m["shards"][0]["index_sha256"]
    assert messages(ManifestCheck, folder(manifest=m)) == ["index sha256 differs from the manifest's"]


def test_shards_and_entries_that_do_not_meet():
    stray = "train-00001-of-00002"
    f = folder({stray: figures(stray), TRAIN: figures(TRAIN, records=3)}, manifest())  # the stray met first
    assert findings(ManifestCheck, f) == [(stray, None, None, "shard not listed in manifest.json"),
                                          (TRAIN, None, None, "3 records, manifest says 2"),
                                          (VAL, None, None, "listed in manifest.json but missing")]


@pytest.mark.parametrize("edit, expected", [
    (lambda m: m["splits"]["train"].update(records=3), ["splits.train.records is 3, its shard entries add up to 2"]),
    (lambda m: m["splits"]["train"].update(shards=2), ["splits.train.shards is 2, its shard entries add up to 1"]),
    (lambda m: m["splits"]["validation"].update(bytes=1), ["splits.validation.bytes is 1, its shard entries add up "
                                                           "to 100"]),
    (lambda m: m["totals"].update(records=5), ["totals.records is 5, its shard entries add up to 4"]),
    (lambda m: m["totals"].update(shards=5), []),  # totals count no shards
    (lambda m: m["splits"]["train"].pop("bytes"), []),  # a figure not there is not compared
    (lambda m: m["splits"].pop("validation"), ["splits.validation: missing, yet shards of it are listed"]),
    (lambda m: (m["splits"].pop("train"), m["totals"].update(bytes=1)),
     ["splits.train: missing, yet shards of it are listed", "totals.bytes is 1, its shard entries add up to 200"]),
    (lambda m: m.pop("totals"), []),  # an empty totals is no wrong sum
    (lambda m: m["splits"].update(test={"shards": 0, "records": 0, "bytes": 0}), []),
])
def test_the_manifests_figures_are_the_sums_of_its_entries(edit, expected):
    m = manifest()
    edit(m)
    assert messages(ManifestCheck, folder(manifest=m)) == expected


def test_an_entry_listed_twice_or_under_another_split():
    m = manifest([entry(TRAIN), entry(TRAIN), entry(VAL, "train"), entry("stray.bin", "validation")])
    results = {TRAIN: figures(TRAIN), VAL: figures(VAL), "stray.bin": figures("stray.bin")}
    assert findings(ManifestCheck, folder(results, m)) == [
        (TRAIN, None, None, "listed 2 times in manifest.json"),
        (VAL, None, None, "listed under split 'train'"),
        ("stray.bin", None, None, "listed under split 'validation'")]


def test_manifest_check_runs_where_there_is_a_manifest():
    assert ManifestCheck.runs(FULL) and not ManifestCheck.runs(FULL._replace(manifest=False))


# ---------------------------------------------------------------------------------------------------- labels

def label_record(label):
    from helpers import encode_example

    payload = encode_example(encoded=b"\xff\xd8", filename="a.jpg", height=1, width=1, label=label, synset="n1",
                             text="one")
    return Record(0, 0, payload, True)


def test_a_record_label_below_1_is_named():
    assert list(Labels().run_record(label_record(0))) == ["label 0: labels are 1-based (0 is background)"]
    assert list(Labels().run_record(label_record(1))) == []
    assert list(Labels().run_record(Record(0, 0, b"", False))) == []


def place(record, name=TRAIN):
    return (name, record, 100 * record)


def label_folder(seen, synsets=("n1", "n2", "n3"), num_classes=3, mode=FULL, counts=None, has_manifest=True):
    m = manifest()
    m.update(num_classes=num_classes, synsets=list(synsets))
    if counts is not None:
        m["splits"]["train"]["label_counts"] = counts
    return folder(manifest=m if has_manifest else None, mode=mode, seen=seen,
                  split_counts={"train": Counter({label: n for (label, _), (n, _) in seen.items()})})


def test_labels_within_the_classes_and_their_synsets_pass():
    seen = {(1, "n1"): (4, place(0)), (3, "n3"): (2, place(1))}
    assert findings(Labels, label_folder(seen, counts={"1": 4, "3": 2})) == []


def test_a_label_above_the_classes_names_its_first_record():
    seen = {(4, "n4"): (2, place(5)), (3, "n3"): (1, place(1))}
    (finding,) = [f for f in findings(Labels, label_folder(seen)) if "above" in f[3]]
    assert finding == (*place(5), "label 4 above the 3 classes")


def test_the_class_count_is_imagenets_with_expect_imagenet_and_no_manifest():
    seen = {(1000, "n1000"): (1, place(2)), (1001, "n1001"): (1, place(3))}
    f = label_folder(seen, has_manifest=False, mode=FULL._replace(expect_imagenet=True, manifest=False))
    assert messages(Labels, f) == ["label 1001 above the 1000 classes"] and f.notes == []
    f = label_folder(seen, has_manifest=False, mode=FULL._replace(manifest=False))
    assert messages(Labels, f) == []
    assert f.notes == ["no manifest: labels checked to be >= 1 and consistent, not against a class count"]


def test_a_label_and_synset_that_disagree_name_the_rarest_pair_and_the_labels_file():
    seen = {(1, "n1"): (5, place(0)), (1, "n2"): (1, place(7)), (2, "n1"): (1, place(3)),
            (3, "n9"): (2, place(4))}
    assert findings(Labels, label_folder(seen)) == [
        (*place(7), "label 1 carries several synsets: ['n1', 'n2']"),
        (*place(3), "label 2 carries n1, the labels file says n2"),
        (*place(4), "label 3 carries n9, the labels file says n3"),
        (*place(3), "synset n1 under several labels: [1, 2]")]


def test_label_1_is_looked_up_in_the_labels_file_and_label_0_is_not():
    seen = {(1, "n7"): (1, place(2)), (0, "n2"): (1, place(3))}
    assert findings(Labels, label_folder(seen)) == [(*place(2), "label 1 carries n7, the labels file says n1")]


def test_of_two_pairs_as_common_the_one_met_later_is_named():
    seen = {(1, "n1"): (2, place(1)), (1, "n2"): (2, place(6))}
    assert findings(Labels, label_folder(seen))[0] == (*place(6), "label 1 carries several synsets: ['n1', 'n2']")
    seen = {(1, "n1"): (2, place(6)), (1, "n2"): (2, place(1))}
    assert findings(Labels, label_folder(seen))[0] == (*place(6), "label 1 carries several synsets: ['n1', 'n2']")


def test_labels_beyond_the_labels_file_are_not_looked_up():
    seen = {(4, "n4"): (1, place(0))}
    assert messages(Labels, label_folder(seen, num_classes=4)) == []


def test_label_counts_that_differ_from_the_manifest_name_the_labels():
    seen = {(label, f"n{label}"): (1, place(label)) for label in range(1, 14)}
    counts = {str(label): 1 for label in range(2, 13)}
    counts["5"] = 2
    f = label_folder(seen, synsets=[f"n{k}" for k in range(1, 14)], num_classes=13, counts=counts)
    assert findings(Labels, f) == [("train", None, None, "label counts differ from the manifest for labels "
                                                         "1, 5, 13")]
    f.split_counts = {"validation": Counter({1: 1}), **f.split_counts}  # a split the manifest counts no labels of
    assert messages(Labels, f) == ["label counts differ from the manifest for labels 1, 5, 13"]
    counts = {str(label): 2 for label in range(1, 14)}
    f = label_folder(seen, synsets=[f"n{k}" for k in range(1, 14)], num_classes=13, counts=counts)
    assert messages(Labels, f) == ["label counts differ from the manifest for labels 1, 2, 3, 4, 5, 6, 7, 8, 9, 10"]


# ---------------------------------------------------------------------------------------------------- imagenet

IMAGENET = FULL._replace(expect_imagenet=True)


def imagenet_folder(train, val, classes, mode=IMAGENET, **more):
    results = {TRAIN: figures(TRAIN, records=train), VAL: figures(VAL, records=val)}
    seen = {(label, f"n{label}"): (1, place(0)) for label in range(1, classes + 1)}
    m = manifest([entry(TRAIN, records=train), entry(VAL, "validation", records=val)], num_classes=classes, **more)
    return folder(results, m, mode, seen)


def test_imagenet_totals_and_classes():
    assert findings(Imagenet, imagenet_folder(1281167, 50000, 1000)) == []
    assert findings(Imagenet, imagenet_folder(1281166, 50001, 999)) == [
        ("train", None, None, "1281166 records, ILSVRC2012 has 1,281,167"),
        ("validation", None, None, "50001 records, ILSVRC2012 has 50,000"),
        ("classes", None, None, "999 classes, ILSVRC2012 has 1,000")]
    assert Imagenet.runs(IMAGENET) and not Imagenet.runs(FULL)


def test_imagenet_counts_the_classes_the_records_hold_and_the_totals_of_the_builds_subset():
    f = imagenet_folder(12811, 50000, 999)
    f.manifest["num_classes"] = 1000  # the manifest's count is not the records'
    f.manifest["options"] = {"subset": "imagenet-1pct"}
    assert messages(Imagenet, f) == ["999 classes, ILSVRC2012 --subset imagenet-1pct has 1,000"]


def test_imagenet_with_quick_counts_the_manifests_classes_or_says_it_cannot():
    quick = IMAGENET._replace(quick=True)
    f = imagenet_folder(1281167, 50000, 1000, quick)
    f.manifest["num_classes"] = 998
    assert messages(Imagenet, f) == ["998 classes, ILSVRC2012 has 1,000"]
    f.manifest = None
    assert messages(Imagenet, f) == [] and f.notes == [
        "--expect-imagenet: classes not counted (--quick reads no labels, and there is no manifest)"]


def test_a_split_with_no_shards_is_counted_as_0():
    f = imagenet_folder(1281167, 50000, 1000)
    del f.by_split["validation"]
    assert messages(Imagenet, f) == ["0 records, ILSVRC2012 has 50,000"]


def test_expected_totals_of_a_copy_and_a_subset():
    from imagenet_build.sources.blurred import NAME, TOTALS

    source = {"inputs": {"source": {"layout": NAME}}}
    assert expected_totals(source) == (TOTALS, NAME)
    assert expected_totals({**source, "options": {"subset": "imagenet-1pct"}}) == (
        {**TOTALS, "train": 12811}, f"{NAME} --subset imagenet-1pct")
    assert expected_totals({"options": {"subset": "other"}}) == ({"train": 1281167, "validation": 50000},
                                                                  "ILSVRC2012")


def counted_folder(counts, num_classes=7, mode=FULL, source=None):
    """A folder whose train records hold `counts` ({label: records}), the manifest's label counts the same."""
    m = manifest(num_classes=num_classes, synsets=[f"n{k}" for k in range(1, num_classes + 1)])
    m["splits"]["train"]["label_counts"] = {str(k): v for k, v in counts.items()}
    m["splits"]["validation"]["label_counts"] = {str(k): 1 for k in range(1, num_classes + 1)}
    if source is not None:
        m["inputs"] = {"source": source}
    split_counts = {"train": Counter(counts), "validation": Counter(range(1, num_classes + 1))}
    return folder(manifest=m, mode=mode, split_counts={} if mode.quick else split_counts)


def test_a_class_with_no_records_in_a_split_is_a_warning_naming_it():
    """verify passed a write_arrays build where a class had no records without a word."""
    assert EmptyClasses.warning and EmptyClasses.counted == "split(s)"
    assert findings(EmptyClasses, counted_folder({k: 3 for k in range(1, 8)})) == []
    for mode in (FULL, FULL._replace(quick=True)):  # --quick reads no labels: the manifest's counts
        f = counted_folder({1: 3, 2: 4, 4: 1, 6: 2}, mode=mode)
        assert findings(EmptyClasses, f) == [
            ("train", None, None, "3 of 7 classes have no train records: label 3 (n3), label 5 (n5), label 7 (n7)")]
    f = counted_folder({1: 1})
    assert messages(EmptyClasses, f) == [
        "6 of 7 classes have no train records: label 2 (n2), label 3 (n3), label 4 (n4), label 5 (n5), "
        "label 6 (n6) ..."]


def test_a_copy_holding_some_classes_is_held_to_those_and_no_manifest_to_none():
    """ImageNet-A's build holds 200 of its labels file's classes (inputs.source.labels): those are its classes."""
    f = counted_folder({2: 5, 4: 5}, source={"layout": "ImageNet-A", "labels": [2, 4]})
    assert findings(EmptyClasses, f) == []
    f = counted_folder({2: 5}, source={"layout": "ImageNet-A", "labels": [2, 4]})
    assert messages(EmptyClasses, f) == ["1 of 2 classes have no train records: label 4 (n4)"]
    f = counted_folder({1: 1})
    f.manifest = None
    assert findings(EmptyClasses, f) == []
    f = counted_folder({1: 1}, mode=FULL._replace(quick=True))
    del f.manifest["splits"]["train"]["label_counts"]  # an incomplete build's: not known
    assert findings(EmptyClasses, f) == []


def test_a_manifest_edited_by_hand_gives_no_traceback():
    """Labels a copy holds that are not whole numbers mean the manifest's classes; a count under a name that is
    no label (which int() refuses, "²") is left to the labels check."""
    f = counted_folder({k: 1 for k in range(1, 8)}, source={"labels": [[2], "x"]})
    assert findings(EmptyClasses, f) == []
    f = counted_folder({k: 1 for k in range(1, 7)}, mode=FULL._replace(quick=True))
    f.manifest["splits"]["train"]["label_counts"]["\u00b2"] = 1
    assert messages(EmptyClasses, f) == ["1 of 7 classes have no train records: label 7 (n7)"]
