"""trainer-check through DALI into PyTorch: the reader `dali-torch`, how most DALI users train.

The pipeline is readers/dali_pipeline.py's, the one the TensorFlow path trains on (the same reader, decoder,
augmentation and normalisation, the images as HWC), delivered by DALI's PyTorch iterator
(`DALIGenericIterator`, given the reader's name so that it knows each rank's share and drops the last
batch's padding) and trained on by torch_training.py's model and loop, as the PyTorch reader's are:
ResNet-50 in bf16 autocast and channels_last on a GPU (the HWC images permuted to NCHW are channels_last
as they are), the small ResNet on the CPU. The epoch is read through the same iterator, so the check
holds what a training loop gets: every record once an epoch across the ranks. No TensorFlow: DALI and
PyTorch only (extras `dali` and `torch`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any, Generator

from imagenet_build.format.build_folder import OpenedSplit
from imagenet_build.infra.errors import PathLike
from imagenet_build.infra.optional import require
from imagenet_build.infra.workers import progress_bar
from imagenet_build.readers.dali_pipeline import (
    READER_NAME,
    reading_pipeline,
    resolve_device,
    training_pipeline,
)
from imagenet_build.readers.normalisation import DLE_MEAN, DLE_STD
from imagenet_build.trainercheck.checks import Seen, Settings, TrainerResult, run_checks
from imagenet_build.trainercheck.dali_check import checked_run, seen
from imagenet_build.trainercheck.show_grid import BatchCapture
from imagenet_build.trainercheck.torch_training import build_model, sync, to_host, train, train_timed
from imagenet_build.trainercheck.trainers import Option, Trainer, register, with_defaults


def iterator(pipe: Any, outputs: Sequence[str], whole_batches: bool = False) -> Any:
    """DALI's PyTorch iterator over a pipeline built by dali_pipeline: each epoch this rank's records once, the
    padding of the last batch dropped (whole_batches: kept, so that every batch is full), reset at each end."""
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    policy = LastBatchPolicy.FILL if whole_batches else LastBatchPolicy.PARTIAL
    return DALIGenericIterator(pipe, list(outputs), reader_name=READER_NAME, last_batch_policy=policy,
                               auto_reset=True)


def batches(loader: Any) -> Generator[dict, None, None]:
    """An iterator's batches epoch after epoch (it resets itself at each end)."""
    while True:
        for outputs in loader:
            yield outputs[0]  # one pipeline: its outputs by name


def read_epoch(paths: list[str], indexes: list[str], num_shards: int, batch_size: int = 64,
               threads: int = 2) -> list[Seen]:
    """[(rank, source file, offset, filename, label as stored)] for one epoch of every simulated rank, as DALI's
    PyTorch iterator delivers them."""
    records: list[Seen] = []
    bar = progress_bar(None, 0, "epoch", "rec")
    for rank in range(num_shards):
        pipe = reading_pipeline(paths, indexes, rank, num_shards, batch_size, threads)
        for outputs in iterator(pipe, ["source", "name", "label"]):
            batch = outputs[0]
            for source, name, label in zip(batch["source"].numpy(), batch["name"].numpy(),
                                           batch["label"].view(-1).tolist()):
                records.append(seen(rank, source.tobytes(), name.tobytes(), label))
            bar.update(len(batch["label"]))
        del pipe
    bar.close()
    return records


def trainer_check(folder: PathLike, split: str = "train", device: str = "auto", framework: str = "dali-torch",
                  **options: Any) -> TrainerResult:
    """Run every check through DALI into PyTorch; the report dict, shaped as every reader's."""
    return checked_run(folder, split, TRAINER, framework, lambda opened: _trainer_check(opened, device, **options))


def _trainer_check(opened: OpenedSplit, device: str, steps: int | None = None, batch_size: int | None = None,
                   model: str | None = None, workers: int | None = None, num_shards: int = 1,
                   mean: Sequence[float] = DLE_MEAN, std: Sequence[float] = DLE_STD,
                   show: str | None = None) -> TrainerResult:
    torch = require("torch", "trainer-check --framework dali-torch")
    import nvidia.dali

    started = time.monotonic()
    device = resolve_device(device)
    gpu = device == "gpu"
    chosen = with_defaults(TRAINER, gpu, {"steps": steps, "batch_size": batch_size, "model": model,
                                         "workers": workers})
    threads = chosen["workers"] if workers is not None else min(chosen["workers"], os.cpu_count() or 1)
    settings = Settings(opened.folder, opened.split, device, chosen["model"], chosen["batch_size"],
                        chosen["steps"], num_shards, show)
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = gpu  # fixed input shapes: let cuDNN pick its fastest kernels
    result = run_checks(_DaliTorchReader(settings, opened, mean, std, threads), settings, opened.manifest,
                        opened.paths, started)
    result["framework"], result["reader"] = TRAINER.name, TRAINER.title
    result["device_name"] = torch.cuda.get_device_name() if gpu else "cpu"
    result["torch"], result["dali"], result["workers"] = torch.__version__, nvidia.dali.__version__, threads
    return result


class _DaliTorchReader:
    """trainer-check's steps through DALI's PyTorch iterator (a TrainerReader)."""

    name = "DALI's PyTorch iterator"

    def __init__(self, settings: Settings, opened: OpenedSplit, mean: Sequence[float], std: Sequence[float],
                 threads: int) -> None:
        self.settings, self.opened, self.mean, self.std, self.threads = settings, opened, mean, std, threads
        self.gpu = settings.device == "gpu"
        self.torch_device = "cuda" if self.gpu else "cpu"
        self.capture = BatchCapture(mean, std, to_host) if settings.show is not None else None

    def _batches(self, training: bool = True) -> Generator[dict, None, None]:
        s, o = self.settings, self.opened
        pipe = training_pipeline(o.paths, o.indexes, device_id=0 if self.gpu else None, batch_size=s.batch_size,
                                 mean=self.mean, std=self.std, training=training, threads=self.threads,
                                 layout="HWC", labels_on_gpu=False)
        return batches(iterator(pipe, ["images", "labels"], whole_batches=training))

    def read_epoch(self) -> list[Seen]:
        return read_epoch(self.opened.paths, self.opened.indexes, self.settings.num_shards, threads=self.threads)

    def sample(self, count: int) -> tuple[list[Any], float]:
        """read + decode + augment alone, as the iterator delivers it: its speed, and batches to look at."""
        stream = self._batches()
        next(stream)  # warm-up, untimed: the pipeline builds and fills its queue
        sync(self.torch_device)
        kept, timed_images = [], 0
        t0 = time.perf_counter()
        for k in range(count):
            images = next(stream)["images"]
            if k < 8:  # enough to look at; 20 batches of 256 would be 3 GB on the host
                kept.append(images.cpu().numpy())
            timed_images += len(images)
        sync(self.torch_device)
        pipeline_rate = timed_images / (time.perf_counter() - t0)
        stream.close()
        return kept, pipeline_rate  # NHWC already

    def train(self, classes: int) -> tuple[list[float], str, float]:
        """Training fed by the iterator, end to end."""
        s = self.settings
        net = build_model(s.model, classes, self.torch_device)
        stream = self._batches()
        # NCHW, channels_last in memory as the HWC images are
        batches = ((batch["images"].permute(0, 3, 1, 2), batch["labels"]) for batch in stream)
        result = train_timed(net, batches, s.steps, s.batch_size, classes, self.torch_device,
                             see=self.capture.step if self.capture is not None else None)
        stream.close()
        del net
        return result

    def overfit(self, classes: int) -> tuple[list[float], str, int]:
        """A small fixed subset: one evaluation batch (the centre crop) held on the device, trained on repeatedly
        (until the loss is down to a quarter, or max(steps, 30) steps)."""
        s = self.settings
        stream = self._batches(training=False)
        first = next(stream)
        stream.close()
        images, labels = first["images"].permute(0, 3, 1, 2), first["labels"]  # the iterator's own, new each batch
        fixed: list[float] = []
        failure = train(build_model(s.model, classes, self.torch_device),
                        lambda: ((images, labels) for _ in range(max(s.steps, 30))), classes, self.torch_device,
                        fixed, until=lambda so_far: so_far[-1] < 0.25 * so_far[0],
                        see=self.capture.subset if self.capture is not None else None)
        return fixed, failure, len(labels)


TRAINER = register(Trainer(
    name="dali-torch", title="DALI into PyTorch (DALI's PyTorch iterator)",
    needs=("nvidia.dali", "torch", "torchvision"), reads_through="dali",
    options=(Option("steps", 30, 300), Option("batch_size", 16, 256), Option("model", "small", "resnet50"),
             Option("workers", 2, 8, "DALI's CPU threads", least=1)),
    run=trainer_check, family="dali", rank=1))
