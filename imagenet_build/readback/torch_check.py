"""trainer-check --framework torch: the shards through the PyTorch reader into real training steps.

The same checks as the DALI path, from checks.py: one epoch read by
--num-shards simulated ranks (each with its DataLoader workers) must deliver
every record once and no record to two ranks; labels and histogram; batches;
normalisation; a finite loss; a small fixed subset that is learned. One code
path for both devices: `BatchTransform` decodes and augments on the CPU or,
with the device switched, on the GPU (nvJPEG); the GPU run uses ResNet-50
(torchvision) in bf16 autocast and channels_last. torch and torchvision come
from the `torch` extra.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterator, Sequence

from imagenet_build.encode.example import FIRST_LABEL
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.optional import require
from imagenet_build.infra.workers import progress_bar
from imagenet_build.readback.checks import DLE_MEAN, DLE_STD, Seen, Settings, TrainerResult, run_checks
from imagenet_build.readback.show_grid import BatchCapture
from imagenet_build.readback.torch_loader import batches, cycle, worker_count


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


def small_resnet(classes: int) -> Any:
    """A small ResNet for CPU runs (the DALI path's, in PyTorch): a stride-4 stem, three residual stages."""
    torch = require("torch", "trainer-check --framework torch")
    nn = torch.nn

    class Block(nn.Module):  # type: ignore[name-defined]  # torch comes from require() at run time
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
            self.shortcut = (nn.Identity() if stride == 1 and cin == cout else
                             nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

        def forward(self, x: Any) -> Any:
            return torch.relu(self.body(x) + self.shortcut(x))

    return nn.Sequential(
        nn.Conv2d(3, 16, 7, 4, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))


def build_model(name: str, classes: int, device: str) -> Any:
    torch = require("torch", "trainer-check --framework torch")
    torch.manual_seed(0)  # the weights' initialisation: the same model every run
    if name == "resnet50":
        models = require("torchvision.models", "trainer-check --framework torch --model resnet50")
        # each residual branch's last BN starts at zero (Goyal et al. 2017): the net starts as its shortcuts
        model = models.resnet50(weights=None, num_classes=classes, zero_init_residual=True)
    else:
        model = small_resnet(classes)
    return model.to(device, memory_format=torch.channels_last if device == "cuda" else torch.contiguous_format)


def read_epoch(folder: str, split: str, num_shards: int, workers: int, batch_size: int = 64) -> list[Seen]:
    """[(rank, shard, offset, filename, label as stored)] for one epoch of every simulated rank."""
    from imagenet_build.readback.torch_dataset import RecordDataset

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


# ResNet-50 from scratch, in bf16: a linear warm-up and a clipped gradient norm, the usual guards, so that
# a loss that stops being finite points at what check_loss names, the data, not the optimiser. (The NaN
# first seen on an H100 was the GPU decoder's, not the optimiser's: docs/gpu.md.)
LEARNING_RATE, WARMUP_STEPS, MAX_GRAD_NORM = 0.05, 10, 5.0


def _train(model: Any, batches: Callable[[], Iterator[tuple]], classes: int, device: str,
           losses: list[float], until: Callable[[list[float]], bool] | None = None,
           see: Callable[[Any, Any], None] | None = None) -> str:
    """Train on batches(), appending each loss; returns why training stopped early, or "".

    `until(losses)`, looked at every 5 steps, ends training early when it holds. `see(images, labels)`
    (--show's capture) is handed each batch as it is about to be trained on, a bad label included.
    """
    torch = require("torch", "trainer-check --framework torch")
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=0.9)
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / WARMUP_STEPS))
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    pending: list[Any] = []  # losses stay on the device until the end: no sync per step
    bar = progress_bar(None, 0, "train", "step")
    failure = ""
    try:
        for images, labels in batches():
            if see is not None:
                see(images, labels)
            bad = (labels < 0) | (labels >= classes)
            if bool(bad.any()):  # checked on the CPU: on a GPU a bad label is a device-side assert
                failure = (f"training stopped at step {len(pending) + 1}: label {int(labels[bad][0])} outside "
                           f"[0, {classes}) (records stored 0-based?)")
                break
            with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
                loss = loss_fn(model(images), labels.to(device, non_blocking=True))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
            optimizer.step()
            warmup.step()
            pending.append(loss.detach().float())
            bar.update(1)
            if until is not None and len(pending) % 5 == 0 and until(torch.stack(pending).cpu().tolist()):
                break
    except RuntimeError as e:
        failure = f"training failed after {len(pending)} steps: {str(e).splitlines()[0][:200]}"
    finally:
        bar.close()
    if pending:
        losses.extend(torch.stack(pending).cpu().tolist())
    return failure


def _to_host(images: Any, labels: Any) -> tuple[Any, Any]:
    """A batch as the model takes it (NCHW, on any device, channels_last or not) as NHWC float32 numpy."""
    return images.detach().permute(0, 2, 3, 1).float().cpu().numpy(), labels.cpu().numpy()


def _sync(device: str) -> None:
    if device == "cuda":
        require("torch", "trainer-check --framework torch").cuda.synchronize()


def trainer_check(folder: str, split: str = "train", **options: Any) -> TrainerResult:
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
    torch = require("torch", "trainer-check --framework torch")
    from imagenet_build.readback.torch_records import Records, share

    started = time.monotonic()
    records = Records(folder, split)  # a missing or unreadable index: one line, before anything starts
    device = resolve_device(device)
    gpu = device == "cuda"
    settings = Settings(folder, split, device, model or ("resnet50" if gpu else "small"),
                        batch_size or (256 if gpu else 16), steps or (300 if gpu else 30), num_shards, show)
    workers, note = worker_count(workers, gpu, len(records), settings.batch_size)
    share(len(records), num_shards - 1, num_shards)
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = gpu  # fixed input shapes: let cuDNN pick its fastest kernels
    result = run_checks(_TorchReader(settings, mean, std, workers), settings, records.manifest, records.paths,
                        started)
    result["framework"], result["reader"] = "torch", "PyTorch reader (imagenet_build.torch)"
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
        self.capture = BatchCapture(mean, std, _to_host) if settings.show is not None else None

    def read_epoch(self) -> list[Seen]:
        s = self.settings
        return read_epoch(s.folder, s.split, s.num_shards, self.workers)

    def sample(self, count: int) -> tuple[list[Any], float]:
        """read + decode + augment alone: its speed, and batches to look at."""
        from imagenet_build.readback.torch_dataset import RecordDataset
        from imagenet_build.readback.torch_transform import BatchTransform

        s = self.settings
        self.dataset = RecordDataset(s.folder, s.split, decode=False, shuffle=True)
        self.augment = BatchTransform(s.device, training=True, mean=self.mean, std=self.std, channels_last=self.gpu)
        with contextlib.closing(cycle(self.dataset, s.batch_size, self.workers)) as stream:  # ends its workers
            self.augment(next(stream)["image"])  # warm-up, untimed: the workers start, the decoder initialises
            _sync(s.device)
            kept, timed_images = [], 0
            t0 = time.perf_counter()
            for k in range(count):
                images = self.augment(next(stream)["image"])
                if k < 8:  # enough to look at; 20 batches of 256 would be 3 GB on the host
                    kept.append(images)
                timed_images += len(images)
            _sync(s.device)
            pipeline_rate = timed_images / (time.perf_counter() - t0)
        return [images.permute(0, 2, 3, 1).float().cpu().numpy() for images in kept], pipeline_rate  # NHWC

    def train(self, classes: int) -> tuple[list[float], str, float]:
        """Training from the reader, end to end."""
        s = self.settings
        net = build_model(s.model, classes, s.device)
        stream = cycle(self.dataset, s.batch_size, self.workers)
        after_first_step: list[float] = []

        def training_batches() -> Iterator[tuple]:
            for step in range(s.steps):
                if step == 1:
                    after_first_step.append(time.perf_counter())
                batch = next(stream)
                yield self.augment(batch["image"]), batch["label"]

        losses: list[float] = []
        t0 = time.perf_counter()
        with contextlib.closing(stream):  # its DataLoader workers end here, whatever ends training
            failure = _train(net, training_batches, classes, s.device, losses,
                             see=self.capture.step if self.capture is not None else None)
        _sync(s.device)
        if len(losses) > 1:  # the first step (start-up, cuDNN's choices) is not timed
            train_rate = (len(losses) - 1) * s.batch_size / (time.perf_counter() - after_first_step[0])
        else:
            train_rate = len(losses) * s.batch_size / (time.perf_counter() - t0)
        del net
        return losses, failure, train_rate

    def overfit(self, classes: int) -> tuple[list[float], str, int]:
        """A small fixed subset: eval-style images held on the device, trained on repeatedly (until the loss is
        down to a quarter, well past the halving the check asks for, or max(steps, 30) steps)."""
        from imagenet_build.readback.torch_dataset import RecordDataset
        from imagenet_build.readback.torch_transform import BatchTransform

        s = self.settings
        subset = RecordDataset(s.folder, s.split, decode=False, shuffle=False)
        first = next(batches(subset, s.batch_size, 0))
        images = BatchTransform(s.device, training=False, mean=self.mean, std=self.std,
                                channels_last=self.gpu)(first["image"])
        labels = first["label"]
        fixed: list[float] = []
        failure = _train(build_model(s.model, classes, s.device),
                         lambda: ((images, labels) for _ in range(max(s.steps, 30))), classes, s.device, fixed,
                         until=lambda so_far: so_far[-1] <= 0.25 * so_far[0],
                         see=self.capture.subset if self.capture is not None else None)
        return fixed, failure, len(labels)
