"""TFDS's two files without TensorFlow: written with every complete manifest and only then, the `tfds` verb that adds
them to an older build (and refuses in one line what is no complete build), and verify's `tfds` check naming
each way they can disagree with the shards."""

import json
import os

import pytest

from conftest import run_cli, sample_args, tree_digest
from helpers import expect_error
from imagenet_build.format import manifest as manifest_mod
from imagenet_build.format.tfds_metadata import differences, label_names
from imagenet_build.infra import storage, write_door

TFDS = ("features.json", "dataset_info.json")


def documents(folder):
    return {name: json.loads((folder / name).read_text()) for name in TFDS}


def test_convert_writes_both_just_before_the_manifest_that_says_complete_and_never_beside_another(
        sample_dir, tmp_path, monkeypatch):
    seen = []  # (file written, whether features.json was there, the manifest's "complete")
    write = write_door.write_bytes

    def spy(path, data, **kwargs):
        name = storage.basename(path)
        complete = json.loads(data)["complete"] if name == "manifest.json" else None
        seen.append((name, os.path.exists(tmp_path / "out" / "features.json"), complete))
        write(path, data, **kwargs)

    monkeypatch.setattr(write_door, "write_bytes", spy)
    result = run_cli(*sample_args(sample_dir, tmp_path / "out", "--workers", 1))
    assert result.exit_code == 0, result.output
    ours = [entry for entry in seen if entry[0] in (*TFDS, "manifest.json")]
    assert [name for name, _, _ in ours[-3:]] == [*TFDS, "manifest.json"]
    assert [name for name, _, _ in ours].count("features.json") == 1
    assert all(there == complete for name, there, complete in ours if name == "manifest.json")
    assert len([1 for name, _, complete in ours if name == "manifest.json" and not complete]) >= 1


def test_a_manifest_that_is_not_complete_takes_them_away_and_a_complete_one_brings_them_back(build):
    before = {name: (build / name).read_bytes() for name in TFDS}
    manifest = manifest_mod.read_manifest(build)
    manifest_mod.write_manifest(build, dict(manifest, complete=False, ended="interrupted"))
    assert not any((build / name).exists() for name in TFDS)
    manifest_mod.write_manifest(build, manifest)
    assert {name: (build / name).read_bytes() for name in TFDS} == before


def test_what_they_say_of_a_build(converted):
    info, features = documents(converted)["dataset_info.json"], documents(converted)["features.json"]
    manifest = json.loads((converted / "manifest.json").read_text())
    assert info["splits"] == [
        {"name": split, "filepathTemplate": "{SPLIT}-{SHARD_X_OF_Y}", "numBytes": str(figures["bytes"]),
         "shardLengths": [str(e["records"]) for e in manifest["shards"] if e["split"] == split]}
        for split, figures in sorted(manifest["splits"].items())]
    assert info["supervisedKeys"] == {"input": "image/encoded", "output": "image/class/label"}
    keys = features["featuresDict"]["features"]
    assert len(keys) == 15 and "image/class/real_labels" not in keys
    label = json.loads(keys["image/class/label"]["jsonFeature"]["json"])
    assert label["names"] == ["background", *manifest["synsets"]]
    assert manifest["imagenet_build_version"] == __import__("imagenet_build").__version__


def test_label_zero_gets_a_name_no_class_has():
    assert label_names(["cat"]) == ["background", "cat"]
    assert label_names(["background", "_background"]) == ["__background", "background", "_background"]


def test_the_verb_writes_only_the_two_files_the_bytes_convert_writes(build):
    written = {name: (build / name).read_bytes() for name in TFDS}
    for name in TFDS:
        os.remove(build / name)
    before = tree_digest(build)
    result = run_cli("tfds", build, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["written"] == list(TFDS) and report["splits"] == {
        "train": {"shards": 4, "records": 48}, "validation": {"shards": 2, "records": 16}}
    after = tree_digest(build)
    assert {k: v for k, v in after.items() if k not in TFDS} == before
    assert {name: (build / name).read_bytes() for name in TFDS} == written


def test_the_verb_refuses_what_is_no_complete_build_in_one_line(build, tmp_path, sample_dir):
    before = {name: (build / name).read_bytes() for name in TFDS}
    expect_error(["tfds", tmp_path / "nowhere"], 1, "nowhere: not a folder")
    (tmp_path / "empty").mkdir()
    expect_error(["tfds", tmp_path / "empty"], 1, "empty: holds no manifest.json")
    resized = tmp_path / "resized"
    assert run_cli(*sample_args(sample_dir, resized, "--resize", "shorter:32", "--workers", 1)).exit_code == 0
    expect_error(["tfds", resized], 1, "holds no manifest.json", "shorter-32/ hold builds: name one of them")
    manifest = json.loads((build / "manifest.json").read_text())
    os.remove(build / "validation-00001-of-00002")
    expect_error(["tfds", build], 1, "validation-00001-of-00002: listed in manifest.json but missing")
    (build / "manifest.json").write_text(json.dumps(dict(manifest, complete=False)))
    expect_error(["tfds", build], 1, "manifest.json: the build is not complete")
    (build / "manifest.json").write_text("[" * 100)
    expect_error(["tfds", build], 1, "manifest.json: not valid JSON")
    assert {name: (build / name).read_bytes() for name in TFDS} == before  # refused before writing anything


def tfds_findings(folder, *args):
    result = run_cli("verify", folder, "--quick", "--json", *args)
    report = json.loads(result.stdout)
    return result.exit_code, [(p["file"], p["message"]) for p in report["problems"] if p["check"] == "tfds"], report


def edit(folder, name, change):
    document = json.loads((folder / name).read_text())
    change(document)
    (folder / name).write_text(json.dumps(document))


def set_name(document, index, name):
    label = document["featuresDict"]["features"]["image/class/label"]["jsonFeature"]
    names = json.loads(label["json"])["names"]
    names[index] = name
    label["json"] = json.dumps({"names": names})


DAMAGE = {
    "a shard length": ("dataset_info.json", lambda d: d["splits"][0]["shardLengths"].__setitem__(3, "11"),
                       'splits.train.shardLengths[3]: "11", the build\'s: "12"'),
    "a split's bytes": ("dataset_info.json", lambda d: d["splits"][1].__setitem__("numBytes", "7"),
                        'splits.validation.numBytes: "7"'),
    "a split missing": ("dataset_info.json", lambda d: d["splits"].pop(), "splits.validation: missing"),
    "a split too many": ("dataset_info.json", lambda d: d["splits"].append(dict(d["splits"][0], name="test")),
                         "splits.test: not in the build's"),
    "another file template": ("dataset_info.json",
                              lambda d: d["splits"][0].__setitem__("filepathTemplate", "{DATASET}-{SPLIT}"),
                              'splits.train.filepathTemplate: "{DATASET}-{SPLIT}"'),
    "another label name": ("features.json", lambda d: set_name(d, 2, "n99999999"),
                           'image/class/label.names[2]: "n99999999", the build\'s: "n01443537"'),
    "a feature missing": ("features.json", lambda d: d["featuresDict"]["features"].pop("image/width"),
                          "image/width: missing"),
    "a feature of another type": ("features.json", lambda d: d["featuresDict"]["features"]["image/height"][
        "tensor"].__setitem__("dtype", "float32"), 'image/height.tensor.dtype: "float32", the build\'s: "int64"'),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_verify_names_each_disagreement_with_the_shards(build, damage):
    name, change, message = DAMAGE[damage]
    edit(build, name, change)
    code, found, _ = tfds_findings(build)
    assert code == 1 and len(found) == 1 and found[0][0] == name and message in found[0][1], found


def test_verify_takes_lengths_from_the_shards_not_the_manifest(build):
    """A manifest and dataset_info.json that agree on a wrong count: the shards' own count wins."""
    manifest = json.loads((build / "manifest.json").read_text())
    manifest["shards"][0]["records"] = 11
    (build / "manifest.json").write_text(json.dumps(manifest))
    edit(build, "dataset_info.json", lambda d: d["splits"][0]["shardLengths"].__setitem__(0, "11"))
    _, found, _ = tfds_findings(build)
    assert found == [("dataset_info.json", 'splits.train.shardLengths[0]: "11", the build\'s: "12"')]


def test_verify_passes_them_sound_notes_their_absence_and_refuses_half_of_them_or_junk(build):
    code, found, report = tfds_findings(build)
    assert code == 0 and found == [] and not any("TensorFlow Datasets" in n for n in report["summary"]["notes"])
    edit(build, "dataset_info.json", lambda d: d.__setitem__("description", "my own words"))
    assert tfds_findings(build)[:2] == (0, [])  # free text
    os.remove(build / "dataset_info.json")
    assert tfds_findings(build)[1] == [("dataset_info.json", "missing, yet the other TFDS file is there "
                                                             "(imagenet-build tfds FOLDER writes both)")]
    os.remove(build / "features.json")
    code, found, report = tfds_findings(build)
    assert code == 0 and found == []
    assert any("TensorFlow Datasets cannot open this build" in note for note in report["summary"]["notes"])
    (build / "features.json").write_text("{")
    assert tfds_findings(build)[1] == [("features.json", "not valid JSON (JSONDecodeError: Expecting property "
                                                         "name enclosed in double quotes: line 1 column 2 (char 1))")]


def test_files_beside_a_build_that_is_not_complete_are_a_problem(build):
    manifest = json.loads((build / "manifest.json").read_text())
    (build / "manifest.json").write_text(json.dumps(dict(manifest, complete=False)))
    _, found, _ = tfds_findings(build)
    assert found == [("dataset_info.json", "TFDS files in a build that is not complete: TFDS would take its shards "
                                           "for the build")]


def test_differences_names_numbers_written_as_numbers_the_same():
    assert differences({"a": [12, "3"]}, {"a": ["12", "3"]}) == []
    assert differences([1], {"a": 1}) == ["the file: [1], the build's: {\"a\": 1}"]
    assert differences({"a": True}, {"a": "1"}) == ['a: true, the build\'s: "1"']


@pytest.mark.parametrize("found,line", [
    ([1], "splits: [1], the build's: "),  # no split at all: an AttributeError once
    ([{"numBytes": "5"}], 'splits: [{"numBytes": "5"}], the build\'s: '),  # a split without a name: a KeyError once
    ([{"name": 3}], 'splits: [{"name": 3}], the build\'s: '),
    ([{"name": "train"}, {"name": "train", "numBytes": "5"}], 'splits: [{"name": "train"}, {"name": "train", '),
])
def test_splits_that_are_not_each_named_once_are_compared_as_the_list_they_are(found, line):
    expected = {"splits": [{"name": "train", "numBytes": "5"}]}
    (difference,) = differences({"splits": found}, expected)
    assert difference.startswith(line), difference
    assert differences({"splits": [{"numBytes": "5", "name": "train"}]}, expected) == []
