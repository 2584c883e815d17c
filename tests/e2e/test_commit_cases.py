"""A commit never records what verify refuses: a rerun that meets a lying receipt or manifest entry rewrites that
shard, and `tfds` refuses a manifest its shards contradict; what a rerun, verify and report meet in a manifest of
the wrong shape is one line. Each case as a user made it, on a real small build."""

import json
import shutil

import pytest

from conftest import run_cli, run_process, tree_digest
from helpers import as_killed_run, edit_json, expect_error, sample_options
from imagenet_build import api
from imagenet_build.infra.errors import BuildError

SHARD = "train-00000-of-00004"


@pytest.fixture(scope="module")
def built(sample_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("commit") / "out"
    api.convert(out, **sample_options(sample_dir))
    return out


@pytest.fixture
def build(built, tmp_path):
    shutil.copytree(built, tmp_path / "out")
    return tmp_path / "out"


def entry_of(build, name=SHARD):
    return next(e for e in json.loads((build / "manifest.json").read_text())["shards"] if e["name"] == name)


def rerun_rewrites_the_shard(sample, build, original):
    """The rerun keeps every other shard, writes the lying one again (the same bytes), and verify passes."""
    summary = api.convert(build, **sample_options(sample))
    assert (summary["shards_kept"], summary["shards_written"]) == (5, 1)
    assert summary["splits"]["train"]["records"] == 48
    assert entry_of(build) == original
    assert api.verify(build, workers=1)["ok"]


LIES = {
    "999 records": lambda entry: entry.update(records=999),
    "1 byte": lambda entry: entry.update(bytes=1),
    "a train shard's split validation": lambda entry: entry.update(split="validation"),
    "a skipped input that never was": lambda entry: entry["skipped"].append(
        {"file": "n01440764/n01440764_999.JPEG", "label": 1, "reason": "not a JPEG"}),
    "one of its inputs said skipped": lambda entry: entry["skipped"].append(
        {"file": "n01440764/n01440764_10.JPEG", "label": 1, "reason": "not a JPEG"}),
    "10**400 records": lambda entry: entry.update(records=10 ** 400),
    "another index size": lambda entry: entry.update(index_bytes=entry["index_bytes"] + 1),
}


@pytest.mark.parametrize("lie", LIES.values(), ids=LIES)
def test_a_receipt_that_lies_about_its_shard_has_it_rewritten(sample_dir, build, lie):
    original = entry_of(build)
    receipt = as_killed_run(build)[SHARD]
    edit_json(receipt, lambda document: lie(document["result"][0][1]))
    rerun_rewrites_the_shard(sample_dir, build, original)


@pytest.mark.parametrize("lie", [LIES["999 records"], LIES["1 byte"], LIES["a train shard's split validation"]],
                         ids=["records", "bytes", "moved to the other split"])
def test_a_manifest_edited_on_a_complete_build_has_the_shard_rewritten(sample_dir, build, lie):
    original = entry_of(build)
    edit_json(build / "manifest.json", lambda m: lie(next(e for e in m["shards"] if e["name"] == SHARD)))
    rerun_rewrites_the_shard(sample_dir, build, original)


def test_a_receipt_without_its_note_vouches_for_nothing(sample_dir, build):
    receipt = as_killed_run(build)[SHARD]
    edit_json(receipt, lambda document: document["result"][0][1]["reencoded"][0].pop("note"))
    result = run_cli("convert", "--output-dir", build, *sample_cli(sample_dir))  # its lines: KeyError: 'note' once
    assert result.exit_code == 0, result.output
    assert "shards written: 1, kept from before: 5" in result.output
    assert api.verify(build, workers=1)["ok"]


def sample_cli(sample):
    return ["--labels-file", sample / "labels.txt", "--train-dir", sample / "train", "--bounding-box-file",
            sample / "bboxes.csv", "--validation-dir", sample / "validation", "--validation-labels-file",
            sample / "validation_labels.txt", "--train-shards", 4, "--validation-shards", 2, "--layout-threads", 2,
            "--workers", 1]


WRONG_SHAPES = {
    "a re-encoded entry without its reason": (
        lambda m: m["shards"][0]["reencoded"][0].pop("reencoded"), "shards[0].reencoded[0].reencoded: missing"),
    "a skipped entry without its label": (
        lambda m: m["shards"][0]["skipped"].append({"file": "x.JPEG", "reason": "r"}),
        "shards[0].skipped[0].label: missing"),
    "inputs.shards a list": (lambda m: m["inputs"].update(shards=[]), "inputs.shards: [] is not an object"),
}


@pytest.mark.parametrize("change,problem", WRONG_SHAPES.values(), ids=WRONG_SHAPES)
def test_a_rerun_over_a_manifest_of_the_wrong_shape_is_one_line(sample_dir, build, change, problem):
    edit_json(build / "manifest.json", change)
    before = tree_digest(build)
    expect_error(["convert", "--output-dir", build, *sample_cli(sample_dir)], 1,
                 f"{build / 'manifest.json'}: {problem}; use --overwrite to start over")
    assert tree_digest(build) == before


TFDS_LIES = {
    "one shard listed twice": lambda m: m["shards"].append(m["shards"][0]),
    "no shards": lambda m: m.update(shards=[]),
    "no shards, no splits": lambda m: m.update(shards=[], splits={}, totals={"records": 0, "bytes": 0}),
    "a shard's records": lambda m: m["shards"][0].update(records=13),
    "a split's records": lambda m: m["splits"]["train"].update(records=47),
}


@pytest.mark.parametrize("lie", TFDS_LIES.values(), ids=TFDS_LIES)
def test_tfds_refuses_a_manifest_its_shards_contradict(build, lie):
    for name in ("features.json", "dataset_info.json"):
        (build / name).unlink()
    edit_json(build / "manifest.json", lie)
    before = tree_digest(build)
    expect_error(["tfds", build], 1, f"{build / 'manifest.json'}: not written: ")
    assert tree_digest(build) == before


def test_report_refuses_label_counts_below_one(build, tmp_path):
    edit_json(build / "manifest.json", lambda m: m["splits"]["train"]["label_counts"].update({"1": -5}))
    expect_error(["report", build, "-o", tmp_path / "page.html"], 1,
                 'splits.train.label_counts: expected {"<label>": <count of at least 1>}')
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("verb", ["verify", "report"])
def test_inputs_source_of_another_shape_is_one_line(build, verb, tmp_path):
    edit_json(build / "manifest.json", lambda m: m["inputs"].update(source=["x"]))  # AttributeError in verify once
    result = run_cli(verb, build, *(["-o", tmp_path / "page.html"] if verb == "report" else []), "--workers", 1)
    said = result.output if verb == "verify" else result.stderr
    assert result.exit_code == 1 and 'inputs.source: ["x"] is not an object' in said, result.output


@pytest.mark.parametrize("verb", ["verify", "report"])
def test_a_lone_surrogate_in_a_manifest_is_one_line(build, verb):
    edit_json(build / "manifest.json", lambda m: m["synsets"].__setitem__(0, "\ud800"))
    result = run_process(verb, build, *(["-o", build.parent / "page.html"] if verb == "report" else []))
    assert "Traceback" not in result.stderr and "UnicodeEncodeError" not in result.stderr, result.stderr
    said = result.stdout if verb == "verify" else result.stderr
    assert result.returncode == 1 and 'a string holding a lone surrogate ("\\ud800"), which is no Unicode text' in \
        said, said


def test_overwrite_given_a_string_is_refused_and_the_build_kept(sample_dir, build):
    before = tree_digest(build)
    with pytest.raises(BuildError) as refused:
        api.convert(build, **sample_options(sample_dir, overwrite="no"))
    assert str(refused.value) == "overwrite must be True or False, not str 'no'"
    assert tree_digest(build) == before
