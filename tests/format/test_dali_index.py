"""The DALI index rule on small shards made here: each defect by its exact diagnosis, line and byte,
as verify (check_index) and every reader (index_entries) report it, and `index` over files and folders."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import record
from imagenet_build.format import dali_index
from imagenet_build.format.dali_index import check_index, index_entries, parse_index
from imagenet_build.format.tfrecord import FramingError
from imagenet_build.infra import read_door
from imagenet_build.infra.errors import BuildError

SHARD = record(b"first") + record(b"second payload") + record(b"third")  # records of 21, 30, 21 bytes
ENTRIES = [(0, 21), (21, 30), (51, 21)]
SIZE = 72
GOOD = b"0 21\n21 30\n51 21\n"
REPEATS = "repeats the line before it: DALI reads that record twice an epoch"


def lines(*pairs):
    return "".join(f"{o} {s}\n" for o, s in pairs).encode()


def test_a_sound_index_has_no_problem_whether_the_records_are_known_or_not():
    assert dali_index.index_text(ENTRIES) == GOOD.decode()
    assert check_index(GOOD, ENTRIES, SIZE) == [] and check_index(GOOD, None, SIZE) == []
    assert parse_index(GOOD) == ([(1, 0, 21), (2, 21, 30), (3, 51, 21)], [])
    assert check_index(b"", [], 0) == [] and check_index(b"", None, 0) == []  # an empty shard, an empty index
    assert check_index(b"0 16\n", [(0, 16)], 16) == [] and check_index(b"0 16\n", None, 16) == []  # empty payload


# (index bytes, problems with the shard's records known (verify), problems with only its size known (readers))
DEFECTS = {
    "missing": (None, [(None, None, "index file missing: DALI refuses to start without it")], None),
    "empty": (b"", [(None, None, "index file is empty but the shard has 3 records: DALI silently reads none of them")],
              [(None, None, "index file is empty but the shard has 72 bytes: DALI silently reads none of them")]),
    "short": (lines((0, 21), (21, 30)), [(None, 51, "2 lines for 3 records: DALI silently reads only 2 of them")],
              [(2, 51, "the last entry ends at byte 51, the shard has 72 bytes: "
                       "the records after it are missing from the index")]),
    "line beyond the end": (GOOD + b"72 21\n", [(4, 72, "no record starts at this offset")],
                            [(4, 93, "the last entry ends at byte 93, the shard has 72 bytes: "
                                     "it runs past the end of the shard")]),
    "last entry too long": (lines((0, 21), (21, 30), (51, 25)),
                            [(3, 51, "size 25 but the record at this offset is 21 bytes (16 + its length)")],
                            [(3, 76, "the last entry ends at byte 76, the shard has 72 bytes: "
                                     "it runs past the end of the shard")]),
    "first entry not at 0": (lines((5, 21), (21, 30), (51, 21)),
                             [(1, 5, "offset 5 is not where a record starts (expected 0)")],
                             [(1, 5, "the first entry starts at byte 5, not 0")]),
    "first entry skips a record": (lines((21, 30), (51, 21)),
                                   [(1, 21, "skips the record(s) between byte 0 and 21")],
                                   [(1, 21, "the first entry starts at byte 21, not 0")]),
    "its only line out of place": (lines((21, 30)), [(1, 21, "skips the record(s) between byte 0 and 21")],
                                   [(1, 21, "the first entry starts at byte 21, not 0")]),
    "a record skipped": (lines((0, 21), (51, 21)), [(2, 51, "skips the record(s) between byte 21 and 51")],
                         [(2, 51, "starts at byte 51, but line 1 ends at byte 21: entries must follow each other")]),
    "offset off by one": (lines((0, 21), (22, 30), (51, 21)),
                          [(2, 22, "offset 22 is not where a record starts (expected 21)")],
                          [(2, 22, "starts at byte 22, but line 1 ends at byte 21: entries must follow each other")]),
    "repeated line": (lines((0, 21), (21, 30), (21, 30), (51, 21)), [(3, 21, REPEATS)], [(3, 21, REPEATS)]),
    "repeated first line": (lines((0, 21), (0, 21), (21, 30), (51, 21)), [(2, 0, REPEATS)], [(2, 0, REPEATS)]),
    "goes back": (lines((0, 21), (21, 30), (0, 21)),  # line 3 is line 1's, not the line before it
                  [(3, 0, "goes back to byte 0 (entries must follow each other)")],
                  [(3, 0, "starts at byte 0, but line 2 ends at byte 51: entries must follow each other")]),
    "merged entries": (lines((0, 51), (51, 21)),
                       [(1, 0, "size 51 spans 2 records (merged entries): DALI reads them as one")], []),
    "all merged": (lines((0, 72)), [(1, 0, "size 72 spans 3 records (merged entries): DALI reads them as one")], []),
    "size into the next record": (lines((0, 40), (40, 32)),
                                  [(1, 0, "size 40 but the record at this offset is 21 bytes (16 + its length)")], []),
    "size one record short of the end": (lines((0, 21), (21, 50)),
                                         [(2, 21, "size 50 but the record at this offset is 30 bytes "
                                                  "(16 + its length)")],
                                         [(2, 71, "the last entry ends at byte 71, the shard has 72 bytes: "
                                                  "the records after it are missing from the index")]),
    "size below the framing": (lines((0, 15), (15, 57)),
                               [(1, 0, "size 15 but the record at this offset is 21 bytes (16 + its length)")],
                               [(1, 0, "size 15 is less than a record's 16 bytes of framing")]),
}


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_each_index_defect_by_its_diagnosis(defect):
    raw, known, size_only = DEFECTS[defect]
    assert check_index(raw, ENTRIES, SIZE) == known
    if size_only is not None:
        assert check_index(raw, None, SIZE) == size_only


LINE_PROBLEMS = {  # index bytes: the first problem parse_index reports
    b"offset size\n0 21\n": (1, None, "a header line: 'offset size'; DALI stops parsing this file here"),
    b"0 21\noffset size\n": (2, None, "not '<offset> <size>': 'offset size'; DALI stops parsing this file here"),
    b"12x 40\n": (1, None, "not '<offset> <size>': '12x 40'; DALI stops parsing this file here"),
    b"0 21\r\n": (1, None, "not tfrecord2idx's '<offset> <size>' line: '0 21\\r' (DALI reads its numbers; "
                           "stricter readers, such as the PyTorch reader, refuse it)"),
    b"0 21\n21\n": (2, None, "not tfrecord2idx's '<offset> <size>' line: '21' (DALI, which reads numbers in "
                             "pairs, pairs the wrong ones from here)"),
    b"0 21\n\n21 30\n": (2, None, "not tfrecord2idx's '<offset> <size>' line: '' (DALI reads its numbers; "
                                  "stricter readers, such as the PyTorch reader, refuse it)"),
    b"+0 -21\n": (1, None, "not tfrecord2idx's '<offset> <size>' line: '+0 -21' (DALI reads its numbers; "
                           "stricter readers, such as the PyTorch reader, refuse it)"),
    b"0  21\n": (1, None, "not tfrecord2idx's '<offset> <size>' line: '0  21' (DALI reads its numbers; "
                          "stricter readers, such as the PyTorch reader, refuse it)"),
    b"0 21 \n": (1, None, "not tfrecord2idx's '<offset> <size>' line: '0 21 ' (DALI reads its numbers; "
                          "stricter readers, such as the PyTorch reader, refuse it)"),
    b" 0 21\n": (1, None, "not tfrecord2idx's '<offset> <size>' line: ' 0 21' (DALI reads its numbers; "
                          "stricter readers, such as the PyTorch reader, refuse it)"),
    b"1" * 70 + b"  2\n": (1, None, f"not tfrecord2idx's '<offset> <size>' line: {'1' * 60!r} (DALI reads its "
                                   "numbers; stricter readers, such as the PyTorch reader, refuse it)"),
    b"x" * 70 + b"\n": (1, None, f"a header line: {'x' * 60!r}; DALI stops parsing this file here"),
    # digits of other scripts are not numbers in an index (Python's int() and \\d would take them)
    b"0 21\n\xd9\xa3 21\n": (2, None, "not '<offset> <size>': '\ufffd\ufffd 21'; DALI stops parsing this file here"),
    b"0 2\xff\n": (1, None, "not '<offset> <size>': '0 2\ufffd'; DALI stops parsing this file here"),  # U+FFFD
}


@pytest.mark.parametrize("raw", list(LINE_PROBLEMS))
def test_a_line_dali_cannot_parse_is_named_with_what_dali_makes_of_it(raw):
    parsed, problems = parse_index(raw)
    assert problems[0] == LINE_PROBLEMS[raw]
    assert check_index(raw, ENTRIES, SIZE)[0] == LINE_PROBLEMS[raw]  # reported before the coverage of the lines
    assert all(number != LINE_PROBLEMS[raw][0] for number, _, _ in parsed)


def test_a_last_line_without_its_newline_is_parsed_and_reported():
    assert parse_index(b"0 21\n21 30\n51 21") == ([(1, 0, 21), (2, 21, 30), (3, 51, 21)],
                                                 [(3, None, "last line has no newline")])
    assert parse_index(b"0 21\n21 30\r\n51 21") == ([(1, 0, 21), (3, 51, 21)], [
        (3, None, "last line has no newline"),
        (2, None, "not tfrecord2idx's '<offset> <size>' line: '21 30\\r' (DALI reads its numbers; "
                  "stricter readers, such as the PyTorch reader, refuse it)")])
    assert check_index(b"0 21\n21 30\n51 21", ENTRIES, SIZE) == [(3, None, "last line has no newline")]


@pytest.fixture
def shard(tmp_path):
    path = tmp_path / "train-00000-of-00001"
    path.write_bytes(SHARD)
    return path


def written_index(shard, raw):
    index = shard.parent / "dali_idx" / f"{shard.name}.idx"
    index.parent.mkdir(exist_ok=True)
    index.write_bytes(raw)
    return index


def test_write_index_writes_tfrecord2idxs_bytes(shard, tmp_path):
    index = tmp_path / "new" / "folder" / "s.idx"
    assert dali_index.write_index(str(shard), str(index)) == 3
    assert index.read_bytes() == GOOD
    assert dali_index.record_entries(str(shard)) == ENTRIES
    assert index_entries(str(shard), str(index)) == ENTRIES


def test_an_empty_or_broken_file_gets_no_index(tmp_path):
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    with pytest.raises(FramingError) as info:
        dali_index.write_index(str(empty), str(tmp_path / "empty.idx"))
    assert (info.value.offset, info.value.message) == (0, "empty file (0 bytes): not a TFRecord file")
    broken = tmp_path / "broken.tfrecord"
    broken.write_bytes(SHARD + b"xx")
    with pytest.raises(FramingError, match="^byte 72: 2 trailing byte"):
        dali_index.write_index(str(broken), str(tmp_path / "broken.idx"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.tfrecord", "empty.tfrecord"]


def test_a_reader_takes_a_last_line_without_newline_as_dali_does(shard):
    index = written_index(shard, GOOD[:-1])
    assert index_entries(str(shard), str(index)) == ENTRIES


def test_a_reader_takes_an_empty_index_of_an_empty_shard(tmp_path):
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    (tmp_path / "empty.idx").write_bytes(b"")
    assert index_entries(str(empty), str(tmp_path / "empty.idx")) == []


READER_REFUSALS = {  # index bytes: what the one BuildError line says between the index and the shard
    b"": "index file is empty but the shard has 72 bytes: DALI silently reads none of them",
    b"0 21\n21 30\n": "line 2: the last entry ends at byte 51, the shard has 72 bytes: the records after it are "
                      "missing from the index",
    b"0 21\n21 30\n51 21\n72 21": "line 4: the last entry ends at byte 93, the shard has 72 bytes: it runs past "
                                  "the end of the shard",
    b"0 21\n0 21\n21 30\n51 21\n": f"line 2: {REPEATS}",
    b"offset size\n0 21\n21 30\n51 21\n": "line 1: a header line: 'offset size'; DALI stops parsing this file here",
    b"0 21\n21 30\n51\n": "line 3: not tfrecord2idx's '<offset> <size>' line: '51' (DALI, which reads numbers in "
                          "pairs, pairs the wrong ones from here)",
    b"0 21\n21 30\n51 21\r\n": "line 3: not tfrecord2idx's '<offset> <size>' line: '51 21\\r' (DALI reads its "
                               "numbers; stricter readers, such as the PyTorch reader, refuse it)",
}


@pytest.mark.parametrize("raw", list(READER_REFUSALS))
def test_a_reader_refuses_an_index_that_does_not_cover_its_shard_in_one_line(shard, raw):
    index = written_index(shard, raw)
    with pytest.raises(BuildError) as info:
        index_entries(str(shard), str(index))
    assert str(info.value) == (f"{index}: {READER_REFUSALS[raw]} (the index of {shard}); "
                               "run imagenet-build verify")


def test_a_reader_names_a_missing_index(shard, tmp_path):
    index = tmp_path / "dali_idx" / "none.idx"
    with pytest.raises(BuildError) as info:
        index_entries(str(shard), str(index))
    assert str(info.value) == f"{index}: DALI index missing (the index of {shard}); run imagenet-build index"


@pytest.mark.parametrize("node", ["a FIFO", "a folder"])
def test_a_reader_refuses_an_index_that_is_not_a_file_unread(shard, tmp_path, node):
    index = tmp_path / "train.idx"
    os.mkfifo(index) if node == "a FIFO" else index.mkdir()
    with pytest.raises(BuildError) as info:
        index_entries(str(shard), str(index))
    assert str(info.value) == (f"{index}: not a regular file ({node}) (the index of {shard}); "
                               "run imagenet-build verify")


def test_an_index_written_to_object_storage_makes_no_local_folder(shard, memory_prefix, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert dali_index.write_index(str(shard), f"{memory_prefix}/dali_idx/s.idx") == 3
    assert read_door.read_bytes(f"{memory_prefix}/dali_idx/s.idx") == GOOD
    assert sorted(os.listdir(tmp_path)) == [shard.name]


def test_indexes_equal_tfrecord2idx_output(converted, tmp_path):
    """The indexes convert writes are DALI's own tfrecord2idx's, byte for byte."""
    script = shutil.which("tfrecord2idx", path=os.path.dirname(sys.executable))
    assert script, "DALI's tfrecord2idx is not installed"
    paths = sorted(str(p) for p in converted.glob("*-of-*"))
    for n, path in enumerate(paths):
        reference = tmp_path / (Path(path).name + ".idx")
        if n == 0:  # as users run it, TensorFlow installed (it then reads through tf.io.gfile)
            cmd = [sys.executable, script, path, str(reference)]
        else:  # the same script with TensorFlow hidden (plain open(); ~3 s faster per file)
            hide_tf = "import sys, runpy; sys.modules['tensorflow'] = None; sys.argv = sys.argv[1:]; " \
                      "runpy.run_path(sys.argv[0], run_name='__main__')"
            cmd = [sys.executable, "-c", hide_tf, script, path, str(reference)]
        subprocess.run(cmd, check=True, capture_output=True)
        ours = converted / "dali_idx" / (Path(path).name + ".idx")
        assert ours.read_bytes() == reference.read_bytes(), path
