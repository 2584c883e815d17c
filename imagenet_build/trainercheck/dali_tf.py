"""trainer-check through DALI into Keras (TensorFlow): the reader `dali-tf`.

DALI's pipeline (readers/dali_pipeline.py, the one definition the PyTorch path and imagenet_build.dali share)
feeds Keras through DALI's TensorFlow plugin (`DALIDataset`). On a GPU it decodes with "mixed" and trains
ResNet-50; on the CPU the same pipeline with the device switched and a small ResNet. The checks, their
order and the report are checks.py's, shared with every reader. TensorFlow, DALI and DALI's TF plugin are
imported here only inside the functions (extras `tf` and `dali`, then the plugin).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any, Callable

from imagenet_build.format.build_folder import OpenedSplit
from imagenet_build.infra.errors import BuildError, PathLike
from imagenet_build.infra.optional import PLUGIN, require
from imagenet_build.infra.workers import progress_bar
from imagenet_build.readers.dali_pipeline import (
    IMAGE_SIZE,
    READER_NAME,
    rank_size,
    reading_pipeline,
    resolve_device,
    training_pipeline,
)
from imagenet_build.readers.normalisation import DLE_MEAN, DLE_STD
from imagenet_build.trainercheck.checks import (
    Seen,
    Settings,
    TfDataFigures,
    TrainerResult,
    per_second,
    run_checks,
)
from imagenet_build.trainercheck.dali_check import checked_run, seen
from imagenet_build.trainercheck.show_grid import BatchCapture
from imagenet_build.trainercheck.trainers import Option, Trainer, register, with_defaults


def read_epoch(paths: list[str], indexes: list[str], num_shards: int, batch_size: int = 64) -> list[Seen]:
    """[(rank, source file, offset, filename, label as stored)] for one epoch of every simulated rank, as DALI's
    reader delivers them (pipeline.run; the padding of the last batch left out by each rank's size)."""
    records: list[Seen] = []
    bar = progress_bar(None, 0, "epoch", "rec")
    for rank in range(num_shards):
        pipe = reading_pipeline(paths, indexes, rank, num_shards, batch_size)
        pipe.build()
        size = rank_size(pipe.reader_meta(READER_NAME)["epoch_size"], rank, num_shards)
        got = 0
        while got < size:
            info, names, labels = pipe.run()
            before = got
            for i in range(len(names)):
                if got == size:  # the rest is padding (pad_last_batch repeats the last record)
                    break
                records.append(seen(rank, info.at(i).tobytes(), names.at(i).tobytes(), int(labels.at(i)[0])))
                got += 1
            bar.update(got - before)
        del pipe
    bar.close()
    return records


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
            output_shapes=((batch_size, IMAGE_SIZE, IMAGE_SIZE, 3), (batch_size,)),
            output_dtypes=(tf.float32, tf.int64),
        )


def _load_tf_plugin() -> None:
    """TensorFlow and DALI's TF plugin, imported quietly; a plugin built against another TensorFlow does not
    load: one line saying how to reinstall it."""
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


def trainer_check(folder: PathLike, split: str = "train", device: str = "auto", framework: str = "dali-tf",
                  **options: Any) -> TrainerResult:
    """Run every check through DALI into Keras; the report dict (ok, checks, images_per_second, loss, ...)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    def check(opened: OpenedSplit) -> TrainerResult:
        _load_tf_plugin()
        return _trainer_check(opened, device, **options)

    return checked_run(folder, split, TRAINER, framework, check)


def _trainer_check(opened: OpenedSplit, device: str, steps: int | None = None, batch_size: int | None = None,
                   model: str | None = None, workers: int | None = None, num_shards: int = 1,
                   mean: Sequence[float] = DLE_MEAN, std: Sequence[float] = DLE_STD, compare_tf: bool = False,
                   show: str | None = None) -> TrainerResult:
    started = time.monotonic()
    device = resolve_device(device)
    chosen = with_defaults(TRAINER, device == "gpu", {"steps": steps, "batch_size": batch_size, "model": model,
                                                     "workers": workers})
    settings = Settings(opened.folder, opened.split, device, chosen["model"], chosen["batch_size"], chosen["steps"],
                        num_shards, show)
    reader = _DaliReader(settings, opened.paths, opened.indexes, mean, std, chosen["workers"])
    result = run_checks(reader, settings, opened.manifest, opened.paths, started)
    result["framework"], result["reader"] = TRAINER.name, TRAINER.title
    result["workers"] = chosen["workers"]
    if compare_tf:
        result["tf_data"] = compare_with_tf_data(opened.paths, settings.batch_size, mean, std, reader.sampled)
    return result


class _DaliReader:
    """trainer-check's steps through DALI's pipelines (a TrainerReader); training through its TF plugin."""

    name = "DALI"

    def __init__(self, settings: Settings, paths: list[str], indexes: list[str], mean: Sequence[float],
                 std: Sequence[float], threads: int) -> None:
        self.settings, self.paths, self.indexes, self.mean, self.std = settings, paths, indexes, mean, std
        self.threads = threads
        self.sampled = 0  # batches sample() ran
        self.capture = BatchCapture(mean, std) if settings.show is not None else None

    def _pipeline(self, training: bool = True) -> Any:
        s = self.settings
        return training_pipeline(self.paths, self.indexes, device_id=0 if s.device == "gpu" else None,
                                 batch_size=s.batch_size, mean=self.mean, std=self.std, training=training,
                                 threads=self.threads, layout="HWC")

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
        s = self.settings
        train_model = build_model(s.model, classes)
        dataset = _dali_dataset(self._pipeline(), s.device, s.batch_size)
        losses: list[float] = []
        t0 = time.perf_counter()
        failure = _train(lambda: iter(dataset.take(s.steps)), train_model, losses,
                         self.capture.step if self.capture is not None else None)
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


def compare_with_tf_data(
    paths: list[str], batch_size: int, mean: Sequence[float], std: Sequence[float], num_batches: int
) -> TfDataFigures:
    """trainer-check --compare-tf: DALI's augmentation through tf.data, its images/s and channel statistics."""
    import numpy as np

    from imagenet_build.readers.tfdata_dataset import make_dataset

    dataset = make_dataset(paths, training=True, batch_size=batch_size, mean=mean, std=std)
    batches: list[Any] = []
    t0 = time.perf_counter()
    for images, _ in dataset.take(num_batches):
        batches.append(images.numpy())
    rate = num_batches * batch_size / (time.perf_counter() - t0)
    pixels = np.concatenate([b.reshape(-1, 3) for b in batches])
    return {"images_per_second": per_second(rate),
            "channel_mean": [round(float(v), 3) for v in pixels.mean(axis=0)],
            "channel_std": [round(float(v), 3) for v in pixels.std(axis=0)]}


TRAINER = register(Trainer(
    name="dali-tf", title="DALI into Keras (TensorFlow)", needs=("nvidia.dali", "tensorflow", PLUGIN),
    reads_through="dali",
    options=(Option("steps", 30, 200), Option("batch_size", 16, 64), Option("model", "small", "resnet50"),
             Option("workers", 2, 8, "DALI's CPU threads", least=1), Option("compare_tf", None, None)),
    run=trainer_check, family="dali", rank=0))
