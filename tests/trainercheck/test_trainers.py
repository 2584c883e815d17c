"""The trainer registry (trainercheck/trainers.py): every trainer registered by its module, trainer-check's
--framework choices and the defaults its help states read from it, a family taking its first installed trainer,
and what a trainer misses said in one line. The defaults are pinned here: changing one is a decision, not a
slip."""

import pytest

import imagenet_build.trainercheck  # noqa: F401  (registers every trainer)
from imagenet_build.infra import optional
from imagenet_build.infra.errors import BuildError
from imagenet_build.readers.registry import READERS
from imagenet_build.trainercheck import trainers
from imagenet_build.trainercheck.trainers import Option, Trainer

# name -> {option: (default on the CPU, on a GPU)}: what the docs (trainer-check.md) promise
DEFAULTS = {
    "dali-tf": {"steps": (30, 200), "batch_size": (16, 64), "model": ("small", "resnet50"), "workers": (2, 8),
                "compare_tf": (None, None)},
    "dali-torch": {"steps": (30, 300), "batch_size": (16, 256), "model": ("small", "resnet50"), "workers": (2, 8)},
    "torch": {"steps": (30, 300), "batch_size": (16, 256), "model": ("small", "resnet50"), "workers": (2, 8)},
}


def test_every_trainer_module_registers_its_trainer_reading_through_a_reader_of_the_library():
    assert sorted(trainers.TRAINERS) == ["dali-tf", "dali-torch", "torch"]
    assert [r.name for r in trainers.trainers()] == ["dali-tf", "dali-torch", "torch"]
    assert [r.name for r in trainers.family("dali")] == ["dali-tf", "dali-torch"]
    assert {r.name: r.reads_through for r in trainers.trainers()} == {"dali-tf": "dali", "dali-torch": "dali",
                                                                     "torch": "torch"}
    assert all(r.reads_through in READERS for r in trainers.trainers())


def test_the_defaults_are_pinned():
    got = {r.name: {o.name: (o.cpu, o.gpu) for o in r.options} for r in trainers.trainers()}
    assert got == DEFAULTS


def test_framework_choices_and_help_come_from_the_registry():
    import click

    from imagenet_build.cli import cli

    command = cli.commands["trainer-check"]
    params = {p.name: p for p in command.get_params(click.Context(command))}
    assert isinstance(params["framework"].type, click.Choice)
    assert list(params["framework"].type.choices) == trainers.framework_choices() == [
        "dali", "dali-tf", "dali-torch", "torch"]
    assert "[default: 30 on the CPU; on a GPU: 200 (dali-tf), 300 (dali-torch, torch)]" in params["steps"].help
    assert "[default: 16 on the CPU; on a GPU: 64 (dali-tf), 256 (dali-torch, torch)]" in params["batch_size"].help
    assert "[default: small on the CPU, resnet50 on a GPU]" in params["model"].help
    assert params["workers"].help.startswith("dali-tf, dali-torch: DALI's CPU threads; torch: DataLoader worker")
    assert "(dali-tf)" in params["compare_tf"].help
    assert "dali: the first installed of dali-tf, dali-torch" in params["framework"].help


def test_the_command_line_imports_no_reader_or_trainer_until_trainer_check_runs():
    """The registry fills trainer-check's options when it is parsed or its help shown: importing every trainer
    module would slow every verb's start (and `imagenet-build --help`)."""
    import subprocess
    import sys

    code = ("import sys; from imagenet_build.cli import main\n"
            "sys.argv = ['imagenet-build', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "assert not [m for m in sys.modules\n"
            "            if m.startswith(('imagenet_build.readers', 'imagenet_build.trainercheck'))], 'imported'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and "trainer-check" in result.stdout, result.stderr


def run(folder, **options):
    return {"folder": folder, **options}


@pytest.fixture
def registry(monkeypatch):
    """A registry of made-up trainers: one installed (its module is json), one not, a family of both."""
    monkeypatch.setattr(trainers, "TRAINERS", {})
    trainers.register(Trainer("fast", "the fast one", ("json", "no_such_module_here"), "dali",
                                 (Option("steps", 3, 9), Option("workers", 1, 4, "threads", least=1)), run, "both", 0))
    trainers.register(Trainer("slow", "the slow one", ("json",), "dali", (Option("steps", 5, 50),), run, "both", 1))
    return trainers


def test_a_family_takes_its_first_installed_trainer(registry):
    assert registry.framework_choices() == ["both", "fast", "slow"]
    assert registry.for_framework("both").name == "slow"  # fast is ranked first, but misses a module
    assert registry.for_framework("fast").name == "fast"
    with pytest.raises(BuildError, match="^--framework plain: one of both, fast, slow$"):
        registry.for_framework("plain")


def test_what_a_trainer_misses_is_one_line(registry, monkeypatch):
    with pytest.raises(BuildError) as missing:
        registry.require_trainer(registry.TRAINERS["fast"], "fast")
    assert str(missing.value) == ("trainer-check --framework fast needs no_such_module_here, which is not installed: "
                                  "pip install no_such_module_here (or: trainer-check --framework slow, installed "
                                  "here)")
    registry.require_trainer(registry.TRAINERS["slow"], "both")  # installed: nothing to say
    monkeypatch.setattr(optional, "is_installed", lambda module: module != "no_such_module_here" and
                        module != "json")
    with pytest.raises(BuildError, match="^trainer-check --framework both trains through fast or slow, none of them "
                                         "installed: fast needs json and no_such_module_here, .*; slow needs json"):
        registry.require_trainer(registry.TRAINERS["fast"], "both")


def test_defaults_fill_what_is_not_given(registry):
    fast = registry.TRAINERS["fast"]
    assert registry.with_defaults(fast, False, {"steps": None, "workers": 2}) == {"steps": 3, "workers": 2}
    assert registry.with_defaults(fast, True, {}) == {"steps": 9, "workers": 4}
    assert registry.default_help("steps") == "[default: 3 / 9 on the CPU / a GPU (fast); 5 / 50 on the CPU / a GPU " \
                                             "(slow)]"
    assert registry.default_help("workers") == "[default: 1 on the CPU, 4 on a GPU]"
    assert registry.meanings("workers") == "fast: threads" and registry.takes("workers") == ["fast"]


def test_a_trainer_registered_twice_is_refused(registry):
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(Trainer("slow", "again", (), "dali", (), run))


def test_the_docs_state_the_registrys_defaults():
    """trainer-check.md's table of defaults, row by row, as the registry has them."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "trainer-check.md").read_text()
    code = lambda value: f"`{value}`" if isinstance(value, str) else str(value)  # noqa: E731
    for option in ("steps", "batch_size", "model", "workers"):
        declared = [(r.name, o) for r in trainers.trainers() for o in r.options if o.name == option]
        cpu = {o.cpu for _, o in declared}
        on_gpu = {}
        for name, o in declared:
            on_gpu.setdefault(o.gpu, []).append(f"`{name}`")
        assert len(cpu) == 1, option
        gpu = code(next(iter(on_gpu))) if len(on_gpu) == 1 else ", ".join(
            f"{code(g)} ({', '.join(names)})" for g, names in on_gpu.items())
        assert f"| `--{option.replace('_', '-')}` | {code(cpu.pop())} | {gpu}" in text, (option, gpu)


@pytest.fixture
def wider(monkeypatch):
    """Made-up trainers registered out of name order: a family ranked against its names' order, a trainer that is
    missing a module and belongs to no family, two installed ones beside it."""
    monkeypatch.setattr(trainers, "TRAINERS", {})
    trainers.register(Trainer("zeta", "the zeta one", ("json",), "dali", (Option("steps", 5, 50),), run, "pair", 0))
    trainers.register(Trainer("alpha", "the alpha one", ("json", "no_such_module_here"), "dali",
                                 (Option("steps", 3, 9), Option("workers", 1, 4, "threads")), run, "pair", 1))
    trainers.register(Trainer("broken", "the broken one", ("no_such_module_here",), "dali", (), run))
    trainers.register(Trainer("other", "the other one", ("json",), "dali",
                                 (Option("steps", 5, 50), Option("model", None, None)),
                                 run))
    return trainers


def test_trainers_go_by_name_and_a_familys_by_rank(wider):
    assert [r.name for r in wider.trainers()] == ["alpha", "broken", "other", "zeta"]
    assert [r.name for r in wider.family("pair")] == ["zeta", "alpha"]
    assert wider.framework_help() == ("alpha: the alpha one; broken: the broken one; other: the other one; "
                                      "zeta: the zeta one; pair: the first installed of zeta, alpha.")


def test_a_family_none_of_whose_trainers_is_installed_takes_its_first(wider, monkeypatch):
    assert wider.for_framework("pair").name == "zeta"
    monkeypatch.setattr(optional, "is_installed", lambda module: False)
    assert wider.for_framework("pair").name == "zeta"  # its check then says what each needs


def test_a_missing_trainer_names_only_the_other_installed_ones(wider):
    with pytest.raises(BuildError) as missing:
        wider.require_trainer(wider.TRAINERS["alpha"], "alpha")
    assert str(missing.value).endswith(" (or: trainer-check --framework other or zeta, installed here)")


def test_help_of_options_without_defaults_or_meanings(wider):
    assert wider.default_help("model") == "" and wider.default_help("no_such_option") == ""
    assert wider.default_help("steps") == ("[default: 3 / 9 on the CPU / a GPU (alpha); "
                                           "5 / 50 on the CPU / a GPU (other, zeta)]")
    assert wider.meanings("steps") == "" and wider.meanings("workers") == "alpha: threads"
