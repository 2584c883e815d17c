"""verify and index against the tools users have today, as whole processes.

On a convert output of N ImageNet-sized images (made here, or --build DIR):
  floor     this script's own minimal pass over the shards: framing, both CRC32Cs of every record, sha256 of each
            shard (the least any full verify does; `bench_verify_index.py floor DIR`)
  verify    imagenet-build verify DIR            (full: framing, both CRCs, sha256, every Example, indexes)
  verify-q  imagenet-build verify DIR --quick    (headers and indexes only)
  tf.data   one tf.data.TFRecordDataset pass over the shards (TensorFlow checks both CRCs)
  index     imagenet-build index DIR
  t2i-tf    DALI's tfrecord2idx once per shard, as DLE's dali_index.sh runs it, TensorFlow installed
  t2i       the same with TensorFlow hidden from it (plain open())
  deep      imagenet-build verify DIR --deep     (and every image decoded)
Commands alternate, `sync` before each, medians printed: wall seconds, and CPU seconds (user + system of the
whole process tree, the figure that holds on a busy machine) per GB of shards, with the ratios to the floor.
Usage: python benchmarks/bench_verify_index.py [--images 10000] [--shards 32] [--repeats 3] [--only floor,verify,deep]
       python benchmarks/bench_verify_index.py --quick      (2,000 images, 16 shards, 3 repeats)
--only runs those commands alone (tfrecord2idx with TensorFlow takes minutes a run), --workers-1 adds
`verify --workers 1` (the driver's own process, no worker processes beside it).
"""

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import compiled, make_inputs, measure  # noqa: E402

TF_PASS = (
    "import glob, os, sys; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'; import tensorflow as tf; "
    "files = sorted(glob.glob(os.path.join(sys.argv[1], '*-of-*'))); "
    "n = sum(1 for _ in tf.data.TFRecordDataset(files)); print(n)"
)
HIDE_TF = (
    "import runpy, sys; sys.modules['tensorflow'] = None; sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def per_shard(script, build, out, hide_tf):
    """A shell loop calling tfrecord2idx once per shard."""
    py = sys.executable
    call = f'"{py}" -c "{HIDE_TF}" "{script}"' if hide_tf else f'"{py}" "{script}"'
    return ["sh", "-c",
            f'mkdir -p "{out}"; for f in "{build}"/*-of-*; do {call} "$f" "{out}/$(basename "$f").idx"; done']


def floor(build):
    """Framing, both CRC32Cs of every record and the sha256 of every shard, as plainly as Python does them: each
    payload read into its own bytes and its CRC apart (a payload cut out of a larger read is a copy, ~10 µs a
    record with the memory it churns)."""
    import glob
    import hashlib

    import google_crc32c

    def masked(crc):
        return ((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF).to_bytes(4, "little")

    records = 0
    for path in sorted(glob.glob(os.path.join(build, "*-of-*"))):
        size, offset, digest = os.path.getsize(path), 0, hashlib.sha256()
        with open(path, "rb") as f:
            while offset < size:
                head = f.read(12)
                length = int.from_bytes(head[:8], "little")
                body = f.read(length)
                foot = f.read(4)
                if masked(google_crc32c.value(head[:8])) != head[8:] or masked(google_crc32c.value(body)) != foot:
                    raise SystemExit(f"{path}: CRC mismatch at byte {offset}")
                digest.update(head)
                digest.update(body)
                digest.update(foot)
                offset += 16 + length
                records += 1
        digest.hexdigest()
    print(records, "records")


def main():
    if sys.argv[1:2] == ["floor"]:
        return floor(sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2,000 images, 16 shards, 3 repeats")
    parser.add_argument("--work", help="scratch folder (default: a temporary one)")
    parser.add_argument("--only", help="the commands to run, comma-separated (default: all)")
    parser.add_argument("--workers-1", action="store_true", help="also verify --workers 1")
    args = parser.parse_args()
    if args.quick:
        args.images, args.shards, args.repeats = 2000, 16, 3
    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-verify-"))
    compiled()
    ib = [sys.executable, "-m", "imagenet_build"]
    build = work / "build"
    if not (build / "manifest.json").exists():
        inputs = work / "inputs"
        if not (inputs / "labels.txt").exists():
            make_inputs(inputs, args.images, 100)
        subprocess.run(ib + ["convert", "--train-dir", str(inputs / "train"), "--labels-file",
                             str(inputs / "labels.txt"), "--output-dir", str(build),
                             "--train-shards", str(args.shards), "--layout-threads", str(math.gcd(8, args.shards))],
                       check=True, capture_output=True)
    shards = sorted(build.glob("*-of-*"))
    total = sum(p.stat().st_size for p in shards)
    script = shutil.which("tfrecord2idx", path=os.path.dirname(sys.executable))
    copy = work / "idx-copy"
    commands = {
        "floor": ([sys.executable, str(Path(__file__).resolve()), "floor", str(build)], None),
        "verify": (ib + ["verify", str(build)], None),
        "deep": (ib + ["verify", str(build), "--deep"], None),
        "verify-q": (ib + ["verify", str(build), "--quick"], None),
        "tf.data": ([sys.executable, "-c", TF_PASS, str(build)], None),
        "index": (ib + ["index", str(build), "--index-dir", str(copy)], copy),
        "t2i-tf": (per_shard(script, build, work / "idx-t2i", False), work / "idx-t2i"),
        "t2i": (per_shard(script, build, work / "idx-t2i", True), work / "idx-t2i"),
    }
    if args.only:
        commands = {name: command for name, command in commands.items() if name in args.only.split(",")}
    if args.workers_1:
        commands["verify-1"] = (ib + ["verify", str(build), "--workers", "1"], None)
    subprocess.run(["cat", *map(str, shards)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    runs = {name: [] for name in commands}
    cpu = {name: [] for name in commands}
    load = [os.getloadavg()[0]]
    for _ in range(args.repeats):
        for name, (cmd, clear) in commands.items():
            wall, cpu_seconds, _ = measure(cmd, clear or ())
            runs[name].append(wall)
            cpu[name].append(cpu_seconds)
        load.append(os.getloadavg()[0])
    med = {name: statistics.median(r) for name, r in runs.items()}
    gb = total / 1e9
    cpu_med = {name: statistics.median(c) for name, c in cpu.items()}
    print(f"{len(shards)} shards, {total / 1e6:.0f} MB, {os.cpu_count()} cores, load average {min(load):.1f}-"
          f"{max(load):.1f}, {args.repeats} runs each (median)")
    for name in runs:
        print(f"  {name:9s} {med[name]:7.2f} s  {total / med[name] / 1e6:7.0f} MB/s  {cpu_med[name] / gb:6.2f} CPU-s/GB"
              f"   CPU runs: {', '.join(f'{s:.2f}' for s in cpu[name])}")
    ratios(med, cpu_med, gb)
    if {"index", "t2i"} <= set(commands):
        same = all((copy / f"{p.name}.idx").read_bytes() == (work / "idx-t2i" / f"{p.name}.idx").read_bytes()
                   for p in shards)
        print(f"  indexes identical to tfrecord2idx's: {same}")


def ratios(med, cpu_med, gb):
    """The ratios of the commands that ran."""
    for name in ("verify", "verify-1"):
        if {name, "floor"} <= set(cpu_med):
            print(f"  {name} / floor, CPU: {cpu_med[name] / cpu_med['floor']:.2f}x")
    if "deep" in cpu_med:
        print(f"  verify --deep: {cpu_med['deep'] / gb:.2f} CPU-s per GB of shards")
    for name, what in (("verify", "verify (full) "), ("verify-q", "verify --quick")):
        if {name, "tf.data"} <= set(med):
            print(f"  {what} vs tf.data pass: {med['tf.data'] / med[name]:.1f}x faster")
    for name, what in (("t2i-tf", "TensorFlow installed"), ("t2i", "TensorFlow hidden:   ")):
        if {name, "index"} <= set(med):
            print(f"  index vs tfrecord2idx per shard, {what}: {med[name] / med['index']:.1f}x faster")


if __name__ == "__main__":
    main()
