"""prepare-val (tools/prepare_val.py): slim's validation folders, linked, copied or moved, safe to run twice,
refused before anything moves."""

import json
import os
import shutil

import pytest

from conftest import run_cli, run_process, tree_digest
from helpers import expect_error
from run_helpers import hold_lock


@pytest.fixture
def flat_val(sample_dir, tmp_path):
    val = tmp_path / "val"
    shutil.copytree(sample_dir / "validation", val)
    return val, sample_dir / "validation_labels.txt"


def test_prepare_val_links_and_is_safe_to_run_twice(flat_val):
    val, labels = flat_val
    synsets = labels.read_text().split()
    first = json.loads(run_cli("prepare-val", val, "--labels", labels, "--json").stdout)
    assert first["placed"] == 16 and first["already_in_place"] == 0
    for number, synset in enumerate(synsets, start=1):
        name = f"ILSVRC2012_val_{number:08d}.JPEG"
        assert os.path.samefile(val / name, val / synset / name)  # hard link, flat original kept
    again = json.loads(run_cli("prepare-val", val, "--labels", labels, "--json").stdout)
    assert again["placed"] == 0 and again["already_in_place"] == 16


def test_prepare_val_dry_run_partial_set_conflicts_and_move(flat_val):
    val, labels = flat_val
    synsets = labels.read_text().split()
    before = tree_digest(val)
    dry = json.loads(run_cli("prepare-val", val, "--labels", labels, "--dry-run", "--json").stdout)
    assert dry["placed"] == 16 and tree_digest(val) == before
    (val / "ILSVRC2012_val_00000002.JPEG").unlink()  # a partial set
    (val / synsets[0]).mkdir(exist_ok=True)
    (val / synsets[0] / "ILSVRC2012_val_00000001.JPEG").write_bytes(b"someone else's file")
    result = run_cli("prepare-val", val, "--labels", labels, "--move")
    assert result.exit_code == 1 and "conflict" in result.stderr
    assert (val / synsets[0] / "ILSVRC2012_val_00000001.JPEG").read_bytes() == b"someone else's file"
    assert (val / "ILSVRC2012_val_00000001.JPEG").exists()  # not moved over the conflict
    assert not (val / "ILSVRC2012_val_00000003.JPEG").exists()  # moved
    assert (val / synsets[2] / "ILSVRC2012_val_00000003.JPEG").exists()
    assert "moved: 14" in result.stdout


def test_prepare_val_with_another_labels_file_is_refused_before_anything_moves(flat_val, tmp_path):
    val, labels = flat_val
    assert run_cli("prepare-val", val, "--labels", labels).exit_code == 0
    synsets = labels.read_text().split()
    other = tmp_path / "other_labels.txt"
    other.write_text("\n".join(synsets[1:] + synsets[:1]) + "\n")  # image 1 (and most others) under another synset
    before = tree_digest(val)
    name = "ILSVRC2012_val_00000001.JPEG"
    expect_error(["prepare-val", val, "--labels", other], 1,
                 f"{val / synsets[0] / name}: in folder {synsets[0]}, but {other} gives {synsets[1]} (",
                 "such image(s)): placed by a run with another labels file")
    expect_error(["prepare-val", val, "--labels", other, "--dry-run"], 1, "placed by a run with another labels file")
    assert tree_digest(val) == before
    assert run_cli("prepare-val", val, "--labels", labels).exit_code == 0  # the first labels file: all in place


def test_prepare_val_refuses_a_locked_folder(tmp_path, sample_dir):
    val = tmp_path / "val"
    shutil.copytree(sample_dir / "validation", val)
    holder = hold_lock(val)
    try:
        result = run_process("prepare-val", val, "--labels", sample_dir / "validation_labels.txt")
        assert result.returncode == 1 and f"pid {holder.pid}" in result.stderr
    finally:
        holder.kill()
        holder.wait()
