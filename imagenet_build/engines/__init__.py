"""How convert's shard tasks run: worker processes here, Apache Beam, Apache Spark — one module each.

Each module registers its Engine (engine.register) with the options it takes; the registry's names are
`--runner`'s choices, local first, and its engines' options are convert's (ENGINE_OPTIONS).
"""

from collections.abc import Mapping
from typing import Any

from imagenet_build.engines import beam, local, spark  # noqa: F401  (each registers itself)
from imagenet_build.engines.engine import ENGINES, Engine, EngineOption
from imagenet_build.infra.errors import UsageError

ENGINE_NAMES = tuple(sorted(ENGINES, key=lambda name: (name != "local", name)))


def _engine_options() -> tuple[EngineOption, ...]:
    """Every engine's options, each once, as --help lists them: each engine's own, by --runner's order, then
    those several engines take."""
    takers: dict[EngineOption, list[str]] = {}
    for name in ENGINE_NAMES:
        for option in ENGINES[name].options:
            takers.setdefault(option, []).append(name)
    return tuple(sorted(takers, key=lambda option: len(takers[option]) > 1))


ENGINE_OPTIONS = _engine_options()
ENGINE_OPTION_NAMED = {option.name: option for option in ENGINE_OPTIONS}
ENGINE_DEFAULTS = {option.name: option.default for option in ENGINE_OPTIONS}  # the Python API's defaults


def runners_taking(option: EngineOption) -> list[str]:
    """The engines that take an option, in --runner's order."""
    return [name for name in ENGINE_NAMES if option in ENGINES[name].options]


def make_engine(name: str, workers: int, given: Mapping[str, Any]) -> Engine:
    """The engine `--runner name` chose, reading its options: `given` holds every engine option by name; one
    another engine takes, given (not its default), is refused in one line."""
    values = {option.name: option_value(option, given.get(option.name, option.default)) for option in ENGINE_OPTIONS}
    for option in ENGINE_OPTIONS:
        takers = runners_taking(option)
        if name not in takers and values[option.name] != option.default:
            raise UsageError(f"{option.flag_name} goes with --runner {' or '.join(takers)}")
    engine = ENGINES[name]
    return engine(workers, {option.name: values[option.name] for option in engine.options})


def option_value(option: EngineOption, value: Any) -> Any:
    """A repeated option's values as a tuple (the Python API takes one value as a str, or a list)."""
    if option.multiple:
        return (value,) if isinstance(value, str) else tuple(value)
    return value
