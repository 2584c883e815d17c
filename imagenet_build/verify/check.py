"""A check of verify is one class: its name, what it covers, its row in the report, and a run at each
scope it looks at. Defining it registers it (the package's __init__ imports the check modules).

Its scope is its base class, each with its own run:
  RecordCheck (record.py)  run_record(record) -> messages   every record's fields, on the workers
  ShardCheck  (shard.py)   run_shard(shard) -> findings     one shard file and its index, on the workers
  FolderCheck (folder.py)  run_folder(folder) -> findings   across shards and the manifest, on the driver
A check that looks at two scopes (labels: each record's, then the folder's counts) has both bases.
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, NamedTuple, Type


class Mode(NamedTuple):
    """What a verify run was asked for, which decides the checks it makes."""

    quick: bool  # the record headers only: no payload is read
    deep: bool  # every image decoded too
    expect_imagenet: bool  # ImageNet's totals required
    manifest: bool  # the folder has a readable manifest.json


class Check:
    """One row of verify's report and the code that finds its problems (see the module's docstring).

    A check sets `name`, `covers` and `rank`, and `runs(mode)` where it does not run in every mode.
    The findings of a `warning` check are warnings: reported apart, they never make a build unsound.
    """

    name: ClassVar[str]  # what the report and --json call it
    covers: ClassVar[str]  # the report's words for what it checks
    rank: ClassVar[int]  # its row in the report: ascending
    warning: ClassVar[bool] = False
    counted: ClassVar[str] = "record(s)"  # what a warning's count counts, in the report's words

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            return  # a base for checks (a scope), not a check
        known = REGISTRY.get(cls.name)
        if known is not None and known.__qualname__ != cls.__qualname__:
            raise TypeError(f"two checks named {cls.name!r}: {known.__qualname__} and {cls.__qualname__}")
        REGISTRY[cls.name] = cls

    @classmethod
    def runs(cls, mode: Mode) -> bool:
        """Whether a run in this mode makes this check."""
        return True


REGISTRY: Dict[str, Type[Check]] = {}


def registered() -> list[type[Check]]:
    """Every check, in report order."""
    return sorted(REGISTRY.values(), key=lambda check: (check.rank, check.name))


def checks_run(mode: Mode) -> list[type[Check]]:
    """The checks a run in this mode makes, in report order."""
    return [check for check in registered() if check.runs(mode)]
