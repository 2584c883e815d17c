"""cli/group.py's endings, in this process (mutation testing sees only the calls a test makes in its own process;
tests/cli/test_error_lines.py holds every verb to them as whole processes): the error line and its --json
document, exactly; the program's name in what click prints; libraries' log records kept off stderr; the form of
every --json document."""

import json
import logging
import sys

import click
import pytest
from click.testing import CliRunner

from imagenet_build import __version__
from imagenet_build.cli.group import cli, print_json, report_and_exit
from imagenet_build.infra.errors import Interrupted


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
