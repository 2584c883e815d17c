"""What slim's build_imagenet_data does per image, as the baseline to beat.

Reduced from slim's Python 3 port to the train split of a folder tree: the same
file list, seed-12345 shuffle and thread/shard layout, one TF session shared by
8 threads that fully decodes every JPEG (slim's way of learning height/width),
tf.train.Example built feature by feature, and tf.io.TFRecordWriter.
Usage: slim_baseline.py TRAIN_DIR LABELS_FILE OUTPUT_DIR [NUM_SHARDS] [NUM_THREADS]
"""

import os
import random
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()


class ImageCoder:
    def __init__(self):
        self._sess = tf.compat.v1.Session()
        self._decode_jpeg_data = tf.compat.v1.placeholder(dtype=tf.string)
        self._decode_jpeg = tf.image.decode_jpeg(self._decode_jpeg_data, channels=3)

    def decode_jpeg(self, image_data):
        image = self._sess.run(self._decode_jpeg, feed_dict={self._decode_jpeg_data: image_data})
        assert len(image.shape) == 3 and image.shape[2] == 3
        return image


def _int64(v):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=v if isinstance(v, list) else [v]))


def _bytes(v):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))


def _floats(v):
    return tf.train.Feature(float_list=tf.train.FloatList(value=v))


def convert_to_example(filename, image_buffer, label, synset, height, width):
    return tf.train.Example(features=tf.train.Features(feature={
        "image/height": _int64(height), "image/width": _int64(width),
        "image/colorspace": _bytes(b"RGB"), "image/channels": _int64(3),
        "image/class/label": _int64(label), "image/class/synset": _bytes(synset.encode()),
        "image/class/text": _bytes(b"text"),
        "image/object/bbox/xmin": _floats([]), "image/object/bbox/xmax": _floats([]),
        "image/object/bbox/ymin": _floats([]), "image/object/bbox/ymax": _floats([]),
        "image/object/bbox/label": _int64([]), "image/format": _bytes(b"JPEG"),
        "image/filename": _bytes(os.path.basename(filename).encode()), "image/encoded": _bytes(image_buffer),
    }))


def process_batch(coder, thread_index, ranges, filenames, synsets, labels, out, num_shards, num_threads):
    per_thread = num_shards // num_threads
    cuts = np.linspace(ranges[thread_index][0], ranges[thread_index][1], per_thread + 1).astype(int)
    for s in range(per_thread):
        shard = thread_index * per_thread + s
        with tf.io.TFRecordWriter(os.path.join(out, "train-%.5d-of-%.5d" % (shard, num_shards))) as writer:
            for i in range(cuts[s], cuts[s + 1]):
                with tf.io.gfile.GFile(filenames[i], "rb") as f:
                    data = f.read()
                image = coder.decode_jpeg(data)
                example = convert_to_example(filenames[i], data, labels[i], synsets[i], image.shape[0], image.shape[1])
                writer.write(example.SerializeToString())


def main(train_dir, labels_file, out, num_shards=128, num_threads=8):
    challenge = [line.strip() for line in open(labels_file)]
    filenames, synsets, labels = [], [], []
    for label, synset in enumerate(challenge, start=1):
        files = sorted(tf.io.gfile.glob(os.path.join(train_dir, synset, "*.JPEG")))
        filenames += files
        synsets += [synset] * len(files)
        labels += [label] * len(files)
    order = list(range(len(filenames)))
    random.seed(12345)
    random.shuffle(order)
    filenames = [filenames[i] for i in order]
    synsets = [synsets[i] for i in order]
    labels = [labels[i] for i in order]
    spacing = np.linspace(0, len(filenames), num_threads + 1).astype(int)
    ranges = [[spacing[i], spacing[i + 1]] for i in range(num_threads)]
    os.makedirs(out, exist_ok=True)
    coder = ImageCoder()
    threads = [
        threading.Thread(target=process_batch,
                         args=(coder, t, ranges, filenames, synsets, labels, out, num_shards, num_threads))
        for t in range(num_threads)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], *(int(a) for a in sys.argv[4:6]))
