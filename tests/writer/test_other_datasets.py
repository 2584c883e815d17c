"""tf.data reading (imagenet_build.tfdata) and datasets other than ImageNet: class folders, arrays."""

import io
import json
import os
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

from conftest import run_cli, tree_digest
from helpers import edit_json
from imagenet_build import write_arrays
from imagenet_build.infra.errors import BuildError


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def np():
    """write_arrays takes numpy arrays; numpy comes with the extras, not the core install."""
    return pytest.importorskip("numpy")


def make_dataset(*args, **kwargs):
    pytest.importorskip("tensorflow")
    from imagenet_build.tfdata import make_dataset as make

    return make(*args, **kwargs)


def label_histogram(dataset):
    counts = Counter()
    for _, labels in dataset:
        counts.update(labels.numpy().tolist())
    return counts


def manifest_counts(folder, split="train"):
    counts = json.loads((Path(folder) / "manifest.json").read_text())["splits"][split]["label_counts"]
    return Counter({int(k) - 1: v for k, v in counts.items()})


def test_training_batches_have_the_right_shapes_labels_and_normalisation(converted, tf, np):
    images, labels = next(iter(make_dataset(converted, training=True, batch_size=8, seed=1)))
    assert images.shape == (8, 224, 224, 3) and images.dtype == tf.float32
    assert labels.shape == (8,) and labels.dtype == tf.int32
    assert set(labels.numpy().tolist()) <= {0, 1, 2, 3}  # 0-based
    per_channel = images.numpy().reshape(-1, 3)
    assert np.all(np.abs(per_channel.mean(axis=0)) < 1.0) and np.all(per_channel.std(axis=0) < 3.0)


def test_evaluation_pass_reads_every_record_once(converted):
    dataset = make_dataset(str(converted / "train-*"), training=False, batch_size=5)
    assert label_histogram(dataset) == manifest_counts(converted)
    val = make_dataset(converted, training=False, batch_size=7)  # a folder: validation- shards
    assert sum(label_histogram(val).values()) == 16


def test_workers_share_the_files_and_together_read_everything(converted):
    parts = [label_histogram(make_dataset(str(converted / "train-*"), training=False, batch_size=4, num_workers=2,
                                          worker_index=w)) for w in range(2)]
    assert all(sum(p.values()) > 0 for p in parts)
    assert parts[0] + parts[1] == manifest_counts(converted)
    with pytest.raises(BuildError, match="4 files cannot be shared by 5 workers"):
        make_dataset(converted, training=True, batch_size=4, num_workers=5, worker_index=0)


# ------------------------------------------------------------------ class folders


@pytest.fixture
def folder_dataset(tmp_path):
    root = tmp_path / "flowers"
    rng = random.Random(0)
    kinds = {"tulip": ".jpg", "rose": ".JPG", "daisy": ".jpeg", "iris": ".png"}
    for k, (name, suffix) in enumerate(sorted(kinds.items())):
        (root / name).mkdir(parents=True)
        for i in range(6):
            size = (50, 40 + i)
            noise = Image.frombytes("RGB", size, bytes(rng.randrange(30) for _ in range(size[0] * size[1] * 3)))
            pixels = Image.eval(noise, lambda v, base=40 * k: v + base)  # a class colour, a little noise
            pixels.save(root / name / f"{name}{i}{suffix}", "PNG" if suffix == ".png" else "JPEG")
        (root / name / "notes.txt").write_text("not an image")
    return root


def test_class_folders_convert_verify_and_read_back(folder_dataset, tmp_path, tf):
    out = tmp_path / "out"
    result = run_cli("convert", "--train-dir", folder_dataset, "--classes-from-folders", "--output-dir", out,
                     "--train-shards", 2, "--layout-threads", 1, "--workers", 1, "--json")
    assert result.exit_code == 0, result.output
    assert (out / "labels.txt").read_text().split() == ["daisy", "iris", "rose", "tulip"]  # sorted, label 1 first
    summary = json.loads(result.stdout)
    assert summary["splits"]["train"]["records"] == 24
    assert [r["reencoded"] for r in summary["reencoded"]] == ["PNG"] * 6  # the .png class
    verify = run_cli("verify", out, "--deep", "--workers", 1)
    assert verify.exit_code == 0, verify.output
    for raw in tf.data.TFRecordDataset(sorted(str(p) for p in out.glob("train-*"))):
        example = tf.train.Example.FromString(raw.numpy())
        feature = example.features.feature
        label = feature["image/class/label"].int64_list.value[0]
        synset = feature["image/class/synset"].bytes_list.value[0].decode()
        assert synset == ["daisy", "iris", "rose", "tulip"][label - 1]
        assert feature["image/class/text"].bytes_list.value[0].decode() == synset
        assert feature["image/filename"].bytes_list.value[0].decode().startswith(synset)
    assert label_histogram(make_dataset(str(out / "train-*"), training=False, batch_size=5)) == Counter(
        {0: 6, 1: 6, 2: 6, 3: 6})


def test_class_folders_resume_and_metadata_texts(folder_dataset, tmp_path, tf):
    meta = tmp_path / "meta.txt"
    meta.write_text("rose\tRosa, the rose\n")
    args = ["convert", "--train-dir", folder_dataset, "--classes-from-folders", "--metadata-file", meta,
            "--output-dir", tmp_path / "out", "--train-shards", 2, "--layout-threads", 1, "--workers", 1, "--json"]
    assert json.loads(run_cli(*args).stdout)["shards_written"] == 2
    assert json.loads(run_cli(*args).stdout)["shards_kept"] == 2
    texts = set()
    for raw in tf.data.TFRecordDataset(sorted(str(p) for p in (tmp_path / "out").glob("train-*"))):
        texts.add(tf.train.Example.FromString(raw.numpy()).features.feature["image/class/text"].bytes_list.value[0])
    assert texts == {b"daisy", b"iris", b"Rosa, the rose", b"tulip"}


def test_classes_from_folders_refuses_imagenet_only_options(folder_dataset, sample_dir, tmp_path):
    result = run_cli("convert", "--train-dir", folder_dataset, "--classes-from-folders", "--output-dir", tmp_path / "o",
                     "--labels-file", sample_dir / "labels.txt")
    assert result.exit_code == 2 and "--classes-from-folders" in result.stderr


# ------------------------------------------------------------------ arrays


@pytest.fixture(scope="module")
def cifar_like(np):
    rng = np.random.default_rng(7)
    coarse = rng.integers(0, 256, (300, 8, 8, 3), dtype=np.uint8)  # smooth pictures, as photos are
    return coarse.repeat(4, axis=1).repeat(4, axis=2), rng.integers(0, 10, 300)


@pytest.mark.parametrize("lossless", [False, True], ids=["jpeg", "png"])
def test_arrays_convert_verify_and_read_back(cifar_like, tmp_path, lossless, tf, np):
    images, labels = cifar_like
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    out = tmp_path / "cifar"
    write_arrays(images[:250], labels[:250], out, "train", 4, class_names=names, layout_threads=2, lossless=lossless)
    write_arrays(images[250:], labels[250:], out, "validation", 2, class_names=names, lossless=lossless)
    verify = run_cli("verify", out, "--deep", "--workers", 1)
    assert verify.exit_code == 0, verify.output
    assert label_histogram(make_dataset(str(out / "train-*"), training=False, batch_size=16, image_size=32)) == Counter(
        labels[:250].tolist())
    for raw in tf.data.TFRecordDataset(sorted(str(p) for p in out.glob("train-*"))):
        feature = tf.train.Example.FromString(raw.numpy()).features.feature
        index = int(feature["image/filename"].bytes_list.value[0].decode()[len("train_"):][:8])
        assert feature["image/class/label"].int64_list.value[0] == labels[index] + 1
        assert feature["image/class/synset"].bytes_list.value[0].decode() == names[labels[index]]
        decoded = np.array(Image.open(io.BytesIO(feature["image/encoded"].bytes_list.value[0])))
        if lossless:
            assert feature["image/format"].bytes_list.value[0] == b"PNG"
            assert np.array_equal(decoded, images[index])
        else:
            error = np.abs(decoded.astype(int) - images[index]).mean()
            other = np.abs(decoded.astype(int) - images[(index + 1) % len(images)]).mean()
            assert error < 20 and error < other / 3  # lossy, but this picture and not another


def test_arrays_refuse_an_unreadable_manifest_before_writing(np, tmp_path):

    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(BuildError, match="manifest.json: not valid JSON"):
        write_arrays(np.zeros((4, 8, 8, 3), np.uint8), [0, 1, 0, 1], tmp_path, "train", 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]  # nothing written, nothing replaced


def test_arrays_bad_input(np):

    with pytest.raises(BuildError, match="uint8"):
        write_arrays(np.zeros((4, 8, 8), np.uint8), [0, 1, 2, 3], "/nonexistent", "train", 1)
    with pytest.raises(BuildError, match="4 images but 3 labels"):
        write_arrays(np.zeros((4, 8, 8, 3), np.uint8), [0, 1, 2], "/nonexistent", "train", 1)


def test_arrays_rewriting_a_split_replaces_its_shards_and_holds_the_folder(np, tmp_path):
    """A split written again with another shard count leaves none of its old shards (a glob would read
    both layouts as one split); other splits and their shards stay; a second writer is refused."""
    from imagenet_build.infra.lock import FolderLock

    images, labels = np.zeros((12, 8, 8, 3), np.uint8), np.arange(12) % 3
    write_arrays(images, labels, tmp_path, "train", 4)
    write_arrays(images[:6], labels[:6], tmp_path, "validation", 3)
    (tmp_path / ".train-00000-of-00002.999.tmp").write_bytes(b"half")  # an interrupted write's leftover
    write_arrays(images, labels, tmp_path, "train", 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dali_idx", "dataset_info.json", "features.json", "labels.txt", "manifest.json", "train-00000-of-00002",
        "train-00001-of-00002", "validation-00000-of-00003", "validation-00001-of-00003", "validation-00002-of-00003"]
    assert sorted(p.name for p in (tmp_path / "dali_idx").iterdir()) == [
        "train-00000-of-00002.idx", "train-00001-of-00002.idx", "validation-00000-of-00003.idx",
        "validation-00001-of-00003.idx", "validation-00002-of-00003.idx"]
    verify = run_cli("verify", tmp_path, "--workers", 1)
    assert verify.exit_code == 0, verify.output
    before = sorted((p.name, p.stat().st_mtime_ns) for p in tmp_path.iterdir())
    with FolderLock(tmp_path, "imagenet-build convert"):
        with pytest.raises(BuildError, match="in use by another imagenet-build"):
            write_arrays(images, labels, tmp_path, "train", 3)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in tmp_path.iterdir()) == before


def test_arrays_refuse_what_would_make_a_build_verify_rejects(np, tmp_path, converted):
    """Each mistake one BuildError before anything is written: a split name that is a path or empty, a
    quality outside 1..100, class names that repeat or break labels.txt, no images, a file for a folder,
    and a convert build's folder (writing there would take its manifest over)."""

    images, labels = np.zeros((4, 8, 8, 3), np.uint8), np.array([0, 1, 0, 1])
    out = tmp_path / "out"
    for kwargs, message in (
            ({"split": "../escape"}, "a split is named with"), ({"split": ""}, "a split is named with"),
            ({"split": "a/b"}, "a split is named with"), ({"quality": 0}, "quality must be 1..100"),
            ({"quality": 101}, "quality must be 1..100"), ({"quality": "high"}, "quality must be 1..100"),
            ({"class_names": ["a", "a"]}, "given more than once"), ({"class_names": ["a", ""]}, "non-empty"),
            ({"class_names": ["a", "b\nc"]}, "on one line"),
            ({"class_names": ["a", "b\udcff"]}, "'b\\\\udcff': not encodable as UTF-8")):
        with pytest.raises(BuildError, match=message):
            write_arrays(images, labels, out, **kwargs)
    with pytest.raises(BuildError, match="no images"):
        write_arrays(images[:0], labels[:0], out, "train")
    assert not out.exists() and not (tmp_path / "escape-00000-of-00001").exists()
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(BuildError, match="exists and is not a folder"):
        write_arrays(images, labels, tmp_path / "a-file", "train")
    before = tree_digest(converted)
    with pytest.raises(BuildError, match="holds a build of convert"):
        write_arrays(images, labels, converted, "test")
    assert tree_digest(converted) == before


def test_arrays_splits_keep_their_own_encoding_and_the_folders_classes(np, tmp_path):
    """A second split takes the folder's classes when given none (a test split may lack the last class),
    and records its own encoding and layout: the manifest says what each split's shards hold."""
    images = np.zeros((12, 8, 8, 3), np.uint8)
    write_arrays(images, np.arange(12) % 4, tmp_path, "train", 4, class_names=["a", "b", "c", "d"],
                 layout_threads=2)
    manifest = write_arrays(images[:4], np.array([0, 1, 2, 0]), tmp_path, "test", 2, lossless=True)
    assert manifest["synsets"] == ["a", "b", "c", "d"]
    assert {s: (v["encoding"], v["layout_threads"]) for s, v in manifest["splits"].items()} == {
        "train": ("JPEG q95", 2), "test": ("PNG", 1)}
    verify = run_cli("verify", tmp_path, "--deep", "--workers", 1)
    assert verify.exit_code == 0, verify.output


def test_arrays_refuse_a_folder_whose_manifest_its_shards_contradict(np, tmp_path):
    """The folder's other splits are kept in the manifest written: each held to its shards first (the commit
    check), and a lie refused in one line before anything is written."""
    images, labels = np.zeros((12, 8, 8, 3), np.uint8), np.arange(12) % 3
    write_arrays(images, labels, tmp_path, "train", 2)
    manifest = (tmp_path / "manifest.json").read_text()
    for lie, problem in (
            (lambda m: m["shards"][0].update(records=7), "train-00000-of-00002: records 7, its files' 6"),
            (lambda m: m["shards"][1].update(sha256="0" * 64), "train-00001-of-00002: sha256 "),
            (lambda m: m["splits"]["train"].update(records=13), "splits.train.records is 13, its shard entries add"),
            (lambda m: None, "test-00000-of-00001: in the folder, not listed")):
        (tmp_path / "manifest.json").write_text(manifest)
        edit_json(tmp_path / "manifest.json", lie)
        if "test-" in problem:
            shutil.copy(tmp_path / "train-00000-of-00002", tmp_path / "test-00000-of-00001")
        before = tree_digest(tmp_path)
        with pytest.raises(BuildError) as refused:
            write_arrays(images[:4], labels[:4], tmp_path, "validation", 1)
        assert str(refused.value).startswith(f"{tmp_path / 'manifest.json'}: {problem}"), str(refused.value)
        assert tree_digest(tmp_path) == before
    os.remove(tmp_path / "test-00000-of-00001")
    (tmp_path / "manifest.json").write_text(manifest)
    write_arrays(images[:4], labels[:4], tmp_path, "train", 1)  # the split written again: its old shards go
    assert run_cli("verify", tmp_path, "--workers", 1).exit_code == 0
