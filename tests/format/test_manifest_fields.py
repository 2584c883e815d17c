"""format/manifest.py, field by field: every shape the one reader refuses named in its exact line, what it lets
pass, the bytes a manifest is written as, and the TFDS files written from it (their image format, each split's
bytes, ReaL labels' feature where the manifest says the records carry them)."""

import json

import pytest
from test_manifest import good_manifest

from imagenet_build._version import __version__
from imagenet_build.format import manifest
from imagenet_build.format.naming import DATASET_INFO_JSON, FEATURES_JSON
from imagenet_build.format.record_schema import EXTRA, IMAGE_KEY, REAL_LABELS, SCHEMA

LONG = ["n%05d" % k for k in range(20)]
COUNTS = 'splits.train.label_counts: expected {"<label>": <count of at least 1>}'
SKIPPED = {"file": "x.JPEG", "label": 1, "reason": "empty"}

CASES = [
    (lambda m: m.update(complete=1), "complete: 1 is not true or false"),
    (lambda m: m.update(options=[]), "options: [] is not an object"),
    (lambda m: m.update(synsets=["n1", ""]), "synsets: every entry must be a non-empty string"),
    (lambda m: m.update(synsets=["n1", 2]), "synsets: every entry must be a non-empty string"),
    (lambda m: m["options"].update(real_labels=1), "options.real_labels: not a string"),
    (lambda m: m["splits"].update(train=[]), "splits.train: not an object"),
    (lambda m: m["splits"]["train"].pop("records"), "splits.train.records: missing"),
    (lambda m: m["splits"]["train"].update(label_counts={"1": True}), COUNTS),
    (lambda m: m["splits"]["train"].update(label_counts={"1": "3"}), COUNTS),
    (lambda m: m["splits"]["train"].update(label_counts={"1": -5}), COUNTS),  # report drew it as a bar below 0
    (lambda m: m["splits"]["train"].update(label_counts={"1": 3, "2": 0}), COUNTS),  # never written: verify refuses
    (lambda m: m["splits"]["train"].update(left_out=[{"file": "x.JPEG"}]), "splits.train.left_out[0].reason: missing"),
    (lambda m: m.update(inputs={"shards": ["state"]}), 'inputs.shards: ["state"] is not an object'),  # a rerun:
    # AttributeError: 'list' object has no attribute 'get'
    (lambda m: m.update(inputs={"shards": {"train-00000-of-00001": 5}}),
     "inputs.shards.train-00000-of-00001: 5 is not a string"),
    (lambda m: m.update(inputs={"source": ["x"]}), 'inputs.source: ["x"] is not an object'),  # verify's classes:
    # AttributeError: 'list' object has no attribute 'get'
    (lambda m: m["splits"]["train"].update(left_out=["x.JPEG"]), 'splits.train.left_out[0]: "x.JPEG" is not an object'),
    (lambda m: m.update(shards=[3]), "shards[0]: not an object"),
    (lambda m: m["shards"][0].pop("sha256"), "shards[0].sha256: missing"),
    (lambda m: m["shards"][0].update(records="3"), 'shards[0].records: "3" is not a whole number >= 0'),
    (lambda m: m["shards"][0].update(skipped=[SKIPPED, 5]), "shards[0].skipped[1]: 5 is not an object"),
    (lambda m: m["shards"][0].update(skipped=[{"file": "x.JPEG", "reason": "empty"}]),
     "shards[0].skipped[0].label: missing"),  # a rerun counted the labels left out: KeyError: 'label'
    (lambda m: m["shards"][0].update(skipped=[dict(SKIPPED, label="1")]),
     'shards[0].skipped[0].label: "1" is not a whole number'),
    (lambda m: m["shards"][0].update(reencoded=[{"file": "x.JPEG", "note": ""}]),
     "shards[0].reencoded[0].reencoded: missing"),  # a rerun's codec: KeyError: 'reencoded'
    (lambda m: m["shards"][0].update(reencoded=[{"file": "x.JPEG", "reencoded": "PNG"}]),
     "shards[0].reencoded[0].note: missing"),  # convert's lines: KeyError: 'note'
    (lambda m: m["shards"][0].update(reencoded=[{"file": 5, "reencoded": "PNG", "note": ""}]),
     "shards[0].reencoded[0].file: 5 is not a string"),
    (lambda m: m["shards"][0].update(resized="2"), 'shards[0].resized: "2" is not a whole number >= 0'),
    (lambda m: m["shards"][0].update(fingerprint=5), "shards[0].fingerprint: 5 is not a string"),
    (lambda m: m["shards"][0].update(name=LONG), f"shards[0].name: {json.dumps(LONG)[:40]} is not a string"),
    (lambda m: m["shards"][0].update(skipped=[LONG]),
     f"shards[0].skipped[0]: {json.dumps(LONG)[:37]}... is not an object"),
]


@pytest.mark.parametrize("change,problem", CASES)
def test_each_wrong_field_is_named_in_one_exact_line(tmp_path, change, problem):
    m = good_manifest()
    change(m)
    assert manifest.schema_problem(m) == problem
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ValueError) as refused:
        manifest.read_manifest(tmp_path)
    assert str(refused.value) == f"{tmp_path / 'manifest.json'}: {problem}"


def test_what_the_reader_lets_pass():
    m = good_manifest()
    del m["splits"]["train"]["label_counts"]  # optional fields may be absent
    m["shards"][0].update(resized=0, fingerprint="f")
    m["options"].update(real_labels="real.json")
    m["splits"]["train"]["left_out"] = [{"file": "x.JPEG", "reason": "empty"}]
    m["shards"][0].update(skipped=[SKIPPED], reencoded=[{"file": "y.JPEG", "reencoded": "PNG", "note": ""}])
    m["splits"]["train"]["label_counts"] = {"1": 2, "2": 1}  # a label of one record
    m["inputs"] = {"shards": {"train-00000-of-00001": "state"}, "train": {"layout": "folders"},
                   "source": {"layout": "ilsvrc", "labels": [1, 2]}}
    assert manifest.schema_problem(m) == ""
    assert manifest.shard_entry_problem(m["shards"][0]) == ""
    assert manifest.shard_entry_problem([]) == "not an object"
    assert manifest.shard_entry_problem(dict(m["shards"][0], bytes=-1)) == "bytes: -1 is not a whole number >= 0"


def test_a_format_that_is_no_number_this_version_reads_is_refused(tmp_path):
    for format_ in (True, 0, 1.5, [2], None):
        (tmp_path / "manifest.json").write_text(json.dumps(dict(good_manifest(), format=format_)))
        with pytest.raises(ValueError) as refused:
            manifest.read_manifest(tmp_path)
        assert str(refused.value) == (f"{tmp_path / 'manifest.json'}: not an imagenet-build manifest (no \"format\" "
                                      "this version reads: 1, 2)"), format_
    (tmp_path / "manifest.json").write_text(json.dumps(["not", "an", "object"]))
    with pytest.raises(ValueError, match="not an imagenet-build manifest"):
        manifest.read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps(dict(good_manifest(), format=manifest.FORMAT + 1)))
    with pytest.raises(ValueError) as newer:
        manifest.read_manifest(tmp_path)
    assert str(newer.value) == (f"{tmp_path / 'manifest.json'}: format {manifest.FORMAT + 1}, written by a newer "
                                f"imagenet-build (this one reads formats up to {manifest.FORMAT}): "
                                "upgrade imagenet-build")


def test_a_manifest_is_written_as_sorted_json_one_space_deep_with_the_version_and_the_tfds_files(tmp_path):
    assert manifest.dumps({"b": 1, "a": [1]}) == b'{\n "a": [\n  1\n ],\n "b": 1\n}\n'
    written = manifest.write_manifest(tmp_path, good_manifest())
    assert written == dict(good_manifest(), imagenet_build_version=__version__)
    assert (tmp_path / "manifest.json").read_bytes() == manifest.dumps(written)
    assert (tmp_path / FEATURES_JSON).exists() and (tmp_path / DATASET_INFO_JSON).exists()
    manifest.write_manifest(tmp_path, dict(good_manifest(), complete=False))  # not complete: no TFDS files
    assert not (tmp_path / FEATURES_JSON).exists() and not (tmp_path / DATASET_INFO_JSON).exists()
    manifest.write_labels(tmp_path, ["n1", "n2"])
    assert (tmp_path / "labels.txt").read_text() == "n1\nn2\n"


def test_real_labels_are_carried_where_the_options_name_them():
    m = good_manifest()
    assert manifest.carries_real_labels(m) is False and manifest.carries_real_labels({}) is False
    assert dict(manifest.tfds_record_schema(m).types) == SCHEMA
    m["options"]["real_labels"] = "real.json"
    assert manifest.carries_real_labels(m) is True
    schema = manifest.tfds_record_schema(m)
    assert dict(schema.types) == dict(SCHEMA, **EXTRA) and REAL_LABELS in schema.types
    assert schema.image == IMAGE_KEY and REAL_LABELS not in schema.one_value


def two_splits(encodings):
    m = good_manifest()
    m["splits"] = {"train": {"shards": 2, "records": 5, "encoding": encodings[0]},
                   "validation": {"shards": 1, "records": 1, "encoding": encodings[1]}}
    m["shards"] = [dict(m["shards"][0], name="train-00001-of-00002", records=2, bytes=20),
                   dict(m["shards"][0], name="train-00000-of-00002", records=3, bytes=30),
                   dict(m["shards"][0], split="validation", name="validation-00000-of-00001", records=1, bytes=7)]
    return m


def test_the_tfds_files_say_each_splits_shards_in_order_and_bytes_and_the_images_format():
    documents = manifest.tfds_documents(two_splits(["PNG", "PNG"]))
    info = documents[DATASET_INFO_JSON]
    assert [(s["name"], s["shardLengths"], s["numBytes"]) for s in info["splits"]] == [
        ("train", ["3", "2"], "50"), ("validation", ["1"], "7")]
    assert info["description"] == manifest.TFDS_DESCRIPTION
    image = documents[FEATURES_JSON]["featuresDict"]["features"][IMAGE_KEY]["image"]
    assert image["encodingFormat"] == "png"  # every split PNG: write_arrays' lossless=True
    mixed = manifest.tfds_documents(two_splits(["PNG", "JPEG q95"]))
    assert mixed[FEATURES_JSON]["featuresDict"]["features"][IMAGE_KEY]["image"]["encodingFormat"] == "jpeg"
    found = manifest.tfds_documents(two_splits(["PNG", "PNG"]), {"train-00000-of-00001": (4, 40), "stray": (1, 1)})
    assert [(s["name"], s["shardLengths"], s["numBytes"]) for s in found[DATASET_INFO_JSON]["splits"]] == [
        ("train", ["4"], "40")]  # what verify found in the shards, a name that is no shard's left out
