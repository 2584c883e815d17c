"""convert against a plain copy of the same bytes and against slim's way, as whole processes.

Makes N ImageNet-sized JPEGs (~110 KB, 500x375 and around), then runs, alternating,
`repeats` times each, with `sync` before every timed run:
  copy      cat of every input file into one file (the limit: the bytes must be read and written)
  copy+sync the same, then fsync of the output (convert fsyncs every shard it writes)
  slim      benchmarks/slim_baseline.py: full TF decode of every image, TFRecordWriter, 8 threads
  convert   imagenet-build convert --workers <cores>
and prints medians, ratios and the peak RSS of each. Also times planning 1,281,167 entries.
Usage: python benchmarks/bench_convert.py [--images 10000] [--repeats 3] [--work DIR]
"""

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import make_inputs, timed  # noqa: E402


def bench_plan():
    from imagenet_build.catalog.classes import load_catalog
    from imagenet_build.model import SplitInput
    from imagenet_build.plan import SplitPlan
    from imagenet_build.sources.folders import FolderReader

    cat = load_catalog()
    split = SplitInput("train", "/", "folders", FolderReader)
    for i in range(1281167):
        synset = cat.synsets[i % 1000]
        split.add(f"{synset}/{synset}_{i}.JPEG", i % 1000 + 1)
    started = time.perf_counter()
    fingerprints = [spec.fingerprint("fail") for spec in SplitPlan(split, cat, {}, 1024, 8)]
    return time.perf_counter() - started, len(fingerprints)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shards", type=int, default=128)
    parser.add_argument("--work", help="scratch folder (default: a temporary one)")
    parser.add_argument("--skip-slim", action="store_true", help="leave out the TensorFlow baseline")
    parser.add_argument("--cold", action="store_true",
                        help="drop the page cache before every run (root only): inputs read from the disk")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-"))
    inputs = work / "inputs"
    if not (inputs / "labels.txt").exists():
        shutil.rmtree(inputs, ignore_errors=True)
        print(f"making {args.images} JPEGs in {inputs} ...", file=sys.stderr)
        make_inputs(inputs, args.images, args.classes)
    files = sorted(str(p) for p in (inputs / "train").rglob("*.JPEG"))
    total_bytes = sum(os.path.getsize(f) for f in files)
    list_file = work / "files.txt"
    list_file.write_text("\0".join(files) + "\0")
    cores = os.cpu_count()
    ib = [sys.executable, "-m", "imagenet_build"]
    commands = {
        "copy": (["sh", "-c", f'xargs -0 cat < "{list_file}" > "{work / "copy.bin"}"'], work / "copy.bin"),
        "copy+sync": (["sh", "-c",
                       f'xargs -0 cat < "{list_file}" > "{work / "copy.bin"}" && sync "{work / "copy.bin"}"'],
                      work / "copy.bin"),
        "convert": (ib + ["convert", "--train-dir", str(inputs / "train"), "--labels-file", str(inputs / "labels.txt"),
                          "--output-dir", str(work / "out-convert"), "--train-shards", str(args.shards),
                          "--layout-threads", str(math.gcd(8, args.shards)),
                          "--workers", str(cores)], work / "out-convert"),
    }
    if not args.skip_slim:
        commands["slim"] = ([sys.executable, str(HERE / "slim_baseline.py"), str(inputs / "train"),
                             str(inputs / "labels.txt"), str(work / "out-slim"), str(args.shards), "8"],
                            work / "out-slim")
    if not args.cold:  # warm the page cache once, so every run reads from memory
        subprocess.run(commands["copy"][0], check=True)
    runs = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, (cmd, out) in commands.items():
            runs[name].append(timed(cmd, out, args.cold))
    plan_seconds, _ = bench_plan()

    print(f"{len(files)} images, {total_bytes / 1e6:.0f} MB, {cores} cores, {args.repeats} runs each (median), "
          f"{'cold' if args.cold else 'warm'} page cache")
    med = {name: statistics.median(s for s, _ in r) for name, r in runs.items()}
    for name, r in runs.items():
        seconds = med[name]
        print(f"  {name:10s} {seconds:7.2f} s  {len(files) / seconds:8.0f} images/s  "
              f"{total_bytes / seconds / 1e6:7.0f} MB/s"
              f"  peak RSS {max(m for _, m in r):6.0f} MB   runs: {', '.join(f'{s:.2f}' for s, _ in r)}")
    print(f"  convert / copy      throughput: {med['copy'] / med['convert']:.2f}x")
    print(f"  convert / copy+sync throughput: {med['copy+sync'] / med['convert']:.2f}x")
    if "slim" in med:
        print(f"  convert / slim      throughput: {med['slim'] / med['convert']:.2f}x")
    print(f"  planning 1,281,167 entries into 1024 shards (with fingerprints): {plan_seconds:.2f} s")


if __name__ == "__main__":
    main()
