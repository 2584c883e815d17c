"""What convert writes, read back by TensorFlow's reader and DALI's (tfrecord2idx: tests/format/test_dali_index.py)."""

import glob
import json
import os
import random
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers import read_with_tensorflow
from imagenet_build.catalog.classes import DEFAULT_METADATA_FILE, read_metadata_file

tf = pytest.importorskip("tensorflow")

def shards(out, split):
    return sorted(glob.glob(str(out / f"{split}-*-of-*")))


def expected_order(sample, split):
    """slim's order, computed independently: class by class, sorted, seed-12345 shuffle, linspace."""
    synsets = (sample / "labels.txt").read_text().split()
    if split == "train":
        files = [(f"{s}/{n}", i + 1) for i, s in enumerate(synsets) for n in sorted(os.listdir(sample / "train" / s))]
    else:
        val = (sample / "validation_labels.txt").read_text().split()
        files = [
            (f"ILSVRC2012_val_{k + 1:08d}.JPEG", i + 1)
            for i, s in enumerate(synsets)
            for k in range(len(val))
            if val[k] == s
        ]
    order = list(range(len(files)))
    random.seed(12345)
    random.shuffle(order)
    num_shards, threads = (4, 2) if split == "train" else (2, 2)
    spacing = np.linspace(0, len(files), threads + 1).astype(int)
    out = []
    for t in range(threads):
        cuts = np.linspace(spacing[t], spacing[t + 1], num_shards // threads + 1).astype(int)
        out.extend([files[order[i]] for i in range(cuts[s], cuts[s + 1])] for s in range(num_shards // threads))
    return out


def box_table(sample):
    boxes = {}
    for line in (sample / "bboxes.csv").read_text().splitlines():
        name, *values = line.split(",")
        boxes.setdefault(name, []).append([float(v) for v in values])
    return boxes


@pytest.mark.parametrize("split", ["train", "validation"])
def test_tensorflow_reads_every_record_with_slims_values(sample_dir, converted, split):
    texts = read_metadata_file(DEFAULT_METADATA_FILE)
    synsets = (sample_dir / "labels.txt").read_text().split()
    boxes = box_table(sample_dir)
    root = sample_dir / split
    expected = expected_order(sample_dir, split)
    paths = shards(converted, split)
    assert [Path(p).name for p in paths] == [f"{split}-{k:05d}-of-{len(expected):05d}" for k in range(len(expected))]
    for path, want in zip(paths, expected):
        records = read_with_tensorflow(path)
        assert [(r["image/filename"].decode(), r["image/class/label"]) for r in records] == [
            (Path(rel).name, label) for rel, label in want
        ]
        for record, (rel, label) in zip(records, want):
            source = (root / rel).read_bytes()
            synset = synsets[label - 1]
            assert record["image/class/synset"].decode() == synset
            assert record["image/class/text"].decode() == texts[synset]
            assert record["image/colorspace"] == b"RGB" and record["image/channels"] == 3
            assert record["image/format"] == b"JPEG"
            with Image.open(root / rel) as original:
                size = original.size
                plain = original.format == "JPEG" and original.mode in ("RGB", "L")
            assert (record["image/width"], record["image/height"]) == size
            if plain:
                assert record["image/encoded"] == source
            decoded = tf.io.decode_jpeg(record["image/encoded"], channels=3)
            assert tuple(decoded.shape) == (size[1], size[0], 3)
            want_boxes = boxes.get(Path(rel).name, []) if split == "train" else []
            got = list(zip(*(record[f"image/object/bbox/{k}"] for k in ("xmin", "ymin", "xmax", "ymax"))))
            assert np.allclose(np.array(got).reshape(-1, 4), np.array(want_boxes, dtype=np.float32).reshape(-1, 4))
            assert record["image/object/bbox/label"] == [label] * len(want_boxes)


def test_manifest_counts_match_the_shards(converted):
    manifest = json.loads((converted / "manifest.json").read_text())
    assert manifest["complete"] is True
    for entry in manifest["shards"]:
        shard = converted / entry["name"]
        assert entry["bytes"] == shard.stat().st_size
        assert entry["records"] == sum(1 for _ in tf.data.TFRecordDataset(str(shard)))
    assert manifest["splits"]["train"]["records"] == 48
    assert manifest["splits"]["validation"]["records"] == 16
    assert sum(manifest["splits"]["train"]["label_counts"].values()) == 48


def test_dali_reads_every_record_once_through_the_indexes(sample_dir, converted):
    dali = pytest.importorskip("nvidia.dali")
    import nvidia.dali.tfrecord as tfrec
    from nvidia.dali import fn

    for split, count in (("train", 48), ("validation", 16)):
        paths = shards(converted, split)
        indexes = [str(converted / "dali_idx" / (Path(p).name + ".idx")) for p in paths]

        @dali.pipeline_def(batch_size=5, num_threads=2, device_id=None)
        def pipeline():
            r = fn.readers.tfrecord(
                path=paths,  # noqa: B023  (the pipeline is built and run within this iteration)
                index_path=indexes,  # noqa: B023
                features={
                    "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                    "image/filename": tfrec.FixedLenFeature((), tfrec.string, ""),
                    "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
                },
                name="Reader",
                pad_last_batch=True,
            )
            image = fn.decoders.image(r["image/encoded"], device="cpu")
            return r["image/filename"], r["image/class/label"], image

        pipe = pipeline()
        pipe.build()
        meta = pipe.reader_meta("Reader")
        assert meta["epoch_size"] == count
        seen = []
        for _ in range(-(-count // 5)):
            names, labels, decoded = pipe.run()
            for i in range(len(names)):
                seen.append((names.at(i).tobytes().decode(), int(labels.at(i)[0])))
                assert decoded.at(i).shape[2] == 3
        seen = seen[:count]  # the last batch is padded with repeats of the last record
        expected = [(Path(rel).name, label) for shard in expected_order(sample_dir, split) for rel, label in shard]
        assert sorted(seen) == sorted(expected)
