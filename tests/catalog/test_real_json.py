"""catalog/real_labels.py's reading of real.json: what is not there, not a file or not JSON, each in its exact
line naming the path; each wrong entry in its exact words; the build's labels of the entries (a convert with them:
tests/writer/test_convert_real_labels.py)."""

import json
import os

import pytest

from imagenet_build.catalog.classes import catalog_from_folders
from imagenet_build.catalog.real_labels import read_real_json, read_real_labels
from imagenet_build.infra.errors import InputError

EXPECTED = "expected real.json, a list of 50,000 lists"


def refused(path):
    with pytest.raises(InputError) as error:
        read_real_json(path)
    assert error.value.path == str(path)
    return error.value.problem


def test_a_real_json_that_cannot_be_read_is_one_line_naming_it(tmp_path):
    assert refused(tmp_path / "real.json") == "file not found"
    assert refused(tmp_path) == f"not a regular file (a folder): {EXPECTED}"
    (tmp_path / "notes.txt").write_text("a file")
    assert refused(tmp_path / "notes.txt" / "real.json") == "a folder of its path is a file"
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    assert refused(tmp_path / "loop") == "Too many levels of symbolic links"
    (tmp_path / "bad.json").write_text("[[0], [1")
    assert refused(tmp_path / "bad.json").startswith("not valid JSON (") and refused(tmp_path / "bad.json").endswith(
        f"): {EXPECTED}")


def test_a_real_json_far_larger_than_any_or_of_another_shape_is_refused_before_its_entries(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(65 << 20)  # sparse: real.json is ~0.4 MB, nothing near 64 MiB is one
    assert refused(big) == f"larger than 67,108,864 bytes, more than any such file holds: {EXPECTED}"
    (tmp_path / "dict.json").write_text("{}")
    assert refused(tmp_path / "dict.json") == "holds a JSON dict, expected a list of 50,000 lists (real.json)"


def real_json(path, planted):
    """A real.json of 50,000 entries, empty but those `planted` ({entry number: its value})."""
    entries = [[] for _ in range(50000)]
    for number, value in planted.items():
        entries[number - 1] = value
    path.write_text(json.dumps(entries))
    return path


LONG = "x" * 60  # its JSON is cut at 40 characters in the message


@pytest.mark.parametrize("planted,problem", [
    ({3: 7}, "entry 3 (ILSVRC2012_val_00000003.JPEG) is 7, expected a list of class indices"),
    ({4: LONG}, f"entry 4 (ILSVRC2012_val_00000004.JPEG) is {json.dumps(LONG)[:40]}, expected a list of class indices"),
    ({5: [1, LONG]}, f"entry 5 (ILSVRC2012_val_00000005.JPEG): {json.dumps(LONG)[:40]} is not a class index "
                     "(a whole number)"),
    ({6: [False]}, "entry 6 (ILSVRC2012_val_00000006.JPEG): false is not a class index (a whole number)"),
    ({7: [1.0]}, "entry 7 (ILSVRC2012_val_00000007.JPEG): 1.0 is not a class index (a whole number)"),
    ({50000: [1000]}, "entry 50000 (ILSVRC2012_val_00050000.JPEG): class index 1000 out of range 0..999 "
                      "(the sorted ILSVRC2012 synsets)"),
    ({1: [-1]}, "entry 1 (ILSVRC2012_val_00000001.JPEG): class index -1 out of range 0..999 "
                "(the sorted ILSVRC2012 synsets)"),
    ({2: [3, 5, 5, 3]}, "entry 2 (ILSVRC2012_val_00000002.JPEG): class index 3 listed twice"),
    ({2: [3, 5, 7, 5]}, "entry 2 (ILSVRC2012_val_00000002.JPEG): class index 5 listed twice"),
])
def test_a_wrong_entry_is_named_by_its_number_and_image_in_exact_words(tmp_path, planted, problem):
    assert refused(real_json(tmp_path / "real.json", planted)) == problem


def test_entries_are_read_as_tuples_of_class_indices_from_0_to_999(tmp_path):
    entries = read_real_json(real_json(tmp_path / "real.json", {1: [0, 999], 2: [17], 50000: [998, 3]}))
    assert len(entries) == 50000 and entries[:3] == [(0, 999), (17,), ()] and entries[-1] == (998, 3)


def build_classes(tmp_path, names):
    root = tmp_path / "classes"
    for name in names:
        (root / name).mkdir(parents=True)
    return catalog_from_folders(root)


def test_real_labels_go_to_the_builds_label_of_each_synset_and_count_what_it_lacks(tmp_path):
    """Index 0 is n01440764 and 1 n01443537 (the sorted synsets); a build of n01443537 and a class of its own."""
    catalog = build_classes(tmp_path, ["n01443537", "zzz"])
    table = read_real_labels(real_json(tmp_path / "real.json", {1: [0, 1], 2: [1], 4: [0]}), catalog)
    assert table.label_of[:3] == [None, 1, None] and table.label_of.count(None) == 999
    assert [table.labels(n) for n in (1, 2, 3, 4)] == [((1,), 1), ((1,), 0), ((), 0), ((), 1)]
    assert table.entries[0] == (0, 1) and len(table.entries) == 50000


def test_real_labels_for_a_build_of_none_of_imagenets_classes_are_refused(tmp_path):
    catalog = build_classes(tmp_path, ["cats", "dogs"])
    path = real_json(tmp_path / "real.json", {1: [0]})
    with pytest.raises(InputError) as error:
        read_real_labels(path, catalog)
    assert str(error.value) == (f"{path}: none of the 1000 ILSVRC2012 synsets it labels with is a class of this build "
                                f"({catalog.labels_file}): ReaL labels need ImageNet's classes")
