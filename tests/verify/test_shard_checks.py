"""The shard checks (framing, index) on one shard and its index made here, through the worker task that runs
them, each held to its exact finding: the file, the record or index line, the byte, and what it says."""

import pytest

from helpers import GOOD
from imagenet_build.verify.check import Mode
from imagenet_build.verify.shard import check_shard
from imagenet_build.verify.shard_checks import Framing, Index

NAME = "train-00000-of-00001"
FULL = Mode(quick=False, deep=False, expect_imagenet=False, manifest=True)
GOOD_INDEX = b"0 21\n21 30\n"  # GOOD's two records: 16 bytes of framing each, payloads of 5 and 14 bytes


def found(tmp_path, data, index, mode=FULL):
    """[(check, file, record, offset, message)] the shard checks find in a shard of `data` with `index` (bytes,
    "folder" for a folder in its place, or None for none)."""
    shard, index_path = tmp_path / NAME, tmp_path / f"{NAME}.idx"
    shard.write_bytes(data)
    if index == "folder":
        index_path.mkdir()
    elif index is not None:
        index_path.write_bytes(index)
    result = check_shard(str(shard), str(index_path), mode, (Framing, Index))
    return [tuple(p.values()) for p in result.problems.shown]


@pytest.mark.parametrize("mode", [FULL, FULL._replace(quick=True)])
def test_a_sound_shard_and_index_pass(tmp_path, mode):
    assert found(tmp_path, GOOD, GOOD_INDEX, mode) == []


def test_a_shard_of_no_records_is_a_problem(tmp_path):
    assert found(tmp_path, b"", b"") == [("framing", NAME, None, 0, "shard holds no records")]


def test_broken_framing_names_the_record_and_byte_and_leaves_the_index_unjudged(tmp_path):
    assert found(tmp_path, GOOD[:-3], b"0 21\n21 99\n") == [
        ("framing", NAME, 1, 21, "record of 14 bytes runs past the end of the file (48 bytes)")]


def test_an_index_that_is_not_a_file_is_named(tmp_path):
    assert found(tmp_path, GOOD, "folder") == [
        ("index", f"{NAME}.idx", None, None, "not a regular file (a folder): DALI cannot read it")]


def test_an_index_line_at_fault_is_named_with_its_line_and_byte(tmp_path):
    (problem,) = found(tmp_path, GOOD, b"0 21\n22 29\n")
    assert problem == ("index", f"{NAME}.idx", 2, 22, "offset 22 is not where a record starts (expected 21)")
