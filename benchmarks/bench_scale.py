"""The cost of scaling out: Beam's DirectRunner against the local runner, and S3 against local disk.

On N generated ImageNet-sized images (or --work's), as whole processes, alternating, `sync` first:
  local         imagenet-build convert --output-dir DIR            (worker processes)
  beam-direct   imagenet-build convert --output-dir DIR --runner beam   (DirectRunner)
  s3            imagenet-build convert --output-dir s3://...       (moto's S3 server on loopback)
Usage: python benchmarks/bench_scale.py [--images 2000] [--repeats 3]
"""

import argparse
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import make_inputs, start_s3, timed  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", help="scratch folder (default: a temporary one)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-scale-"))
    inputs = work / "scale-inputs"
    if not (inputs / "labels.txt").exists():
        make_inputs(inputs, args.images, 20)
    server = start_s3()
    try:
        base = [sys.executable, "-m", "imagenet_build", "convert", "--train-dir", str(inputs / "train"),
                "--labels-file", str(inputs / "labels.txt"), "--train-shards", str(args.shards),
                "--layout-threads", str(math.gcd(8, args.shards)), "--overwrite"]
        commands = {
            "local": base + ["--output-dir", str(work / "scale-out")],
            "beam-direct": base + ["--output-dir", str(work / "scale-out"), "--runner", "beam"],
            "s3": base + ["--output-dir", "s3://bench/out"],
        }
        runs = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, cmd in commands.items():
                runs[name].append(timed(cmd, [work / "scale-out"])[0])
    finally:
        server.terminate()
    images = sum(1 for _ in (inputs / "train").rglob("*.JPEG"))
    med = {name: statistics.median(r) for name, r in runs.items()}
    print(f"{images} images, {args.shards} shards, {os.cpu_count()} cores, {args.repeats} runs each (median)")
    for name, r in runs.items():
        print(f"  {name:12s} {med[name]:6.2f} s  {images / med[name]:7.0f} images/s   runs: "
              + ", ".join(f"{s:.2f}" for s in r))
    print(f"  Beam DirectRunner / local: {med['beam-direct'] / med['local']:.2f}x the time")
    print(f"  S3 (moto, loopback) / local disk: {med['s3'] / med['local']:.2f}x the time")


if __name__ == "__main__":
    main()
