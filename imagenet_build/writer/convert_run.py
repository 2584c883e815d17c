"""convert's execute stage: a request -> inputs listed, the plan, one ShardWriteTask per shard through an engine
-> manifest.

With every build's folders held (output_folder.py's lock) from the start: list the inputs
(writer/inputs.py), plan the shards (plan.py), check each build's folder and keep what a previous run
vouches for (writer/builds.py, resume.py), write the rest (shard_writer.py, through the engine --runner chose:
dispatch.py), and record each finished shard in the manifest, written complete last (format/manifest.py), each
time through the commit check (writer/commit.py).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, cast

from imagenet_build.engines.job import remove_job_folder
from imagenet_build.format.manifest import ShardEntry
from imagenet_build.infra.errors import BuildError, Interrupted, Stopped, one_line
from imagenet_build.infra.workers import Workers, progress_bar
from imagenet_build.plan import SplitPlan
from imagenet_build.request import ConvertRequest
from imagenet_build.writer.builds import Build, destinations, make_builds, ready_builds
from imagenet_build.writer.commit import reported
from imagenet_build.writer.dispatch import Planned, run_job
from imagenet_build.writer.inputs import Inputs, list_inputs
from imagenet_build.writer.output_folder import check_resize_root, locked, remove_unrecorded
from imagenet_build.writer.shard_writer import ShardWriteResult, ShardWriteTask
from imagenet_build.writer.spooling import copy_spool
from imagenet_build.writer.summary import ConvertSummary, Timing, run_summary

MANIFEST_EVERY = 5.0  # seconds between rewrites of the in-progress manifest


def convert(request: ConvertRequest) -> ConvertSummary:
    """The request's builds written: shards, indexes, manifests. Returns the summary.

    Every build's folders are held from the start: a second run is refused before it scans or
    decompresses anything (a .tar.gz copy's spool is ~140 GB), not after. The workers end before
    the copy's spool is removed (one still writing into it would leave part of it behind).
    """
    started = time.monotonic()
    if request.resize is not None:
        check_resize_root(request.dest)
    with contextlib.ExitStack() as held:
        for build_dest in destinations(request):
            held.enter_context(locked(build_dest))
        spool = held.enter_context(copy_spool(request))  # gone before the locks, which then remove a folder they made
        with Workers(request.workers) as pool:
            inputs = list_inputs(request, pool, spool)
            real = {"validation": inputs.real_labels}  # --real-labels: the validation images' ReaL labels
            plans = [SplitPlan(split_input, inputs.catalog, inputs.boxes, request.shards(split_input.split),
                               request.layout_threads, real.get(split_input.split)) for split_input in inputs.splits]
            builds = make_builds(request, [p.split for p in plans], inputs.subset, inputs.real_labels_file)
            ready_builds(request, pool, builds, inputs, plans)
            return _execute(request, pool, builds, plans, inputs, started)


class _Progress:
    """The run's record as shards finish: each result in its build, the bar, the manifests rewritten now and then
    (at once after the first shard, then every few seconds: a failed last write still leaves a manifest that
    vouches for the shards finished until then)."""

    def __init__(self, builds: list[Build], plans: list[SplitPlan]) -> None:
        self.builds, self.plans = builds, plans
        self.by_dest = {build.dest: build for build in builds}
        sizes = {name: p.size(k) for p in plans for k, name in enumerate(p.names)}
        self.total = sum(sizes.values())
        self.kept = sum(size for name, size in sizes.items() if all(name in b.done for b in builds))
        self.bar = progress_bar(self.total, self.kept, "convert", "img")
        self.written = 0
        self.last_write = time.monotonic()

    def save(self, complete: bool, ended: dict[str, str] | None = None) -> None:
        for build in self.builds:
            build.commit(self.plans, complete, ended or {})
        self.last_write = time.monotonic()

    def finished(self, task: Planned, raw: list[list[Any]]) -> None:
        """A task's results (run_shard_task's), each recorded in the build of its destination, in task order."""
        assert len(task.dests) == len(raw), "one result per destination"
        for dest, (_, entry, state) in zip(task.dests, raw):
            build = self.by_dest[dest]
            written = cast(ShardEntry, entry)  # the writer's own figures, as its task reported them
            build.done[written["name"]] = ShardWriteResult(written, state, reported(written))
            build.written.append(entry["name"])
        self.written += 1
        self.bar.update(task.images)
        if self.written == 1 or time.monotonic() - self.last_write > MANIFEST_EVERY:
            self.save(False)


def _execute(request: ConvertRequest, pool: Workers, builds: list[Build], plans: list[SplitPlan], inputs: Inputs,
             started: float) -> ConvertSummary:
    """Everything that writes, under the outputs' locks: each image read once, written to every build."""
    progress = _Progress(builds, plans)
    todo = [(p, k) for p in plans for k, name in enumerate(p.names) if any(name not in b.done for b in builds)]
    if inputs.spool is not None:  # a .tar.gz copy planned from kept listings: decompressed where a shard is written
        inputs.spool.make_readable(pool, {p.split for p, _ in todo})
    try:
        if todo:
            progress.save(False)  # what earlier runs' receipts vouched for, recorded before their job is replaced
            run_job(request.engine, request.dest.output, (_shard_task(request, builds, p, k) for p, k in todo), pool,
                    progress.finished)
            for build in builds:  # a worker killed mid-shard whose task an engine ran again elsewhere (Spark) left
                remove_unrecorded(build.dest, set(build.done))  # its temporary file: every worker has ended now
        progress.save(True)
        remove_job_folder(request.dest.output)  # the manifests vouch for every shard its receipts named
    except BaseException as e:
        interrupted = isinstance(e, KeyboardInterrupt) or Interrupted.requested  # an engine's failure a stop set off
        ended = {"ended": "interrupted"} if interrupted else {"ended": "failed", "error": one_line(e)}
        _stop(pool, builds, lambda: progress.save(False, ended))
        with contextlib.suppress(OSError, BuildError):  # the run's own error is the one to say
            remove_job_folder(request.dest.output)  # the manifest just written lists every shard its receipts named
        if interrupted:
            raise Stopped("interrupted; run the same command again to resume") from None
        raise
    finally:
        progress.bar.close()
    timing = Timing(time.monotonic() - started, progress.total - progress.kept)
    return run_summary(request, builds, plans, inputs, len(todo), timing)


def _stop(pool: Workers, builds: list[Build], save: Callable[[], None]) -> None:
    """A run stopped early: its workers end (the shards they were writing finished and recorded), every
    file a build holds that its manifest does not list is removed (a shard renamed into place just as
    the run stopped, a temporary file), and the manifest is written, saying how the run ended."""
    try:
        pool.close()
        for build in builds:
            remove_unrecorded(build.dest, set(build.done))
    finally:
        save()


def _shard_task(request: ConvertRequest, builds: list[Build], p: SplitPlan, k: int) -> ShardWriteTask:
    """The task that writes shard k of a plan to every build that lacks it (a shard resumes per build)."""
    spec = p.spec(k)
    lacking = [b for b in builds if spec.name not in b.done]
    resize = None
    if request.resize is not None:
        resize = request.resize.only([build.resize.targets[0] for build in lacking if build.resize is not None])
    return ShardWriteTask(spec, tuple(b.dest for b in lacking), request.on_error, resize)
