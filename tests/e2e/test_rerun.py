"""A rerun trusts only unchanged inputs: a changed input's shard redone, --verify-inputs reading what size and
mtime cannot see."""

import io
import json
import os

import pytest
from PIL import Image

from conftest import (
    run_process,
    tree_digest,
)
from run_helpers import a_train_image, convert_json


def different_jpeg(path, size=(97, 61)):
    image = Image.new("RGB", size, (10, 200, 30))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=80)
    path.write_bytes(out.getvalue())


@pytest.mark.parametrize("split", ["train", "validation"])
def test_rerun_redoes_the_shard_of_a_changed_input(sample_copy, tmp_path, split):
    out = tmp_path / "out"
    convert_json(sample_copy, out)
    image = a_train_image(sample_copy) if split == "train" else sorted((sample_copy / "validation").glob("*.JPEG"))[2]
    different_jpeg(image)
    rerun = convert_json(sample_copy, out)
    assert rerun["shards_written"] == 1
    clean = tmp_path / "clean"
    convert_json(sample_copy, clean)
    assert tree_digest(out) == tree_digest(clean)


def test_rerun_of_unchanged_inputs_keeps_everything(sample_copy, tmp_path):
    out = tmp_path / "out"
    first = convert_json(sample_copy, out)
    rerun = convert_json(sample_copy, out)
    assert rerun["shards_written"] == 0 and rerun["shards_kept"] == first["shards_written"]


def test_verify_inputs_reads_what_size_and_mtime_cannot_see(sample_copy, tmp_path):
    out = tmp_path / "out"
    convert_json(sample_copy, out)
    image = a_train_image(sample_copy)
    st = image.stat()
    data = bytearray(image.read_bytes())
    data[-3] ^= 0x55  # same size, scan data changed
    image.write_bytes(bytes(data))
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the old mtime
    assert convert_json(sample_copy, out)["shards_written"] == 0  # what a rerun trusts, as documented
    assert convert_json(sample_copy, out, "--verify-inputs")["shards_written"] == 1
    clean = tmp_path / "clean"
    convert_json(sample_copy, clean)
    assert tree_digest(out) == tree_digest(clean)


def test_verify_inputs_keeps_a_touched_but_unchanged_input(sample_copy, tmp_path):
    out = tmp_path / "out"
    convert_json(sample_copy, out)
    os.utime(a_train_image(sample_copy), ns=(1, 10**18))
    assert convert_json(sample_copy, out, "--verify-inputs")["shards_written"] == 0
    assert convert_json(sample_copy, out)["shards_written"] == 0  # the new mtime is what the manifest holds now


def test_rerun_redoes_shards_of_a_changed_archive(tmp_path):
    from imagenet_build.tools.sample_dataset import make_sample

    sample = tmp_path / "sample"
    make_sample(sample, classes=3, per_class=6, validation_per_class=2, tarballs=True)
    args = ["convert", "--validation-tar", sample / "ILSVRC2012_img_val.tar", "--labels-file", sample / "labels.txt",
            "--validation-labels-file", sample / "validation_labels.txt", "--validation-shards", 2,
            "--layout-threads", 1, "--output-dir", tmp_path / "out", "--json"]
    assert run_process(*args).returncode == 0
    os.utime(sample / "ILSVRC2012_img_val.tar", ns=(1, 10**18))
    rerun = run_process(*args)
    assert rerun.returncode == 0 and json.loads(rerun.stdout)["shards_written"] == 2
