"""verify and index against a corruption corpus made here from a clean convert output, one defect a case.

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
    FRAMING_DAMAGE,
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
from imagenet_build.encode.example import decode_example


@pytest.fixture
def dali():
    return pytest.importorskip("nvidia.dali")


def verify_json(folder, *extra):
    result = run_cli("verify", folder, "--workers", 1, "--json", *extra)
    return result.exit_code, json.loads(result.stdout)


def checks_failed(report):
    return set(report["summary"]["problem_counts"])


TRAIN_RECORDS = 48


def test_clean_build_passes_every_mode(converted):
    for extra in ((), ("--quick",), ("--deep",)):
        code, report = verify_json(converted, *extra)
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


def drop_last_line(folder):
    set_index(folder, index_lines(folder)[:-1])


def duplicate_line(folder):
    lines = index_lines(folder)
    set_index(folder, lines[:3] + [lines[2]] + lines[3:])


def merge_entries(folder):
    lines = index_lines(folder)
    (o1, s1), (_, s2) = (map(int, lines[i].split()) for i in (1, 2))
    set_index(folder, lines[:1] + [f"{o1} {s1 + s2}\n"] + lines[3:])


def only_offset(folder):
    """On the last line DALI drops the record silently; mid-file it pairs the tokens wrongly and fails."""
    lines = index_lines(folder)
    set_index(folder, lines[:-1] + [lines[-1].split()[0] + "\n"])


def offset_off_by_one(folder):
    lines = index_lines(folder)
    offset, size = map(int, lines[2].split())
    set_index(folder, lines[:2] + [f"{offset + 1} {size}\n"] + lines[3:])


def swap_indexes(folder):
    a, b = index_lines(folder, SHARD), index_lines(folder, OTHER)
    set_index(folder, b, SHARD)
    set_index(folder, a, OTHER)


def go_back(folder):
    lines = index_lines(folder)
    set_index(folder, lines[:2] + [lines[0]] + lines[2:])


def line_beyond_the_end(folder):
    set_index(folder, index_lines(folder) + [f"{(folder / SHARD).stat().st_size} 100\n"])


INDEX_DEFECTS = {
    # name: (damage, what DALI does: "silent" = wrong epoch without a word, "fails" = refuses or errors)
    "missing": (lambda f: (f / "dali_idx" / f"{SHARD}.idx").unlink(), "fails"),
    "empty": (lambda f: set_index(f, []), "silent"),
    "short": (drop_last_line, "silent"),
    "header line": (lambda f: set_index(f, ["offset size\n"] + index_lines(f)), "silent"),
    "duplicated line": (duplicate_line, "silent"),
    "merged entries": (merge_entries, "silent"),
    "offset off by one": (offset_off_by_one, "fails"),
    "non-numeric line": (lambda f: set_index(f, index_lines(f)[:2] + ["12x 40\n"] + index_lines(f)[3:]), "silent"),
    "only an offset": (only_offset, "silent"),
    "swapped between shards": (swap_indexes, "fails"),
    "goes back": (go_back, "silent"),
    "line beyond the end": (line_beyond_the_end, "fails"),
    "no newline at the end": (lambda f: set_index(f, index_lines(f)[:-1] + [index_lines(f)[-1].rstrip("\n")]), "reads"),
    # not tfrecord2idx's form, though DALI reads its numbers (the PyTorch reader refuses it): reported as such
    "CRLF line endings": (lambda f: set_index(f, [line.replace("\n", "\r\n") for line in index_lines(f)]), "reads"),
}


def index_diagnoses(folder):
    """{defect: (line, message)} of the first index problem verify must report for each of INDEX_DEFECTS,
    worked out from the clean index's lines (each entry `<offset> <size>`) and its shard's size."""
    lines = index_lines(folder)
    (o0, s0), (o1, s1), (o2, s2) = ((int(n) for n in line.split()) for line in lines[:3])
    last_offset = lines[-1].split()[0]
    other_first_size = int(index_lines(folder, OTHER)[0].split()[1])
    n = len(lines)
    return {
        "missing": (None, "index file missing: DALI refuses to start without it"),
        "empty": (None, f"index file is empty but the shard has {n} records: DALI silently reads none of them"),
        "short": (None, f"{n - 1} lines for {n} records: DALI silently reads only {n - 1} of them"),
        "header line": (1, "a header line: 'offset size'; DALI stops parsing this file here"),
        "duplicated line": (4, "repeats the line before it: DALI reads that record twice an epoch"),
        "merged entries": (2, f"size {s1 + s2} spans 2 records (merged entries): DALI reads them as one"),
        "offset off by one": (3, f"offset {o2 + 1} is not where a record starts (expected {o2})"),
        "non-numeric line": (3, "not '<offset> <size>': '12x 40'; DALI stops parsing this file here"),
        "only an offset": (n, f"not tfrecord2idx's '<offset> <size>' line: '{last_offset}' "
                              "(DALI, which reads numbers in pairs, pairs the wrong ones from here)"),
        "swapped between shards": (1, f"size {other_first_size} but the record at this offset is {s0} bytes "
                                      "(16 + its length)"),
        "goes back": (3, f"goes back to byte {o0} (entries must follow each other)"),
        "line beyond the end": (n + 1, "no record starts at this offset"),
        "CRLF line endings": (1, f"not tfrecord2idx's '<offset> <size>' line: '{o0} {s0}\\r' (DALI reads its "
                                 "numbers; stricter readers, such as the PyTorch reader, refuse it)"),
        "no newline at the end": (n, "last line has no newline"),
    }


@pytest.mark.parametrize("defect", list(INDEX_DEFECTS))
def test_index_defects_are_reported_by_their_diagnosis(build, defect):
    """Each defect named for what it is, at the line it is on (JSON `record` is the index's line)."""
    expected = index_diagnoses(build)[defect]
    damage, _ = INDEX_DEFECTS[defect]
    damage(build)
    code, report = verify_json(build, "--quick")
    assert code == 1 and "index" in checks_failed(report), report["summary"]
    problem = next(p for p in report["problems"] if p["check"] == "index")
    assert problem["file"] == f"{SHARD}.idx"
    assert (problem["record"], problem["message"]) == expected


@pytest.mark.parametrize("defect", list(INDEX_DEFECTS))
def test_why_index_checks_exist_dali_on_the_same_defects(build, defect, dali):
    damage, behaviour = INDEX_DEFECTS[defect]
    damage(build)
    if behaviour == "silent":  # DALI gives a wrong epoch and says nothing
        size, distinct = dali_epoch(build)
        assert (size, distinct) != (TRAIN_RECORDS, TRAIN_RECORDS)
    elif behaviour == "reads":  # DALI's own parser takes it: what verify's message says
        assert dali_epoch(build) == (TRAIN_RECORDS, TRAIN_RECORDS)
    else:  # DALI notices these itself, at start or mid-epoch (its own error); verify finds them before training
        assert dali_epoch(build) is None


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
    duplicate_line(build)
    result = run_cli("verify", build, "--workers", 1)
    assert result.exit_code == 1
    shown = result.stdout.splitlines()
    assert f"    {SHARD}.idx, line 4, byte {offsets[2]}: repeats the line before it: DALI reads that record twice " \
           "an epoch" in shown, result.stdout
    # the index is wrong, so the records are read by their own framing: record 3 is still named
    assert f"    {SHARD}, record 3, byte {offsets[3]}: height/width {height}x0 not positive" in shown, result.stdout


def test_report_is_readable_and_exit_codes(build):
    drop_last_line(build)
    result = run_cli("verify", build, "--workers", 1, "--quick")
    assert result.exit_code == 1
    assert "lines for" in result.stdout and "silently reads only" in result.stdout
    assert f"{SHARD}.idx" in result.stdout and "FAILED" in result.stdout
    assert run_cli("verify", build / "nowhere").exit_code == 1
    assert run_cli("verify", "--bogus-option", build).exit_code == 2


# ------------------------------------------------------------------ index


def test_index_equals_what_convert_wrote(converted, tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    for p in converted.glob("*-of-*"):
        shutil.copy(p, shards)
    result = run_cli("index", shards, "--workers", 1, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert len(report["indexed"]) == 6 and report["records"] == 64
    for p in converted.glob("*-of-*"):
        index = f"dali_idx/{p.name}.idx"
        assert (shards / index).read_bytes() == (converted / index).read_bytes()
    other = tmp_path / "elsewhere"
    assert run_cli("index", shards / SHARD, "--index-dir", other).exit_code == 0
    assert (other / f"{SHARD}.idx").read_bytes() == (converted / "dali_idx" / f"{SHARD}.idx").read_bytes()


@pytest.mark.parametrize("defect", ["length past the end", "sign bit set", "trailing garbage", "flipped length CRC"])
def test_index_refuses_broken_framing_and_leaves_no_index(tmp_path, converted, defect):
    data, offset, message = FRAMING_DAMAGE[defect]
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(data)
    good = tmp_path / "good.tfrecord"
    shutil.copy(converted / SHARD, good)
    result = run_cli("index", bad, good, "--index-dir", tmp_path / "idx", "--workers", 1)
    assert result.exit_code == 1
    assert f"refused: {bad} at byte {offset}: " in result.stderr and message in result.stderr
    assert not (tmp_path / "idx" / "bad.tfrecord.idx").exists()
    assert not list((tmp_path / "idx").glob(".*"))  # no temporary left either
    assert (tmp_path / "idx" / "good.tfrecord.idx").exists()  # the sound file is still indexed


@pytest.mark.parametrize("content", ["nothing", "no shard-named file"])
def test_index_of_a_folder_without_tfrecords(tmp_path, content):
    """One line and exit 1, whether the folder is empty or holds only other files (a folder named like a
    shard is not a shard)."""
    if content != "nothing":
        (tmp_path / "notes.txt").write_text("hello")
        (tmp_path / "train-00000-of-00001").mkdir()
        (tmp_path / "old.tfrecord.idx").write_text("0 16\n")
    result = run_cli("index", tmp_path)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"error: {tmp_path}: holds no TFRecord files (<name>-NNNNN-of-NNNNN or *.tfrecord)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == (
        [] if content == "nothing" else ["notes.txt", "old.tfrecord.idx", "train-00000-of-00001"])


def test_index_refuses_two_files_that_would_share_one_index(tmp_path, converted):
    """a/s.tfrecord and b/s.tfrecord into one --index-dir: one index would be the other file's (DALI then
    fails or reads wrong records); a file named twice is indexed once."""
    for folder, shard in (("a", SHARD), ("b", OTHER)):
        (tmp_path / folder).mkdir()
        shutil.copy(converted / shard, tmp_path / folder / "s.tfrecord")
    clash = run_cli("index", tmp_path / "a" / "s.tfrecord", tmp_path / "b" / "s.tfrecord", "--index-dir",
                    tmp_path / "same")
    assert clash.exit_code == 2 and clash.stderr.count("\n") == 1 and "would both be indexed as" in clash.stderr
    assert not (tmp_path / "same").exists()
    twice = run_cli("index", tmp_path / "a" / "s.tfrecord", tmp_path / "a", "--index-dir", tmp_path / "same",
                    "--json")
    assert twice.exit_code == 0 and len(json.loads(twice.stdout)["indexed"]) == 1
    assert (tmp_path / "same" / "s.tfrecord.idx").read_bytes() == (
        converted / "dali_idx" / f"{SHARD}.idx").read_bytes()


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
