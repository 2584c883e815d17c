"""The Python API's functions at the package's top with their whole signatures: the names the command line's
options have, convert's defaults request.ConvertOptions', what help() shows, and docs/api.md's tables of every
parameter, each checked against the functions themselves."""

import ast
import dataclasses
import inspect
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

import imagenet_build
from imagenet_build import api

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ("convert", "verify", "index", "report", "write_arrays")
VERBS = ("convert", "verify", "index", "report")
CALLED = {"run_verify": "verify"}  # report's --verify: its click name, and the function's parameter


def test_the_package_names_the_apis_functions_and_write_arrays_is_the_writers():
    from imagenet_build.writer.arrays import write_arrays

    assert imagenet_build.FUNCTIONS == FUNCTIONS and set(FUNCTIONS) <= set(imagenet_build.__all__)
    for name in FUNCTIONS:
        assert getattr(imagenet_build, name) is getattr(api, name), name
    assert imagenet_build.write_arrays is write_arrays  # the function itself: its signature, not (*args, **kwargs)
    assert set(FUNCTIONS) <= set(dir(imagenet_build))
    with pytest.raises(AttributeError, match="module 'imagenet_build' has no attribute 'nothing_here'"):
        imagenet_build.nothing_here  # noqa: B018


def test_a_subpackage_of_the_same_name_never_takes_the_functions_name():
    """verify/ and report/ are imported here first (a fresh process), by every form of import there is, and
    the names stay the functions; the subpackages stay importable by their full names."""
    code = """
import importlib, sys
import imagenet_build
import imagenet_build.verify.check
from imagenet_build.report import report_run
importlib.import_module("imagenet_build.verify.verify_result")
from imagenet_build import api, verify
assert verify is api.verify and imagenet_build.verify is api.verify, imagenet_build.verify
assert imagenet_build.report is api.report, imagenet_build.report
assert sys.modules["imagenet_build.verify"].__path__ and sys.modules["imagenet_build.report"].PER_CLASS == 8
imagenet_build.other = 1
assert imagenet_build.other == 1  # any other name is set as on any module
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_help_shows_each_function_with_its_parameters_and_defaults():
    import pydoc

    package = pydoc.render_doc(imagenet_build, renderer=pydoc.plaintext)
    for name in FUNCTIONS:
        function = getattr(imagenet_build, name)
        shown = pydoc.render_doc(function, renderer=pydoc.plaintext)
        assert f"{name}{inspect.signature(function)}" in shown.replace("\n", "")
        assert re.search(rf"^    {name}\(", package, re.M), name  # listed among the package's functions
    assert "train_shards: 'int' = 1024" in pydoc.render_doc(imagenet_build.convert, renderer=pydoc.plaintext)


def test_convert_takes_convert_options_fields_in_order_with_their_defaults():
    """ConvertOptions' fields, the engines' options (each declared by its engine, with its default) where it holds
    them, and last `**engine_options`, for an engine added beyond the shipped ones."""
    from imagenet_build.engines import ENGINE_DEFAULTS, ENGINE_OPTIONS
    from imagenet_build.request import DEFAULTS, ConvertOptions

    parameters = list(inspect.signature(api.convert).parameters.values())
    fields = [field.name for field in dataclasses.fields(ConvertOptions)]
    at = fields.index("engine_options")
    assert [p.name for p in parameters] == (fields[:at] + [option.name for option in ENGINE_OPTIONS]
                                            + fields[at + 1:] + ["engine_options"])
    assert parameters[0].default is inspect.Parameter.empty
    assert {p.kind for p in parameters[1:-1]} == {inspect.Parameter.KEYWORD_ONLY}
    assert parameters[-1].kind is inspect.Parameter.VAR_KEYWORD
    for parameter in parameters[1:-1]:
        default = ENGINE_DEFAULTS[parameter.name] if parameter.name in ENGINE_DEFAULTS else getattr(DEFAULTS,
                                                                                                     parameter.name)
        assert parameter.default is default, parameter.name  # the one home's, not a copy


def test_an_added_engines_option_is_taken_by_name_and_an_unknown_name_is_pythons_type_error(monkeypatch):
    from imagenet_build.engines import ENGINE_OPTION_NAMED
    from imagenet_build.engines.engine import EngineOption

    seen = []
    monkeypatch.setattr("imagenet_build.writer.convert_run.convert", lambda request: seen.append(request))
    monkeypatch.setattr("imagenet_build.request.convert_request", lambda options: options)
    monkeypatch.setitem(ENGINE_OPTION_NAMED, "added_speed", EngineOption("added_speed", 1, "an added option"))
    api.convert("out", train_dir="t", added_speed=3)
    assert dict(seen[0].engine_options)["added_speed"] == 3
    with pytest.raises(TypeError) as unknown:
        api.convert("out", train_dir="t", added_sped=3)
    assert str(unknown.value) == "convert() got an unexpected keyword argument 'added_sped'"


def command_line(verb):
    """{parameter: (the option as docs/api.md shows it, the value the verb's function gets when it is not given)}
    of a verb's options and arguments (--json is the command line's own), by the API's names."""
    from imagenet_build.cli import cli

    command = cli.commands[verb]
    context = command.make_context(verb, ["--output-dir", "o"] if verb == "convert" else ["."])
    options = {}
    for param in command.params:
        if param.name == "as_json":
            continue
        if isinstance(param, click.Argument):
            shown = f"`{param.human_readable_name}`"
        else:
            shown = ", ".join(f"`{o}`" for o in param.opts) + "".join(f" / `{o}`" for o in param.secondary_opts)
        options[CALLED.get(param.name, param.name)] = (shown, context.params[param.name])
    return options


@pytest.mark.parametrize("verb", VERBS)
def test_each_verbs_options_are_its_functions_parameters_with_the_same_defaults(verb):
    """Every option of the verb is a parameter of its function, and back; what the command gives for an option
    left out is the function's default (a repeated option's nothing, (), included)."""
    options = command_line(verb)
    parameters = {name: p for name, p in inspect.signature(getattr(api, verb)).parameters.items()
                  if p.kind is not p.VAR_KEYWORD}  # convert's **engine_options: an added engine's
    assert set(options) == set(parameters)
    for name, parameter in parameters.items():
        if parameter.default is not inspect.Parameter.empty:
            assert options[name][1] == parameter.default, (verb, name, options[name][1], parameter.default)


def documented():
    """{function: [(parameter, default, the command line's), ...]} of docs/api.md's "Every parameter" tables."""
    text = (ROOT / "docs" / "api.md").read_text().split("\n## Every parameter\n", 1)[1].split("\n## ", 1)[0]
    tables = {}
    for section in text.split("\n### ")[1:]:
        name = re.match(r"`(\w+)`", section).group(1)
        rows = re.findall(r"^\| `(\w+)` \| ([^|]*?) \| ([^|]*?) \|", section, re.M)
        tables[name] = rows
    return tables


def test_docs_api_lists_every_parameter_in_order_with_its_default_and_option():
    tables = documented()
    assert list(tables) == list(FUNCTIONS)
    for name in FUNCTIONS:
        options = command_line(name) if name in VERBS else {}
        parameters = inspect.signature(getattr(api, name)).parameters.values()
        expected = [(p.name, "required" if p.default is p.empty else f"`{p.default!r}`",
                     options[p.name][0] if options else "none")
                    for p in parameters if p.kind is not p.VAR_KEYWORD]
        expected += [(p.name, "none", "an added engine's options, by name") for p in parameters
                     if p.kind is p.VAR_KEYWORD]
        assert tables[name] == expected, name


def test_docs_api_shows_the_signatures_its_table_of_functions_names():
    """The table of functions shows each call as it begins: the same names and defaults, in order."""
    text = (ROOT / "docs" / "api.md").read_text()
    for name in FUNCTIONS:
        shown, = re.findall(rf"^\| `({name}\([^`]*\))` \|", text, re.M)
        parameters = inspect.signature(getattr(api, name)).parameters.values()
        written = [p.name if p.default is p.empty else f"{p.name}={p.default!r}".replace("'", '"')
                   for p in parameters if p.kind not in (p.KEYWORD_ONLY, p.VAR_KEYWORD)]
        if any(p.kind is p.KEYWORD_ONLY for p in parameters):
            written.append("*")
        given = [part.strip() for part in shown[len(name) + 1:-1].split(",")]
        assert given[:len(written)] == written, (name, given, written)


def python_files():
    for folder in ("imagenet_build", "tests", "benchmarks", "scripts"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_no_import_statement_reaches_a_subpackage_named_as_a_function():
    """`import imagenet_build.verify.check` binds `imagenet_build`, whose `verify` is the function: the module
    is imported by its full name (`from imagenet_build.verify import check`), so no code reaches it as an
    attribute of the package."""
    named = tuple(f"imagenet_build.{name}" for name in FUNCTIONS)
    found = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [f"{path.relative_to(ROOT)}:{node.lineno}: import {alias.name}" for alias in node.names
                          if alias.name in named or alias.name.startswith(tuple(n + "." for n in named))]
    assert found == []
