"""cli/report_command.py: --classes checked while the command line is parsed, refused as click refuses a value, in
exact words, before the folder is looked at (the page itself: tests/report/)."""

import pytest
from click.testing import CliRunner

from imagenet_build.cli import cli


def report(folder, classes):
    return CliRunner().invoke(cli, ["report", str(folder), "--classes", classes], prog_name="imagenet-build")


@pytest.mark.parametrize("classes", ["0", "-1", "²", "x", "1.5", ""])
def test_classes_other_than_a_number_or_all_is_refused_before_the_folder_is_read(tmp_path, classes):
    result = report(tmp_path / "nowhere", classes)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == ("error: Invalid value for '--classes': a number of classes (1 or more) or 'all' "
                             "(see: imagenet-build report --help)\n")


@pytest.mark.parametrize("classes", ["1", "24", "all"])
def test_classes_given_as_a_number_or_all_is_taken_and_the_folder_then_read(tmp_path, classes):
    result = report(tmp_path / "nowhere", classes)
    assert (result.exit_code, result.stderr) == (1, f"error: {tmp_path / 'nowhere'}: not a folder\n")
