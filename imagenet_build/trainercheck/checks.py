"""The checks of trainer-check, one set for every reader (DALI in dali.py, PyTorch in torch_check.py).

A reader turns the shards into what these functions take: the records one
epoch delivered to each simulated rank, batches of normalised images (NHWC
arrays), and the losses of its training steps. The checks, their thresholds,
their wording and their order (`run_checks`, over a reader's `TrainerReader`)
live here only, so the readers are held to the same rules.
numpy is imported inside the functions (the `tf` and `torch` extras both bring it).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, List, NamedTuple, Optional, Protocol, Tuple, TypedDict

from imagenet_build.format.build_figures import label_counts
from imagenet_build.format.output_guard import PICTURE, check_output_file
from imagenet_build.format.record_schema import FIRST_LABEL
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.workers import progress_note

if TYPE_CHECKING:
    from imagenet_build.trainercheck.show_grid import BatchCapture

ONE_CLASS_LOSS = 1e-3  # a 1-class build's loss: 0 up to bf16's rounding of a logit minus itself
# (rank, source file, byte offset, image/filename, the label as stored: 1-based)
Seen = Tuple[int, Any, Any, str, int]


class CheckLine(TypedDict):
    """One check of a trainer-check report."""

    name: str
    ok: bool
    detail: str  # its figures, or what is wrong


class FirstAndLast(TypedDict):
    first: Optional[float]
    last: Optional[float]


class _TrainerResult(TypedDict):
    ok: bool
    checks: List[CheckLine]
    split: str
    device: str
    model: str
    batch_size: int
    steps: int
    ranks: int
    records: int
    images_per_second: float  # read + decode + augment
    training_images_per_second: float
    loss: FirstAndLast
    overfit_loss: FirstAndLast
    channel_mean: List[float]
    channel_std: List[float]
    seconds: float


class TfDataFigures(TypedDict):
    """The same augmentation through tf.data (trainer-check --compare-tf)."""

    images_per_second: float
    channel_mean: List[float]
    channel_std: List[float]


class TrainerResult(_TrainerResult, total=False):
    """trainer-check's result and its --json document: every reader's, and what each adds."""

    tf_data: TfDataFigures  # DALI, --compare-tf
    framework: str  # the trainer's name in its registry (trainercheck/trainers.py): "dali-tf", "dali-torch", "torch"
    reader: str  # its title
    device_name: str  # PyTorch's name for the GPU (PyTorch trainers)
    torch: str  # torch's version
    dali: str  # DALI's version (dali-torch)
    workers: int  # DataLoader workers (torch), DALI's CPU threads (dali-tf, dali-torch)
    show: str  # --show: the picture of the batches fed to the model (absolute path)
    notes: List[str]  # what the run changed of what it was asked (PyTorch: --workers cut to the cores)


class Report:
    def __init__(self) -> None:
        self.checks: list[CheckLine] = []

    def add(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append({"name": name, "ok": bool(ok), "detail": detail})

    @property
    def ok(self) -> bool:
        return all(c["ok"] for c in self.checks)


def check_epoch(report: Report, seen: Sequence[Seen], manifest: Mapping[str, Any] | None, split: str,
                paths: Sequence[str],
                num_shards: int, classes: int, reader: str = "DALI") -> None:
    """epoch, ranks and labels: every record once across the ranks, ranks disjoint, labels and histogram.

    A record is its place, (shard, byte offset): class folders each holding img000.jpg are many
    records. A record whose file name, label and size all equal another's is that record again
    (a shard under two names).
    """
    expected = (manifest or {}).get("splits", {}).get(split, {}).get("records")
    total = len(seen)
    sources = Counter((file, offset) for _, file, offset, _, _ in seen)
    twice = [s for s, n in sources.items() if n > 1]
    sizes = record_sizes(paths)
    real = len(sizes)
    records = {(file, offset): (name, label, sizes.get((file, offset))) for _, file, offset, name, label in seen}
    copies = Counter(records.values())
    same_image = [name for (name, _, _), n in copies.items() if n > 1]
    problems = []
    if expected is not None and total != expected:
        problems.append(f"epoch has {total} records, manifest.json says {expected}")
    if total != real:
        problems.append(f"{reader} delivered {total} records, the shards hold {real} (an index drops or repeats some)")
    if twice:
        problems.append(f"{len(twice)} record(s) read more than once, e.g. {twice[0][0]} at byte {twice[0][1]}")
    if same_image:
        problems.append(f"{len(same_image)} image(s) present more than once: the same file name, label and size "
                        f"at two places (a shard under two names?), e.g. {same_image[0]}")
    detail = f"{total} records over {num_shards} rank(s)" + (f"; manifest: {expected}" if expected is not None else "")
    report.add("epoch", not problems, "; ".join(problems) or detail)

    by_rank: dict[Any, set] = {}
    for rank, file, offset, _, _ in seen:
        by_rank.setdefault((file, offset), set()).add(rank)
    shared = [k for k, ranks in by_rank.items() if len(ranks) > 1]
    report.add("ranks", not shared, f"{len(shared)} record(s) reach more than one rank" if shared
               else f"{num_shards} rank(s), disjoint")

    labels = Counter(label - FIRST_LABEL for _, _, _, _, label in seen)
    outside = sorted(k for k in labels if not 0 <= k < classes)
    detail = f"labels - 1 in [{min(labels)}, {max(labels)}], {classes} classes"
    problems = []
    if outside:
        problems.append(f"{sum(labels[k] for k in outside)} label(s) outside [0, {classes}) after the shift "
                        f"(e.g. {outside[0]}): records 0-based, or a wrong class count")
    wanted = (manifest or {}).get("splits", {}).get(split, {}).get("label_counts")
    if wanted is not None and label_counts({k + FIRST_LABEL: v for k, v in labels.items()}) != wanted:
        problems.append("class histogram differs from manifest.json")
    report.add("labels", not problems, "; ".join(problems) or detail)


def record_sizes(paths: Sequence[str]) -> dict[tuple[str, int], int]:
    """{(shard, offset): size} of every record in the shards by their own framing (not by their indexes)."""
    from imagenet_build.format.dali_index import record_entries
    from imagenet_build.format.tfrecord import FramingError

    sizes: dict[tuple[str, int], int] = {}
    for path in paths:
        try:
            sizes.update(((path, offset), size) for offset, size in record_entries(path))
        except FramingError as e:
            raise BuildError(f"{path}: {e}; run imagenet-build verify") from None
    return sizes


def check_batches(report: Report, batches: Sequence[Any], mean_tolerance: float = 1.0,
                  std_range: tuple[float, float] = (0.25, 4.0)) -> tuple[list[float], list[float]]:
    """batches and normalisation, on NHWC float arrays; returns the per-channel mean and std."""
    import numpy as np

    identical = sum(1 for images in batches if len(images) > 1 and float(np.ptp(images, axis=0).max()) == 0.0)
    report.add("batches", not identical, f"{identical} of {len(batches)} batch(es) hold one image repeated"
               if identical else f"{len(batches)} batches, images differ within each")
    pixels = np.concatenate([b.reshape(-1, 3) for b in batches])
    mean, std = pixels.mean(axis=0), pixels.std(axis=0)
    ok = bool(np.all(np.abs(mean) < mean_tolerance) and np.all((std > std_range[0]) & (std < std_range[1])))
    detail = (f"per-channel mean {', '.join(f'{m:.2f}' for m in mean)}, std {', '.join(f'{s:.2f}' for s in std)}")
    if not ok:
        detail += " (expected mean ~0, std ~1: raw 0-255 pixels, or normalised twice?)"
    report.add("normalisation", ok, detail)
    return [round(float(m), 3) for m in mean], [round(float(s), 3) for s in std]


def check_loss(report: Report, losses: Sequence[float], failure: str) -> None:
    """loss: finite through every training step, and training did not stop (`failure` says why it did)."""
    finite = bool(losses) and all(math.isfinite(v) for v in losses) and not failure
    if finite:
        detail = f"{len(losses)} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}"
    elif failure or not losses:
        detail = failure or "no training steps ran"
    else:
        first_bad = next(k for k, v in enumerate(losses) if not math.isfinite(v))
        detail = (f"loss is not finite (NaN/inf) from step {first_bad + 1} of {len(losses)}"
                  + (f" (it was {losses[first_bad - 1]:.3f} at step {first_bad})" if first_bad else "")
                  + ": labels out of range or pixels not normalised?")
    report.add("loss", finite, detail)


def check_overfit(report: Report, fixed: Sequence[float], failure: str, count: int, classes: int) -> None:
    """overfit: the loss on `count` fixed images, trained on repeatedly, at least halves.

    With one class there is nothing to learn: cross-entropy over a single class is log(1) = 0 for any
    image, before and after training, so halving cannot be asked. What can go wrong there, a label other
    than that class, the labels check has already failed; the check asks that the loss stay 0 (a model
    with more outputs than the build's classes would not give 0) and says why it asks no more.
    """
    failure = failure or ("" if fixed else "no training steps ran")
    finite = not failure and all(math.isfinite(v) for v in fixed)
    if classes == 1:
        zero = finite and max(abs(v) for v in fixed) < ONE_CLASS_LOSS
        report.add("overfit", zero, failure or (
            f"loss on {count} fixed images {fixed[0]:.3f} -> {fixed[-1]:.3f}"
            + (": 1 class, whose cross-entropy is 0 whatever the images (nothing to learn; every label is that "
               "class by the labels check)" if zero else " (1 class: the loss should be 0; more model outputs "
                                                        "than classes?)")))
        return
    falls = finite and fixed[-1] < 0.5 * fixed[0]
    report.add("overfit", falls, failure or (
        f"loss on {count} fixed images {fixed[0]:.3f} -> {fixed[-1]:.3f}"
        + ("" if falls else " (did not halve: labels do not match the images?)")))


def result_of(report: Report, *, split: str, device: str, model: str, batch_size: int, steps: int, ranks: int,
              records: int, pipeline_rate: float, train_rate: float, losses: Sequence[float],
              fixed: Sequence[float], channel_mean: list[float], channel_std: list[float],
              started: float) -> TrainerResult:
    """The report every reader's trainer check returns (each adds what is its own)."""
    return {
        "ok": report.ok,
        "checks": report.checks,
        "split": split,
        "device": device,
        "model": model,
        "batch_size": batch_size,
        "steps": steps,
        "ranks": ranks,
        "records": records,
        "images_per_second": per_second(pipeline_rate),
        "training_images_per_second": per_second(train_rate),
        "loss": {"first": losses[0] if losses else None, "last": losses[-1] if losses else None},
        "overfit_loss": {"first": fixed[0] if fixed else None, "last": fixed[-1] if fixed else None},
        "channel_mean": channel_mean,
        "channel_std": channel_std,
        "seconds": round(time.monotonic() - started, 1),
    }


def per_second(value: float) -> float:
    """A rate for the JSON report: one decimal, or three significant digits below 10 (ResNet-50 trains
    at 0.0412 images/s on a CPU: that, not 0.0)."""
    return round(value, 1) if value >= 10 else float(f"{value:.3g}")


def rate(value: float) -> str:
    """A rate for the readable report: whole numbers from 100 up, else three significant digits."""
    return f"{value:.0f}" if value >= 100 else f"{float(f'{value:.3g}'):g}"


def format_report(result: TrainerResult) -> list[str]:
    """The readable report of a trainer-check result, whichever reader made it."""
    through = f" through {result['framework']}" if "framework" in result else ""
    lines = [f"trainer-check {result['split']}{through} on {result['device']} ({result['model']}, "
             f"batch {result['batch_size']}, {result['steps']} steps, {result['ranks']} rank(s)): "
             f"{result['records']} records"]
    for check in result["checks"]:
        lines.append(f"  {'ok  ' if check['ok'] else 'FAIL'} {check['name']:14s} {check['detail']}")
    lines.append(f"  {result.get('reader', 'DALI')} read+decode+augment: {rate(result['images_per_second'])} images/s; "
                 f"training: {rate(result['training_images_per_second'])} images/s")
    if "tf_data" in result:
        t = result["tf_data"]
        lines.append(f"  tf.data same augmentation: {rate(t['images_per_second'])} images/s; "
                     f"channel mean {t['channel_mean']} std {t['channel_std']} "
                     f"(DALI: mean {result['channel_mean']} std {result['channel_std']})")
    if "show" in result:
        lines.append(f"  the batches as fed to the model: {result['show']}")
    lines.extend(f"note: {note}" for note in result.get("notes", []))
    lines.append("OK: the data trains" if result["ok"] else "FAILED: " + ", ".join(
        c["name"] for c in result["checks"] if not c["ok"]))
    return lines


class Settings(NamedTuple):
    """What a trainer-check run was asked for, its defaults filled in for its device."""

    folder: str
    split: str
    device: str
    model: str
    batch_size: int
    steps: int
    num_shards: int  # simulated ranks
    show: Optional[str] = None  # --show: where to draw the batches fed to the model


class TrainerReader(Protocol):
    """A reader under trainer-check: each step of the check, through it."""

    name: str  # as the report says it: "DALI", "the PyTorch reader"
    capture: BatchCapture | None  # with --show: what train() and overfit() fed the model

    def read_epoch(self) -> list[Seen]:
        """Every record one epoch delivers to each simulated rank."""

    def sample(self, count: int) -> tuple[list[Any], float]:
        """`count` augmented batches as NHWC arrays, and read + decode + augment's images/s."""

    def train(self, classes: int) -> tuple[list[float], str, float]:
        """The losses of training steps fed by the reader, why training stopped early (or ""), images/s."""

    def overfit(self, classes: int) -> tuple[list[float], str, int]:
        """The losses of training on one fixed batch, why it stopped early (or ""), the batch's images."""


def run_checks(reader: TrainerReader, settings: Settings, manifest: Mapping[str, Any] | None, paths: Sequence[str],
               started: float) -> TrainerResult:
    """Every check, in order, through one reader: epoch, ranks and labels; batches and normalisation; loss;
    overfit; then, with --show, the picture of what training was fed. A reader that reads nothing at all is
    an error, not a report."""
    if settings.show is not None:  # the command line refuses it before any work; a caller from Python, here
        check_output_file(settings.show, "--show", may_write=[PICTURE])
    report = Report()
    split, batch_size, steps, ranks = settings.split, settings.batch_size, settings.steps, settings.num_shards
    progress_note(f"trainer-check: one epoch of the {split} split through {reader.name}, {ranks} rank(s)")
    seen = reader.read_epoch()
    if not seen:
        raise BuildError(f"{settings.folder}: {reader.name} read no {split} records at all")
    classes = (manifest or {}).get("num_classes") or max(label for *_, label in seen)
    check_epoch(report, seen, manifest, split, paths, ranks, classes, reader=reader.name)
    sampled = max(4, min(20, len(seen) // batch_size))
    progress_note(f"trainer-check: decoding and augmenting {sampled} batches to look at")
    batches, pipeline_rate = reader.sample(sampled)
    channel_mean, channel_std = check_batches(report, batches)
    progress_note(f"trainer-check: training {settings.model} for {steps} steps, batch {batch_size}")
    losses, failure, train_rate = reader.train(classes)
    check_loss(report, losses, failure)
    progress_note("trainer-check: learning a fixed batch (overfit)")
    fixed, failure, count = reader.overfit(classes)
    check_overfit(report, fixed, failure, count, classes)
    result = result_of(report, split=split, device=settings.device, model=settings.model, batch_size=batch_size,
                       steps=steps, ranks=ranks, records=len(seen), pipeline_rate=pipeline_rate,
                       train_rate=train_rate, losses=losses, fixed=fixed, channel_mean=channel_mean,
                       channel_std=channel_std, started=started)
    if settings.show is not None and reader.capture is not None:
        from imagenet_build.trainercheck.show_grid import write_grid

        result["show"] = write_grid(settings.show, reader.capture, manifest,
                                    f"{reader.name}, {split} split, {settings.device}")
    return result
