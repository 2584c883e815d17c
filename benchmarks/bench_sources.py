"""convert --from every copy of ImageNet the tool knows, against converting the extracted folders.

The same N ImageNet-sized JPEGs (and N/10 validation images) are written once as the extracted
folders with the three ILSVRC2012 archives, then rewritten as every copy kind `sample --layout`
knows (each kind's own writer, shaped as the real download). Each source is converted as a
whole process (`sync` first, commands alternating, medians), 128 train and 16 validation shards,
and its time is given as a ratio to the folders' (above 1: faster than the folders).
Usage: python benchmarks/bench_sources.py [--images 10000] [--repeats 3] [--work DIR]
"""

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import alternate, make_inputs  # noqa: E402


def make_ilsvrc(root, images):
    """The folders, labels files and three archives of an ILSVRC-shaped copy of `images` train images."""
    from imagenet_build.tools.sample_dataset import write_tarballs

    total = make_inputs(root, images, 100)
    pictures = sorted((root / "train").rglob("*.JPEG"))
    synsets = (root / "labels.txt").read_text().split()
    (root / "validation").mkdir()
    labels = []
    for number in range(1, images // 10 + 1):
        (root / "validation" / f"ILSVRC2012_val_{number:08d}.JPEG").write_bytes(
            pictures[number * 7 % len(pictures)].read_bytes())
        labels.append(synsets[number % len(synsets)])
    (root / "validation_labels.txt").write_text("".join(s + "\n" for s in labels))
    (root / "bbox").mkdir()
    (root / "bboxes.csv").write_text("")
    write_tarballs(root)
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", help="scratch folder (default: a temporary one); inputs are kept and reused")
    args = parser.parse_args()
    from imagenet_build.sources.copies import sample_kinds

    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-sources-"))
    ilsvrc = work / "ilsvrc"
    if not (ilsvrc / "ILSVRC2012_img_val.tar").exists():
        make_ilsvrc(ilsvrc, args.images)
    labels = ["--labels-file", str(ilsvrc / "labels.txt"), "--validation-labels-file",
              str(ilsvrc / "validation_labels.txt")]
    layout = ["--train-shards", "128", "--validation-shards", "16", "--layout-threads", "8"]
    ib = [sys.executable, "-m", "imagenet_build", "convert", *labels, *layout]
    commands = {"folders": ib + ["--train-dir", str(ilsvrc / "train"), "--validation-dir",
                                 str(ilsvrc / "validation"), "--output-dir", str(work / "out-folders")]}
    for short, known in sorted(sample_kinds().items()):
        source = work / f"layout-{short}"  # the scratch folder keeps its name: a kept --work is reused
        if not source.exists():
            source.mkdir()
            known.write_sample(ilsvrc, source)
        commands[short] = ib + ["--from", str(source), "--output-dir", str(work / f"out-{short}")]
    times, peaks = alternate(commands, args.repeats, lambda name: work / f"out-{name}")
    rss = {name: max(values) for name, values in peaks.items()}
    images = args.images + args.images // 10
    base = statistics.median(times["folders"])
    print(f"{images:,} images ({args.images:,} train), 128 + 16 shards, median of {args.repeats}, "
          f"whole processes, alternating")
    print(f"{'source':10s} {'median s':>9s} {'images/s':>9s} {'vs folders':>10s} {'peak RSS MB':>12s}  runs (s)")
    for name, values in times.items():
        median = statistics.median(values)
        ratio = base / median if median else math.nan
        print(f"{name:10s} {median:9.2f} {images / median:9,.0f} {ratio:9.2f}x {rss[name]:12.0f}  "
              + " ".join(f"{v:.2f}" for v in values))


if __name__ == "__main__":
    main()
