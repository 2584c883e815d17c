"""How convert's shard tasks run: worker processes here, Apache Beam, Apache Spark — one module each.

Each module registers its Engine (base.register); the registry's names are `--runner`'s choices, local first.
"""

from imagenet_build.engines import beam, local, spark  # noqa: F401  (each registers itself)
from imagenet_build.engines.engine import ENGINES, Engine, EngineSettings

ENGINE_NAMES = tuple(sorted(ENGINES, key=lambda name: (name != "local", name)))


def make_engine(name: str, settings: EngineSettings) -> Engine:
    """The engine `--runner name` chose."""
    return ENGINES[name](settings)
