"""cli/group.py's endings, in this process (mutation testing sees only the calls a test makes in its own process;
tests/cli/test_error_lines.py holds every verb to them as whole processes): the error line and its --json
document, exactly; the program's name in what click prints (and as `python -m` and the console script start it);
libraries' log records kept off stderr (and off the program's); the form of every --json document; what a caller
of `main` gives click and gets back; a group of the test's own (the same class) for the endings no verb of
imagenet-build is written to reach: a group option before the verb, a stop while the line is parsed."""

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from conftest import run_process
from imagenet_build import __version__
from imagenet_build.cli.group import PathOf, _Commands, cli, print_json, report_and_exit
from imagenet_build.infra.errors import Interrupted, UsageError


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], prog_name="imagenet-build")


@pytest.mark.parametrize("args,code,message", [
    (["verify", "--nope"], 2, "No such option '--nope'. (see: imagenet-build verify --help)"),
    (["no-such-verb"], 2, "No such command 'no-such-verb'. (see: imagenet-build --help)"),
    (["verify", "--quick", "--deep", "."], 2, "--quick and --deep exclude each other (see: imagenet-build verify "
                                             "--help)"),
    (["index", "nowhere"], 1, "nowhere: no such file or folder"),
])
def test_a_failed_command_is_one_line_and_with_json_one_document(tmp_path, monkeypatch, args, code, message):
    monkeypatch.chdir(tmp_path)
    plain = invoke(*args)
    assert (plain.exit_code, plain.stdout, plain.stderr) == (code, "", f"error: {message}\n")
    document = invoke(*args, "--json")
    assert (document.exit_code, document.stderr) == (code, f"error: {message}\n")
    assert json.loads(document.stdout) == {"ok": False, "error": message, "exit_code": code,
                                           "imagenet_build_version": __version__}


def test_click_prints_the_programs_name():
    shown = invoke("verify", "--help")
    assert shown.exit_code == 0 and shown.stdout.startswith("Usage: imagenet-build verify [OPTIONS] FOLDER\n")


def test_a_bare_command_shows_the_help_as_click_does():
    shown = invoke()
    assert shown.exit_code == 2 and shown.stdout == ""
    assert shown.stderr.startswith("Usage: imagenet-build [OPTIONS] COMMAND [ARGS]...\n\n  ImageNet (ILSVRC2012)")


def test_libraries_log_records_stay_off_stderr(monkeypatch, capfd):
    """Once a command runs, a library's warning (gcsfs's, Beam's, py4j's) reaches no handler that prints: one
    handler that drops records on the root logger, added once however many commands run."""
    monkeypatch.setattr(logging.root, "handlers", [])
    for _ in range(2):
        assert invoke("verify", "--help").exit_code == 0
    assert [type(handler) for handler in logging.root.handlers] == [logging.NullHandler]
    logging.getLogger("gcsfs").warning("a library's warning")
    assert "a library's warning" not in capfd.readouterr().err


def test_every_json_document_is_sorted_indented_ascii_and_names_the_version(capsys):
    print_json({"b": [1, 2], "a": "é"})
    assert capsys.readouterr().out == ('{\n "a": "\\u00e9",\n "b": [\n  1,\n  2\n ],\n'
                                       f' "imagenet_build_version": "{__version__}"\n}}\n')


def test_standalone_mode_off_hands_the_result_back():
    assert cli.main(["--help"], prog_name="imagenet-build", standalone_mode=False) == 0


def test_without_args_the_command_line_is_sys_argv(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["imagenet-build", "verify", "--nope", "--json"])
    with pytest.raises(SystemExit) as ended:
        cli.main(prog_name="imagenet-build")
    assert ended.value.code == 2 and json.loads(capsys.readouterr().out)["error"] == (
        "No such option '--nope'. (see: imagenet-build verify --help)")


@pytest.fixture
def verb(monkeypatch):
    """A verb added to the group for one test: it runs `body`."""
    def add(body):
        monkeypatch.setitem(cli.commands, "try-it", click.Command("try-it", callback=body,
                                                                  params=[click.Option(["--json"], is_flag=True)]))
    return add


@pytest.mark.parametrize("raised,message", [
    (click.ClickException("it broke"), "it broke"),
    (click.Abort(), "interrupted"),
    (KeyboardInterrupt(), "interrupted"),
])
def test_what_a_verb_raises_ends_as_one_line_and_with_json_one_document(verb, raised, message):
    def body(json):
        raise raised

    verb(body)
    for args in (["try-it"], ["try-it", "--json"]):
        ended = invoke(*args)
        assert (ended.exit_code, ended.stderr) == (1, f"error: {message}\n"), ended.output
        if "--json" in args:
            assert json.loads(ended.stdout) == {"ok": False, "error": message, "exit_code": 1,
                                                "imagenet_build_version": __version__}


def test_a_stop_that_comes_during_the_ending_leaves_it_whole(verb):
    """A signal after the verb ended, while its error's document is printed, is past the stop's reach: the
    ending is printed whole."""
    class Late(click.ClickException):
        def format_message(self):
            Interrupted.requested = True  # the signal's handler ran here
            return "late"

    def body(json):
        raise Late("late")

    verb(body)
    ended = invoke("try-it", "--json")
    assert (ended.exit_code, ended.stderr, json.loads(ended.stdout)["error"]) == (1, "error: late\n", "late")


def denied(json):
    raise PermissionError(13, "Permission denied", "some/file")


def broke_on_a_stop(json):
    Interrupted.requested = True  # a stop came, and the error is one it set off (a worker it ended)
    raise RuntimeError("a pipe broke")


@pytest.mark.parametrize("body,message", [(denied, "some/file: Permission denied"), (broke_on_a_stop, "interrupted")])
def test_a_system_error_or_one_a_stop_set_off_ends_as_one_line(verb, body, message):
    verb(body)
    ended = invoke("try-it", "--json")
    assert (ended.exit_code, ended.stderr, json.loads(ended.stdout)["exit_code"]) == (1, f"error: {message}\n", 1)


@pytest.mark.parametrize("ok,code", [(True, 0), (False, 1)])
def test_a_checking_verb_prints_its_report_or_its_document_and_exits_by_its_result(verb, ok, code):
    def body(json):
        report_and_exit({"ok": ok, "found": 2}, json, lambda result: [f"found {result['found']}", "done"])

    verb(body)
    shown = invoke("try-it")
    assert (shown.exit_code, shown.stdout, shown.stderr) == (code, "found 2\ndone\n", "")
    document = invoke("try-it", "--json")
    assert document.exit_code == code and json.loads(document.stdout) == {
        "ok": ok, "found": 2, "imagenet_build_version": __version__}


@pytest.mark.parametrize("how", ["python -m imagenet_build", "the console script"])
def test_usage_lines_name_imagenet_build_however_it_is_started(how):
    """`python -m imagenet_build` would be named `__main__.py` by click's own guess, and the console script by
    its file: both say imagenet-build."""
    if how == "the console script":
        script = Path(sys.executable).parent / "imagenet-build"
        assert script.is_file(), "the package installs the imagenet-build script next to its Python"
        result = subprocess.run([str(script), "verify", "--help"], capture_output=True, text=True)
    else:
        result = run_process("verify", "--help")
    assert result.returncode == 0 and result.stdout.splitlines()[0] == "Usage: imagenet-build verify [OPTIONS] FOLDER"


# `sample OUT --json` whose work logs as TensorFlow, absl, py4j, gcsfs and a library calling logging.warning do
LOGGING_LIBRARIES = (
    "import logging, sys\n"
    "import imagenet_build.tools.sample_dataset as sample\n"
    "made = sample.make_sample\n"
    "def make_sample(*args, **kwargs):\n"
    "    for name in ('tensorflow', 'absl', 'py4j', 'gcsfs'):\n"
    "        logging.getLogger(name).error('%s says so', name)\n"
    "    logging.warning('the root says so')\n"
    "    return made(*args, **kwargs)\n"
    "sample.make_sample = make_sample\n"
    "from imagenet_build.cli import cli\n"
    "cli.main(['sample', sys.argv[1], '--json'], prog_name='imagenet-build')\n"
)


def test_a_librarys_log_lines_do_not_reach_the_programs_stderr(tmp_path):
    """As the program runs: no handler of pytest's on the root logger, Python's last-resort one waiting."""
    result = subprocess.run([sys.executable, "-c", LOGGING_LIBRARIES, str(tmp_path / "s")], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert json.loads(result.stdout)["out"] == str(tmp_path / "s")


def test_settings_a_caller_gives_main_reach_click():
    """An embedding program's context settings (here the help's width) and completion variable are passed on."""
    runner = CliRunner()
    wide = runner.invoke(cli, ["--help"], prog_name="imagenet-build")
    narrow = runner.invoke(cli, ["--help"], prog_name="imagenet-build", terminal_width=50, max_content_width=50)
    assert max(map(len, wide.stdout.splitlines())) > 50
    assert max(map(len, narrow.stdout.splitlines())) <= 50 and "Usage: imagenet-build" in narrow.stdout
    completed = runner.invoke(cli, [], prog_name="imagenet-build", complete_var="_EMBEDDED_COMPLETE",
                              env={"_EMBEDDED_COMPLETE": "bash_source"})
    assert completed.exit_code == 0 and "_EMBEDDED_COMPLETE=bash_complete" in completed.stdout


def test_a_path_of_the_command_line_keeps_its_role_and_refuses_an_unknown_one():
    assert [PathOf(role).role for role in PathOf.ROLES] == list(PathOf.ROLES)
    with pytest.raises(AssertionError):
        PathOf("deletes")


@click.group(cls=_Commands)
@click.option("--loud", is_flag=True)
@click.option("--stop-now", is_flag=True, callback=lambda ctx, p, v: os.kill(os.getpid(), signal.SIGTERM) if v else v,
              help="A stop signal while the command line is parsed.")
def own(loud, stop_now):
    """A group of the test's own: the endings no verb of imagenet-build is written to reach."""


@own.command()
@click.argument("value")
def gives(value):
    return int(value) if value.isdigit() else value


@own.command()
@click.option("--json", "as_json", is_flag=True)
def refuses(as_json):
    raise UsageError("--a and --b exclude each other")


def test_a_verbs_result_is_mains_result_and_a_whole_number_its_exit_code():
    assert own.main(["gives", "words"], standalone_mode=False) == "words"
    assert own.main(["gives", "3"], standalone_mode=False) == 3
    for value, code in (("words", 0), ("3", 3)):
        with pytest.raises(SystemExit) as ended:
            own.main(["gives", value])
        assert ended.value.code == code


@pytest.mark.parametrize("args,code,message", [
    (["--loud", "refuses"], 2, "--a and --b exclude each other (see: imagenet-build --help)"),
    (["--stop-now", "gives", "x"], 1, "interrupted"),
], ids=["own-usage-error-after-a-group-option", "stop-while-parsing"])
def test_an_ending_reached_before_the_verb_is_one_line_and_its_document(args, code, message):
    """A group option first: the help to see is the group's; a SIGTERM while the line is parsed: click's Abort, after
    the newline click writes to end a terminal's `^C`."""
    ended = CliRunner().invoke(own, [*args, "--json"], prog_name="imagenet-build")
    assert ended.exit_code == code and ended.stderr.splitlines()[-1] == f"error: {message}", ended.stderr
    assert "Traceback" not in ended.output and json.loads(ended.stdout) == {
        "ok": False, "error": message, "exit_code": code, "imagenet_build_version": __version__}
    assert (Interrupted.requested, Interrupted.stopping) == (False, False)  # put back for what runs next
