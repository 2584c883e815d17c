"""convert against the floor of its own work: a minimal converter over the same images, in CPU seconds.

The minimal converter (`bench_floor.py minimal INPUTS OUT SHARDS`, below) does only what any converter must:
lists the class folders, reads each file (Python open/read), frames it as a TFRecord (length, masked CRC32C
of the length, the bytes, masked CRC32C), hashes every shard with sha256, writes each shard under a
temporary name, fsyncs it, renames it, and writes its DALI index the same way. No Example, no check of the
images, no shuffle, no manifest. Beside it `imagenet-build convert --workers 1` on the same folder, into
as many shards.

Both run as whole processes over two corpus sizes of generated ImageNet-like JPEGs (common.make_inputs:
500x375 and around, ~100 KB each), the four commands taking turns, `sync` before each, page cache warm.
The figure is CPU seconds (user + system of the process and all its children) per GB of images: on a
shared machine it holds where wall time does not. From the two sizes, a straight line per command:
CPU = fixed + per GB x GB, so the fixed cost of a run (start-up, listing, the plan, the manifest, and the
per-shard work of the same shard count) apart from the cost per image.
Usage: python benchmarks/bench_floor.py [--images 10500] [--small 1500] [--shards 128] [--repeats 5]
       python benchmarks/bench_floor.py --quick      (2,000 and 500 images, 3 repeats)
"""

import argparse
import hashlib
import math
import os
import statistics
import struct
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import compiled, make_inputs, measure, remove  # noqa: E402

CLASSES = 100


def _masked(crc):
    return ((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF).to_bytes(4, "little")


def minimal(inputs, out, shards):
    """The minimal converter: every JPEG under inputs/train, in sorted order, into `shards` TFRecord files
    with their DALI indexes, each written under a temporary name, fsync'd and renamed."""
    import google_crc32c

    root = Path(inputs) / "train"
    files = [os.path.join(root, c, name) for c in sorted(os.listdir(root)) for name in sorted(os.listdir(root / c))]
    out = Path(out)
    (out / "idx").mkdir(parents=True)
    per = -(-len(files) // shards)
    digests = []
    for k in range(shards):
        name = f"train-{k:05d}-of-{shards:05d}"
        tmp = out / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        digest, offset, index = hashlib.sha256(), 0, []
        for path in files[k * per : (k + 1) * per]:
            with open(path, "rb") as f:
                data = f.read()
            length = struct.pack("<Q", len(data))
            head, foot = length + _masked(google_crc32c.value(length)), _masked(google_crc32c.value(data))
            os.writev(fd, (head, data, foot))
            for part in (head, data, foot):
                digest.update(part)
            index.append(f"{offset} {len(data) + 16}\n")
            offset += len(data) + 16
        os.fsync(fd)
        os.close(fd)
        index_tmp = out / "idx" / f".{name}.idx.tmp"
        index_fd = os.open(index_tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(index_fd, "".join(index).encode())
        os.fsync(index_fd)
        os.close(index_fd)
        os.replace(tmp, out / name)
        os.replace(index_tmp, out / "idx" / f"{name}.idx")
        digests.append(digest.hexdigest())
    for folder in (out, out / "idx"):
        dir_fd = os.open(folder, os.O_RDONLY)
        os.fsync(dir_fd)
        os.close(dir_fd)
    print(len(files), "images,", len(digests), "shards")


def commands(inputs, out, shards):
    here = [sys.executable, str(Path(__file__).resolve()), "minimal", str(inputs), str(out), str(shards)]
    convert = [sys.executable, "-m", "imagenet_build", "convert", "--train-dir", str(inputs / "train"),
               "--labels-file", str(inputs / "labels.txt"), "--output-dir", str(out), "--train-shards", str(shards),
               "--layout-threads", str(math.gcd(8, shards)), "--workers", "1"]
    return {"minimal": here, "convert": convert}


def corpus(work, images):
    """work/inputs-N made once (kept for later runs): (folder, images, bytes)."""
    folder = work / f"inputs-{images}"
    if not (folder / "labels.txt").exists():
        remove(folder)
        make_inputs(folder, images, CLASSES)
    files = list((folder / "train").rglob("*.JPEG"))
    return folder, len(files), sum(p.stat().st_size for p in files)


def line(points):
    """(fixed CPU-s, CPU-s per GB) of the straight line through [(GB, CPU-s)] (two sizes: exact)."""
    (x0, y0), (x1, y1) = points
    slope = (y1 - y0) / (x1 - x0)
    return y0 - slope * x0, slope


def main():
    if sys.argv[1:2] == ["minimal"]:
        return minimal(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=10500, help="the large corpus")
    parser.add_argument("--small", type=int, default=1500, help="the small corpus (for the fixed cost)")
    parser.add_argument("--shards", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2,000 and 500 images, 3 repeats")
    parser.add_argument("--work", help="scratch folder, inputs kept there (default: a temporary one)")
    args = parser.parse_args()
    if args.quick:
        args.images, args.small, args.repeats = 2000, 500, 3
    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-floor-"))
    work.mkdir(parents=True, exist_ok=True)
    compiled()
    sizes = {name: corpus(work, n) for name, n in (("large", args.images), ("small", args.small))}
    out = work / "out"
    cpu = {(size, who): [] for size in sizes for who in ("minimal", "convert")}
    wall = {key: [] for key in cpu}
    load = [os.getloadavg()[0]]
    for repeat in range(args.repeats):
        for size, (folder, _, _) in sizes.items():
            runs = list(commands(folder, out, args.shards).items())
            for who, cmd in runs[repeat % 2 :] + runs[: repeat % 2]:  # who goes first alternates
                seconds, cpu_seconds, _ = measure(cmd, clear=out)
                remove(out)
                cpu[size, who].append(cpu_seconds)
                wall[size, who].append(seconds)
        load.append(os.getloadavg()[0])
    report(sizes, cpu, wall, load, args)


def report(sizes, cpu, wall, load, args):
    med = {key: statistics.median(runs) for key, runs in cpu.items()}
    print(f"{os.cpu_count()} cores, load average {min(load):.1f}-{max(load):.1f} during the runs; {args.shards} "
          f"shards; {args.repeats} runs each, alternated, medians; CPU = user + system of the whole process tree")
    for size, (_, images, total) in sizes.items():
        gb = total / 1e9
        print(f"{size}: {images} images, {total / 1e6:.0f} MB ({total / images / 1e3:.0f} KB an image)")
        for who in ("minimal", "convert"):
            runs = ", ".join(f"{c:.2f}" for c in cpu[size, who])
            print(f"  {who:8s} {med[size, who]:6.2f} CPU-s  {med[size, who] / gb:5.2f} CPU-s/GB  "
                  f"{med[size, who] / images * 1e6:4.0f} us/image  wall {statistics.median(wall[size, who]):6.2f} s"
                  f"   runs: {runs}")
        print(f"  convert / minimal: {med[size, 'convert'] / med[size, 'minimal']:.2f}x")
    fits = {who: line([(sizes[s][2] / 1e9, med[s, who]) for s in ("small", "large")]) for who in ("minimal", "convert")}
    for who, (fixed, per_gb) in fits.items():
        print(f"{who:8s} fixed {fixed:5.2f} CPU-s a run, {per_gb:5.2f} CPU-s/GB beyond it")
    print(f"per GB beyond the fixed cost, convert / minimal: {fits['convert'][1] / fits['minimal'][1]:.2f}x")


if __name__ == "__main__":
    main()
