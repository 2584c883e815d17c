"""Reading the shards in TensorFlow's tf.data: files interleaved, records batched before parsing.

Training augmentation as slim does it: a crop drawn by sample_distorted_bounding_box
that honours the record's boxes (min_object_covered 0.1, area 0.05-1, aspect
0.75-1.33), resized to the output size, randomly mirrored; evaluation: shorter
side to 256/224 of the size, centre crop. Normalised once, labels shifted to
0-based. DALI's random crop draws area and aspect differently (REFERENCE §8):
the two pipelines are alike, not statistically identical.
"""

import glob
import os

DLE_MEAN = (123.68, 116.28, 103.53)
DLE_STD = (58.395, 57.120, 57.385)


def _files(pattern_or_dir):
    if isinstance(pattern_or_dir, (list, tuple)):
        return sorted(str(p) for p in pattern_or_dir)
    if os.path.isdir(pattern_or_dir):
        return sorted(glob.glob(os.path.join(pattern_or_dir, "train-*-of-*")))
    return sorted(glob.glob(pattern_or_dir))


def make_dataset(pattern_or_dir, *, training, batch_size, image_size=224, mean=DLE_MEAN, std=DLE_STD,
                 shuffle_buffer=10000, seed=None):
    """A tf.data.Dataset of (images float32 [B, S, S, 3], labels int32 [B]) from slim shards."""
    import tensorflow as tf

    files = _files(pattern_or_dir)
    if not files:
        raise ValueError(f"no TFRecord files match {pattern_or_dir}")
    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        "image/object/bbox/xmin": tf.io.VarLenFeature(tf.float32),
        "image/object/bbox/ymin": tf.io.VarLenFeature(tf.float32),
        "image/object/bbox/xmax": tf.io.VarLenFeature(tf.float32),
        "image/object/bbox/ymax": tf.io.VarLenFeature(tf.float32),
    }
    mean = tf.constant(mean, tf.float32)
    std = tf.constant(std, tf.float32)

    def augment(encoded, xmin, ymin, xmax, ymax):
        shape = tf.io.extract_jpeg_shape(encoded)
        boxes = tf.reshape(tf.stack([ymin, xmin, ymax, xmax], axis=-1), [1, -1, 4])
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            shape, bounding_boxes=boxes, min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
            area_range=(0.05, 1.0), max_attempts=100, use_image_if_no_bounding_boxes=True, seed=seed or 0)
        window = tf.stack([begin[0], begin[1], size[0], size[1]])
        image = tf.io.decode_and_crop_jpeg(encoded, window, channels=3)
        image = tf.image.resize(image, [image_size, image_size])
        return tf.image.random_flip_left_right(image, seed=seed)

    def evaluate(encoded):
        image = tf.cast(tf.io.decode_jpeg(encoded, channels=3), tf.float32)
        shape = tf.cast(tf.shape(image)[:2], tf.float32)
        scale = (image_size * 256 / 224) / tf.reduce_min(shape)
        image = tf.image.resize(image, tf.cast(tf.round(shape * scale), tf.int32))
        return tf.image.resize_with_crop_or_pad(image, image_size, image_size)

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, features)  # batched before parsing
        coords = [tf.sparse.to_dense(parsed[f"image/object/bbox/{k}"]) for k in ("xmin", "ymin", "xmax", "ymax")]
        if training:
            images = tf.map_fn(lambda args: augment(*args), (parsed["image/encoded"], *coords),
                               fn_output_signature=tf.TensorSpec([image_size, image_size, 3], tf.float32))
        else:
            images = tf.map_fn(evaluate, parsed["image/encoded"],
                               fn_output_signature=tf.TensorSpec([image_size, image_size, 3], tf.float32))
        labels = tf.cast(parsed["image/class/label"], tf.int32) - 1  # records are 1-based
        return (images - mean) / std, labels

    dataset = tf.data.Dataset.from_tensor_slices(files)
    if training:
        dataset = dataset.shuffle(len(files), seed=seed)
    dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=min(len(files), 8),
                                 num_parallel_calls=tf.data.AUTOTUNE, deterministic=not training)
    if training:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed).repeat()
    dataset = dataset.batch(batch_size, drop_remainder=training)
    return dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
