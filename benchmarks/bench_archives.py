"""convert from the ILSVRC2012-shaped tarballs against the folders, and against extract-then-convert.

Makes N ImageNet-sized JPEGs in class folders (or reuses --work), packs them as
ILSVRC2012_img_train.tar (a tar of <synset>.tar), then runs, alternating, with
`sync` before each:
  folders          imagenet-build convert --train-dir
  tarball          imagenet-build convert --train-tar (nothing extracted)
  extract+convert  what users do today: untar the outer tar, untar each class tar into its
                   folder (as the usual extraction scripts do), then convert --train-dir
Usage: python benchmarks/bench_archives.py [--images 10000] [--repeats 3]
"""

import math
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import bench_parser, kept_inputs, timed  # noqa: E402

EXTRACT = (
    'set -e; mkdir -p "$2"; cd "$2"; tar xf "$1"; '
    'for f in *.tar; do d="${f%.tar}"; mkdir -p "$d"; tar xf "$f" -C "$d"; rm "$f"; done'
)


def pack(inputs, archive):
    with tarfile.open(archive, "w", format=tarfile.GNU_FORMAT) as outer:
        for folder in sorted((inputs / "train").iterdir()):
            inner = archive.parent / f"{folder.name}.tar"
            with tarfile.open(inner, "w", format=tarfile.GNU_FORMAT) as tar:
                for image in sorted(folder.iterdir()):
                    tar.add(image, arcname=image.name)
            outer.add(inner, arcname=inner.name)
            inner.unlink()


def main():
    parser = bench_parser(__doc__)
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-tar-"))
    inputs = kept_inputs(work, args.images)
    archive = work / "ILSVRC2012_img_train.tar"
    if not archive.exists():
        pack(inputs, archive)
    ib = [sys.executable, "-m", "imagenet_build", "convert", "--labels-file", str(inputs / "labels.txt"),
          "--train-shards", str(args.shards), "--layout-threads", str(math.gcd(8, args.shards))]
    extracted, out = work / "extracted", work / "out"
    convert_extracted = " ".join(f"'{a}'" for a in ib + ["--train-dir", str(extracted), "--output-dir", str(out)])
    commands = {
        "folders": (ib + ["--train-dir", str(inputs / "train"), "--output-dir", str(out)], [out]),
        "tarball": (ib + ["--train-tar", str(archive), "--output-dir", str(out)], [out]),
        "extract+convert": (["sh", "-c", f"{EXTRACT}; {convert_extracted}", "sh", str(archive), str(extracted)],
                            [out, extracted]),
    }
    subprocess.run(["cat", str(archive)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    runs = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, (cmd, clear) in commands.items():
            runs[name].append(timed(cmd, clear or ())[0])
    med = {name: statistics.median(r) for name, r in runs.items()}
    images = sum(1 for _ in (inputs / "train").rglob("*.JPEG"))
    print(f"{images} images, archive {archive.stat().st_size / 1e6:.0f} MB, {os.cpu_count()} cores, "
          f"{args.repeats} runs each (median)")
    for name, r in runs.items():
        print(f"  {name:16s} {med[name]:6.2f} s  {images / med[name]:7.0f} images/s   runs: "
              + ", ".join(f"{s:.2f}" for s in r))
    print(f"  tarball / folders speed:          {med['folders'] / med['tarball']:.2f}x")
    print(f"  tarball / extract+convert speed:  {med['extract+convert'] / med['tarball']:.2f}x")


if __name__ == "__main__":
    main()
