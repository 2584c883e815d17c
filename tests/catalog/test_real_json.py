"""catalog/real_labels.py's reading of real.json: what is not there, not a file or not JSON, each in its exact
line naming the path (its contents' rules: tests/writer/test_convert_real_labels.py)."""

import os

import pytest

from imagenet_build.catalog.real_labels import read_real_json
from imagenet_build.infra.errors import InputError

EXPECTED = "expected real.json, a list of 50,000 lists"


def refused(path):
    with pytest.raises(InputError) as error:
        read_real_json(path)
    assert error.value.path == str(path)
    return error.value.problem


def test_a_real_json_that_cannot_be_read_is_one_line_naming_it(tmp_path):
    assert refused(tmp_path / "real.json") == "file not found"
    assert refused(tmp_path) == f"not a regular file (a folder): {EXPECTED}"
    (tmp_path / "notes.txt").write_text("a file")
    assert refused(tmp_path / "notes.txt" / "real.json") == "a folder of its path is a file"
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    assert refused(tmp_path / "loop") == "Too many levels of symbolic links"
    (tmp_path / "bad.json").write_text("[[0], [1")
    assert refused(tmp_path / "bad.json").startswith("not valid JSON (") and refused(tmp_path / "bad.json").endswith(
        f"): {EXPECTED}")


def test_a_real_json_far_larger_than_any_or_of_another_shape_is_refused_before_its_entries(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(65 << 20)  # sparse: real.json is ~0.4 MB, nothing near 64 MiB is one
    assert refused(big) == f"larger than 67,108,864 bytes, more than any such file holds: {EXPECTED}"
    (tmp_path / "dict.json").write_text("{}")
    assert refused(tmp_path / "dict.json") == "holds a JSON dict, expected a list of 50,000 lists (real.json)"
