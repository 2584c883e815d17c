"""The trainers trainer-check runs through, in one registry, as the copies, verify's checks, the readers and the
engines have theirs.

Each trainer is one module of this package that registers a `Trainer` when imported (trainercheck/__init__.py
imports them): its `--framework` value, how reports name it, what it needs installed, the reader of the
library it reads the build through (readers/registry.py), its trainer-check options with their defaults on
the CPU and on a GPU, and the function that runs the check. trainer-check's `--framework` choices, the
defaults its help states and the trainer tests' parameters are read from here. A family ("dali") is a
`--framework` value that takes the first of its trainers, by rank, whose modules are all installed: DALI
trains through TensorFlow where TensorFlow and DALI's TF plugin are installed, else through PyTorch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, NamedTuple, Optional, Tuple

from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.optional import missing_all_message, not_installed
from imagenet_build.infra.unique_names import add_once


class Option(NamedTuple):
    """A trainer-check option a trainer takes, and its defaults (None: the option takes no default)."""

    name: str  # trainer_check's keyword, the CLI's --name with '-' for '_'
    cpu: Any
    gpu: Any
    says: str = ""  # what it means for this trainer, where that differs between trainers
    least: int = 0  # the smallest value it takes


class Trainer(NamedTuple):
    name: str  # the registry's key and trainer-check's --framework value
    title: str  # how reports, errors and docs name it
    needs: Tuple[str, ...]  # the modules it imports (optional.require names their extras)
    reads_through: str  # the reader of the library it reads the build through (readers/registry.py's name)
    options: Tuple[Option, ...]  # its trainer-check options
    run: Callable[..., Any]  # (folder, split, device, framework, **options) -> trainer-check's result
    family: Optional[str] = None  # a --framework value it also answers to, ranked among the family's trainers
    rank: int = 0


TRAINERS: dict[str, Trainer] = {}


def register(trainer: Trainer) -> Trainer:
    return add_once(TRAINERS, trainer.name, trainer, "trainer")


def trainers() -> list[Trainer]:
    """The trainers, by name."""
    return sorted(TRAINERS.values(), key=lambda r: r.name)


def family(name: str) -> list[Trainer]:
    """The trainers a family name answers for, by rank."""
    return sorted((r for r in trainers() if r.family == name), key=lambda r: r.rank)


def framework_choices() -> list[str]:
    """trainer-check --framework's values: each trainer's name and each family's."""
    return sorted({r.name for r in trainers()} | {r.family for r in trainers() if r.family})


def framework_help() -> str:
    """--framework's help: each trainer by its title, each family by the trainers it takes, in order."""
    names = [f"{r.name}: {r.title}" for r in trainers()]
    families = sorted({r.family for r in trainers() if r.family})
    names += [f"{f}: the first installed of {', '.join(r.name for r in family(f))}" for f in families]
    return "; ".join(names) + "."


def missing(trainer: Trainer) -> list[str]:
    """The modules a trainer needs that are not installed here."""
    return not_installed(trainer.needs)


def for_framework(framework: str) -> Trainer:
    """The trainer --framework names: by name, or a family's first installed trainer (its first when none is:
    its check then says what each needs)."""
    if framework in TRAINERS:
        return TRAINERS[framework]
    members = family(framework)
    if not members:
        raise BuildError(f"--framework {framework}: one of {', '.join(framework_choices())}")
    return next((r for r in members if not missing(r)), members[0])


def require_trainer(trainer: Trainer, framework: str) -> None:
    """One BuildError saying what the trainer misses and how to install it; asked through a family (the
    family's first trainer, none installed), what each of the family's trainers misses."""
    if not missing(trainer):
        return
    if framework == trainer.name:
        asked = [trainer]
        message = missing_all_message(missing(trainer), f"trainer-check --framework {framework}")
    else:
        asked = family(framework)
        message = (f"trainer-check --framework {framework} trains through {' or '.join(r.name for r in asked)}, "
                   "none of them installed: " + "; ".join(missing_all_message(missing(r), r.name) for r in asked))
    others = [r.name for r in trainers() if r not in asked and not missing(r)]
    if others:
        message += f" (or: trainer-check --framework {' or '.join(others)}, installed here)"
    raise BuildError(message)


def defaults(trainer: Trainer, gpu: bool) -> dict[str, Any]:
    """The trainer's options' defaults on a GPU or on the CPU."""
    return {option.name: option.gpu if gpu else option.cpu for option in trainer.options}


def with_defaults(trainer: Trainer, gpu: bool, given: Mapping[str, Any]) -> dict[str, Any]:
    """The options given, each one not given (None) filled with the trainer's default on the device."""
    filled = defaults(trainer, gpu)
    filled.update({name: value for name, value in given.items() if value is not None})
    return filled


def takes(option: str) -> list[str]:
    """The trainers that take an option, by name."""
    return [r.name for r in trainers() if any(o.name == option for o in r.options)]


def default_help(option: str) -> str:
    """An option's defaults across the trainers, as --help states them: "[default: 30 on the CPU; on a GPU:
    200 (dali-tf), 300 (dali-torch, torch)]" (trainers with the same pair of defaults named together)."""
    pairs: dict[tuple[Any, Any], list[str]] = {}
    for trainer in trainers():
        for o in trainer.options:
            if o.name == option and (o.cpu, o.gpu) != (None, None):
                pairs.setdefault((o.cpu, o.gpu), []).append(trainer.name)
    if not pairs:
        return ""
    cpu = {c for c, _ in pairs}
    gpu: dict[Any, list[str]] = {}
    for (_, g), names in pairs.items():
        gpu.setdefault(g, []).extend(names)
    if len(cpu) == 1 and len(gpu) == 1:
        return f"[default: {next(iter(cpu))} on the CPU, {next(iter(gpu))} on a GPU]"
    on_gpu = ", ".join(f"{g} ({', '.join(sorted(names))})" for g, names in gpu.items())
    if len(cpu) == 1:
        return f"[default: {next(iter(cpu))} on the CPU; on a GPU: {on_gpu}]"
    return "[default: " + "; ".join(f"{c} / {g} on the CPU / a GPU ({', '.join(names)})"
                                     for (c, g), names in pairs.items()) + "]"


def meanings(option: str) -> str:
    """What an option means for each trainer that says so: "dali-tf, dali-torch: DALI's CPU threads; torch: ..."."""
    says: dict[str, list[str]] = {}
    for trainer in trainers():
        for o in trainer.options:
            if o.name == option and o.says:
                says.setdefault(o.says, []).append(trainer.name)
    return "; ".join(f"{', '.join(names)}: {text}" for text, names in says.items())
