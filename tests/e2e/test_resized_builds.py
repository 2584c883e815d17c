"""Resized builds end to end: TensorFlow's and DALI's readers read every record of each size, kill -9 and a
rerun give the same bytes, trainer-check passes on one (the resizing itself: tests/encode/test_resize.py)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import children_of, run_cli, run_process, tree_digest, wait_until_gone
from helpers import read_with_tensorflow
from imagenet_build.encode.jpeg_header import exif_orientation
from imagenet_build.tools.sample_dataset import make_sample
from run_helpers import records


def test_tensorflow_reads_every_record_of_a_resized_build(resized):
    tf = pytest.importorskip("tensorflow")

    for folder in ("shorter-48", "shorter-96"):
        for split, count in (("train", 48), ("validation", 16)):
            seen = 0
            for path in sorted((resized / folder).glob(f"{split}-*-of-*")):
                for record in read_with_tensorflow(path):
                    decoded = tf.io.decode_jpeg(record["image/encoded"], channels=3)
                    assert tuple(decoded.shape) == (record["image/height"], record["image/width"], 3)
                    seen += 1
            assert seen == count


def test_dali_reads_every_record_of_a_resized_build(resized):
    dali = pytest.importorskip("nvidia.dali")
    import nvidia.dali.tfrecord as tfrec
    from nvidia.dali import fn

    for folder in ("shorter-48", "shorter-96"):
        build = resized / folder
        expected = set()
        for _, e in records(build, "train"):
            shape = (e["image/height"][0], e["image/width"][0])
            if exif_orientation(e["image/encoded"][0]) >= 5:  # untouched and rotated: DALI turns it (verify warns)
                shape = shape[::-1]
            expected.add((e["image/filename"][0].decode(), *shape))
        paths = [str(p) for p in sorted(build.glob("train-*-of-*"))]
        indexes = [str(build / "dali_idx" / (Path(p).name + ".idx")) for p in paths]

        @dali.pipeline_def(batch_size=8, num_threads=2, device_id=None)
        def pipeline(paths=paths, indexes=indexes):
            r = fn.readers.tfrecord(path=paths, index_path=indexes, name="Reader", pad_last_batch=True, features={
                "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                "image/filename": tfrec.FixedLenFeature((), tfrec.string, ""),
            })
            return r["image/filename"], fn.decoders.image(r["image/encoded"], device="cpu")

        pipe = pipeline()
        pipe.build()
        assert pipe.reader_meta("Reader")["epoch_size"] == 48
        seen = set()
        for _ in range(6):
            names, images = pipe.run()
            for i in range(len(names)):
                height, width, channels = images.at(i).shape
                seen.add((names.at(i).tobytes().decode(), height, width))
                assert channels == 3
        assert seen == expected


# ------------------------------------------------------------------ slow: kill -9, trainer-check


@pytest.fixture(scope="module")
def larger_sample(tmp_path_factory):
    out = tmp_path_factory.mktemp("larger")
    make_sample(out, classes=8, per_class=100, validation_per_class=2, min_size=200, max_size=400)
    return out


def larger_args(sample, out):
    return ["convert", "--train-dir", sample / "train", "--labels-file", sample / "labels.txt", "--output-dir", out,
            "--train-shards", 32, "--layout-threads", 4, "--workers", 2, "--resize", "shorter:128,224"]


@pytest.mark.slow
def test_kill_9_then_rerun_gives_the_same_bytes(larger_sample, tmp_path):
    reference = tmp_path / "reference"
    assert run_process(*larger_args(larger_sample, reference)).returncode == 0
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "imagenet_build", *map(str, larger_args(larger_sample, out))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(out.glob("shorter-224/train-*"))) >= 3:
            break
        time.sleep(0.002)
    assert proc.poll() is None, "the build ended before it could be killed: make the sample larger"
    workers = children_of(proc.pid)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert workers and wait_until_gone(workers) == []  # workers there were, and none outlived the kill
    rerun = run_process(*larger_args(larger_sample, out), "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert sum(b["shards_kept"] for b in json.loads(rerun.stdout)["builds"].values()) >= 1  # the manifest vouched
    assert tree_digest(out) == tree_digest(reference)
    assert not list(out.rglob(".*.tmp"))


@pytest.mark.slow
def test_trainer_check_passes_on_a_resized_build(resized):
    pytest.importorskip("nvidia.dali.plugin.tf")
    result = run_cli("trainer-check", resized / "shorter-96", "--device", "cpu", "--steps", 8, "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["ok"], report["checks"]
    assert report["records"] == 48
