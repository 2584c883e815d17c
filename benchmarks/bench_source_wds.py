"""convert --from WebDataset shards (timm's imagenet-1k-wds shape) against the extracted folders.

Makes N ImageNet-sized JPEGs in class folders (or reuses --work), packs them as
WebDataset shards shaped like timm's (`imagenet1k-train-NNNN.tar`, samples shuffled
across shards, `.cls`/`.jpg`/`.json` per sample, ~1,250 samples per shard), then runs,
alternating, whole processes, with `sync` before each:
  folders   imagenet-build convert --train-dir
  wds       imagenet-build convert --from <the shard folder>
and times the scan alone (listing every shard's headers and reading its .cls members).
Usage: python benchmarks/bench_source_wds.py [--images 10000] [--repeats 3]
"""

import io
import json
import math
import os
import random
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import alternate, bench_parser, kept_inputs  # noqa: E402


def pack(inputs, folder, per_shard=1250):
    """timm-shaped shards of the images under inputs/train."""
    from imagenet_build.sources.webdataset_shard import cls_synsets

    number = {s: i for i, s in enumerate(cls_synsets())}
    images = sorted((inputs / "train").glob("*/*.JPEG"))
    random.Random(0).shuffle(images)
    folder.mkdir(parents=True)
    count = max(1, math.ceil(len(images) / per_shard))
    for k in range(count):
        with tarfile.open(folder / f"imagenet1k-train-{k:04d}.tar", "w", format=tarfile.PAX_FORMAT) as tar:
            for image in images[k::count]:
                key, synset = image.stem, image.parent.name
                meta = {"filename": f"{synset}/{image.name}", "label": number[synset]}
                for ext, data in (("cls", str(number[synset]).encode()), ("jpg", image.read_bytes()),
                                  ("json", json.dumps(meta).encode())):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))


def scan_seconds(folder, labels, workers):
    """The scan alone, in this process: listing the shards and reading the .cls of every sample."""
    from imagenet_build.catalog.classes import load_catalog
    from imagenet_build.infra.workers import Workers
    from imagenet_build.sources import find_copy

    catalog = load_catalog(labels)
    with Workers(workers) as pool:
        started = time.perf_counter()
        listed = find_copy([str(folder)]).scan_train(catalog, "fail", pool)
        return time.perf_counter() - started, len(listed)


def main():
    parser = bench_parser(__doc__)
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-wds-"))
    inputs = kept_inputs(work, args.images)
    shards = work / "wds"
    if not shards.exists():
        pack(inputs, shards)
    labels = inputs / "labels.txt"
    ib = [sys.executable, "-m", "imagenet_build", "convert", "--labels-file", str(labels),
          "--train-shards", str(args.shards), "--layout-threads", str(math.gcd(8, args.shards))]
    out = work / "out"
    commands = {
        "folders": ib + ["--train-dir", str(inputs / "train"), "--output-dir", str(out)],
        "wds": ib + ["--from", str(shards), "--output-dir", str(out)],
    }
    runs, rss = alternate(commands, args.repeats, lambda name: [out])
    med = {name: statistics.median(r) for name, r in runs.items()}
    images = sum(1 for _ in (inputs / "train").rglob("*.JPEG"))
    size = sum(p.stat().st_size for p in shards.glob("*.tar"))
    scans = [scan_seconds(shards, labels, os.cpu_count()) for _ in range(args.repeats)]
    print(f"{images} images in {len(list(shards.glob('*.tar')))} shards ({size / 1e6:.0f} MB), {os.cpu_count()} cores, "
          f"{args.repeats} runs each (median)")
    for name, r in runs.items():
        print(f"  {name:8s} {med[name]:6.2f} s  {images / med[name]:7.0f} images/s   peak RSS "
              f"{max(rss[name]):.0f} MB   runs: " + ", ".join(f"{s:.2f}" for s in r))
    print(f"  wds / folders speed: {med['folders'] / med['wds']:.2f}x")
    scan = statistics.median(s for s, _ in scans)
    print(f"  scan (headers + .cls of {scans[0][1]} samples): {scan:.3f} s, "
          f"{scan / scans[0][1] * 1e6:.1f} us per sample")


if __name__ == "__main__":
    main()
