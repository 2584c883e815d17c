"""infra/errors.py: the file system's errors as one line naming the path."""

import os

import pytest

from imagenet_build.infra.errors import InputError, input_errors


def test_input_errors_name_the_path(tmp_path):
    with pytest.raises(InputError, match="nowhere: folder not found"), input_errors(tmp_path / "nowhere",
                                                                                     missing="folder not found"):
        os.listdir(tmp_path / "nowhere")
    with pytest.raises(InputError, match="is a folder, expected a text file"), input_errors(tmp_path,
                                                                                            expected="a text file"):
        open(tmp_path).read()
    (tmp_path / "notes.txt").write_text("a file")
    with pytest.raises(InputError) as listed, input_errors(tmp_path / "notes.txt", expected="a folder"):
        os.listdir(tmp_path / "notes.txt")
    assert (listed.value.path, listed.value.problem) == (str(tmp_path / "notes.txt"), "is a file, expected a folder")
    with pytest.raises(InputError) as below, input_errors(tmp_path / "notes.txt" / "real.json", expected="a list"):
        open(tmp_path / "notes.txt" / "real.json").read()
    assert below.value.problem == "a folder of its path is a file"  # not "is a file": the path itself is none
