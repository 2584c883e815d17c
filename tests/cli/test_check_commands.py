"""cli/check_commands.py: trainer-check's command line read as written — --mean and --std as up to three numbers
after the option, --split's name, --show's file checked before any training — its refusals word for word, and the
help of the options the reader registry fills (parsed only: no verb runs here)."""

import json

import click
import pytest
from click.testing import CliRunner

from imagenet_build.cli import cli

TRAINER_CHECK = cli.commands["trainer-check"]
THREE_NUMBERS = "three numbers, one per channel (R G B), e.g. '123.68 116.28 103.53'"


def parsed(*args):
    """trainer-check's parameters as its command line gives them, the verb not run."""
    with TRAINER_CHECK.make_context("trainer-check", [str(a) for a in args]) as ctx:
        return ctx.params


def refused(*args):
    """The error line and exit code of a trainer-check command line refused while it is parsed."""
    result = CliRunner().invoke(cli, ["trainer-check", *map(str, args)], prog_name="imagenet-build")
    assert result.stdout == "" and "Traceback" not in result.stderr, result.output
    return result.exit_code, result.stderr


@pytest.mark.parametrize("args,mean,std,folder", [
    (["x", "--mean", "0", "0", "0", "--std", "1", "1", "1"], (0, 0, 0), (1, 1, 1), "x"),
    (["--mean", "1", "2", "3", "4"], (1, 2, 3), None, "4"),  # at most three numbers: the fourth is FOLDER
    (["--std", "3", "2", "1", "x"], None, (3, 2, 1), "x"),
    (["--mean", "1,2,3", "x"], (1, 2, 3), None, "x"),  # one value: taken as it is
    (["--mean=4 5 6", "--std", "7", "8", "9", "x"], (4, 5, 6), (7, 8, 9), "x"),
    (["--mean", "0", "0", "0", "--", "--std"], (0, 0, 0), None, "--std"),  # after --, FOLDER whatever it looks like
    (["--", "--mean"], None, None, "--mean"),
])
def test_mean_and_std_take_up_to_three_numbers_after_the_option(args, mean, std, folder):
    params = parsed(*args)
    assert (params["mean"], params["std"], params["folder"]) == (mean, std, folder)


@pytest.mark.parametrize("args", [
    ["x", "--mean", "0", "0"],
    ["--mean", "1", "2", "x"],
    ["x", "--std", "a", "b", "c"],
    ["x", "--mean", "1 2 3 4"],
    ["x", "--mean", "1,2"],
])
def test_mean_or_std_of_other_than_three_numbers_is_a_usage_error(args):
    option = "--mean" if "--mean" in args else "--std"
    assert refused(*args) == (2, f"error: Invalid value for '{option}': {THREE_NUMBERS} "
                                 "(see: imagenet-build trainer-check --help)\n")


def test_after_a_double_dash_numbers_are_arguments_each_of_its_own():
    assert refused("--", "--mean", "1", "2") == (
        2, "error: Got unexpected extra arguments (1 2) (see: imagenet-build trainer-check --help)\n")


def test_a_split_is_a_name_a_file_can_take(tmp_path):
    assert parsed("x", "--split", "validation.v2-b_1")["split"] == "validation.v2-b_1"
    assert parsed("x")["split"] == "train"
    assert refused("x", "--split", "a/b") == (
        2, "error: Invalid value for '--split': a split is named with letters, digits, '_', '.' and '-' "
           "(train, validation, test) (see: imagenet-build trainer-check --help)\n")


def test_show_is_checked_before_the_run_and_may_name_a_picture_in_the_build(tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    (build / "manifest.json").write_text(json.dumps({}))
    assert parsed(build, "--show", build / "mine.png")["show"] == str(build / "mine.png")
    assert parsed(build, "--show", tmp_path / "out.png")["show"] == str(tmp_path / "out.png")
    assert parsed(build)["show"] is None
    code, line = refused(build, "--show", build / "manifest.json")
    assert code == 1 and line.startswith(f"error: {build / 'manifest.json'}: --show would write over manifest.json "
                                         f"of the build in {build}, which holds only its shards"), line
    assert line.endswith("; here it writes only trainer-check.png; name a file outside the build\n"), line
    assert (build / "manifest.json").read_text() == "{}"


def test_the_registry_fills_the_options_choices_and_help_once(monkeypatch):
    """Filled here, not by whichever test parsed trainer-check's line first: as when the command first runs."""
    from imagenet_build.cli import check_commands

    trainers = check_commands._trainers()
    monkeypatch.setattr(TRAINER_CHECK, "_filled", False)
    ctx = click.Context(TRAINER_CHECK, info_name="trainer-check")
    params = {p.name: p for p in TRAINER_CHECK.get_params(ctx)}
    assert params["framework"].type.choices == tuple(trainers.framework_choices())
    assert params["framework"].help == trainers.framework_help()
    assert params["workers"].help == f"{trainers.meanings('workers')} {trainers.default_help('workers')}."
    assert params["compare_tf"].help == ("Also run the same augmentation through tf.data and compare "
                                         f"({', '.join(trainers.takes('compare_tf'))}).")
    assert trainers.takes("compare_tf") and trainers.default_help("model")
    assert params["steps"].help == f"Training steps {trainers.default_help('steps')}"
    assert params["batch_size"].help == trainers.default_help("batch_size")
    assert params["model"].help == trainers.default_help("model")
    assert any("--help" in p.opts for p in params.values())
    monkeypatch.setattr(check_commands, "_trainers", lambda: pytest.fail("the registry read again"))
    assert TRAINER_CHECK.get_params(ctx) == list(params.values())  # filled once: the same parameters again
    shown = CliRunner().invoke(cli, ["trainer-check", "--help"], prog_name="imagenet-build").stdout
    assert "Training steps [default:" in " ".join(shown.split())
    assert refused("x", "--framework", "nope")[0] == 2
