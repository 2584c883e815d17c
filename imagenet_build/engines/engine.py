"""What an engine is: something that runs a convert job's shard tasks, given their numbers, somewhere.

The driver (the writer's run) lists, plans and commits; an engine only runs `job.run_task(job, number)`
for each number, on worker processes here, on Apache Beam or on Apache Spark. Every task reports
through the output's own storage (engines/job.py), so the driver counts results the same way whatever
ran them. An engine registers itself here (`@register`); `--runner`'s choices are this registry's names, and
the options each declares (`EngineOption`) are convert's: the command line gathers them from here, and each
engine checks and reads its own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional, Tuple

from imagenet_build.infra import storage
from imagenet_build.infra.errors import UsageError
from imagenet_build.infra.unique_names import add_once

if TYPE_CHECKING:
    from imagenet_build.engines.job import JobRef, Task
    from imagenet_build.infra.workers import Workers

OnResult = Callable[[int, Any], None]  # (task number, its result): a task that ended, where the engine knows
# (task number, the task itself, or None where the engine's workers read it from the job's tasks file), in order
Tasks = Iterable[Tuple[int, Optional["Task"]]]


@dataclass(frozen=True)
class EngineOption:
    """One of convert's options, declared by the engine that takes it: the command line shows it (cli/convert.py
    gathers every engine's), the Python API takes it by name, and a run with another --runner refuses it."""

    name: str  # convert's keyword; the command line's --name with '-' for '_'
    default: Any
    help: str
    multiple: bool = False  # repeatable: the values given, as a tuple
    flag: bool = False  # on where given
    metavar: Optional[str] = None
    show_default: bool = False

    @property
    def flag_name(self) -> str:
        """How the command line names it: --spark-conf."""
        return "--" + self.name.replace("_", "-")


# taken by every engine whose workers may run on other machines (Engine.refuse_unreachable reads it)
SHARED_FILESYSTEM = EngineOption(
    "shared_filesystem", False, flag=True,
    help="--runner beam or spark with workers on other machines: every worker sees the local paths given (an NFS "
    "mount, say); without it, inputs and output must be object-store URLs.")


class Engine(ABC):
    """Runs shard tasks. Subclasses set `name` and `help` and implement `run`; they may declare `options` (and
    check what is given in `read_options`), and override `check` (what they need), `describe` (default: the name)
    and `workers_see_local_paths` (default: every worker does)."""

    name: ClassVar[str]
    help: ClassVar[str]  # --runner's help for it
    options: ClassVar[Tuple[EngineOption, ...]] = ()  # the options of convert it takes (and reads: `values`)
    reports_as_tasks_end: ClassVar[bool] = False  # run() calls on_result as each task ends (else: results are polled)
    reads_tasks_file: ClassVar[bool] = True  # its workers read their task from the job's tasks file (else handed it)

    def __init__(self, workers: int, given: Mapping[str, Any] | None = None) -> None:
        """`workers`: the driver's worker processes; `given`: values of its options by name (the others: their
        defaults). An option it does not declare is a mistake of the caller's (the request refuses it first)."""
        self.workers = workers
        values = dict(given or {})
        self.values: dict[str, Any] = {option.name: values.pop(option.name, option.default) for option in self.options}
        if values:
            raise ValueError(f"--runner {self.name} takes no {', '.join(sorted(values))}")
        self.read_options()

    def read_options(self) -> None:  # noqa: B027 - an engine without options reads none
        """Check and parse its options' values (`self.values`): what it cannot take, one UsageError line."""

    def check(self) -> None:  # noqa: B027 - an engine that needs nothing checks nothing
        """Refuse, in one line, what cannot run (a missing package, no Java), before anything is listed."""

    def workers_see_local_paths(self) -> bool:
        """Whether every worker runs on this machine (local paths then work, shared file system or not)."""
        return True

    def describe(self) -> str:
        """What runs the tasks, for messages: "Apache Spark (yarn)"."""
        return self.name

    @abstractmethod
    def run(self, job: JobRef, tasks: Tasks, on_result: OnResult, pool: Workers) -> None:
        """Run `run_task(job, n, task)` for each (n, task) of `tasks`, drawn lazily; returns when all ended, raises when
        the job failed or was stopped (its workers ended by then). `pool` is the driver's worker processes (the
        local engine's)."""

    def refuse_unreachable(self, paths: Mapping[str, Sequence[str]]) -> None:
        """A local path (output or input) that workers on other machines could not reach: a usage error, unless the
        user says every worker sees it (--shared-filesystem). `paths`: {option: the paths it gave}."""
        if self.workers_see_local_paths() or self.values.get(SHARED_FILESYSTEM.name):
            return
        for option, given in paths.items():
            for path in given:
                if path and not storage.is_url(path):
                    raise UsageError(
                        f"{option} {path} is a local path, and {self.describe()} may run its workers on other "
                        "machines: give an object-store URL (s3://, gs://), or --shared-filesystem if every worker "
                        "sees this path")


ENGINES: dict[str, type[Engine]] = {}


def register(engine: type[Engine]) -> type[Engine]:
    """An engine module's class decorator: `--runner <name>` runs it."""
    return add_once(ENGINES, engine.name, engine, "engine")
