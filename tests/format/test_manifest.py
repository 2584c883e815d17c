"""format/manifest.py: the manifest's schema, each wrong field named; another tool's or a newer format refused."""

import json

import pytest

from imagenet_build.format import manifest


def good_manifest():
    return {"format": manifest.FORMAT, "complete": True, "options": {"index_dir": "dali_idx"}, "num_classes": 2,
            "synsets": ["n1", "n2"], "splits": {"train": {"shards": 1, "records": 3, "label_counts": {"1": 3}}},
            "shards": [{"split": "train", "name": "train-00000-of-00001", "records": 3, "bytes": 99,
                        "sha256": "a" * 64, "index_sha256": "b" * 64, "skipped": [], "reencoded": []}]}


@pytest.mark.parametrize("change,message", [
    (lambda m: m.pop("complete"), "complete: missing"),
    (lambda m: m.update(num_classes=-1), "num_classes: -1 is not a whole number"),
    (lambda m: m.update(num_classes=True), "num_classes: true is not a whole number"),
    (lambda m: m.update(synsets=["n1"]), "synsets: 1 entries for num_classes 2"),
    (lambda m: m["splits"]["train"].update(label_counts={"one": 3}), "splits.train.label_counts"),
    (lambda m: m["shards"][0].update(records="3"), "shards[0].records"),
    (lambda m: m["options"].update(index_dir=3), "options.index_dir: not a string"),
])
def test_the_schema_names_the_wrong_field(tmp_path, change, message):
    m = good_manifest()
    assert manifest.schema_problem(m) == ""
    change(m)
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        manifest.read_manifest(tmp_path)


def test_a_manifest_of_another_tool_or_format_is_refused(tmp_path):
    for version in ("something-else/9", str(manifest.FORMAT), float(manifest.FORMAT), True, None, 0):
        (tmp_path / "manifest.json").write_text(json.dumps(dict(good_manifest(), format=version)))
        with pytest.raises(ValueError, match="not an imagenet-build manifest"):
            manifest.read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps(dict(good_manifest(), format=manifest.FORMAT + 1)))
    with pytest.raises(ValueError, match="written by a newer imagenet-build"):
        manifest.read_manifest(tmp_path)
    assert manifest.read_manifest(tmp_path / "nowhere") is None


