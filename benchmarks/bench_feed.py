"""Feeding a trainer from the CPU: images per CPU-second of decode + RandomResizedCrop(224) + flip + normalise.

Two corpora, made here from --images generated ImageNet-sized JPEGs (benchmarks/common.py): the full-size build
and a `--resize shorter:256` build of the same images. On each, the contenders, alternated, each a whole process:
  torch-sample        imagenet_build.torch: RecordDataset + SampleTransform in --workers DataLoader workers
                      (the crop drawn first, decoded at its DCT scale, resized by fast_image_resize; each
                      batch read in one call, into one block of shared memory), normalised in this process
  tfdata-crop         imagenet_build.tfdata.make_dataset(training=True): decode_and_crop_jpeg
  tfdata-full         the same with decode_crop=False: every image decoded whole, then cropped
  grain               imagenet_build.grain.RecordSource, Grain's DataLoader, --workers worker processes, its
                      Batch with imagenet_build.grain.CropBatch (the same SampleTransform, a batch at a time)
  torchvision         torchvision's ImageFolder over the same images as JPEG files (the resized build's
                      extracted for the second corpus), RandomResizedCrop(224), RandomHorizontalFlip,
                      ToTensor, Normalize, --workers DataLoader workers
  dali-cpu            imagenet_build.dali's pipeline on the CPU (device_id None) from the same shards:
                      decoders.image_random_crop, resize, crop_mirror_normalize, --workers threads
Each process reads one epoch in batches of --batch-size and notes, after every batch, the CPU seconds (user + sys)
of its whole process tree (its workers and threads too); its rate is the images of the middle three fifths of
the epoch over the CPU seconds spent meanwhile, when every stage runs steadily (the start's imports, workers'
start-up and first fill, and the end's drain left out). `sync` before every run; medians of --repeats.
Usage: python benchmarks/bench_feed.py [--images 4000] [--repeats 3] [--workers 2] [--batch-size 64]
           [--only NAME,...] [--work DIR] [--json FILE]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import make_inputs  # noqa: E402

CONTENDERS = ["torch-sample", "tfdata-crop", "tfdata-full", "grain", "torchvision", "dali-cpu"]
MEAN, STD = (123.68, 116.28, 103.53), (58.395, 57.120, 57.385)  # the readers' defaults, in 0-255 units


def tree_cpu():
    """User + system CPU seconds of this process and every live process below it."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def torch_batches(build, files, workers, batch_size):
    import torch

    from imagenet_build.torch import RecordDataset, SampleTransform, collate

    dataset = RecordDataset(build, "train", decode=False, transform=SampleTransform(normalise=False))
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=workers, collate_fn=collate)
    return normalised(batch["image"] for batch in loader)


def tfdata_batches(build, files, workers, batch_size, decode_crop=True):
    from imagenet_build.tfdata import make_dataset

    dataset = make_dataset(build, training=True, batch_size=batch_size, repeat=False, drop_remainder=False, seed=0,
                           decode_crop=decode_crop)
    return (int(labels.shape[0]) for _, labels in dataset)


def grain_batches(build, files, workers, batch_size):
    import grain
    import torch

    from imagenet_build.grain import CropBatch, RecordSource

    source = RecordSource(build, "train")
    sampler = grain.samplers.IndexSampler(len(source), grain.sharding.NoSharding(), shuffle=True, num_epochs=1,
                                          seed=0)
    loader = grain.DataLoader(data_source=source, sampler=sampler, worker_count=workers,
                              operations=[grain.transforms.Batch(batch_size, batch_fn=CropBatch())])
    return normalised((torch.from_numpy(batch["image"]) for batch in loader))


def normalised(batches):
    """uint8 batches normalised into one float buffer, as a training loop uses them: the count of each. On one
    thread: the workers have the cores, and OpenMP's threads would spin waiting for each batch."""
    import torch

    from imagenet_build.torch import normalise

    torch.set_num_threads(1)
    kept = None  # the float batch, one buffer: a training step uses a batch before the next comes
    for images in batches:
        if kept is None or kept.shape != images.shape:
            kept = torch.empty(images.shape, dtype=torch.float32)
        normalise(images, out=kept)
        yield len(images)


def torchvision_batches(build, files, workers, batch_size):
    import torch
    from torchvision import datasets, transforms

    augment = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                  transforms.ToTensor(),
                                  transforms.Normalize([m / 255 for m in MEAN], [s / 255 for s in STD])])
    loader = torch.utils.data.DataLoader(datasets.ImageFolder(files, transform=augment), batch_size=batch_size,
                                         shuffle=True, num_workers=workers)
    return (len(labels) for _, labels in loader)


def dali_batches(build, files, workers, batch_size):
    from imagenet_build.dali import READER_NAME, pipeline

    pipe = pipeline(build, "train", batch_size=batch_size, device_id=None, training=True, num_threads=workers)
    pipe.build()
    size = pipe.epoch_size(READER_NAME)
    for start in range(0, size, batch_size):
        pipe.run()
        yield min(batch_size, size - start)


RUNS = {"torch-sample": torch_batches, "tfdata-crop": tfdata_batches,
        "tfdata-full": lambda *a: tfdata_batches(*a, decode_crop=False), "grain": grain_batches,
        "torchvision": torchvision_batches, "dali-cpu": dali_batches}


def child(name, build, files, workers, batch_size):
    """One contender's epoch: [(images so far, tree CPU seconds so far)] after each batch, as JSON on stdout."""
    import time

    marks, images = [(0, tree_cpu(), time.perf_counter())], 0
    for count in RUNS[name](build, files, workers, batch_size):
        images += count
        marks.append((images, tree_cpu(), time.perf_counter()))
    print(json.dumps(marks))


def steady_rate(marks):
    """(images per CPU-second, images per second) over the middle three fifths of the epoch's batches."""
    n = len(marks) - 1
    lo, hi = max(1, n // 5), n - max(1, n // 5)
    (i0, c0, t0), (i1, c1, t1) = marks[lo], marks[hi]
    return (i1 - i0) / (c1 - c0), (i1 - i0) / (t1 - t0)


def extract_files(build, out):
    """The build's train images as files, <label>/<file name>: what torchvision's ImageFolder reads."""
    from imagenet_build.format.naming import split_shards
    from imagenet_build.format.record_schema import decode_example
    from imagenet_build.format.tfrecord import read_records

    for shard in split_shards(str(build), "train"):
        with open(shard, "rb") as f:
            payloads = [payload for _, payload, _ in read_records(f, os.path.getsize(shard))]
        for payload in payloads:
            record = decode_example(payload)
            folder = out / f"{record['image/class/label'][0]:04d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / record["image/filename"][0].decode()).write_bytes(record["image/encoded"][0])


def corpora(work, images):
    """{corpus: (build, the JPEG files' folder)}: the full-size build of generated inputs and its shorter:256 one."""
    inputs, full, resized = work / "inputs", work / "full", work / "resized"
    if not (work / "resized-files").exists():  # made last
        make_inputs(inputs, images, classes=100)
        for out, more in ((full, []), (resized, ["--resize", "shorter:256"])):
            subprocess.run([sys.executable, "-m", "imagenet_build", "convert", "--train-dir", str(inputs / "train"),
                            "--labels-file", str(inputs / "labels.txt"), "--output-dir", str(out),
                            "--train-shards", "16", *more], check=True, capture_output=True)
        extract_files(resized / "shorter-256", work / "resized-files")
    return {"ImageNet-sized JPEGs": (full, inputs / "train"),
            "--resize shorter:256": (resized / "shorter-256", work / "resized-files")}


def run_one(name, build, files, args):
    subprocess.run(["sync"], check=True)
    result = subprocess.run([sys.executable, __file__, "--child", name, "--build", str(build), "--files", str(files),
                             "--workers", str(args.workers), "--batch-size", str(args.batch_size)],
                            capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"{name} failed:\n{result.stderr[-3000:]}")
    return steady_rate(json.loads(result.stdout.strip().splitlines()[-1]))


def report(found, names):
    print(f"{'corpus':24} {'contender':14} {'images/CPU-s':>13} {'images/s':>9}")
    for corpus, rates in found.items():
        per_cpu = {name: statistics.median(r[0] for r in rates[name]) for name in names}
        for name in names:
            wall = statistics.median(r[1] for r in rates[name])
            print(f"{corpus:24} {name:14} {per_cpu[name]:13.0f} {wall:9.0f}")
        if {"torch-sample", "torchvision"} <= set(names):
            print(f"  torch-sample / torchvision: {per_cpu['torch-sample'] / per_cpu['torchvision']:.2f}x")
        if {"torch-sample", "dali-cpu"} <= set(names):
            print(f"  torch-sample / dali-cpu: {per_cpu['torch-sample'] / per_cpu['dali-cpu']:.2f}x")
        if {"tfdata-crop", "tfdata-full"} <= set(names):
            print(f"  tfdata-crop / tfdata-full: {per_cpu['tfdata-crop'] / per_cpu['tfdata-full']:.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--only", help="a comma-separated subset of " + ", ".join(CONTENDERS))
    parser.add_argument("--work", help="scratch folder, kept for a rerun with the same --images")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--build", help=argparse.SUPPRESS)
    parser.add_argument("--files", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.build, args.files, args.workers, args.batch_size)
    names = args.only.split(",") if args.only else CONTENDERS
    unknown = sorted(set(names) - set(CONTENDERS))
    if unknown:
        parser.error(f"--only {','.join(unknown)}: not one of {', '.join(CONTENDERS)}")
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-feed-"))
    work.mkdir(parents=True, exist_ok=True)
    found = {}
    for corpus, (build, files) in corpora(work, args.images).items():
        rates = found[corpus] = {name: [] for name in names}
        for _ in range(args.repeats):
            for name in names:
                rates[name].append(run_one(name, build, files, args))
    report(found, names)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rates": found, "cpus": os.cpu_count()}, indent=1))


if __name__ == "__main__":
    main()
