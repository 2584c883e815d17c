"""verify against a corruption corpus made here from a clean convert output, one defect a case (its index
defects: test_index_checks.py; the index verb: tests/format/test_index_verb.py).

Where DALI itself is silent about a defect, the test also shows DALI's reader
returning the wrong number of records without a word: that is why the check exists.
"""

import json
import shutil
from pathlib import Path

import pytest

from conftest import run_cli
from helpers import (
    FOLDER_DAMAGE,
    OTHER,
    SHARD,
    dali_epoch,
    edit_record,
    index_lines,
    records_of,
    set_index,
    with_length,
    write_shard,
)
from imagenet_build.format.record_schema import decode_example
from run_helpers import TRAIN_RECORDS, checks_failed, verify_json


@pytest.fixture
def dali():
    return pytest.importorskip("nvidia.dali")


def test_clean_build_passes_every_mode(converted):
    for more in ((), ("--quick",), ("--deep",)):
        code, report = verify_json(converted, *more)
        assert code == 0 and report["ok"] and report["problems"] == [], report
        assert report["summary"]["manifest"] is True
    assert report["summary"]["records"] == 64


def test_dali_reads_the_clean_build_whole(converted, dali):
    assert dali_epoch(converted) == (TRAIN_RECORDS, TRAIN_RECORDS)


def flip(path, at):
    data = bytearray(Path(path).read_bytes())
    data[at] ^= 0x01
    Path(path).write_bytes(bytes(data))


def test_flipped_payload_byte(build):
    flip(build / SHARD, 100)
    code, report = verify_json(build)
    assert code == 1 and {"crc", "manifest"} <= checks_failed(report)
    crc = [p for p in report["problems"] if p["check"] == "crc"]
    assert crc[0]["file"] == SHARD and crc[0]["record"] == 0 and crc[0]["offset"] == 0


@pytest.mark.parametrize(
    "defect,offset_of",
    [
        ("flipped length CRC", lambda size: 0),
        ("sign bit set", lambda size: 0),
        ("truncated last record", None),
        ("trailing garbage", lambda size: size),
        ("trailing zero bytes", lambda size: size),
    ],
)
def test_broken_framing(build, defect, offset_of):
    path = build / SHARD
    data = path.read_bytes()
    size = len(data)
    if defect == "flipped length CRC":
        data = data[:8] + bytes([data[8] ^ 0xFF]) + data[9:]
    elif defect == "sign bit set":
        data = with_length(data, -(2**40))
    elif defect == "truncated last record":
        data = data[:-10]
    elif defect == "trailing garbage":
        data += b"not a record at all"
    else:
        data += bytes(64)
    path.write_bytes(data)
    for mode in ((), ("--quick",)):
        code, report = verify_json(build, *mode)
        assert code == 1 and "framing" in checks_failed(report), (defect, mode)
        problem = next(p for p in report["problems"] if p["check"] == "framing")
        assert problem["file"] == SHARD
        if offset_of:
            assert problem["offset"] == offset_of(size)


def test_orphan_index_and_stray_files(build):
    shutil.copy(build / "dali_idx" / f"{SHARD}.idx", build / "dali_idx" / "train-00009-of-00004.idx")
    (build / "notes.txt").write_text("hello")
    code, report = verify_json(build, "--quick")
    assert code == 1
    messages = {(p["check"], p["file"]): p["message"] for p in report["problems"]}
    assert "index file with no shard" in messages[("index", "dali_idx/train-00009-of-00004.idx")]
    assert "stray file" in messages[("shard-set", "notes.txt")]


@pytest.mark.parametrize("damage", list(FOLDER_DAMAGE))
def test_each_folder_damage_is_found_without_reading_a_record(build, damage):
    """The damage tests/helpers.py keeps for verify and report alike: each a problem of the listing or of the
    folder checks, with --quick too (report holds its problems to be found there: test_report_problems.py)."""
    FOLDER_DAMAGE[damage](build)
    code, report = verify_json(build, "--quick")
    assert code == 1 and checks_failed(report) & {"shard-set", "manifest", "index"}, report["problems"]


def test_missing_shard(build):
    (build / SHARD).unlink()
    (build / "dali_idx" / f"{SHARD}.idx").unlink()
    code, report = verify_json(build)
    assert code == 1 and {"shard-set", "manifest"} <= checks_failed(report)
    assert any(p["file"] == SHARD and p["message"] == "shard missing" for p in report["problems"])


def test_stray_shard(build):
    shutil.copy(build / SHARD, build / "train-00001-of-00008")
    shutil.copy(build / "dali_idx" / f"{SHARD}.idx", build / "dali_idx" / "train-00001-of-00008.idx")
    code, report = verify_json(build, "--quick")
    assert code == 1 and "shard-set" in checks_failed(report)
    assert any("disagree on their total" in p["message"] for p in report["problems"])


def test_dropped_record(build):
    write_shard(build, SHARD, records_of(build / SHARD)[:-1])  # shard and index agree; one record gone
    code, report = verify_json(build)
    assert code == 1 and {"manifest", "labels"} <= checks_failed(report)
    assert any("records, manifest says" in p["message"] for p in report["problems"])


def test_label_zero(build):
    def zero(example):
        example.features.feature["image/class/label"].int64_list.value[:] = [0]
        del example.features.feature["image/object/bbox/label"].int64_list.value[:]
        for c in ("xmin", "ymin", "xmax", "ymax"):
            del example.features.feature[f"image/object/bbox/{c}"].float_list.value[:]

    edit_record(build, SHARD, 3, zero)
    (build / "manifest.json").unlink()  # the record check alone, without the manifest's help
    code, report = verify_json(build)
    assert code == 1 and "labels" in checks_failed(report)
    problem = next(p for p in report["problems"] if p["check"] == "labels")
    assert problem["record"] == 3 and "1-based" in problem["message"]


@pytest.mark.parametrize("edit,expected", [
    (lambda m: m["splits"]["train"].update(records=999), ("manifest.json", "splits.train.records is 999")),
    (lambda m: m["splits"].pop("validation"), ("manifest.json", "splits.validation: missing")),
    (lambda m: m["totals"].update(bytes=1), ("manifest.json", "totals.bytes is 1")),
    (lambda m: m["shards"].append(dict(m["shards"][0])), ("train-00000-of-00004", "listed 2 times")),
    (lambda m: m["shards"][0].update(split="validation"), ("train-00000-of-00004", "listed under split")),
], ids=["split-records", "split-missing", "totals-bytes", "listed-twice", "wrong-split"])
def test_manifest_figures_that_disagree_with_its_own_shard_entries(build, edit, expected):
    """trainer-check and the readers take a split's records from the manifest: a figure that is not the sum
    of its shard entries is a problem, though every shard matches its own entry."""
    manifest = json.loads((build / "manifest.json").read_text())
    edit(manifest)
    (build / "manifest.json").write_text(json.dumps(manifest))
    code, report = verify_json(build)
    found = [(p["file"], p["message"]) for p in report["problems"]]
    assert code == 1 and any(f == expected[0] and m.startswith(expected[1]) for f, m in found), found


def test_label_problems_name_the_record_that_shows_them(build):
    """A label above the classes, or a label and synset that disagree: the shard, record and byte of the
    record at fault (found over the whole folder, where the pairs are counted), as for label 0."""
    classes = json.loads((build / "manifest.json").read_text())["synsets"]

    def set_label(label, synset=None):
        def change(example):
            example.features.feature["image/class/label"].int64_list.value[:] = [label]
            if synset:
                example.features.feature["image/class/synset"].bytes_list.value[:] = [synset.encode()]
        return change

    synset_of_record_3 = decode_example(records_of(build / SHARD)[3])["image/class/synset"][0].decode()
    edit_record(build, SHARD, 3, set_label(len(classes) + 1))
    edit_record(build, OTHER, 5, set_label(1, classes[1]))  # label 1 with label 2's synset
    code, report = verify_json(build)
    located = {(p["file"], p["record"], p["message"].split(":")[0]) for p in report["problems"]
               if p["check"] == "labels" and p["record"] is not None}
    assert code == 1 and located == {
        (SHARD, 3, f"label {len(classes) + 1} above the {len(classes)} classes"),
        (SHARD, 3, f"synset {synset_of_record_3} under several labels"),  # its synset keeps its old label elsewhere
        (OTHER, 5, "label 1 carries several synsets"),
        (OTHER, 5, f"synset {classes[1]} under several labels"),
    }, report["problems"]


def set_int(key, value):
    def change(example):
        example.features.feature[key].int64_list.value[:] = [value]
    return change


def set_box(*corners):
    """One box (xmin, ymin, xmax, ymax) of the record's own label, in place of its boxes."""
    def change(example):
        feature = example.features.feature
        for key, value in zip(("xmin", "ymin", "xmax", "ymax"), corners):
            feature[f"image/object/bbox/{key}"].float_list.value[:] = [value]
        feature["image/object/bbox/label"].int64_list.value[:] = feature["image/class/label"].int64_list.value
    return change


@pytest.mark.parametrize("change,message", [
    (set_int("image/width", 0), "height/width {height}x0 not positive"),
    (set_int("image/height", 0), "height/width 0x{width} not positive"),
    (set_int("image/width", -1), "height/width {height}x-1 not positive"),
    (set_box(0.1, 0.2, 1.5, 0.4), "bbox value outside [0, 1]"),
    (set_box(-0.5, 0.2, 0.3, 0.4), "bbox value outside [0, 1]"),
    (set_box(0.1, 0.2, 1.0, 1.0), None),  # the edges themselves are inside
], ids=["width-0", "height-0", "width-negative", "box-1.5", "box-negative", "box-at-1"])
def test_record_values_out_of_range(build, change, message):
    """A side of 0 or a box value outside [0, 1]: the example check names the record and the value."""
    sizes = decode_example(records_of(build / SHARD)[3])
    edit_record(build, SHARD, 3, change)
    code, report = verify_json(build)
    found = [p["message"] for p in report["problems"] if p["check"] == "example" and p["record"] == 3]
    if message is None:  # the edited record differs from the manifest's, but is a sound Example
        assert "example" not in checks_failed(report), report["problems"]
    else:
        expected = message.format(height=sizes["image/height"][0], width=sizes["image/width"][0])
        assert code == 1 and expected in found, found


def test_record_missing_a_key(build):
    edit_record(build, SHARD, 2, lambda e: e.features.feature.pop("image/class/text"))
    code, report = verify_json(build)
    assert code == 1 and "example" in checks_failed(report)
    assert any(p["record"] == 2 and "missing key image/class/text" in p["message"] for p in report["problems"])


def test_undecodable_image_is_found_by_deep(build):
    def garble(example):
        value = example.features.feature["image/encoded"].bytes_list.value
        value[0] = value[0][:40] + bytes(200)

    edit_record(build, SHARD, 1, garble)
    code, report = verify_json(build, "--deep")
    assert code == 1 and "decode" in checks_failed(report)
    code, report = verify_json(build)
    assert "decode" not in checks_failed(report)  # without --deep images are not decoded


def test_shards_without_manifest_are_checked_structurally(build):
    (build / "manifest.json").unlink()
    code, report = verify_json(build)
    assert code == 0 and any("no manifest.json" in n for n in report["summary"]["notes"])
    assert report["summary"]["manifest"] is False


@pytest.mark.parametrize("mode", [[], ["--quick"]], ids=["full", "quick"])
def test_expect_imagenet_fails_a_small_build_naming_its_totals_and_classes(converted, mode):
    code, report = verify_json(converted, *mode, "--expect-imagenet")
    assert code == 1 and checks_failed(report) == {"imagenet"}
    assert sorted((p["file"], p["message"]) for p in report["problems"]) == [
        ("classes", "4 classes, ILSVRC2012 has 1,000"),  # the labels the records hold (quick: the manifest's)
        ("train", "48 records, ILSVRC2012 has 1,281,167"),
        ("validation", "16 records, ILSVRC2012 has 50,000")]


def test_text_report_names_a_records_number_and_an_index_line(build):
    """A record's problem is `<shard>, record N, byte B`; an index's is `<index>, line N, byte B` (the
    JSON gives both under `record`)."""
    edit_record(build, SHARD, 3, set_int("image/width", 0))
    offsets = [int(line.split()[0]) for line in index_lines(build)]
    height = decode_example(records_of(build / SHARD)[3])["image/height"][0]
    lines = index_lines(build)
    set_index(build, lines[:3] + [lines[2]] + lines[3:])  # line 4 repeats line 3
    result = run_cli("verify", build, "--workers", 1)
    assert result.exit_code == 1
    shown = result.stdout.splitlines()
    assert f"    {SHARD}.idx, line 4, byte {offsets[2]}: repeats the line before it: DALI reads that record twice " \
           "an epoch" in shown, result.stdout
    # the index is wrong, so the records are read by their own framing: record 3 is still named
    assert f"    {SHARD}, record 3, byte {offsets[3]}: height/width {height}x0 not positive" in shown, result.stdout


def test_report_is_readable_and_exit_codes(build):
    set_index(build, index_lines(build)[:-1])  # the last record unlisted
    result = run_cli("verify", build, "--workers", 1, "--quick")
    assert result.exit_code == 1
    assert "lines for" in result.stdout and "silently reads only" in result.stdout
    assert f"{SHARD}.idx" in result.stdout and "FAILED" in result.stdout
    assert run_cli("verify", build / "nowhere").exit_code == 1
    assert run_cli("verify", "--bogus-option", build).exit_code == 2


def test_files_that_are_not_regular_files_are_problems_not_hangs_or_tracebacks(build):
    """A FIFO named like a shard (reading it would wait forever), a link to nothing, an index that is a
    folder: each one problem naming it, and the rest of the folder still checked."""
    import os
    import subprocess
    import sys

    os.mkfifo(build / "train-00004-of-00005")
    os.symlink(build / "nowhere", build / "validation-00002-of-00003")
    index = build / "dali_idx" / f"{OTHER}.idx"
    index.unlink()
    index.mkdir()
    result = subprocess.run([sys.executable, "-m", "imagenet_build", "verify", str(build), "--json", "--workers", "1"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    found = {(p["file"], p["message"]) for p in json.loads(result.stdout)["problems"]}
    assert ("train-00004-of-00005", "not a regular file (a FIFO)") in found
    assert ("validation-00002-of-00003", "not a regular file (a link to nothing)") in found
    assert (f"{OTHER}.idx", "not a regular file (a folder): DALI cannot read it") in found


def test_a_shard_copied_over_another_is_found_without_a_manifest(build):
    shutil.copy(build / SHARD, build / OTHER)
    shutil.copy(build / "dali_idx" / f"{SHARD}.idx", build / "dali_idx" / f"{OTHER}.idx")
    (build / "manifest.json").unlink()
    code, report = verify_json(build)
    assert code == 1 and [(p["file"], p["message"]) for p in report["problems"]] == [
        (OTHER, f"the same bytes as {SHARD}: its records would be read twice an epoch")]


def test_a_write_arrays_build_with_a_class_of_no_records_is_sound_with_a_warning(tmp_path):
    """verify passed, without a word, a write_arrays build where a class had no records (never trained on);
    the sound sample build gets no such warning."""
    np = pytest.importorskip("numpy")
    from imagenet_build import write_arrays

    images = np.random.default_rng(0).integers(0, 255, (12, 8, 8, 3), dtype=np.uint8)
    write_arrays(images, np.arange(12) % 3, tmp_path, class_names=["cat", "dog", "eel", "fox"])
    for mode in ([], ["--quick"]):
        result = run_cli("verify", tmp_path, "--workers", 1, "--json", *mode)
        report = json.loads(result.stdout)
        assert result.exit_code == 0 and report["ok"] and report["summary"]["warning_counts"] == {"empty-classes": 1}
        assert [(w["check"], w["file"], w["record"], w["message"]) for w in report["warnings"]] == [
            ("empty-classes", "train", None, "1 of 4 classes have no train records: label 4 (fox)")]
    text = run_cli("verify", tmp_path, "--workers", 1).stdout
    assert ("warning: empty-classes: 1 split(s): every class of the build has records in each split (one with none "
            "is never trained on or scored)\n    train: 1 of 4 classes have no train records: label 4 (fox)\n") in text


def test_a_sound_build_has_no_empty_class(converted):
    report = json.loads(run_cli("verify", converted, "--workers", 1, "--json").stdout)
    assert report["ok"] and "empty-classes" not in report["summary"]["warning_counts"]
