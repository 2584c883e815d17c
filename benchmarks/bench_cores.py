"""How convert scales with cores: the same folder converted with 1, 2, 4, ... workers, beside a plain copy.

On N generated ImageNet-sized JPEGs (or --work's), as whole processes, `sync` first, the commands
taking turns, medians of --repeats:
  copy         cat of every input file into one file (the physical limit: reading the bytes once)
  copy+sync    the same, then fsync of the output (convert makes each shard durable before naming it)
  workers=K    imagenet-build convert --workers K   (K = 1, 2, 4, ... up to the machine's cores)
Prints each one's images/s, its speed-up over one worker, the efficiency (speed-up / K) and
convert's throughput against the copy; then what caps many workers: the driver process's own CPU (the
serial part: listing, planning, handing out shards, counting results, the manifest) per image beside a
worker's, and the fixed start-up (a convert of --tiny images, one or two a shard, with every core: wall seconds, and the
driver's CPU), each convert run in a probe that reads its own and its workers' CPU time (getrusage).
Usage: python benchmarks/bench_cores.py [--images 20000] [--shards 128] [--repeats 3] [--work DIR] [--json FILE]
"""

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import alternate, make_inputs  # noqa: E402

# convert run in this process, then its own CPU time (the driver) and its waited-for children's (the workers)
# appended as one JSON line to $DRIVER_CPU
DRIVER_PROBE = r"""
import json, os, resource, runpy, sys
sys.argv = ["imagenet-build"] + sys.argv[1:]
code = 0
try:
    runpy.run_module("imagenet_build", run_name="__main__", alter_sys=True)
except SystemExit as e:
    code = e.code or 0
me, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
with open(os.environ["DRIVER_CPU"], "a") as f:
    f.write(json.dumps({"driver": me.ru_utime + me.ru_stime, "workers": workers.ru_utime + workers.ru_stime}) + "\n")
sys.exit(code)
"""


def worker_counts(cores):
    """1, 2, 4, ... and the core count itself."""
    counts = [1 << k for k in range(cores.bit_length()) if 1 << k <= cores]
    return counts if counts[-1] == cores else counts + [cores]


def convert_command(inputs, out, shards, workers, cpu_file):
    return ["env", f"DRIVER_CPU={cpu_file}", sys.executable, "-c", DRIVER_PROBE, "convert", "--train-dir",
            str(inputs / "train"), "--labels-file", str(inputs / "labels.txt"), "--output-dir", str(out),
            "--train-shards", str(shards), "--layout-threads", str(math.gcd(8, shards)), "--workers", str(workers)]


def cpu_of(cpu_file):
    """Medians of the driver's and the workers' CPU seconds over the runs recorded in cpu_file."""
    runs = [json.loads(line) for line in Path(cpu_file).read_text().splitlines()]
    return {key: statistics.median(r[key] for r in runs) for key in ("driver", "workers")}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=20000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--shards", type=int, default=128)
    parser.add_argument("--tiny", type=int, default=0,
                        help="images of the start-up run [default: the fewest of whole classes that fill --shards]")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", help="scratch folder (default: a temporary one)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    args.tiny = args.classes * -(-max(args.tiny, args.shards) // args.classes)  # make_inputs: whole classes
    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-cores-"))
    inputs, tiny = work / "inputs", work / "tiny"
    if not (inputs / "labels.txt").exists():
        make_inputs(inputs, args.images, args.classes)
    if not (tiny / "labels.txt").exists():
        make_inputs(tiny, args.tiny, args.classes)
    files = sorted(str(p) for p in (inputs / "train").rglob("*.JPEG"))
    total_bytes = sum(os.path.getsize(f) for f in files)
    (work / "files.txt").write_text("\0".join(files) + "\0")
    cores = os.cpu_count() or 1
    out = work / "out"
    for old in work.glob("cpu-*.jsonl"):
        old.unlink()
    copy = f'xargs -0 cat < "{work / "files.txt"}" > "{work / "copy.bin"}"'
    commands = {"copy": ["sh", "-c", copy], "copy+sync": ["sh", "-c", f'{copy} && sync "{work / "copy.bin"}"']}
    for k in worker_counts(cores):
        commands[f"workers={k}"] = convert_command(inputs, out, args.shards, k, work / f"cpu-{k}.jsonl")
    commands["start-up"] = convert_command(tiny, out, args.shards, cores, work / "cpu-start-up.jsonl")
    runs, _ = alternate(commands, args.repeats, lambda name: [work / "copy.bin", out])
    med = {name: statistics.median(r) for name, r in runs.items()}
    figures = report(med, runs, len(files), total_bytes, cores, args, work)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


def report(med, runs, images, total_bytes, cores, args, work):
    print(f"{images} images, {total_bytes / 1e6:.0f} MB, {cores} cores, {args.repeats} runs each (median), "
          "warm page cache")
    figures = {"images": images, "bytes": total_bytes, "cores": cores, "repeats": args.repeats, "runs": {}}
    for name, seconds in med.items():
        if name == "start-up":
            continue
        line = (f"  {name:11s} {seconds:7.2f} s  {images / seconds:8.0f} images/s"
                f"  {total_bytes / seconds / 1e6:6.0f} MB/s")
        figures["runs"][name] = {"seconds": seconds, "images_per_second": images / seconds}
        if name.startswith("workers="):
            k = int(name.split("=")[1])
            speedup = med["workers=1"] / seconds
            line += (f"  speed-up {speedup:5.2f}x  efficiency {speedup / k:4.0%}"
                     f"  convert/copy {med['copy'] / seconds:.2f}x, /copy+sync {med['copy+sync'] / seconds:.2f}x")
            figures["runs"][name].update(cpu_of(work / f"cpu-{k}.jsonl"))
        print(line + "   runs: " + ", ".join(f"{s:.2f}" for s in runs[name]))
    start = cpu_of(work / "cpu-start-up.jsonl")
    figures["start_up"] = {"images": args.tiny, "seconds": med["start-up"], "driver_cpu": start["driver"]}
    print(f"  start-up: a {args.tiny}-image convert on {cores} workers takes {med['start-up']:.2f} s, "
          f"{start['driver']:.2f} s of it the driver's CPU")
    if cores > 1:  # one worker runs the tasks in the driver's process: the driver is then everything
        most = figures["runs"][f"workers={cores}"]
        driver = (most["driver"] - start["driver"]) / (images - args.tiny)  # the fixed part taken off
        worker = most["workers"] / images
        figures["per_image"] = {"driver_cpu": driver, "worker_cpu": worker}
        print(f"  CPU per image ({cores} workers): driver {driver * 1e6:.0f} us, worker {worker * 1e6:.0f} us: the "
              f"driver's is {driver / worker:.3f} of a worker's, so it keeps up with "
              f"{worker / driver if driver > 0 else float('inf'):.0f} workers")
    return figures


if __name__ == "__main__":
    main()
