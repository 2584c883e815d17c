"""PyTorch readers side by side, each feeding the same decode and augmentation on --device.

Four readers deliver the same images' stored JPEG bytes and labels in batches
through a torch DataLoader with --workers worker processes:
  ours-map        imagenet_build.torch.RecordDataset: one pread per record at its DALI-index offset
  ours-iterable   imagenet_build.torch.IterableRecordDataset: contiguous runs read sequentially
  tfrecord        the `tfrecord` package's MultiTFRecordDataset (vahidk/tfrecord), on the same shards
                  and the same index files
  imagefolder     torchvision's DatasetFolder over the JPEG files the shards were made from
Each is timed reading alone (bytes and labels into the main process) and reading
+ imagenet_build.torch.BatchTransform on --device (decode, nvJPEG on cuda;
random-resized crop, flip, normalise). Images/s over --batches batches after one
warm-up batch, readers alternated, medians of --repeats. Inputs: --images
generated ImageNet-sized JPEGs (benchmarks/common.py) converted here, unless
--build and --images-dir name an existing build and the folder it was made from.
Usage: python benchmarks/bench_torch.py [--images 2000] [--device cpu|cuda] [--workers 2]
           [--batch-size 64] [--batches 20] [--repeats 3] [--build DIR --images-dir DIR] [--json FILE]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from common import make_inputs  # noqa: E402

from imagenet_build.format.naming import split_shards  # noqa: E402


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def collate(samples):
    """(list of JPEG bytes, labels) from any reader's samples."""
    if isinstance(samples[0], dict) and "image/encoded" in samples[0]:  # tfrecord: raw features, 1-based labels
        return [bytes(s["image/encoded"]) for s in samples], torch.tensor([int(s["image/class/label"][0]) - 1
                                                                           for s in samples])
    if isinstance(samples[0], dict):  # ours
        return [s["image"] for s in samples], torch.tensor([s["label"] for s in samples])
    return [s for s, _ in samples], torch.tensor([t for _, t in samples])  # DatasetFolder: (bytes, class)


def readers(build, images_dir):
    """name -> (dataset, DataLoader shuffle)."""
    import torchvision
    from tfrecord.torch.dataset import MultiTFRecordDataset

    from imagenet_build.torch import IterableRecordDataset, RecordDataset

    names = [os.path.basename(p) for p in split_shards(str(build), "train")]
    return {
        "ours-map": (RecordDataset(build, "train", decode=False), False),  # the dataset shuffles per epoch
        "ours-iterable": (IterableRecordDataset(build, "train", decode=False), False),
        "tfrecord": (MultiTFRecordDataset(str(build / "{}"), str(build / "dali_idx" / "{}.idx"),
                                          {n: 1.0 for n in names}, description={"image/encoded": "byte",
                                                                                "image/class/label": "int"},
                                          shuffle_queue_size=1000, infinite=False), False),
        "imagefolder": (torchvision.datasets.DatasetFolder(str(images_dir), loader=read_bytes,
                                                           extensions=(".jpeg",)), True),
    }


def batches(dataset, shuffle, batch_size, workers):
    """Batches of (bytes, labels) epoch after epoch."""
    epoch = 0
    while True:
        if hasattr(dataset, "set_epoch"):
            dataset.set_epoch(epoch)
        yield from torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=workers,
                                               collate_fn=collate, drop_last=True,
                                               prefetch_factor=4 if workers else None)
        epoch += 1


def rate(dataset, shuffle, transform, device, args):
    stream = batches(dataset, shuffle, args.batch_size, args.workers)

    def step():
        encoded, labels = next(stream)
        if transform is not None:
            transform(encoded)
            labels.to(device)

    step()  # warm-up: the workers start
    if device == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(args.batches):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    stream.close()
    return args.batches * args.batch_size / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--classes", type=int, default=20)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--build", help="an existing convert output (with --images-dir)")
    parser.add_argument("--images-dir", help="the train folder (<class>/*.JPEG) the build was made from")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()

    from imagenet_build.torch import BatchTransform

    if args.build:
        build, images_dir = Path(args.build), Path(args.images_dir)
    else:
        work = Path(tempfile.mkdtemp(prefix="ib-bench-torch-"))
        make_inputs(work / "inputs", args.images, args.classes)
        build, images_dir = work / "build", work / "inputs" / "train"
        subprocess.run([sys.executable, "-m", "imagenet_build", "convert", "--train-dir", str(images_dir),
                        "--labels-file", str(work / "inputs" / "labels.txt"), "--output-dir", str(build),
                        "--train-shards", "16"], check=True, capture_output=True)
    transform = BatchTransform(args.device, training=True, channels_last=args.device == "cuda")
    runs = {}
    for _ in range(args.repeats):
        for name, (dataset, shuffle) in readers(build, images_dir).items():
            runs.setdefault((name, "read"), []).append(rate(dataset, shuffle, None, args.device, args))
            runs.setdefault((name, "read+decode"), []).append(rate(dataset, shuffle, transform, args.device, args))
    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"device {args.device} ({device}), torch {torch.__version__}, {args.workers} workers, "
          f"batch {args.batch_size}, {args.batches} batches, median of {args.repeats}")
    print(f"{'reader':15s} {'read images/s':>14s} {'read+decode+augment images/s':>30s}")
    figures = {}
    for name in ("ours-map", "ours-iterable", "tfrecord", "imagefolder"):
        read, full = (statistics.median(runs[(name, kind)]) for kind in ("read", "read+decode"))
        figures[name] = {"read": round(read, 1), "read+decode": round(full, 1)}
        print(f"{name:15s} {read:14.0f} {full:30.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "torch": torch.__version__, "workers": args.workers,
                                               "batch_size": args.batch_size, "figures": figures}, indent=1))


if __name__ == "__main__":
    main()
