"""convert from Kaggle's zip (read in place), stored and deflated, against the same images in folders.

Makes N ImageNet-sized JPEGs in class folders (or reuses --work), lays them out as
Kaggle's tree (ILSVRC/Data/CLS-LOC/train/<synset>/, with a few validation images and
the LOC_* files), zips the tree twice (all members stored; all members deflated) with
the project's Zip64 writer, then runs, alternating, with `sync` before each:
  folders        imagenet-build convert --from <the extracted tree>
  zip-stored     imagenet-build convert --from <the stored zip>
  zip-deflated   imagenet-build convert --from <the deflated zip>
Usage: python benchmarks/bench_source_kaggle.py [--images 10000] [--repeats 3]
"""

import math
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import alternate, bench_parser, kept_inputs  # noqa: E402

from imagenet_build.sources.kaggle_listing import MAPPING, SOLUTION, TRAIN, VAL  # noqa: E402
from imagenet_build.sources.zips import DEFLATED, STORED, write_zip  # noqa: E402

VALIDATION_IMAGES = 16


def kaggle_tree(inputs, tree):
    """The generated folders as Kaggle's tree; validation images are copies of the first train ones."""
    synsets = (inputs / "labels.txt").read_text().split()
    shutil.copytree(inputs / "train", tree / TRAIN)
    (tree / VAL).mkdir(parents=True)
    firsts = sorted((inputs / "train" / synsets[0]).iterdir())[:VALIDATION_IMAGES]
    for number, image in enumerate(firsts, start=1):
        shutil.copy(image, tree / VAL / f"ILSVRC2012_val_{number:08d}.JPEG")
    (tree / MAPPING).write_text("".join(f"{s} class {s}\n" for s in synsets))
    (tree / SOLUTION).write_text("ImageId,PredictionString\n" + "".join(
        f"ILSVRC2012_val_{n:08d},{synsets[0]} 0 0 1 1\n" for n in range(1, VALIDATION_IMAGES + 1)))
    (tree.parent / "validation_labels.txt").write_text(f"{synsets[0]}\n" * VALIDATION_IMAGES)


def zip_tree(tree, out, method):
    members = [(str(p.relative_to(tree)), p.read_bytes(), method, False)
               for p in sorted(tree.rglob("*")) if p.is_file()]
    write_zip(out, members)


def main():
    parser = bench_parser(__doc__)
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-kaggle-"))
    inputs, tree = kept_inputs(work, args.images), work / "tree"
    if not (tree / SOLUTION).exists():
        shutil.rmtree(tree, ignore_errors=True)
        kaggle_tree(inputs, tree)
    zips = {"zip-stored": work / "stored" / "kaggle.zip", "zip-deflated": work / "deflated" / "kaggle.zip"}
    for name, method in (("zip-stored", STORED), ("zip-deflated", DEFLATED)):
        if not zips[name].exists():
            zips[name].parent.mkdir(parents=True, exist_ok=True)
            zip_tree(tree, zips[name], method)
    ib = [sys.executable, "-m", "imagenet_build", "convert", "--labels-file", str(inputs / "labels.txt"),
          "--validation-labels-file", str(work / "validation_labels.txt"), "--validation-shards", "8",
          "--train-shards", str(args.shards), "--layout-threads", str(math.gcd(8, args.shards))]
    out = work / "out"
    commands = {"folders": ib + ["--from", str(tree), "--output-dir", str(out)]}
    commands.update({name: ib + ["--from", str(path), "--output-dir", str(out)] for name, path in zips.items()})
    for path in zips.values():  # warm the cache
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass
    runs, rss = alternate(commands, args.repeats, lambda name: [out])
    med = {name: statistics.median(r) for name, r in runs.items()}
    images = args.images + VALIDATION_IMAGES
    sizes = ", ".join(f"{name} {path.stat().st_size / 1e6:.0f} MB" for name, path in zips.items())
    print(f"{images} images ({sizes}), {os.cpu_count()} cores, {args.repeats} runs each (median)")
    for name, r in runs.items():
        print(f"  {name:14s} {med[name]:6.2f} s  {images / med[name]:7.0f} images/s  peak RSS "
              f"{max(rss[name]):4.0f} MB   runs: " + ", ".join(f"{s:.2f}" for s in r))
    print(f"  zip-stored / folders speed:    {med['folders'] / med['zip-stored']:.2f}x")
    print(f"  zip-deflated / folders speed:  {med['folders'] / med['zip-deflated']:.2f}x")


if __name__ == "__main__":
    main()
