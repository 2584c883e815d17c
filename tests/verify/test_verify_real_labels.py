"""verify's real-labels check: a --real-labels build's validation records each carry one int64 list of ReaL labels
in 1..K, no other record carries one, and the records agree with what the manifest says."""

import json
import shutil

import pytest

from conftest import run_cli
from helpers import convert_with_real_labels, edit_record
from imagenet_build.format.record_schema import REAL_LABELS

VALIDATION = "validation-00000-of-00002"
TRAIN = "train-00000-of-00004"


@pytest.fixture(scope="module")
def with_real(sample_dir, tmp_path_factory):
    """The sample converted with a real.json labelling its first images (4 classes: labels 1..4)."""
    return convert_with_real_labels(sample_dir, tmp_path_factory.mktemp("with-real"), {0: [0, 2], 1: [1], 3: [3]})


@pytest.fixture
def real_build(with_real, tmp_path):
    out = tmp_path / "build"
    shutil.copytree(with_real, out)
    return out


def verify_problems(folder, *args):
    result = run_cli("verify", folder, "--workers", 1, "--json", *args)
    report = json.loads(result.stdout)
    return result.exit_code, report, [p for p in report["problems"] if p["check"] == "real-labels"]


def test_a_build_with_real_labels_is_sound(with_real):
    code, report, found = verify_problems(with_real)
    assert code == 0 and report["ok"] and found == [] and "real-labels" in report["summary"]["checks"], report


def set_real(values, kind="int64_list"):
    def change(example):
        feature = example.features.feature[REAL_LABELS]
        feature.Clear()
        getattr(feature, kind).value.extend(values)
    return change


def drop_real(example):
    del example.features.feature[REAL_LABELS]


@pytest.mark.parametrize("shard,change,message", [
    (VALIDATION, drop_real, f"lacks {REAL_LABELS}, which manifest.json says every validation record carries "
                            "(1 record(s) lack it)"),
    (VALIDATION, set_real([2, 5]), f"{REAL_LABELS}: label 5 above the 4 classes"),
    (VALIDATION, set_real([0, 3]), f"{REAL_LABELS}: label 0: labels are 1-based (0 is background)"),
    (VALIDATION, set_real([2, 2]), f"{REAL_LABELS}: label 2 listed twice"),
    (VALIDATION, set_real([b"2"], "bytes_list"), f"{REAL_LABELS} is bytes_list, expected int64_list"),
    (VALIDATION, set_real([2.0], "float_list"), f"{REAL_LABELS} is float_list, expected int64_list"),
    (TRAIN, set_real([1]), f"carries {REAL_LABELS}, which only validation records may (1 train record(s) carry it)"),
], ids=["missing", "above-the-classes", "zero", "twice", "bytes", "floats", "on-a-train-record"])
def test_a_damaged_real_labels_feature_is_named_at_its_record(real_build, shard, change, message):
    edit_record(real_build, shard, 3, change)
    code, _, found = verify_problems(real_build)
    assert code == 1 and len(found) == 1, found
    assert (found[0]["file"], found[0]["record"], found[0]["message"]) == (shard, 3, message)


def test_records_with_real_labels_under_a_manifest_without_them(real_build):
    manifest = json.loads((real_build / "manifest.json").read_text())
    del manifest["options"]["real_labels"]
    (real_build / "manifest.json").write_text(json.dumps(manifest))
    code, _, found = verify_problems(real_build)
    assert code == 1 and [(p["file"], p["record"]) for p in found] == [(VALIDATION, 0)]
    assert found[0]["message"] == f"carries {REAL_LABELS}, yet manifest.json says the build has no ReaL labels " \
                                  "(16 record(s) carry it)"


def test_a_manifest_claiming_real_labels_the_records_lack(build):
    manifest = json.loads((build / "manifest.json").read_text())
    manifest["options"]["real_labels"] = "real.json sha256:0"
    (build / "manifest.json").write_text(json.dumps(manifest))
    code, _, found = verify_problems(build)
    assert code == 1 and [(p["file"], p["record"]) for p in found] == [(VALIDATION, 0)]
    assert found[0]["message"] == f"lacks {REAL_LABELS}, which manifest.json says every validation record carries " \
                                  "(16 record(s) lack it)"


def test_without_a_manifest_the_validation_records_all_carry_them_or_none(real_build):
    (real_build / "manifest.json").unlink()
    assert verify_problems(real_build)[2] == []
    edit_record(real_build, VALIDATION, 5, drop_real)
    code, _, found = verify_problems(real_build)
    assert code == 1 and [(p["file"], p["record"], p["message"]) for p in found] == [
        (VALIDATION, 5, f"lacks {REAL_LABELS}, which 15 other validation record(s) carry")]


def test_quick_does_not_claim_to_check_them(with_real):
    code, report, found = verify_problems(with_real, "--quick")
    assert code == 0 and found == [] and "real-labels" not in report["summary"]["checks"]


def test_a_manifest_claiming_real_labels_in_a_folder_without_validation_shards(real_build):
    """The claim is checked against the folder, not only the records it holds: with the validation shards gone,
    the manifest's claim is named (besides the manifest check's missing shards)."""
    for shard in real_build.glob("validation-*"):
        shard.unlink()
    for index in (real_build / "dali_idx").glob("validation-*"):
        index.unlink()
    code, _, found = verify_problems(real_build)
    assert code == 1 and [(p["file"], p["record"], p["offset"], p["message"]) for p in found] == [
        ("manifest.json", None, None,
         "says the validation records carry ReaL labels, but the folder has no validation shards")]
