"""Read-back on one device: how fast each reader decodes, and whether it keeps a model training at full speed.

On a build of --images generated ImageNet-sized JPEGs (benchmarks/common.py; or --build's), images/s of:
  decode  DALI's evaluation pipeline (full decode, "mixed" = nvJPEG on a GPU; resize, centre crop, normalise)
          and its training pipeline (decode of the crop window, resize, flip, normalise), through DALI's
          PyTorch iterator, as imagenet_build.dali gives them; torchvision's decoder (nvJPEG on a GPU) on the
          records' bytes held in memory (imagenet_build.torch.decode_images), alone and with BatchTransform's
          augmentation
  train   the same model (torch_training.build_model: ResNet-50 in bf16 autocast, channels_last, on a GPU),
          the same loop (torch_training.train), fed by synthetic batches (one random batch, on the device),
          by DALI's PyTorch iterator (trainer-check's dali-torch), and by the PyTorch reader (RecordDataset,
          --workers DataLoader workers, BatchTransform on the device): a reader within a few per cent of the
          synthetic batches is not the bottleneck.
Each after a warm-up (--warmup batches or steps), one run each, synchronised before the clock stops.
Usage: python benchmarks/bench_readback.py [--device cuda|cpu] [--images 20000] [--classes 100]
           [--batch-size 256] [--batches 40] [--steps 60] [--warmup 5] [--workers 8] [--threads 8]
           [--model resnet50|small] [--build DIR] [--json FILE]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.modules.setdefault("triton", None)  # torch without triton (not needed here), as the tests run it

import torch  # noqa: E402
from common import make_inputs  # noqa: E402


def synchronise(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(batches, count, warmup, batch_size, device):
    """Images/s of `count` batches drawn from an iterator, after `warmup` untimed ones."""
    for _ in range(warmup):
        next(batches)
    synchronise(device)
    started = time.perf_counter()
    for _ in range(count):
        next(batches)
    synchronise(device)
    return count * batch_size / (time.perf_counter() - started)


def dali_batches(build, args, training):
    from imagenet_build.dali import pipeline
    from imagenet_build.trainercheck.dali_torch import batches, iterator

    pipe = pipeline(build, "train", batch_size=args.batch_size, device_id=0 if args.device == "cuda" else None,
                    training=training, num_threads=args.threads, layout="HWC", seed=0)
    return batches(iterator(pipe, ["images", "labels"], whole_batches=True))


def encoded_batches(build, args):
    """The records' JPEG bytes, read once into memory, batch after batch."""
    from imagenet_build.torch import RecordDataset

    dataset = RecordDataset(build, "train", decode=False, shuffle=False)
    held = [dataset[i]["image"] for i in range(min(len(dataset), args.batch_size * 8))]
    k = 0
    while True:
        yield [held[(k + i) % len(held)] for i in range(args.batch_size)]
        k += args.batch_size


def decode_rates(build, args):
    from imagenet_build.torch import BatchTransform, decode_images

    rates = {}
    jpegs = encoded_batches(build, args)
    decode = (decode_images(next(jpegs), args.device) for _ in iter(int, 1))
    rates["torchvision decode"] = timed(decode, args.batches, args.warmup, args.batch_size, args.device)
    augment = BatchTransform(args.device, training=True, channels_last=args.device == "cuda")
    transform = (augment(next(jpegs)) for _ in iter(int, 1))
    rates["torchvision decode + augment"] = timed(transform, args.batches, args.warmup, args.batch_size, args.device)
    for name, training in (("DALI evaluation pipeline", False), ("DALI training pipeline", True)):
        rates[name] = timed(dali_batches(build, args, training), args.batches, args.warmup, args.batch_size,
                            args.device)
    return rates


def training_rate(feed, classes, args):
    """Images/s of the training loop fed by `feed` (an iterator of (images NCHW, labels)), after the warm-up."""
    from imagenet_build.trainercheck.torch_training import build_model, train

    model = build_model(args.model, classes, args.device)
    marks = []

    def steps():
        for step in range(args.warmup + args.steps):
            if step == args.warmup:
                synchronise(args.device)
                marks.append(time.perf_counter())
            yield next(feed)

    losses = []
    failure = train(model, steps, classes, args.device, losses)
    synchronise(args.device)
    if failure or len(losses) != args.warmup + args.steps:
        raise SystemExit(f"training stopped: {failure or len(losses)}")
    return args.steps * args.batch_size / (time.perf_counter() - marks[0])


def training_rates(build, classes, args):
    from imagenet_build.torch import BatchTransform, RecordDataset, collate

    memory = torch.channels_last if args.device == "cuda" else torch.contiguous_format
    images = torch.randn(args.batch_size, 3, 224, 224, device=args.device).contiguous(memory_format=memory)
    labels = torch.randint(0, classes, (args.batch_size,))
    rates = {"synthetic batches": training_rate(iter(lambda: (images, labels), None), classes, args)}

    dataset = RecordDataset(build, "train", decode=False)
    augment = BatchTransform(args.device, training=True, channels_last=args.device == "cuda")

    def torch_feed():
        epoch = 0
        while True:
            dataset.set_epoch(epoch)
            for batch in torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, num_workers=args.workers,
                                                     collate_fn=collate, drop_last=True,
                                                     prefetch_factor=4 if args.workers else None):
                yield augment(batch["image"]), batch["label"]
            epoch += 1

    feed = torch_feed()
    rates["PyTorch reader"] = training_rate(feed, classes, args)
    feed.close()  # its workers end before DALI's threads start
    dali = dali_batches(build, args, True)
    rates["DALI (PyTorch iterator)"] = training_rate(
        ((b["images"].permute(0, 3, 1, 2), b["labels"]) for b in dali), classes, args)
    return rates


def build_to_read(args):
    if args.build:
        return Path(args.build), json.loads((Path(args.build) / "manifest.json").read_text())["num_classes"]
    work = Path(tempfile.mkdtemp(prefix="ib-bench-readback-"))
    make_inputs(work / "inputs", args.images, args.classes)
    subprocess.run([sys.executable, "-m", "imagenet_build", "convert", "--train-dir", str(work / "inputs/train"),
                    "--labels-file", str(work / "inputs/labels.txt"), "--output-dir", str(work / "build"),
                    "--train-shards", "64", "--layout-threads", "8"], check=True, capture_output=True)
    return work / "build", args.classes


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--images", type=int, default=20000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 1), help="DALI's CPU threads")
    parser.add_argument("--model", help="resnet50 or small [default: resnet50 on a GPU, small on the CPU]")
    parser.add_argument("--build", help="an existing build (its train split) instead of generated images")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    args.model = args.model or ("resnet50" if args.device == "cuda" else "small")
    torch.backends.cudnn.benchmark = args.device == "cuda"
    build, classes = build_to_read(args)
    import nvidia.dali

    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"{name}, {os.cpu_count()} cores; torch {torch.__version__}, DALI {nvidia.dali.__version__}; batch "
          f"{args.batch_size}, {args.batches} batches / {args.steps} steps after {args.warmup}, {args.workers} "
          f"DataLoader workers, {args.threads} DALI threads, model {args.model}", flush=True)
    figures = {"decode": decode_rates(build, args)}
    for what, rate in figures["decode"].items():
        print(f"  decode  {what:32s} {rate:9.0f} images/s", flush=True)
    figures["train"] = training_rates(build, classes, args)
    synthetic = figures["train"]["synthetic batches"]
    for what, rate in figures["train"].items():
        print(f"  train   {what:32s} {rate:9.0f} images/s  {rate / synthetic:5.2f}x synthetic", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": name, "args": vars(args), "figures": figures}, indent=1))


if __name__ == "__main__":
    main()
