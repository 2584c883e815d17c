"""verify's index check against every index defect made here from a clean build, each reported by its
diagnosis; and DALI's reader on the same defects, silent where verify speaks: why the check exists."""


import pytest

from helpers import OTHER, SHARD, dali_epoch, index_lines, set_index
from run_helpers import TRAIN_RECORDS, checks_failed, verify_json


@pytest.fixture
def dali():
    return pytest.importorskip("nvidia.dali")


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
