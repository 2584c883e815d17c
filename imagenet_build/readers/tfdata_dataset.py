"""Reading the shards fast in TensorFlow's tf.data.

`make_dataset` lists and shuffles the files, takes this worker's share of them,
reads them with a parallel `interleave`, shuffles records, batches *before*
parsing (one `tf.io.parse_example` per batch instead of one parse per record),
then decodes and augments in a parallel map, normalises once, shifts labels to
0-based and prefetches.

Training augmentation is slim's: a crop drawn by `sample_distorted_bounding_box`
honouring the record's boxes (min_object_covered 0.1, area 0.05-1, aspect
0.75-1.33), resized to the output size, randomly mirrored. A JPEG's crop is
drawn from its header (`extract_jpeg_shape`) and decoded alone
(`decode_and_crop_jpeg`: libjpeg's partial decode, as the TPU reference
pipelines do); a PNG is decoded whole, then cropped. Evaluation: resize the
shorter side to size * 256/224, centre crop.

Sharding differs from DALI's (docs/readers.md): here each worker takes whole files
(file i goes to worker i mod N), so workers see different numbers of records when
shards differ in size; DALI's `num_shards`/`shard_id` cut the concatenated records
into contiguous, equal ranges. DALI's random crop draws area uniformly and aspect
log-uniformly; `sample_distorted_bounding_box` draws differently and honours the
boxes: alike, not statistically identical.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from typing import Any, Union

from imagenet_build.format.build_folder import BuildFolder
from imagenet_build.format.naming import is_shard_index
from imagenet_build.format.record_schema import BOX_COORDS, FIRST_LABEL, REAL_LABELS
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.optional import require
from imagenet_build.readers.carries_real_labels import require_real_labels
from imagenet_build.readers.normalisation import DLE_MEAN, DLE_STD
from imagenet_build.readers.registry import BuildReader, register

ShardFiles = Union[str, "os.PathLike[str]", list, tuple]  # a folder, a glob pattern, or a list of paths


def list_files(pattern_or_dir: ShardFiles, training: bool = True) -> list[str]:
    """Sorted shard paths: a list as given, a glob pattern (the DALI indexes it matches left out), or a
    folder (its train or validation shards: the build opened as every reader opens one, its manifest sound
    and the split a whole set; its indexes are not read). What lists no shard is a BuildError, in one line."""
    if isinstance(pattern_or_dir, (list, tuple)):
        return sorted(str(p) for p in pattern_or_dir)
    where = os.fspath(pattern_or_dir)
    if storage.is_url(where):
        raise BuildError(f"{where}: make_dataset lists local folders and glob patterns; "
                         "give it the list of the shards' URLs for TensorFlow to open")
    if os.path.isdir(where):  # a shard missing: the epoch would be short without a word
        return BuildFolder.open(where).split_paths("train" if training else "validation")
    files = [f for f in glob.glob(where) if not is_shard_index(os.path.basename(f))]
    if not files:
        raise BuildError(f"no TFRecord files match {where}")
    return sorted(files)


def make_dataset(pattern_or_dir: ShardFiles, *, training: bool, batch_size: int, image_size: int = 224,
                 num_workers: int = 1, worker_index: int = 0, shuffle_buffer: int = 10000, seed: int | None = None,
                 mean: Sequence[float] = DLE_MEAN, std: Sequence[float] = DLE_STD, repeat: bool | None = None,
                 drop_remainder: bool | None = None, augment: bool | None = None, real_labels: bool = False,
                 decode_crop: bool = True) -> Any:
    """A tf.data.Dataset of (images float32 [B, S, S, 3], labels int32 [B]) from slim-format shards.

    repeat and drop_remainder default to `training`; augment (slim's random crop and flip) too.
    With training=False nothing is shuffled: one pass gives every record of this worker's files once.
    real_labels=True (the validation shards of a build made with convert --real-labels) adds a third
    element, the ReaL labels: int32 [B, L], 0-based as the labels, padded with -1 (L: the most a record
    of the batch has; a row of -1 only: ReaL gives the image no label). With augment, a JPEG's crop is drawn from
    its header and only the crop decoded (tf.image.decode_and_crop_jpeg); decode_crop=False decodes the whole
    image first (the same crops' law, more work). Shards without ReaL labels, a folder that is no whole split,
    workers that cannot share the files: the tool's own error, BuildError, in one line.
    """
    tf = require("tensorflow", "imagenet_build.tfdata")

    repeat = training if repeat is None else repeat
    drop_remainder = training if drop_remainder is None else drop_remainder
    augment = training if augment is None else augment
    files = list_files(pattern_or_dir, training)
    if real_labels:
        require_real_labels(files)
    if not 0 <= worker_index < num_workers:
        raise BuildError(f"worker_index {worker_index} is not in [0, {num_workers})")
    if len(files) < num_workers:
        raise BuildError(f"{len(files)} files cannot be shared by {num_workers} workers: each worker needs at "
                         "least one (convert with more shards, or use fewer workers)")
    parse_batch = _batch_parser(tf, augment, image_size, mean, std, real_labels, decode_crop)
    dataset = tf.data.Dataset.from_tensor_slices(files).shard(num_workers, worker_index)
    if training:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=min(len(files), 8),
                                 num_parallel_calls=tf.data.AUTOTUNE, deterministic=not training)
    if training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    return dataset.map(parse_batch, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _batch_parser(tf: Any, augment: bool, image_size: int, mean: Sequence[float], std: Sequence[float],
                  real_labels: bool = False, decode_crop: bool = True) -> Any:
    """serialized records of a batch -> (images normalised, labels 0-based[, ReaL labels 0-based, -1 padded]): one
    parse for the whole batch, then slim's augmentation (augment) or the evaluation crop per image; a JPEG's
    training crop drawn from its header and decoded alone (decode_crop), else cut from the whole image decoded."""
    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        **{key: tf.io.VarLenFeature(tf.float32) for key in BOX_COORDS},
    }
    if real_labels:
        features[REAL_LABELS] = tf.io.VarLenFeature(tf.int64)
    mean = tf.constant(mean, tf.float32)
    std = tf.constant(std, tf.float32)
    size = [image_size, image_size]
    random_crop = _random_crop(tf, size, decode_crop)

    def centre_crop(encoded: Any) -> Any:
        image = tf.cast(tf.io.decode_image(encoded, channels=3, expand_animations=False), tf.float32)
        shape = tf.cast(tf.shape(image)[:2], tf.float32)
        scale = (image_size * 256 / 224) / tf.reduce_min(shape)
        image = tf.image.resize(image, tf.cast(tf.round(shape * scale), tf.int32))
        return tf.image.resize_with_crop_or_pad(image, image_size, image_size)

    spec = tf.TensorSpec(size + [3], tf.float32)

    def parse_batch(serialized: Any) -> tuple[Any, ...]:
        parsed = tf.io.parse_example(serialized, features)  # one parse for the whole batch
        if augment:
            coords = [tf.sparse.to_dense(parsed[key]) for key in BOX_COORDS]
            images = tf.map_fn(lambda args: random_crop(*args), (parsed["image/encoded"], *coords),
                               fn_output_signature=spec, parallel_iterations=16)
        else:
            images = tf.map_fn(centre_crop, parsed["image/encoded"], fn_output_signature=spec,
                               parallel_iterations=16)
        labels = tf.cast(parsed["image/class/label"], tf.int32) - FIRST_LABEL  # 0-based, as a loss takes it
        if not real_labels:
            return (images - mean) / std, labels
        real = tf.cast(tf.sparse.to_dense(parsed[REAL_LABELS]), tf.int32) - FIRST_LABEL  # padding 0 becomes -1
        return (images - mean) / std, labels, real

    return parse_batch


def _random_crop(tf: Any, size: list[int], decode_crop: bool) -> Any:
    """(encoded image, its boxes' xmin, ymin, xmax, ymax) -> slim's training crop, resized to `size`, mirrored half
    the time: a JPEG's crop drawn from its header and decoded alone (decode_crop), else cut from the whole image."""

    def random_crop(encoded: Any, xmin: Any, ymin: Any, xmax: Any, ymax: Any) -> Any:
        boxes = tf.reshape(tf.stack([ymin, xmin, ymax, xmax], axis=-1), [1, -1, 4])

        def window(shape: Any) -> tuple[Any, Any]:  # slim's crop of an image of this shape, honouring its boxes
            begin, crop, _ = tf.image.sample_distorted_bounding_box(
                shape, bounding_boxes=boxes, min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
                area_range=(0.05, 1.0), max_attempts=100, use_image_if_no_bounding_boxes=True)
            return begin, crop

        def jpeg_crop() -> Any:  # the window drawn from the header, then only it decoded
            begin, crop = window(tf.image.extract_jpeg_shape(encoded))
            return tf.image.decode_and_crop_jpeg(encoded, tf.stack([begin[0], begin[1], crop[0], crop[1]]),
                                                 channels=3)

        def decoded_crop() -> Any:  # a PNG (write_arrays(..., lossless=True)), or the whole image first
            image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
            begin, crop = window(tf.shape(image))
            return tf.slice(image, begin, crop)

        if decode_crop:
            image = tf.cond(tf.io.is_jpeg(encoded), jpeg_crop, decoded_crop)
        else:
            image = decoded_crop()
        image = tf.image.resize(tf.ensure_shape(image, [None, None, 3]), size)
        return tf.image.random_flip_left_right(image)

    return random_crop


READER = register(BuildReader(name="tfdata", title="tf.data (imagenet_build.tfdata)", needs=("tensorflow",),
                              by_index=False))

__all__ = [
    "DLE_MEAN", "DLE_STD", "list_files", "make_dataset",
]
