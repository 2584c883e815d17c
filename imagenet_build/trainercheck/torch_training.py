"""PyTorch's side of trainer-check, for every reader that trains in PyTorch (torch_check.py: the PyTorch
reader; dali_torch.py: DALI through its PyTorch iterator): the model, the training loop and its guards.

The GPU run trains torchvision's ResNet-50 in bf16 autocast and channels_last; the CPU run a small
ResNet. SGD with momentum, warmed up, the gradient norm clipped, the weights seeded: a loss that stops
being finite then says something about the data. torch and torchvision come from the `torch` extra.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from imagenet_build.infra.optional import require
from imagenet_build.infra.workers import progress_bar

PURPOSE = "trainer-check through PyTorch"


def small_resnet(classes: int) -> Any:
    """A small ResNet for CPU runs (the DALI path's, in PyTorch): a stride-4 stem, three residual stages."""
    torch = require("torch", PURPOSE)
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
    torch = require("torch", PURPOSE)
    torch.manual_seed(0)  # the weights' initialisation: the same model every run
    if name == "resnet50":
        models = require("torchvision.models", f"{PURPOSE} --model resnet50")
        # each residual branch's last BN starts at zero (Goyal et al. 2017): the net starts as its shortcuts
        model = models.resnet50(weights=None, num_classes=classes, zero_init_residual=True)
    else:
        model = small_resnet(classes)
    return model.to(device, memory_format=torch.channels_last if device == "cuda" else torch.contiguous_format)


# ResNet-50 from scratch, in bf16: a linear warm-up and a clipped gradient norm, the usual guards, so that
# a loss that stops being finite points at what check_loss names, the data, not the optimiser. (The NaN
# first seen on an H100 was the GPU decoder's, not the optimiser's: docs/gpu.md.)
LEARNING_RATE, WARMUP_STEPS, MAX_GRAD_NORM = 0.05, 10, 5.0


def train(model: Any, batches: Callable[[], Iterator[tuple]], classes: int, device: str,
           losses: list[float], until: Callable[[list[float]], bool] | None = None,
           see: Callable[[Any, Any], None] | None = None) -> str:
    """Train on batches(), appending each loss; returns why training stopped early, or "".

    `until(losses)`, looked at every 5 steps, ends training early when it holds. `see(images, labels)`
    (--show's capture) is handed each batch as it is about to be trained on, a bad label included.
    """
    torch = require("torch", PURPOSE)
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


def train_timed(model: Any, batches: Iterator[tuple], steps: int, batch_size: int, classes: int, device: str,
                see: Callable[[Any, Any], None] | None = None) -> tuple[list[float], str, float]:
    """`steps` training steps on batches drawn from an iterator: the losses, why training stopped early (or
    ""), and images/s end to end (the first step, start-up and cuDNN's choices, untimed)."""
    after_first_step: list[float] = []

    def stepping() -> Iterator[tuple]:
        for step in range(steps):
            if step == 1:
                after_first_step.append(time.perf_counter())
            yield next(batches)

    losses: list[float] = []
    t0 = time.perf_counter()
    failure = train(model, stepping, classes, device, losses, see=see)
    sync(device)
    if len(losses) > 1:
        return losses, failure, (len(losses) - 1) * batch_size / (time.perf_counter() - after_first_step[0])
    return losses, failure, len(losses) * batch_size / (time.perf_counter() - t0)


def to_host(images: Any, labels: Any) -> tuple[Any, Any]:
    """A batch as the model takes it (NCHW, on any device, channels_last or not) as NHWC float32 numpy."""
    return images.detach().permute(0, 2, 3, 1).float().cpu().numpy(), labels.cpu().numpy()


def sync(device: str) -> None:
    if device == "cuda":
        require("torch", PURPOSE).cuda.synchronize()
