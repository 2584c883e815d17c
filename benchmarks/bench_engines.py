"""Each engine's overhead against the local worker processes, on the same input, and the job's size at full ImageNet.

Runs `python -m imagenet_build convert` as a whole process per engine, the engines in turn (local first, then
the others, the order rotated each repeat), `sync` before each, on --images ImageNet-like JPEGs (~110 KB, 100
classes) in --shards shards:
  local   --workers 2
  beam    --runner beam: FnApiRunner with 2 worker processes (multi_processing)
  spark   --runner spark --spark-master local[2]; and local-cluster[2,1,1024] (two executor JVMs)
and prints each one's median wall seconds and its ratio to local's, checking that every engine wrote the same
bytes. Then the job at full ImageNet (1,152 shards): the Beam job graph's size (the pipeline proto Dataflow is
sent), and the tasks file every engine's workers read their shard from (measured per image here, scaled).
Usage: python benchmarks/bench_engines.py [--images 4000] [--shards 40] [--repeats 3] [--work DIR]
"""

import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import bench_parser, kept_inputs  # noqa: E402

ENGINES = {
    "local": ["--workers", "2"],
    "beam": ["--runner", "beam", "--beam-options",
             "--runner FnApiRunner --direct_running_mode=multi_processing --direct_num_workers=2"],
    "spark local[2]": ["--runner", "spark", "--spark-master", "local[2]"],
    "spark local-cluster": ["--runner", "spark", "--spark-master", "local-cluster[2,1,1024]"],
}
FULL_SHARDS = 1152
FULL_IMAGES = 1_331_167


def digest(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def convert(inputs, out, shards, engine_args):
    subprocess.run(["sync"], check=True)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "imagenet_build", "convert", "--train-dir", str(inputs / "train"),
         "--labels-file", str(inputs / "labels.txt"), "--train-shards", str(shards), "--layout-threads", "4",
         "--output-dir", str(out), "--overwrite", *engine_args], capture_output=True, text=True)
    seconds = time.monotonic() - started
    if result.returncode:
        sys.exit(f"{engine_args}: {result.stderr}")
    return seconds


def job_sizes(inputs, shards):
    """(Beam job graph bytes at full ImageNet, tasks file bytes per image here)."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from imagenet_build.engines.beam import beam_task
    from imagenet_build.engines.job import JobRef, Task, write_job

    job = JobRef("gs://bucket/imagenet/.convert-job", "0123456789abcdef")
    pipeline = beam.Pipeline(options=PipelineOptions(["--runner", "FnApiRunner"]))
    _ = pipeline | beam.Create(list(range(FULL_SHARDS)), reshuffle=True) | beam.Map(beam_task, job)
    graph = len(pipeline.to_runner_api().SerializeToString())
    with tempfile.TemporaryDirectory() as out:  # a job written and kept: the run below is stopped before it starts
        from imagenet_build.catalog.classes import load_catalog
        from imagenet_build.format.destination import destination
        from imagenet_build.plan import SplitPlan
        from imagenet_build.sources import scan_class_folders
        from imagenet_build.writer.shard_writer import ShardWriteTask, run_shard_task

        catalog = load_catalog(inputs / "labels.txt")
        plan = SplitPlan(scan_class_folders("train", inputs / "train", catalog, "fail"), catalog, {}, shards, 4)
        dest = destination(out, None)
        job = write_job(out, (Task(plan.names[k], run_shard_task, tuple(ShardWriteTask(plan.spec(k), (dest,), "fail")))
                              for k in range(shards)))
        tasks_bytes = os.path.getsize(job.tasks_path)
        images = len(plan.input)
    return graph, tasks_bytes / images


def main():
    parser = bench_parser(__doc__)
    parser.set_defaults(images=4000, shards=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(args.work or scratch)
        inputs = kept_inputs(work, args.images)
        times = {name: [] for name in ENGINES}
        names = list(ENGINES)
        for repeat in range(args.repeats):
            order = names[repeat % len(names):] + names[:repeat % len(names)]
            for name in order:
                times[name].append(convert(inputs, work / f"out-{name.replace(' ', '-')}", args.shards,
                                           ENGINES[name]))
        reference = digest(work / "out-local")
        same = {name: digest(work / f"out-{name.replace(' ', '-')}") == reference for name in names}
        local = statistics.median(times["local"])
        print(f"{args.images} images, {args.shards} shards, {args.repeats} runs each, {os.cpu_count()} cores")
        print(f"{'engine':22} {'median s':>9} {'min s':>7} {'max s':>7} {'x local':>8}  same bytes")
        for name in names:
            median = statistics.median(times[name])
            print(f"{name:22} {median:9.1f} {min(times[name]):7.1f} {max(times[name]):7.1f} "
                  f"{median / local:8.2f}  {same[name]}")
        graph, per_image = job_sizes(inputs, args.shards)
        print(f"Beam job graph at {FULL_SHARDS} shards: {graph / 1024:.1f} KB")
        full = per_image * FULL_IMAGES
        print(f"tasks file: {per_image:.1f} bytes an image here; at {FULL_IMAGES:,} images ~{full / 2**20:.0f} MiB "
              f"(each task reads its own ~{full / FULL_SHARDS / 1024:.0f} KB)")


if __name__ == "__main__":
    main()
