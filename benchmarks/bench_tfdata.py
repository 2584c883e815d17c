"""make_dataset against a naive tf.data pipeline over the same shards, on the CPU, side by side.

naive: TFRecordDataset over the files one after another, parse_single_example per
record, decode + the same slim augmentation per record (no parallel calls), batch.
make_dataset: imagenet_build.tfdata (parallel interleave, batched parse, parallel map, prefetch).
Both in one process, alternating; images/s over --batches batches after a warm-up batch.
Usage: python benchmarks/bench_tfdata.py --build <a convert output> [--batches 30] [--batch-size 32] [--repeats 3]
"""

import argparse
import os
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import images_per_second  # noqa: E402

from imagenet_build.format.naming import split_shards  # noqa: E402


def naive_dataset(files, batch_size, image_size=224):
    import tensorflow as tf

    from imagenet_build.tfdata import DLE_MEAN, DLE_STD

    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        **{f"image/object/bbox/{k}": tf.io.VarLenFeature(tf.float32) for k in ("xmin", "ymin", "xmax", "ymax")},
    }

    def parse(serialized):
        parsed = tf.io.parse_single_example(serialized, features)
        image = tf.io.decode_image(parsed["image/encoded"], channels=3, expand_animations=False)
        coords = [tf.sparse.to_dense(parsed[f"image/object/bbox/{k}"]) for k in ("ymin", "xmin", "ymax", "xmax")]
        boxes = tf.reshape(tf.stack(coords, axis=-1), [1, -1, 4])
        begin, crop, _ = tf.image.sample_distorted_bounding_box(
            tf.shape(image), bounding_boxes=boxes, min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
            area_range=(0.05, 1.0), max_attempts=100, use_image_if_no_bounding_boxes=True)
        image = tf.image.resize(tf.slice(image, begin, crop), [image_size, image_size])
        image = tf.image.random_flip_left_right(image)
        return (image - DLE_MEAN) / DLE_STD, tf.cast(parsed["image/class/label"], tf.int32) - 1

    return tf.data.TFRecordDataset(files).repeat().map(parse).batch(batch_size)


def rate(dataset, batch_size, batches):
    iterator = iter(dataset)
    return images_per_second(lambda: next(iterator), batch_size, batches)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", required=True, help="a convert output folder")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from imagenet_build.tfdata import make_dataset

    files = split_shards(args.build, "train")
    runs = {"naive": [], "make_dataset": []}
    for _ in range(args.repeats):
        runs["naive"].append(rate(naive_dataset(files, args.batch_size), args.batch_size, args.batches))
        runs["make_dataset"].append(rate(make_dataset(files, training=True, batch_size=args.batch_size),
                                         args.batch_size, args.batches))
    print(f"{len(files)} shards, batch {args.batch_size}, {args.batches} batches, {os.cpu_count()} cores, "
          f"{args.repeats} runs (median)")
    for name, rates in runs.items():
        print(f"  {name:12s} {statistics.median(rates):7.0f} images/s   runs: {', '.join(f'{r:.0f}' for r in rates)}")
    print(f"  make_dataset / naive: {statistics.median(runs['make_dataset']) / statistics.median(runs['naive']):.2f}x")


if __name__ == "__main__":
    main()
