"""docs/architecture.md's table of what adding a copy, a check, a reader, a trainer or an engine takes, held true:
one of each is added to a copy of the package with only the edits the table names and must reach its registry and
the command line's choices; every registered one has its rows in the tests the table names; the package table
names every module that registers one; and pyproject.toml's layers are stated once, the docs quoting the
contracts' names."""

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()


def extension_table():
    """{what: (module cell, edited cell, rows cell)} of architecture.md's table of extension points."""
    rows = {}
    for line in ARCHITECTURE.split("## Adding a copy, a check, a reader, a trainer, an engine")[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in ("a copy", "a check", "a reader", "a trainer", "an engine"):
            rows[cells[0]] = tuple(cells[1:])
    return rows


TABLE = extension_table()

# what one more of each is: a module added to its package, registering it
ADDED = {
    "a copy": ("sources", "from imagenet_build.sources.copies import CopyKind, register\n"
               "register(CopyKind(name='an added copy', identify=lambda path: [], assemble=lambda pieces: None,\n"
               "                rank=999, short='added', write_sample=lambda sample, out: None))\n"),
    "a check": ("verify", "from imagenet_build.verify.folder import FolderCheck\n\n\n"
                "class Added(FolderCheck):\n    name, covers, rank = 'added', 'an added check', 999\n\n"
                "    def run_folder(self, folder):\n        return []\n"),
    "a reader": ("readers", "from imagenet_build.readers.registry import BuildReader, register\n"
                 "READER = register(BuildReader('added', 'an added reader', ()))\n"),
    "a trainer": ("trainercheck", "from imagenet_build.trainercheck.trainers import Trainer, register\n"
                  "TRAINER = register(Trainer('added', 'an added trainer', (), 'torch', (), lambda *a, **o: None))\n"),
    "an engine": ("engines", "from imagenet_build.engines.engine import Engine, EngineOption, register\n\n\n"
                  "@register\nclass Added(Engine):\n    name, help = 'added', 'an added engine'\n"
                  "    options = (EngineOption('added_speed', 1, 'how fast it runs'),)\n\n"
                  "    def read_options(self):\n        self.speed = int(self.values['added_speed'])\n\n"
                  "    def run(self, job, tasks, on_result, pool):\n        pass\n"),
}

# where each shows once registered: its registry, and the command line's choices read from it
SEEN = """
import click
from imagenet_build.cli import cli
from imagenet_build.sources.copies import COPY_KINDS
from imagenet_build.verify.check import registered
import imagenet_build.trainercheck
from imagenet_build.readers import registry as readers
from imagenet_build.trainercheck import trainers
from imagenet_build.request import RUNNERS

def choices(verb, option):
    command = cli.commands[verb]
    return [p for p in command.get_params(click.Context(command)) if p.name == option][0].type.choices

def engine_option_taken():  # the added engine's option: on the command line, refused elsewhere, read by it
    from click.testing import CliRunner
    from imagenet_build.engines import make_engine

    shown = CliRunner().invoke(cli, ["convert", "--help"]).output
    refused = CliRunner().invoke(cli, ["convert", "--output-dir", "o", "--train-dir", ".", "--added-speed", "3"])
    return ("--added-speed INTEGER" in shown and refused.exit_code == 2
            and refused.output.startswith("error: --added-speed goes with --runner added (see: ")
            and make_engine("added", 1, {"added_speed": "3"}).speed == 3)

seen = {
    "a copy": "added" in [kind.short for kind in COPY_KINDS] and "added" in choices("sample", "kind"),
    "a check": "added" in [check.name for check in registered()],
    "a reader": "added" in readers.READERS,
    "a trainer": "added" in trainers.framework_choices() and "added" in choices("trainer-check", "framework"),
    "an engine": "added" in RUNNERS and "added" in choices("convert", "runner") and engine_option_taken(),
}
print(sorted(what for what, there in seen.items() if there))
"""


def test_the_table_names_every_extension_point():
    assert sorted(TABLE) == sorted(ADDED)


def test_adding_one_takes_the_edits_the_table_names_and_no_more(tmp_path):
    copy = tmp_path / "imagenet_build"
    shutil.copytree(ROOT / "imagenet_build", copy, ignore=shutil.ignore_patterns("__pycache__"))
    for what, (package, source) in ADDED.items():
        (copy / package / "zz_added.py").write_text(source)
        edited = re.findall(r"`([\w/]+\.py)`: its import", TABLE[what][1])
        assert edited == ([] if TABLE[what][1] == "nothing" else [f"{package}/__init__.py"]), TABLE[what]
        for init in edited:  # its name added to the line that imports the others
            text, line = (copy / init).read_text(), f"from imagenet_build.{package} import "
            assert text.count(line) == 1, init
            (copy / init).write_text(text.replace(line, f"{line}zz_added, "))
    result = subprocess.run([sys.executable, "-c", SEEN], cwd=tmp_path, capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[-2] == str(sorted(ADDED))


def keys_of(path, name):
    """The literal keys of the dict assigned to `name` at the top of a test module (those of a `**{key: ... for key
    in (literals)}` in it too)."""
    for node in ast.parse((ROOT / path).read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            keys = {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
            for key, value in zip(node.value.keys, node.value.values):
                if key is None and isinstance(value, ast.DictComp):
                    keys |= set(ast.literal_eval(value.generators[0].iter))
            return keys
    raise AssertionError(f"{path} has no {name}")


def registered():
    """{what: {name: the module that registers it}} of every registry."""
    import imagenet_build.trainercheck  # noqa: F401  (registers every reader and every trainer)
    from imagenet_build.engines import ENGINES
    from imagenet_build.readers.registry import READERS
    from imagenet_build.sources.copies import COPY_KINDS
    from imagenet_build.trainercheck.trainers import trainers
    from imagenet_build.verify.check import REGISTRY  # importing verify/ registers every check

    reader_modules = {m.READER.name: name for name, m in sys.modules.items()
                      if name.startswith("imagenet_build.readers.") and hasattr(m, "READER")}
    trainer_modules = {m.TRAINER.name: name for name, m in sys.modules.items()
                       if name.startswith("imagenet_build.trainercheck.") and hasattr(m, "TRAINER")}
    # an evaluation set's CopyKind is made by eval_sets.register_set from the EvalSet its module holds
    sets = {value.short: name for name, m in list(sys.modules.items()) if name.startswith("imagenet_build.sources.")
            for value in vars(m).values() if type(value).__name__ == "EvalSet"}
    return {
        "a copy": {kind.short: sets.get(kind.short) or kind.identify.__module__ for kind in COPY_KINDS},
        "a check": {name: check.__module__ for name, check in REGISTRY.items()},
        "a reader": {name: reader_modules[name] for name in READERS},
        "a trainer": {trainer.name: trainer_modules[trainer.name] for trainer in trainers()},
        "an engine": {name: engine.__module__ for name, engine in ENGINES.items()},
    }


@pytest.mark.parametrize("what", sorted(ADDED))
def test_every_registered_one_has_its_rows_where_the_table_says(what):
    names = registered()
    rows = TABLE[what][2]
    tables = re.findall(r"`(\w+)` in `(tests/[\w/]+\.py)`", rows)
    if what == "a check":
        assert rows == "the table of `docs/verify.md` (a warning's: its Warnings)"
        from imagenet_build.verify import check

        text = (ROOT / "docs" / "verify.md").read_text()
        warnings = text.split("## Warnings")[1]
        rows, items = re.findall(r"^\| `([\w-]+)` \|", text, re.M), re.findall(r"^- `([\w-]+)`", warnings, re.M)
        assert {n for n, c in check.REGISTRY.items() if not c.warning} <= set(rows)
        assert {n for n, c in check.REGISTRY.items() if c.warning} <= set(items)
        return
    assert tables
    for name, path in tables:
        assert set(names[what]) <= keys_of(path, name), (name, path)


def test_the_package_table_names_every_module_that_registers_one():
    """architecture.md's package table names each module that registers a copy, a reader or an engine
    (a check's module is named by its scope's)."""
    package_rows = ARCHITECTURE.split("## The package")[1].split("## Import contracts")[0]
    names = registered()
    modules = {module for what in ("a copy", "a reader", "a trainer", "an engine") for module in names[what].values()}
    missing = [module for module in sorted(modules) if f"`{module.rsplit('.', 1)[1]}" not in package_rows]
    assert missing == []
    scopes = {module.rsplit(".", 1)[1] for module in names["a check"].values()}
    assert [s for s in sorted(scopes) if f"`{s}.py`" not in package_rows] == []


def test_the_layers_are_stated_once_and_quoted():
    """pyproject.toml's layers contract is named by its layers, and architecture.md quotes every contract's name."""
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11's tomllib reads pyproject.toml")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")
    stated = " > ".join(", ".join(part.strip().removeprefix("imagenet_build.") for part in layer.split("|"))
                        for layer in layers["layers"])
    assert layers["name"] == f"Layers: {stated}"
    for contract in config["contracts"]:
        assert f'- "{contract["name"]}"' in ARCHITECTURE
