"""trainer-check --framework torch: the shards through the PyTorch reader into real training steps (the
reader `torch`; the model and the training loop are torch_training.py's, shared with dali_torch.py).

The same checks as the DALI path, from checks.py: one epoch read by
--num-shards simulated ranks (each with its DataLoader workers) must deliver
every record once and no record to two ranks; labels and histogram; batches;
normalisation; a finite loss; a small fixed subset that is learned. On the CPU
the DataLoader workers decode and augment each image (`SampleTransform`: only the
DCT scale the crop needs); on a GPU `BatchTransform` decodes and augments each
batch there (nvJPEG), and the run uses ResNet-50 (torchvision) in bf16 autocast
and channels_last. torch and torchvision come from the `torch` extra.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Sequence

from imagenet_build.format.build_folder import BuildFolder
from imagenet_build.format.record_schema import FIRST_LABEL
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.optional import require
from imagenet_build.infra.workers import progress_bar
from imagenet_build.readers.normalisation import DLE_MEAN, DLE_STD
from imagenet_build.trainercheck.checks import Seen, Settings, TrainerResult, run_checks
from imagenet_build.trainercheck.show_grid import BatchCapture
from imagenet_build.trainercheck.torch_loader import batches, cycle, worker_count
from imagenet_build.trainercheck.torch_training import build_model, sync, to_host, train, train_timed
from imagenet_build.trainercheck.trainers import Option, Trainer, register, with_defaults


def resolve_device(device: str) -> str:
    """"cuda" or "cpu" for --device auto|gpu|cuda|cpu."""
    torch = require("torch", "trainer-check --framework torch")
    if device == "cpu":
        return "cpu"
    available = torch.cuda.is_available()
    if device in ("gpu", "cuda") and not available:
        raise BuildError(f"--device {device}: PyTorch sees no GPU (torch.cuda.is_available() is False); "
                         "use --device cpu or auto")
    return "cuda" if available else "cpu"


def read_epoch(folder: str, split: str, num_shards: int, workers: int, batch_size: int = 64) -> list[Seen]:
    """[(rank, shard, offset, filename, label as stored)] for one epoch of every simulated rank."""
    from imagenet_build.readers.torch_dataset import RecordDataset

    seen: list[Seen] = []
    bar = progress_bar(None, 0, "epoch", "rec")
    for rank in range(num_shards):
        dataset = RecordDataset(folder, split, rank=rank, world_size=num_shards, decode=False, shuffle=True)
        with contextlib.closing(batches(dataset, batch_size, workers)) as epoch:  # its workers end, whatever comes
            for batch in epoch:
                for shard, offset, name, label in zip(batch["shard"], batch["offset"].tolist(), batch["filename"],
                                                      batch["label"].tolist()):
                    seen.append((rank, shard, offset, name, label + FIRST_LABEL))  # the check wants the stored label
                bar.update(len(batch["filename"]))
    bar.close()
    return seen


def trainer_check(folder: str, split: str = "train", framework: str = "torch", **options: Any) -> TrainerResult:
    """Run every check through the PyTorch reader; the report dict, shaped as the DALI path's.

    A DataLoader worker's error reaches here rebuilt by PyTorch with the worker's whole traceback in
    its message: the BuildError it was becomes that one line again.
    """
    try:
        return _trainer_check(folder, split, **options)
    except (BuildError, RuntimeError) as e:
        text = str(e).strip()
        if "Original Traceback" not in text:
            raise
        last = text.splitlines()[-1]  # "imagenet_build.infra.errors.BuildError: <the line>"
        raise BuildError(last.split(": ", 1)[1] if ": " in last else last) from None


def _trainer_check(folder: str, split: str = "train", device: str = "auto", steps: int | None = None,
                   batch_size: int | None = None, model: str | None = None, num_shards: int = 1,
                   mean: Sequence[float] = DLE_MEAN, std: Sequence[float] = DLE_STD,
                   workers: int | None = None, show: str | None = None) -> TrainerResult:
    started = time.monotonic()
    opened = BuildFolder.open(folder).split(split)  # the data's own problems, named before PyTorch is needed
    torch = require("torch", "trainer-check --framework torch")
    from imagenet_build.readers.torch_records import Records, share

    records = Records(folder, split, opened=opened)
    device = resolve_device(device)
    gpu = device == "cuda"
    chosen = with_defaults(TRAINER, gpu, {"steps": steps, "batch_size": batch_size, "model": model, "workers": workers})
    settings = Settings(folder, split, device, chosen["model"], chosen["batch_size"], chosen["steps"], num_shards,
                        show)
    workers, note = worker_count(workers, chosen["workers"], len(records), settings.batch_size)
    share(len(records), num_shards - 1, num_shards)
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = gpu  # fixed input shapes: let cuDNN pick its fastest kernels
    result = run_checks(_TorchReader(settings, mean, std, workers), settings, records.manifest, records.paths,
                        started)
    result["framework"], result["reader"] = TRAINER.name, TRAINER.title
    result["device_name"] = torch.cuda.get_device_name() if gpu else "cpu"
    result["torch"], result["workers"] = torch.__version__, workers
    if note:
        result["notes"] = [note]
    return result


class _TorchReader:
    """trainer-check's steps through the PyTorch reader (a TrainerReader): one code path for both devices."""

    name = "the PyTorch reader"

    def __init__(self, settings: Settings, mean: Sequence[float], std: Sequence[float], workers: int) -> None:
        self.settings, self.mean, self.std, self.workers = settings, mean, std, workers
        self.gpu = settings.device == "cuda"
        self.capture = BatchCapture(mean, std, to_host) if settings.show is not None else None

    def read_epoch(self) -> list[Seen]:
        s = self.settings
        return read_epoch(s.folder, s.split, s.num_shards, self.workers)

    def augmented(self, training: bool, shuffle: bool) -> tuple[Any, Any]:
        """(the dataset, batch -> images on the device): on the CPU the workers decode and augment each image
        (SampleTransform) and the batch is normalised here; on a GPU each batch is decoded and augmented there
        (BatchTransform, nvJPEG)."""
        from imagenet_build.readers.torch_dataset import RecordDataset
        from imagenet_build.readers.torch_sample_transform import SampleTransform, normalise
        from imagenet_build.readers.torch_transform import BatchTransform

        s = self.settings
        if not self.gpu:  # uint8 crops through the workers' shared memory, normalised here
            transform = SampleTransform(training, normalise=False)
            return (RecordDataset(s.folder, s.split, decode=False, shuffle=shuffle, transform=transform),
                    lambda batch: normalise(batch["image"], self.mean, self.std))
        on_gpu = BatchTransform(s.device, training=training, mean=self.mean, std=self.std, channels_last=True)
        return (RecordDataset(s.folder, s.split, decode=False, shuffle=shuffle),
                lambda batch: on_gpu(batch["image"]))

    def sample(self, count: int) -> tuple[list[Any], float]:
        """read + decode + augment alone: its speed, and batches to look at."""
        s = self.settings
        self.dataset, self.augment = self.augmented(training=True, shuffle=True)
        with contextlib.closing(cycle(self.dataset, s.batch_size, self.workers)) as stream:  # ends its workers
            self.augment(next(stream))  # warm-up, untimed: the workers start, the decoder initialises
            sync(s.device)
            kept, timed_images = [], 0
            t0 = time.perf_counter()
            for k in range(count):
                images = self.augment(next(stream))
                if k < 8:  # enough to look at; 20 batches of 256 would be 3 GB on the host
                    kept.append(images)
                timed_images += len(images)
            sync(s.device)
            pipeline_rate = timed_images / (time.perf_counter() - t0)
        return [images.permute(0, 2, 3, 1).float().cpu().numpy() for images in kept], pipeline_rate  # NHWC

    def train(self, classes: int) -> tuple[list[float], str, float]:
        """Training from the reader, end to end."""
        s = self.settings
        net = build_model(s.model, classes, s.device)
        with contextlib.closing(cycle(self.dataset, s.batch_size, self.workers)) as stream:  # ends its workers
            feed = ((self.augment(batch), batch["label"]) for batch in stream)
            result = train_timed(net, feed, s.steps, s.batch_size, classes, s.device,
                                 see=self.capture.step if self.capture is not None else None)
        del net
        return result

    def overfit(self, classes: int) -> tuple[list[float], str, int]:
        """A small fixed subset: eval-style images held on the device, trained on repeatedly (until the loss is
        down to a quarter, well past the halving the check asks for, or max(steps, 30) steps)."""
        s = self.settings
        subset, augment = self.augmented(training=False, shuffle=False)
        first = next(batches(subset, s.batch_size, 0))
        images, labels = augment(first), first["label"]
        fixed: list[float] = []
        failure = train(build_model(s.model, classes, s.device),
                         lambda: ((images, labels) for _ in range(max(s.steps, 30))), classes, s.device, fixed,
                         until=lambda so_far: so_far[-1] <= 0.25 * so_far[0],
                         see=self.capture.subset if self.capture is not None else None)
        return fixed, failure, len(labels)


TRAINER = register(Trainer(
    name="torch", title="PyTorch reader (imagenet_build.torch)", needs=("torch", "torchvision"), reads_through="torch",
    options=(Option("steps", 30, 300), Option("batch_size", 16, 256), Option("model", "small", "resnet50"),
             Option("workers", 2, 8, "DataLoader worker processes per rank, at most one per usable core and per batch "
                    "of an epoch")),
    run=trainer_check))
