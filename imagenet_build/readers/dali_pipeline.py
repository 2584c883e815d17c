"""DALI's pipelines over a build: the one definition trainer-check trains on (into TensorFlow or PyTorch)
and `imagenet_build.dali` gives users for their own loops.

DLE's ImageNet pipeline: `readers.tfrecord` over a split's shards and indexes, random-crop decode (area
0.05-1, aspect 0.75-1.33, 100 attempts), resize to 224, random mirror, `crop_mirror_normalize` with the
mean and std, `label - 1` (0-based, as a loss takes it); evaluation: the shorter side to 256, the centre
224. On a GPU it decodes with "mixed" (nvJPEG, the GPU's hardware JPEG decoder where DALI uses it) and
runs the image ops there; on the CPU (device_id None) the same pipeline with the device switched. DALI
checks nothing it is given: the split is opened by format/build_folder.py first (manifest, whole shard set,
every index covering its shard), and ReaL labels are asked only of shards that carry them.
nvidia.dali comes with the `dali` extra and is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from imagenet_build.format.build_folder import BuildFolder
from imagenet_build.format.record_schema import FIRST_LABEL, REAL_LABELS
from imagenet_build.infra.errors import BuildError, PathLike
from imagenet_build.infra.optional import require
from imagenet_build.readers.carries_real_labels import require_real_labels
from imagenet_build.readers.normalisation import DLE_MEAN, DLE_STD
from imagenet_build.readers.registry import BuildReader, register

IMAGE_SIZE = 224
READER_NAME = "Reader"  # the reader's name in every pipeline: DALI's iterators take it as reader_name
LAYOUTS = ("CHW", "HWC")  # PyTorch's, TensorFlow's


def _features(real_labels: bool = False) -> dict[str, Any]:
    import nvidia.dali.tfrecord as tfrec

    # DALI takes any sequence as the shape; its stubs say list (a scalar's shape () stays as it always was)
    features = {
        "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),  # type: ignore[arg-type]
        "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
        "image/filename": tfrec.FixedLenFeature((), tfrec.string, ""),  # type: ignore[arg-type]
    }
    if real_labels:
        features[REAL_LABELS] = tfrec.VarLenFeature(tfrec.int64, FIRST_LABEL - 1)
    return features


def reading_pipeline(paths: list[str], indexes: list[str], shard_id: int, num_shards: int, batch_size: int,
                     threads: int = 2) -> Any:
    """Records as DALI's reader delivers them to one rank, nothing decoded: where each came from ("<shard> at
    index <offset>") and its file name as bytes padded with zeros, and its label as stored."""
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None)
    def pipeline() -> tuple[Any, Any, Any]:
        # Any: the reader's outputs are a dict by feature name, which DALI's stubs do not say
        r: Any = fn.readers.tfrecord(path=paths, index_path=indexes, features=_features(), name=READER_NAME,
                                     shard_id=shard_id, num_shards=num_shards, pad_last_batch=True)
        source = fn.get_property(r["image/encoded"], key="source_info")
        return fn.pad(source, fill_value=0), fn.pad(r["image/filename"], fill_value=0), r["image/class/label"]

    return pipeline()


def training_pipeline(paths: list[str], indexes: list[str], *, device_id: int | None, batch_size: int,
                      mean: Sequence[float] = DLE_MEAN, std: Sequence[float] = DLE_STD, training: bool = True,
                      shard_id: int = 0, num_shards: int = 1, threads: int = 2, seed: int | None = 1234,
                      size: int = IMAGE_SIZE, layout: str = "HWC", real_labels: bool = False,
                      labels_on_gpu: bool = True) -> Any:
    """DLE's pipeline over these shards: (images float32 normalised in `layout`, labels int64 [B] 0-based
    [, ReaL labels int64 [B, L] 0-based, padded with -1]). device_id None: all on the CPU; a GPU's number:
    "mixed" decoding and the image ops there, the labels too unless labels_on_gpu is False."""
    import nvidia.dali.types as types
    from nvidia.dali import fn, pipeline_def

    gpu = device_id is not None
    options = {} if seed is None else {"seed": seed}

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=device_id, **options)
    def pipeline() -> tuple[Any, ...]:
        r: Any = fn.readers.tfrecord(path=paths, index_path=indexes, features=_features(real_labels),
                                     name=READER_NAME, shard_id=shard_id, num_shards=num_shards,
                                     pad_last_batch=True, random_shuffle=training, initial_fill=10000)
        decoder = "mixed" if gpu else "cpu"
        if training:
            images = fn.decoders.image_random_crop(r["image/encoded"], device=decoder, output_type=types.RGB,
                                                   random_area=[0.05, 1.0], random_aspect_ratio=[0.75, 1.33],
                                                   num_attempts=100)
            images = fn.resize(images, resize_x=size, resize_y=size)
            mirror = fn.random.coin_flip(probability=0.5)
        else:
            images = fn.decoders.image(r["image/encoded"], device=decoder, output_type=types.RGB)
            images = fn.resize(images, resize_shorter=round(size * 256 / 224))
            mirror = False
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout=layout, crop=(size, size),
                                          mean=list(mean), std=list(std), mirror=mirror)
        # 0-based, as a loss takes it; one number a record, so a batch's labels are [B]
        labels = fn.squeeze(fn.cast(r["image/class/label"], dtype=types.INT64), axes=[0]) - FIRST_LABEL
        outputs = [images, labels.gpu() if gpu and labels_on_gpu else labels]
        if real_labels:
            real = fn.pad(fn.cast(r[REAL_LABELS], dtype=types.INT64) - FIRST_LABEL, fill_value=-1)
            outputs.append(real.gpu() if gpu and labels_on_gpu else real)
        return tuple(outputs)

    return pipeline()


def pipeline(folder: PathLike, split: str = "train", *, batch_size: int, device_id: int | None = 0,
             training: bool | None = None, shard_id: int = 0, num_shards: int = 1, num_threads: int = 4,
             seed: int | None = None, size: int = IMAGE_SIZE, mean: Sequence[float] = DLE_MEAN,
             std: Sequence[float] = DLE_STD, layout: str = "CHW", real_labels: bool = False,
             index_dir: str | None = None) -> Any:
    """A DALI pipeline over a build's split, for a training loop: (images, labels[, real_labels]).

    The split is checked before DALI sees it (BuildFolder.open, then its split); each problem is one BuildError line.
    training (default: split == "train") shuffles and augments; otherwise every record of this shard once
    an epoch (with pad_last_batch: DALI's iterators drop the padding given reader_name=READER_NAME),
    resized and centre-cropped. shard_id / num_shards: DALI's, contiguous equal ranges of the split's
    records. layout "CHW" for PyTorch, "HWC" for TensorFlow. real_labels=True (the validation split of a
    build made with convert --real-labels) adds the ReaL labels, 0-based, padded with -1 to the batch's
    longest; asked of shards without them, a BuildError.
    """
    if layout not in LAYOUTS:
        raise BuildError(f"layout {layout!r}: one of {', '.join(LAYOUTS)}")
    if not 0 <= shard_id < num_shards:
        raise BuildError(f"shard_id {shard_id} is not in [0, {num_shards})")
    opened = BuildFolder.open(folder, index_dir).split(split)
    if real_labels:
        require_real_labels(opened.paths)
    require("nvidia.dali", "imagenet_build.dali")
    return training_pipeline(opened.paths, opened.indexes, device_id=device_id, batch_size=batch_size, mean=mean,
                             std=std, training=split == "train" if training is None else training,
                             shard_id=shard_id, num_shards=num_shards, threads=num_threads, seed=seed, size=size,
                             layout=layout, real_labels=real_labels)


# ------------------------------------------------------------------ what both DALI trainers share


def resolve_device(device: str) -> str:
    """"gpu" or "cpu" for --device auto|gpu|cuda|cpu, as DALI sees the machine."""
    if device == "cpu":
        return "cpu"
    from nvidia.dali import backend

    try:
        gpus = backend.GetCUDADeviceCount()  # type: ignore[attr-defined]  # not in DALI's stubs
    except Exception:  # no driver: DALI raises its own error type
        gpus = 0
    if device in ("gpu", "cuda") and not gpus:
        raise BuildError(f"--device {device}: no GPU is visible to DALI; use --device cpu or auto")
    return "gpu" if gpus else "cpu"


def rank_size(epoch_size: int, shard_id: int, num_shards: int) -> int:
    """How many records DALI's reader gives rank shard_id (contiguous ranges of the concatenated indexes)."""
    return epoch_size * (shard_id + 1) // num_shards - epoch_size * shard_id // num_shards


def dali_failure(error: BaseException) -> str:
    """DALI's error text (a RuntimeError with a C++ trace) cut to its one telling line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    telling = [line for line in lines if "rror" in line and "Stacktrace" not in line] or lines or [repr(error)]
    return telling[0][:300]


READER = register(BuildReader(name="dali", title="DALI pipeline (imagenet_build.dali)", needs=("nvidia.dali",)))

__all__ = ["DLE_MEAN", "DLE_STD", "IMAGE_SIZE", "READER_NAME", "pipeline", "training_pipeline"]
