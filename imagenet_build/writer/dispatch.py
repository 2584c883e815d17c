"""convert's shard tasks through an engine: the job written once, the engine run, every result counted.

The driver plans; the engine (request.engine: local worker processes, Apache Beam, Apache Spark) only runs
tasks by number. Every task reports through a receipt beside the output (engines/job.py), so results are
counted the same way whatever ran them: each planned shard must have reported exactly once, and a shard
whose task finished is recorded even when the job as a whole fails or is stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from imagenet_build.engines import Engine
from imagenet_build.engines.engine import Tasks
from imagenet_build.engines.job import (
    Collected,
    JobRef,
    ResultWatcher,
    Task,
    collect,
    earlier_results,
    new_job,
    task_error,
    write_job,
)
from imagenet_build.format.destination import Destination
from imagenet_build.format.manifest import shard_entry_problem
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError, one_line
from imagenet_build.infra.workers import Workers
from imagenet_build.writer.shard_writer import ShardWriteResult, ShardWriteTask, run_shard_task

SHOWN = 3  # shards named in a message, then "..."


class Planned(NamedTuple):
    """What the driver keeps of a task once it is written to the job: where its results go, how many images."""

    dests: tuple[Destination, ...]
    images: int


OnShard = Callable[[Planned, list[list[Any]]], None]  # a task's results, as run_shard_task gives them


class _Drawn:
    """The tasks of a run as they are drawn (one at a time: the plan's images are never all in memory as ShardSpecs):
    what each becomes for the engine, and what the driver keeps of it."""

    def __init__(self, tasks: Iterable[ShardWriteTask]) -> None:
        self._tasks = tasks
        self.keys: list[str] = []  # by task number
        self.planned: dict[str, Planned] = {}

    def __iter__(self) -> Iterator[Task]:
        for task in self._tasks:
            self.keys.append(task.spec.name)
            self.planned[task.spec.name] = Planned(task.dests, len(task.spec.entries))
            yield Task(task.spec.name, run_shard_task, tuple(task.portable()))


def run_job(engine: Engine, output: str, tasks: Iterable[ShardWriteTask], pool: Workers, on_shard: OnShard) -> None:
    """Every task run by the engine; on_shard(task, results) once for each as it is known to have ended. Raises
    BuildError naming the shards not written when the job failed, or when any task did not report.

    Workers that read their task from the output's storage get the plan written there first; the local engine's
    are handed each task as it is drawn."""
    drawn = _Drawn(tasks)
    output = storage.absolute(output)  # the job folder as workers in another folder (Spark's executors) find it
    todo: Tasks
    if engine.reads_tasks_file:
        job = write_job(output, drawn)
        todo = ((n, None) for n in range(len(drawn.keys)))
    else:
        job = new_job(output)
        todo = enumerate(drawn)
    seen: dict[str, Any] = {}

    def reported(key: str, raw: Any) -> None:
        if key not in seen:
            seen[key] = raw
            on_shard(drawn.planned[key], raw)

    try:
        if engine.reports_as_tasks_end:
            engine.run(job, todo, lambda n, raw: reported(drawn.keys[n], raw), pool)
        else:
            with ResultWatcher(job, drawn.keys, reported):
                engine.run(job, todo, lambda n, raw: None, pool)
    except Exception as e:
        pool.close()  # a local worker still writing a shard ends first: its shard and receipt then count
        collected = _record(job, drawn, seen, reported)
        own = task_error(e)
        if own is not None:  # a task's own error (a bad input, a full disk, no credentials): its line is the news
            raise BuildError(own) from None
        said = str(e) if isinstance(e, BuildError) else f"{engine.describe()} failed: {one_line(e)}"
        raise BuildError(f"{said}; {_not_written(collected, drawn.keys)}") from e
    except BaseException:
        pool.close()
        _record(job, drawn, seen, reported)
        raise
    collected = _record(job, drawn, seen, reported)
    if collected.missing or collected.unexpected:
        raise BuildError(f"{engine.describe()} ran the job, but {_not_written(collected, drawn.keys)}")


def _record(job: JobRef, drawn: _Drawn, seen: dict[str, Any], reported: Callable[[str, Any], None]) -> Collected:
    """Every receipt of the job not handed on yet, handed on now (a job stopped early keeps what it finished). A
    task not drawn when the job stopped has no receipt to look for: it is among the missing."""
    collected = collect(job, drawn.keys, seen)
    for key, raw in collected.results.items():
        reported(key, raw)
    return collected


def _names(keys: Sequence[str]) -> str:
    return ", ".join(keys[:SHOWN]) + (" ..." if len(keys) > SHOWN else "")


def _not_written(collected: Collected, keys: Sequence[str]) -> str:
    """What a failed or incomplete job leaves: the shards without a result, those with one that is not the job's."""
    said = []
    if collected.missing:
        said.append(f"{len(collected.missing)} of {len(keys)} shards have no result ({_names(collected.missing)})")
    if collected.unexpected:
        said.append(f"results that are not this job's: {_names(collected.unexpected)}")
    if not said:
        return "every shard reported; run the same command again to finish the build"
    return "; ".join(said) + "; run the same command again to write them"


def earlier_shards(output: str, dests: Sequence[Destination]) -> dict[Destination, list[ShardWriteResult]]:
    """{dest: [ShardWriteResult]} that receipts of an earlier job (failed or killed) in `output` report, for
    resume to check against the files as it checks the manifest's entries."""
    by_place = {storage.absolute(dest.output): dest for dest in dests}
    found: dict[Destination, list[ShardWriteResult]] = {dest: [] for dest in dests}
    for _, raw in earlier_results(output):
        for item in raw if isinstance(raw, list) else []:
            if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                    and isinstance(item[2], str) and not shard_entry_problem(item[1])):
                continue  # a receipt this version did not write: nothing to trust
            dest = by_place.get(storage.absolute(item[0]))
            if dest is not None:
                found[dest].append(ShardWriteResult(item[1], item[2]))
    return found
