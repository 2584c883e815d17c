"""DALI's CPU pipeline against the tf.data pipeline with the same augmentation, side by side.

Both read the same shards (a convert output, made here if --build is not given),
decode, random-crop (area 0.05-1, aspect 0.75-1.33), resize to 224, mirror and
normalise, in one process, alternating; images/s over --batches batches after
one warm-up batch, medians of --repeats.
Usage: python benchmarks/bench_pipelines.py [--build DIR] [--batches 30] [--batch-size 32] [--repeats 3]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import images_per_second, make_inputs  # noqa: E402

from imagenet_build.format.naming import split_shards  # noqa: E402


def dali_rate(paths, indexes, batch_size, batches):
    from imagenet_build.dali import training_pipeline

    pipe = training_pipeline(paths, indexes, device_id=None, batch_size=batch_size, layout="HWC")
    pipe.build()
    rate = images_per_second(pipe.run, batch_size, batches)
    del pipe
    return rate


def tfdata_rate(paths, batch_size, batches):
    from imagenet_build.tfdata import make_dataset

    iterator = iter(make_dataset(paths, training=True, batch_size=batch_size))
    return images_per_second(lambda: next(iterator), batch_size, batches)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", help="a convert output folder (default: 2,000 generated images)")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    build = Path(args.build) if args.build else None
    if build is None:
        work = Path(tempfile.mkdtemp(prefix="ib-bench-pipe-"))
        make_inputs(work / "inputs", 2000, 20)
        build = work / "build"
        subprocess.run([sys.executable, "-m", "imagenet_build", "convert", "--train-dir", str(work / "inputs/train"),
                        "--labels-file", str(work / "inputs/labels.txt"), "--output-dir", str(build),
                        "--train-shards", "16"], check=True, capture_output=True)
    paths = split_shards(str(build), "train")
    indexes = [str(build / "dali_idx" / (Path(p).name + ".idx")) for p in paths]
    runs = {"dali-cpu": [], "tf.data": []}
    for _ in range(args.repeats):
        runs["dali-cpu"].append(dali_rate(paths, indexes, args.batch_size, args.batches))
        runs["tf.data"].append(tfdata_rate(paths, args.batch_size, args.batches))
    print(f"{len(paths)} shards, batch {args.batch_size}, {args.batches} batches, {os.cpu_count()} cores, "
          f"{args.repeats} runs (median)")
    for name, rates in runs.items():
        print(f"  {name:9s} {statistics.median(rates):7.0f} images/s   runs: {', '.join(f'{r:.0f}' for r in rates)}")
    print(f"  DALI / tf.data: {statistics.median(runs['dali-cpu']) / statistics.median(runs['tf.data']):.2f}x")


if __name__ == "__main__":
    main()
