"""format/destination.py: a build's output and index folders, one value: the index folder resolved from --index-dir
or from what the manifest records, recorded there so that it reads back the same, and placed against the output."""

import os

import pytest

from imagenet_build.format.destination import Destination, default_index_dir, destination
from imagenet_build.infra.errors import UsageError


def test_the_index_folder_is_output_dali_idx_unless_given(tmp_path):
    out = str(tmp_path / "out")
    default = destination(out + "/", None)
    assert (default.output, default.index, default.index_given) == (out, os.path.join(out, "dali_idx"), False)
    assert default.index == default_index_dir(out) and default.placement == "inside"
    given = destination(out, str(tmp_path / "idx") + "/")
    assert (given.index, given.index_given, given.placement) == (str(tmp_path / "idx"), True, "elsewhere")
    assert destination(out, out).placement == "beside"
    assert destination("s3://b/out/", None) == Destination("s3://b/out", "s3://b/out/dali_idx")
    with pytest.raises(UsageError, match="--output-dir and --index-dir must both be local or both be URLs"):
        destination(out, "s3://b/idx")


@pytest.mark.parametrize("index,label,placement", [
    (None, "dali_idx", "inside"),
    ("{out}/idx", "idx", "inside"),
    ("{out}", ".", "beside"),
    ("{tmp}/elsewhere", "{tmp}/elsewhere", "elsewhere"),
])
def test_what_the_manifest_records_reads_back_as_the_same_folder(tmp_path, index, label, placement):
    out = str(tmp_path / "out")
    given = destination(out, index and index.format(out=out, tmp=tmp_path))
    recorded = given.label_for_manifest()
    assert recorded == label.format(tmp=tmp_path.resolve()) and given.placement == placement
    read = Destination.recorded(out, {"options": {"index_dir": recorded}})
    assert os.path.realpath(read.index) == os.path.realpath(given.index) and read.placement == placement


def test_a_written_builds_index_folder_comes_from_the_option_then_the_manifest_then_the_default():
    assert Destination.recorded("/out", None).index == os.path.join("/out", "dali_idx")
    assert Destination.recorded("/out", {"options": {}}).index == os.path.join("/out", "dali_idx")
    assert Destination.recorded("/out", {"options": {"index_dir": "/elsewhere"}}).index == "/elsewhere"
    assert Destination.recorded("/out", {"options": {"index_dir": "idx"}}, "/given") == Destination(
        "/out", "/given", index_given=True)
    assert Destination.recorded("s3://b/out", {"options": {"index_dir": "idx"}}).index == "s3://b/out/idx"
    assert Destination.recorded("s3://b/out", {"options": {"index_dir": "gs://c/idx"}}).index == "gs://c/idx"
    url = destination("s3://b/out", "s3://b/out/idx")
    assert url.label_for_manifest() == "idx" and destination("s3://b/out", "s3://c/i").label_for_manifest() == "s3://c/i"


def test_a_resized_builds_folders_are_below_the_runs(tmp_path):
    """--resize: OUTPUT/shorter-96 with its own dali_idx/, or --index-dir's own shorter-96/ where given."""
    out = str(tmp_path / "out")
    own = destination(out, None).below("shorter-96")
    assert own == Destination(os.path.join(out, "shorter-96"), os.path.join(out, "shorter-96", "dali_idx"))
    assert own.label_for_manifest() == "dali_idx"
    given = destination(out, str(tmp_path / "idx")).below("shorter-96")
    assert given == Destination(os.path.join(out, "shorter-96"), str(tmp_path / "idx" / "shorter-96"), True)
    assert destination("s3://b/out", "s3://b/idx/").below("longer-500").index == "s3://b/idx/longer-500"
