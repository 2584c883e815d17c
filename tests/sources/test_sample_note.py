"""The note `sample` writes beside a sample (imagenet-build-sample.json): `convert --from DIR` takes the sample as
it is, an option given wins over the note, and a note that is not what `sample` writes is one line naming it."""

import json
import os

import pytest

from conftest import run_cli, shard_files
from helpers import expect_error, user_copy_of
from imagenet_build.sources.samples import SAMPLE_NOTE, sample_files

SHARDS = ["--train-shards", 4, "--validation-shards", 2, "--layout-threads", 2, "--workers", 1]


@pytest.fixture
def sample(sample_dir, tmp_path):
    """The session's sample, copied with its note, to be edited."""
    import shutil

    return shutil.copytree(sample_dir, tmp_path / "s")


def test_the_sample_as_it_is_gives_the_build_its_files_name(sample, tmp_path):
    """--from the sample alone gives the build of the same command with its three files named."""
    taken = run_cli("convert", "--from", sample, *SHARDS, "--output-dir", tmp_path / "taken")
    assert taken.exit_code == 0, taken.output
    assert "note: the sample's own bboxes.csv, labels.txt, validation_labels.txt (imagenet-build-sample.json)" \
        in taken.stdout
    named = run_cli("convert", "--from", user_copy_of(sample, tmp_path / "copy"), *SHARDS,
                    "--labels-file", sample / "labels.txt",
                    "--validation-labels-file", sample / "validation_labels.txt",
                    "--bounding-box-file", sample / "bboxes.csv", "--output-dir", tmp_path / "named")
    assert named.exit_code == 0, named.output
    assert shard_files(tmp_path / "taken") == shard_files(tmp_path / "named")


def test_an_option_given_wins_over_the_note(sample, tmp_path):
    """--validation-labels-file given (here a wrong one, its 4 lines for 16 images): it is the one read, not the
    note's, and the one line names it."""
    result = run_cli("convert", "--from", sample, *SHARDS, "--output-dir", tmp_path / "out",
                     "--validation-labels-file", sample / "labels.txt")
    assert result.exit_code == 1
    assert f"{sample / 'labels.txt'} has 4 lines, this is image 5" in result.stderr


def test_the_same_files_without_the_note_are_a_users_copy(sample_dir, tmp_path):
    """Only `sample` writes the note: the same files without it are read as any copy of 4 classes would be."""
    copy = user_copy_of(sample_dir, tmp_path / "copy")
    assert sample_files([str(copy)]) == {}
    expect_error(["convert", "--from", copy, *SHARDS, "--output-dir", tmp_path / "out"], 1,
                 f"error: {copy / 'train'}: no class folder for 996 synset(s)")


@pytest.mark.parametrize("note,problem", [
    ({"labels_file": "../labels.txt", "validation_labels_file": "validation_labels.txt",
      "bounding_box_file": "bboxes.csv"}, "labels_file: '../labels.txt' is no file name in the sample's folder"),
    ({"labels_file": "", "validation_labels_file": "validation_labels.txt", "bounding_box_file": "bboxes.csv"},
     "labels_file: '' is no file name in the sample's folder"),
    ({"labels_file": "labels.txt"}, "validation_labels_file"),
    ([1], "[1] is not an object"),
])
def test_a_note_that_sample_did_not_write_is_one_line(sample, tmp_path, note, problem):
    (sample / SAMPLE_NOTE).write_text(json.dumps(note))
    expect_error(["convert", "--from", sample, *SHARDS, "--output-dir", tmp_path / "out"], 1,
                 f"error: {sample / SAMPLE_NOTE}: ", problem)
    assert not (tmp_path / "out").exists()


def test_a_note_that_is_a_fifo_is_refused_unread(sample, tmp_path):
    (sample / SAMPLE_NOTE).unlink()
    os.mkfifo(sample / SAMPLE_NOTE)
    expect_error(["convert", "--from", sample, *SHARDS, "--output-dir", tmp_path / "out"], 1,
                 f"error: {sample / SAMPLE_NOTE}: ", "FIFO")
