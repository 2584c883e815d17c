"""The readers a build is read back through, in one registry, as the copies and verify's checks have theirs.

Each reader is one module that registers a `BuildReader` when imported: the library's in readers/
(readers/__init__.py imports them), those trainer-check trains through in trainercheck/ (its __init__.py):
its name, what it needs installed, and, where trainer-check runs through it, its `--framework` value, its
trainer-check options with their defaults on the CPU and on a GPU, and the
function that runs the check. trainer-check's `--framework` choices, the defaults its help states and
the reader tests' parameters are read from here. A family ("dali") is a `--framework` value that takes
the first of its readers, by rank, whose modules are all installed: DALI trains through TensorFlow where
TensorFlow and DALI's TF plugin are installed, else through PyTorch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, NamedTuple, Optional, Tuple

from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.optional import is_installed, missing_all_message


class Option(NamedTuple):
    """A trainer-check option a reader takes, and its defaults (None: the option takes no default)."""

    name: str  # trainer_check's keyword, the CLI's --name with '-' for '_'
    cpu: Any
    gpu: Any
    says: str = ""  # what it means for this reader, where that differs between readers
    least: int = 0  # the smallest value it takes


class BuildReader(NamedTuple):
    name: str  # the registry's key; trainer-check's --framework value where it serves trainer-check
    title: str  # how reports, errors and docs name it
    needs: Tuple[str, ...]  # the modules it imports (optional.require names their extras)
    options: Tuple[Option, ...] = ()  # its trainer-check options; () for a reader trainer-check does not use
    trainer_check: Optional[Callable[..., Any]] = None  # (folder, split, device, framework, **options) -> result
    family: Optional[str] = None  # a --framework value it also answers to, ranked among the family's readers
    rank: int = 0
    by_index: bool = True  # finds records by the DALI indexes (each must cover its shard); else by the framing


READERS: dict[str, BuildReader] = {}


def register(reader: BuildReader) -> BuildReader:
    if reader.name in READERS:
        raise ValueError(f"reader {reader.name!r} registered twice")
    READERS[reader.name] = reader
    return reader


def trainers() -> list[BuildReader]:
    """The readers trainer-check runs through, by name."""
    return sorted((r for r in READERS.values() if r.trainer_check is not None), key=lambda r: r.name)


def family(name: str) -> list[BuildReader]:
    """The readers a family name answers for, by rank."""
    return sorted((r for r in trainers() if r.family == name), key=lambda r: r.rank)


def framework_choices() -> list[str]:
    """trainer-check --framework's values: each trainer's name and each family's."""
    return sorted({r.name for r in trainers()} | {r.family for r in trainers() if r.family})


def framework_help() -> str:
    """--framework's help: each trainer by its title, each family by the readers it takes, in order."""
    names = [f"{r.name}: {r.title}" for r in trainers()]
    families = sorted({r.family for r in trainers() if r.family})
    names += [f"{f}: the first installed of {', '.join(r.name for r in family(f))}" for f in families]
    return "; ".join(names) + "."


def missing(reader: BuildReader) -> list[str]:
    return [module for module in reader.needs if not is_installed(module)]


def for_framework(framework: str) -> BuildReader:
    """The reader --framework names: a trainer by name, or a family's first installed reader (its first
    reader when none is: its check then says what each needs)."""
    if framework in READERS and READERS[framework].trainer_check is not None:
        return READERS[framework]
    members = family(framework)
    if not members:
        raise BuildError(f"--framework {framework}: one of {', '.join(framework_choices())}")
    return next((r for r in members if not missing(r)), members[0])


def require_reader(reader: BuildReader, framework: str) -> None:
    """One BuildError saying what the reader misses and how to install it; asked through a family (the
    family's first reader, none installed), what each of the family's readers misses."""
    if not missing(reader):
        return
    if framework == reader.name:
        asked = [reader]
        message = missing_all_message(missing(reader), f"trainer-check --framework {framework}")
    else:
        asked = family(framework)
        message = (f"trainer-check --framework {framework} trains through {' or '.join(r.name for r in asked)}, "
                   "none of them installed: " + "; ".join(missing_all_message(missing(r), r.name) for r in asked))
    others = [r.name for r in trainers() if r not in asked and not missing(r)]
    if others:
        message += f" (or: trainer-check --framework {' or '.join(others)}, installed here)"
    raise BuildError(message)


def defaults(reader: BuildReader, gpu: bool) -> dict[str, Any]:
    """The reader's options' defaults on a GPU or on the CPU."""
    return {option.name: option.gpu if gpu else option.cpu for option in reader.options}


def with_defaults(reader: BuildReader, gpu: bool, given: Mapping[str, Any]) -> dict[str, Any]:
    """The options given, each one not given (None) filled with the reader's default on the device."""
    filled = defaults(reader, gpu)
    filled.update({name: value for name, value in given.items() if value is not None})
    return filled


def takes(option: str) -> list[str]:
    """The trainers that take an option, by name."""
    return [r.name for r in trainers() if any(o.name == option for o in r.options)]


def default_help(option: str) -> str:
    """An option's defaults across the trainers, as --help states them: "[default: 30 on the CPU; on a GPU:
    200 (dali-tf), 300 (dali-torch, torch)]" (readers with the same pair of defaults named together)."""
    pairs: dict[tuple[Any, Any], list[str]] = {}
    for reader in trainers():
        for o in reader.options:
            if o.name == option and (o.cpu, o.gpu) != (None, None):
                pairs.setdefault((o.cpu, o.gpu), []).append(reader.name)
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
    for reader in trainers():
        for o in reader.options:
            if o.name == option and o.says:
                says.setdefault(o.says, []).append(reader.name)
    return "; ".join(f"{', '.join(names)}: {text}" for text, names in says.items())
