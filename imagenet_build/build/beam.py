"""Run the shard tasks on Apache Beam: one task per ShardSpec, the manifest written by the driver.

The plan is made on the driver as for the local runner; Beam runs `write_shard`
for each spec (DirectRunner by default; Dataflow, Flink or Spark through Beam's
own options) and the driver collects each shard's manifest entry afterwards.
Shard writes are idempotent (the same spec always gives the same bytes, written
atomically), so a runner may retry a task freely. apache-beam is the `[beam]`
extra, imported only here.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from collections.abc import Iterable
from typing import Any, Callable

from imagenet_build.infra import storage
from imagenet_build.infra.optional import require


def _task(task: tuple[int, tuple[Any, ...]], fn: Callable[..., Any]) -> str:
    """One shard on a Beam worker; its manifest entry as a JSON line, with the task's place in the plan."""
    number, args = task
    return json.dumps({"number": number, "entry": fn(*args)}, sort_keys=True)


def run_on_beam(
    fn: Callable[..., Any],
    tasks: Iterable[Any],
    on_result: Callable[[Any, Any], None],
    beam_options: str = "",
    results_dir: str | None = None,
) -> None:
    """fn(*task) for each task on Beam; on_result(task, result) on the driver once the pipeline is done.

    The figures travel back through files under results_dir, which remote workers must reach (the
    output's bucket, when the output is a URL); by default a local temporary folder, enough for
    the DirectRunner.
    """
    beam = require("apache_beam", "--runner beam")
    fsspec = require("fsspec", "--runner beam")
    from apache_beam.options.pipeline_options import PipelineOptions
    tasks = list(tasks)
    if not tasks:
        return
    options = PipelineOptions(shlex.split(beam_options or ""))
    with tempfile.TemporaryDirectory(prefix="imagenet-build-beam-") as local:
        prefix = storage.join(results_dir or local, "entries")
        if results_dir and storage.listdir(results_dir):
            storage.remove_tree(results_dir)  # left by an interrupted run
        with beam.Pipeline(options=options) as pipeline:
            (
                pipeline
                | "shards" >> beam.Create(list(enumerate(tasks)), reshuffle=True)
                | "write" >> beam.Map(_task, fn)
                | "entries" >> beam.io.WriteToText(prefix, file_name_suffix=".jsonl")
            )
        fs, root = fsspec.core.url_to_fs(prefix)
        for path in sorted(fs.glob(root + "*.jsonl")):
            for line in fs.cat_file(path).decode().splitlines():
                result = json.loads(line)
                on_result(tasks[result["number"]], result["entry"])
        if results_dir:
            storage.remove_tree(results_dir)
