"""How convert scales with cores: the same folder converted with 1, 2, 4, ... workers, beside a plain copy.

On N generated ImageNet-sized JPEGs (or --work's), as whole processes, `sync` first, the commands
taking turns, medians of --repeats:
  copy         cat of every input file into one file (the physical limit: reading the bytes once)
  copy+sync    the same, then fsync of the output (convert makes each shard durable before naming it)
  workers=K    imagenet-build convert --workers K   (K = 1, 2, 4, ... up to the machine's cores)
Prints each one's images/s, its speed-up over one worker, the efficiency (speed-up / K) and
convert's throughput against the copy.
Usage: python benchmarks/bench_cores.py [--images 20000] [--shards 128] [--repeats 3] [--work DIR]
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

from common import alternate, make_inputs  # noqa: E402


def worker_counts(cores):
    """1, 2, 4, ... and the core count itself."""
    counts = [1 << k for k in range(cores.bit_length()) if 1 << k <= cores]
    return counts if counts[-1] == cores else counts + [cores]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=20000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--shards", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", help="scratch folder (default: a temporary one)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-cores-"))
    inputs = work / "inputs"
    if not (inputs / "labels.txt").exists():
        make_inputs(inputs, args.images, args.classes)
    files = sorted(str(p) for p in (inputs / "train").rglob("*.JPEG"))
    total_bytes = sum(os.path.getsize(f) for f in files)
    (work / "files.txt").write_text("\0".join(files) + "\0")
    cores = os.cpu_count() or 1
    out = work / "out"
    copy = f'xargs -0 cat < "{work / "files.txt"}" > "{work / "copy.bin"}"'
    commands = {"copy": ["sh", "-c", copy], "copy+sync": ["sh", "-c", f'{copy} && sync "{work / "copy.bin"}"']}
    for k in worker_counts(cores):
        commands[f"workers={k}"] = [
            sys.executable, "-m", "imagenet_build", "convert", "--train-dir", str(inputs / "train"),
            "--labels-file", str(inputs / "labels.txt"), "--output-dir", str(out), "--train-shards",
            str(args.shards), "--layout-threads", str(math.gcd(8, args.shards)), "--workers", str(k)]
    runs, _ = alternate(commands, args.repeats, lambda name: [work / "copy.bin", out])
    med = {name: statistics.median(r) for name, r in runs.items()}
    print(f"{len(files)} images, {total_bytes / 1e6:.0f} MB, {cores} cores, {args.repeats} runs each (median), "
          "warm page cache")
    for name, seconds in med.items():
        line = (f"  {name:11s} {seconds:7.2f} s  {len(files) / seconds:8.0f} images/s"
                f"  {total_bytes / seconds / 1e6:6.0f} MB/s")
        if name.startswith("workers="):
            k = int(name.split("=")[1])
            speedup = med["workers=1"] / seconds
            line += (f"  speed-up {speedup:5.2f}x  efficiency {speedup / k:4.0%}"
                     f"  convert/copy {med['copy'] / seconds:.2f}x, /copy+sync {med['copy+sync'] / seconds:.2f}x")
        print(line + "   runs: " + ", ".join(f"{s:.2f}" for s in runs[name]))


if __name__ == "__main__":
    main()
