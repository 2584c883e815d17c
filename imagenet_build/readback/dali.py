"""trainer-check: read the shards back through DALI into real training steps, and prove the data trains.

One pipeline definition serves the CPU and the GPU: the device only changes
where decoding ("mixed" on a GPU) and the image ops run. Checks, each with its
figures in the report (REFERENCE §8 for the pipeline):
  epoch          every record read exactly once per epoch across the simulated ranks, epoch = manifest
  ranks          no record reaches two ranks
  labels         after `label - 1`: in [0, classes); class histogram = the manifest's
  batches        no batch of identical images
  normalisation  per-channel mean ~ 0, std ~ 1 (not raw 0-255, not normalised twice)
  loss           finite through the training steps
  overfit        a small fixed subset is learned: its loss falls clearly
The checks themselves, and their order, are checks.py's, shared with the PyTorch reader (torch_check.py).
TensorFlow and DALI are imported here only (extras `tf` and `dali`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from typing import Any, Callable

from imagenet_build.build.manifest import Manifest, read_manifest
from imagenet_build.encode.example import FIRST_LABEL
from imagenet_build.format.dali_index import index_entries
from imagenet_build.format.naming import index_dir_of, index_path, no_shards_message, split_shards
from imagenet_build.infra.errors import BuildError, PathLike
from imagenet_build.infra.optional import PLUGIN, require, require_all
from imagenet_build.infra.workers import progress_bar
from imagenet_build.readback.checks import (
    DLE_MEAN,
    DLE_STD,
    Seen,
    Settings,
    TrainerResult,
    run_checks,
)
from imagenet_build.readback.show_grid import BatchCapture

IMAGE_SIZE = 224
_SOURCE_INFO = re.compile(r"^(?P<file>.*) at index (?P<offset>\d+)$")


# ------------------------------------------------------------------ inputs


def split_files(folder: PathLike, split: str) -> tuple[Manifest | None, list[str], list[str]]:
    """Every `<split>-NNNNN-of-NNNNN` shard in the folder and its index (the manifest's index folder),
    each index checked to cover its shard exactly before DALI, which checks nothing, reads it."""
    folder = str(folder)
    if not os.path.isdir(folder):
        raise BuildError(f"{folder}: not a folder")
    try:
        manifest = read_manifest(folder)
    except ValueError as e:
        raise BuildError(str(e)) from None
    index_dir = index_dir_of(folder, manifest)
    paths = split_shards(folder, split)
    if not paths:
        raise BuildError(no_shards_message(folder, f"{split} shards ({split}-NNNNN-of-NNNNN)"))
    indexes = [index_path(p, index_dir) for p in paths]
    for path, index in zip(paths, indexes):
        index_entries(path, index)
    return manifest, paths, indexes


def resolve_device(device: str) -> str:
    """"gpu" or "cpu" for --device auto|gpu|cpu."""
    if device == "cpu":
        return "cpu"
    from nvidia.dali import backend

    try:
        gpus = backend.GetCUDADeviceCount()  # type: ignore[attr-defined]  # not in DALI's stubs
    except Exception:  # no driver: DALI raises its own error type
        gpus = 0
    if device == "gpu" and not gpus:
        raise BuildError("--device gpu: no GPU is visible to DALI; use --device cpu or auto")
    return "gpu" if gpus else "cpu"


def _features() -> dict[str, Any]:
    import nvidia.dali.tfrecord as tfrec

    # DALI takes any sequence as the shape; its stubs say list (a scalar's shape () stays as it always was)
    return {
        "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),  # type: ignore[arg-type]
        "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
        "image/filename": tfrec.FixedLenFeature((), tfrec.string, ""),  # type: ignore[arg-type]
    }


# ------------------------------------------------------------------ the DALI pipelines


def reading_pipeline(paths: list[str], indexes: list[str], shard_id: int, num_shards: int, batch_size: int) -> Any:
    """Records as DALI's reader delivers them to one rank: where each came from, its name and label."""
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None)
    def pipeline() -> tuple[Any, Any, Any]:
        # Any: the reader's outputs are a dict by feature name, which DALI's stubs do not say
        r: Any = fn.readers.tfrecord(path=paths, index_path=indexes, features=_features(), name="Reader",
                                shard_id=shard_id, num_shards=num_shards, pad_last_batch=True)
        return fn.get_property(r["image/encoded"], key="source_info"), r["image/filename"], r["image/class/label"]

    return pipeline()


def training_pipeline(paths: list[str], indexes: list[str], device: str, batch_size: int, mean: Sequence[float],
                      std: Sequence[float], training: bool = True, shard_id: int = 0, num_shards: int = 1,
                      seed: int = 1234) -> Any:
    """DLE's ImageNet pipeline: random-crop decode, resize 224, mirror, normalise, label - 1.

    `device` "gpu" decodes with "mixed" and runs the image ops on the GPU; "cpu" runs it all on the
    CPU with no GPU at all (device_id=None). Evaluation: resize the shorter side to 256, centre 224.
    """
    import nvidia.dali.types as types
    from nvidia.dali import fn, pipeline_def

    gpu = device == "gpu"

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=0 if gpu else None, seed=seed)
    def pipeline() -> tuple[Any, Any]:
        # Any: the reader's outputs are a dict by feature name, which DALI's stubs do not say
        r: Any = fn.readers.tfrecord(path=paths, index_path=indexes, features=_features(), name="Reader",
                                shard_id=shard_id, num_shards=num_shards, pad_last_batch=True,
                                random_shuffle=training, initial_fill=10000)
        decoder = "mixed" if gpu else "cpu"
        if training:
            images = fn.decoders.image_random_crop(r["image/encoded"], device=decoder, output_type=types.RGB,
                                                   random_area=[0.05, 1.0], random_aspect_ratio=[0.75, 1.33],
                                                   num_attempts=100)
            images = fn.resize(images, resize_x=IMAGE_SIZE, resize_y=IMAGE_SIZE)
            mirror = fn.random.coin_flip(probability=0.5)
        else:
            images = fn.decoders.image(r["image/encoded"], device=decoder, output_type=types.RGB)
            images = fn.resize(images, resize_shorter=256)
            mirror = False
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="HWC",
                                          crop=(IMAGE_SIZE, IMAGE_SIZE), mean=list(mean), std=list(std),
                                          mirror=mirror)
        labels = fn.cast(r["image/class/label"], dtype=types.INT32) - FIRST_LABEL  # 0-based, as a loss takes it
        return images, (labels.gpu() if gpu else labels)

    return pipeline()


def _rank_size(epoch_size: int, shard_id: int, num_shards: int) -> int:
    """How many records DALI's reader gives rank shard_id (contiguous ranges of the concatenated indexes)."""
    return epoch_size * (shard_id + 1) // num_shards - epoch_size * shard_id // num_shards


def read_epoch(paths: list[str], indexes: list[str], num_shards: int, batch_size: int = 64) -> list[Seen]:
    """[(rank, source file, offset, filename, label)] for one epoch of every simulated rank."""
    seen: list[Seen] = []
    bar = progress_bar(None, 0, "epoch", "rec")
    for rank in range(num_shards):
        pipe = reading_pipeline(paths, indexes, rank, num_shards, batch_size)
        pipe.build()
        size = _rank_size(pipe.reader_meta("Reader")["epoch_size"], rank, num_shards)
        got = 0
        while got < size:
            info, names, labels = pipe.run()
            before = got
            for i in range(len(names)):
                if got == size:  # the rest is padding (pad_last_batch repeats the last record)
                    break
                match = _SOURCE_INFO.match(bytes(info.at(i)).decode(errors="replace"))
                source: tuple[str | None, int | None] = (match["file"], int(match["offset"])) if match else (None, None)
                seen.append((rank, *source, names.at(i).tobytes().decode(errors="replace"), int(labels.at(i)[0])))
                got += 1
            bar.update(got - before)
        del pipe
    bar.close()
    return seen


# ------------------------------------------------------------------ the model


def small_resnet(classes: int) -> Any:
    """A small ResNet for CPU runs: a stride-4 stem, two residual stages, global pooling."""
    import keras
    from keras import layers

    def block(x: Any, filters: int, stride: int) -> Any:
        shortcut = x
        y = layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
        y = layers.BatchNormalization()(y)
        y = layers.ReLU()(y)
        y = layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
        y = layers.BatchNormalization()(y)
        if stride != 1 or shortcut.shape[-1] != filters:
            shortcut = layers.Conv2D(filters, 1, strides=stride, use_bias=False)(shortcut)
            shortcut = layers.BatchNormalization()(shortcut)
        return layers.ReLU()(layers.Add()([y, shortcut]))

    inputs = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3))
    x = layers.Conv2D(16, 7, strides=4, padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    x = layers.MaxPooling2D(2)(x)
    x = block(x, 16, 1)
    x = block(x, 32, 2)
    x = block(x, 64, 2)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(classes)(x), name="small_resnet")


def build_model(name: str, classes: int) -> Any:
    import keras

    model = keras.applications.ResNet50(weights=None, classes=classes) if name == "resnet50" else small_resnet(classes)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=name != "resnet50"))
    return model


# ------------------------------------------------------------------ the check


def _train(batches: Callable[[], Any], model: Any, losses: list[float], see: Callable[[Any, Any], None] | None = None
           ) -> str:
    """Train on batches(), appending each loss; returns why training stopped early, or "".

    `see(images, labels)` (--show's capture) is handed each batch as it is about to be trained on.
    """
    import tensorflow as tf

    bar = progress_bar(None, 0, "train", "step")
    try:
        for images, labels in batches():
            if see is not None:
                see(images, labels)
            losses.append(float(model.train_on_batch(images, labels)))
            bar.update(1)
    except tf.errors.OpError as e:  # e.g. a label outside [0, classes) on the CPU
        return f"training failed after {len(losses)} steps: {e.message.splitlines()[0][:200]}"
    finally:
        bar.close()
    return ""


def _dali_dataset(pipe: Any, device: str, batch_size: int) -> Any:
    import tensorflow as tf
    from nvidia.dali.plugin import tf as dali_tf

    with tf.device("/gpu:0" if device == "gpu" else "/cpu:0"):
        return dali_tf.DALIDataset(
            pipeline=pipe, batch_size=batch_size, device_id=0 if device == "gpu" else None,
            output_shapes=((batch_size, IMAGE_SIZE, IMAGE_SIZE, 3), (batch_size, 1)),
            output_dtypes=(tf.float32, tf.int32),
        )


def _require_dali_and_tf() -> None:
    """DALI, TensorFlow and DALI's TF plugin, or one BuildError naming every one missing and how to
    install them all."""
    try:
        require_all(["nvidia.dali", "tensorflow", PLUGIN], "trainer-check")
    except BuildError as e:
        raise BuildError(f"{e} (or: trainer-check --framework torch, which needs the torch extra only)") from None
    require("nvidia.dali", "trainer-check")
    require("tensorflow", "trainer-check", quiet=True)
    try:
        require(PLUGIN, "trainer-check", quiet=True)
    except BuildError:
        raise
    except Exception as e:  # the plugin is built against one TensorFlow: another one fails to load it
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise BuildError(f"trainer-check: DALI's TensorFlow plugin does not load ({first}); reinstall it: "
                         "pip install -c constraints.txt --no-build-isolation --force-reinstall "
                         "'nvidia-dali-tf-plugin-cuda120>=2.4,<2.5'") from None


def _dali_failure(error: BaseException) -> str:
    """DALI's error text (a RuntimeError with a C++ trace) cut to its one telling line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    telling = [line for line in lines if "rror" in line and "Stacktrace" not in line] or lines or [repr(error)]
    return telling[0][:300]


def trainer_check(folder: PathLike, split: str = "train", device: str = "auto", **options: Any) -> TrainerResult:
    """Run every check; returns the report dict (ok, checks, images_per_second, loss, ...).

    DALI reports bad data it reaches (an index entry off by a byte, a truncated record) as a
    RuntimeError mid-run: that becomes one BuildError line naming the folder and what DALI said.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    inputs = split_files(folder, split)  # the data's own problems first: they need no DALI to be named
    _require_dali_and_tf()
    try:
        return _trainer_check(folder, split, device, inputs, **options)
    except RuntimeError as e:
        raise BuildError(f"{folder}: DALI failed reading the {split} shards: {_dali_failure(e)}; "
                         f"run imagenet-build verify {folder}") from None


def _trainer_check(folder: PathLike, split: str, device: str, inputs: tuple[Manifest | None, list[str], list[str]],
                   steps: int | None = None, batch_size: int | None = None, model: str | None = None,
                   num_shards: int = 1, mean: Sequence[float] = DLE_MEAN, std: Sequence[float] = DLE_STD,
                   compare_tf: bool = False, show: str | None = None) -> TrainerResult:
    started = time.monotonic()
    manifest, paths, indexes = inputs
    device = resolve_device(device)
    gpu = device == "gpu"
    settings = Settings(str(folder), split, device, model or ("resnet50" if gpu else "small"),
                        batch_size or (64 if gpu else 16), steps or (200 if gpu else 30), num_shards, show)
    reader = _DaliReader(settings, paths, indexes, mean, std)
    result = run_checks(reader, settings, manifest, paths, started)
    if compare_tf:
        from imagenet_build.readback.tfdata import compare_with_tf_data

        result["tf_data"] = compare_with_tf_data(paths, settings.batch_size, mean, std, reader.sampled)
    return result


class _DaliReader:
    """trainer-check's steps through DALI's pipelines (a TrainerReader); training through its TF plugin."""

    name = "DALI"

    def __init__(self, settings: Settings, paths: list[str], indexes: list[str], mean: Sequence[float],
                 std: Sequence[float]) -> None:
        self.settings, self.paths, self.indexes, self.mean, self.std = settings, paths, indexes, mean, std
        self.sampled = 0  # batches sample() ran
        self.capture = BatchCapture(mean, std) if settings.show is not None else None

    def _pipeline(self, training: bool = True) -> Any:
        s = self.settings
        return training_pipeline(self.paths, self.indexes, s.device, s.batch_size, self.mean, self.std,
                                 training=training)

    def read_epoch(self) -> list[Seen]:
        return read_epoch(self.paths, self.indexes, self.settings.num_shards)

    def sample(self, count: int) -> tuple[list[Any], float]:
        """The read-and-decode pipeline alone: its speed, and batches to look at."""
        import numpy as np

        gpu = self.settings.device == "gpu"
        pipe = self._pipeline()
        pipe.build()
        batches: list[Any] = []
        timed_images, t0 = 0, time.perf_counter()
        for _ in range(count):
            images, _ = pipe.run()
            batches.append(np.array(images.as_cpu().as_tensor() if gpu else images.as_tensor()))
            timed_images += self.settings.batch_size
        pipeline_rate = timed_images / (time.perf_counter() - t0)
        del pipe
        self.sampled = count
        return batches, pipeline_rate

    def train(self, classes: int) -> tuple[list[float], str, float]:
        """Training through DALI's TensorFlow plugin."""
        import tensorflow as tf

        s = self.settings
        train_model = build_model(s.model, classes)
        dataset = _dali_dataset(self._pipeline(), s.device, s.batch_size)
        losses: list[float] = []
        t0 = time.perf_counter()
        failure = _train(lambda: ((images, tf.reshape(labels, [-1])) for images, labels in dataset.take(s.steps)),
                         train_model, losses, self.capture.step if self.capture is not None else None)
        return losses, failure, len(losses) * s.batch_size / (time.perf_counter() - t0)

    def overfit(self, classes: int) -> tuple[list[float], str, int]:
        """A small fixed subset: eval-style images held in memory, trained on repeatedly."""
        import numpy as np

        s = self.settings
        gpu = s.device == "gpu"
        subset = self._pipeline(training=False)
        subset.build()
        images, labels = subset.run()
        images = np.array(images.as_cpu().as_tensor() if gpu else images.as_tensor())
        labels = np.array(labels.as_cpu().as_tensor() if gpu else labels.as_tensor()).reshape(-1)
        del subset
        fixed: list[float] = []
        failure = _train(lambda: ((images, labels) for _ in range(max(s.steps, 30))), build_model(s.model, classes),
                         fixed, self.capture.subset if self.capture is not None else None)
        return fixed, failure, len(labels)

