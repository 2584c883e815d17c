"""The local engine: the shard tasks on this machine's worker processes (infra.workers), results handed back
as each task ends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagenet_build.engines.engine import Engine, OnResult, Tasks, register
from imagenet_build.engines.job import JobRef, run_task

if TYPE_CHECKING:
    from imagenet_build.infra.workers import Workers


@register
class LocalEngine(Engine):
    name = "local"
    help = "worker processes here (--workers)"
    reports_as_tasks_end = True
    reads_tasks_file = False  # its workers are handed each task as it is drawn, overlapping the driver's work

    def describe(self) -> str:
        return f"{self.workers} local worker process{'es' if self.workers > 1 else ''}"

    def run(self, job: JobRef, tasks: Tasks, on_result: OnResult, pool: Workers) -> None:
        pool.run(run_task, ((job, n, task) for n, task in tasks), lambda task, result: on_result(task[1], result))
