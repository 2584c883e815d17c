"""Every reader the project ships x every index defect: refused in one line naming index, line and shard,
or, where sound, read exactly (every record of the shards once).

The readers are the library's registry's (readers/registry.py): the PyTorch reader (its two datasets, and
trainer-check's epoch through it), tf.data's make_dataset (which reads the shards' own framing and no index: it
must read every record exactly, whatever the indexes say), the Grain data source (imagenet_build.grain), and
DALI's pipeline (the public one, imagenet_build.dali, and trainer-check's epoch through it into TensorFlow and
into PyTorch). A reader registered without its rows in READS, or a trainer not read through the reader it names,
fails a test.
"""

import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

import imagenet_build.trainercheck  # noqa: F401  (registers every reader and every trainer)
from conftest import run_process, sample_args
from helpers import OTHER, SHARD
from imagenet_build.format.build_folder import BuildFolder
from imagenet_build.format.dali_index import record_entries
from imagenet_build.format.manifest import read_manifest
from imagenet_build.infra.errors import BuildError
from imagenet_build.readers.registry import READERS as REGISTRY
from imagenet_build.sources.copies import sample_kinds
from imagenet_build.tools.sample_dataset import make_sample
from imagenet_build.trainercheck.trainers import TRAINERS, trainers

# torch before TensorFlow in one process, and without triton (see test_torch.py)
sys.modules.setdefault("triton", None)
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")


def torch_dataset(folder, split="train"):
    from imagenet_build.torch import RecordDataset

    dataset = RecordDataset(folder, split, decode=False, shuffle=False)
    return [(sample["shard"], sample["offset"], sample["label"]) for sample in map(dataset.__getitem__,
                                                                                  range(len(dataset)))]


def torch_iterable(folder, split="train"):
    from imagenet_build.torch import IterableRecordDataset

    return [(s["shard"], s["offset"], s["label"]) for s in IterableRecordDataset(folder, split, decode=False,
                                                                                 shuffle=False)]


def tf_data(folder, split="train"):
    """make_dataset reads no index: its records, labels only (it yields no place)."""
    pytest.importorskip("tensorflow")
    from imagenet_build.tfdata import make_dataset

    dataset = make_dataset(folder, training=split == "train", repeat=False, drop_remainder=False, augment=False, seed=0,
                           batch_size=16, image_size=32)  # a folder's train shards, each record once
    return [(None, None, int(label)) for _, labels in dataset for label in labels.numpy()]


def grain_source(folder, split="train"):
    """imagenet_build.grain's RecordSource through Grain's MapDataset, in order: one epoch's places and labels."""
    pytest.importorskip("grain")
    import grain

    from imagenet_build.grain import RecordSource

    dataset = grain.MapDataset.source(RecordSource(folder, split))
    return [(r["shard"], r["offset"], r["label"]) for r in (dataset[k] for k in range(len(dataset)))]


def dali_public(folder, split="train"):
    """imagenet_build.dali's pipeline (CPU, evaluation) through DALI's PyTorch iterator: one epoch's labels."""
    pytest.importorskip("nvidia.dali")
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    from imagenet_build.dali import READER_NAME, pipeline

    pipe = pipeline(folder, split, batch_size=5, device_id=None, training=False, num_threads=1, size=32)
    loader = DALIGenericIterator(pipe, ["images", "labels"], reader_name=READER_NAME,
                                 last_batch_policy=LastBatchPolicy.PARTIAL)
    return [(None, None, label) for batch in loader for label in batch[0]["labels"].tolist()]


def dali_epoch(folder, ranks=2, split="train"):
    """trainer-check's epoch through DALI's reader (CPU, pipeline.run): [(rank, shard, offset, file name, label)]."""
    pytest.importorskip("nvidia.dali")
    from imagenet_build.trainercheck import dali_tf

    opened = BuildFolder.open(folder).split(split)
    return dali_tf.read_epoch(opened.paths, opened.indexes, ranks)


def dali_torch_epoch(folder, ranks=2, split="train"):
    """trainer-check's epoch through DALI's PyTorch iterator, as dali_epoch."""
    pytest.importorskip("nvidia.dali")
    from imagenet_build.trainercheck import dali_torch

    opened = BuildFolder.open(folder).split(split)
    return dali_torch.read_epoch(opened.paths, opened.indexes, ranks, batch_size=5)


def torch_epoch(folder, ranks=2, split="train"):
    """trainer-check's epoch through the PyTorch reader, as dali_epoch."""
    from imagenet_build.trainercheck import torch_check as torch_trainer

    return torch_trainer.read_epoch(folder, split, ranks, workers=0)


def places(epoch):
    """A trainer's epoch reader as the table takes it: [(shard, offset, 0-based label)]."""
    return lambda folder, split="train": [(file, offset, label - 1) for _, file, offset, _, label in
                                          epoch(folder, split=split)]


# registry reader -> {how it is read: one epoch of a split (default train) -> [(shard, offset, 0-based label)]};
# each trainer's epoch under the reader it reads through, as "trainer-check <trainer>"
READS = {
    "torch": {"RecordDataset": torch_dataset, "IterableRecordDataset": torch_iterable,
              "trainer-check torch": places(torch_epoch)},
    "tfdata": {"make_dataset": tf_data},
    "grain": {"RecordSource": grain_source},
    "dali": {"imagenet_build.dali": dali_public, "trainer-check dali-tf": places(dali_epoch),
             "trainer-check dali-torch": places(dali_torch_epoch)},
}
READERS = {f"{reader} {how}": (read, REGISTRY[reader].by_index) for reader, hows in READS.items()
           for how, read in hows.items()}


def test_every_registered_reader_is_in_the_table_and_each_trainer_under_the_reader_it_reads_through():
    assert sorted(READS) == sorted(REGISTRY)
    assert sorted(how for hows in READS.values() for how in hows if how.startswith("trainer-check")) == sorted(
        f"trainer-check {trainer.name}" for trainer in trainers())
    assert all(f"trainer-check {trainer.name}" in READS[trainer.reads_through] for trainer in trainers())


def damaged(lines):
    """{defect: (index lines, the line an error must name, or None)} of a sound index's lines."""
    offset, size = map(int, lines[2].split())
    return {
        "short": (lines[:-1], f"line {len(lines) - 1}: the last entry ends"),
        "empty": ([], "index file is empty"),
        "duplicated line": (lines[:3] + [lines[2]] + lines[3:], "line 4: repeats the line before it"),
        "off by one": (lines[:2] + [f"{offset + 1} {size}\n"] + lines[3:], "line 3: starts at byte"),
        "size off by one": (lines[:2] + [f"{offset} {size + 1}\n"] + lines[3:], "line 4: starts at byte"),
        "header line": (["offset size\n"] + lines, "line 1: a header line"),
    }


DEFECTS = ["short", "empty", "duplicated line", "off by one", "size off by one", "header line"]


@pytest.fixture(scope="module")
def beside(sample_dir, tmp_path_factory):
    """The sample converted with --index-dir OUTPUT_DIR: each index beside its shard."""
    out = tmp_path_factory.mktemp("beside") / "build"
    result = run_process(*sample_args(sample_dir, out, "--workers", 1, "--index-dir", out))
    assert result.returncode == 0, result.stderr
    assert (out / f"{SHARD}.idx").is_file() and not (out / "dali_idx").exists()
    return out


def assert_read_exactly(folder, got, split="train", records=48):
    """Every record of the split's shards once, by place where the reader says it, else by count and labels."""
    paths = sorted(str(p) for p in Path(folder).glob(f"{split}-?????-of-?????"))
    places = Counter((shard, offset) for shard, offset, _ in got if shard is not None)
    if places:
        assert places == Counter((p, offset) for p in paths for offset, _ in record_entries(p))
    wanted = read_manifest(str(folder))["splits"][split]["label_counts"]
    assert {str(label + 1): n for label, n in Counter(label for *_, label in got).items()} == wanted
    assert len(got) == sum(wanted.values()) == records


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("defect", DEFECTS)
def test_every_reader_refuses_an_index_that_does_not_cover_its_shard(build, reader, defect):
    read, reads_indexes = READERS[reader]
    index = build / "dali_idx" / f"{SHARD}.idx"
    lines, where = damaged(index.read_text().splitlines(keepends=True))[defect]
    index.write_text("".join(lines))
    if not reads_indexes:
        assert_read_exactly(build, read(build))
        return
    with pytest.raises(BuildError) as refused:
        read(build)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{index}: {where}"), message
    assert f"(the index of {build / SHARD})" in message, message


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_refuses_a_split_with_a_shard_missing(build, reader):
    """A split whose shard set is not whole (format/naming.py's rule, as verify holds it) is refused in one line
    naming the missing shard, before anything is read: the epoch would be short without a word."""
    read, _ = READERS[reader]
    (build / OTHER).unlink()
    (build / "dali_idx" / f"{OTHER}.idx").unlink()
    with pytest.raises(BuildError) as refused:  # the tool's own error, from every reader (tf.data's too)
        read(build)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{build / OTHER}: shard missing: the train split is not "
                                                      "whole"), message


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_refuses_an_unsound_manifest_in_one_line(build, reader):
    """Every reader opens a build the one way (format/build_folder.py): a manifest that is not sound is refused
    before anything is read, in the tool's own error naming it (tf.data's reader read no manifest)."""
    read, _ = READERS[reader]
    manifest = json.loads((build / "manifest.json").read_text())
    (build / "manifest.json").write_text(json.dumps(dict(manifest, num_classes="four")))
    with pytest.raises(BuildError) as refused:
        read(build)
    assert str(refused.value) == f'{build / "manifest.json"}: num_classes: "four" is not a whole number >= 0'


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("indexes", ["dali_idx", "beside the shards"])
def test_every_reader_reads_a_sound_build_exactly(converted, beside, reader, indexes):
    folder = converted if indexes == "dali_idx" else beside
    read, _ = READERS[reader]
    assert_read_exactly(folder, read(folder))


EVALUATION = [short for short, kind in sample_kinds().items() if kind.evaluation]


@pytest.fixture(scope="module")
def evaluation_builds(tmp_path_factory):
    """set -> the build of its sample (`sample --layout`): a validation split whose classes (A's and R's: 4 of
    the labels file's 7 or 12) may be a subset of the labels file's."""
    made = {}

    def get(kind):
        if kind not in made:
            root = tmp_path_factory.mktemp(kind)
            make_sample(root / "copy", kind=kind)
            result = run_process("convert", "--from", root / "copy", "--labels-file", root / "copy" / "labels.txt",
                                 "--output-dir", root / "build", "--validation-shards", 2, "--layout-threads", 2,
                                 "--workers", 1)
            assert result.returncode == 0, result.stderr
            made[kind] = root / "build"
        return made[kind]

    return get


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind", EVALUATION)
def test_every_reader_reads_every_evaluation_sets_build_exactly(evaluation_builds, reader, kind):
    """Each evaluation set's build (its validation split, its classes a subset of the labels file's where the set
    has a fixed subset) is read by every reader, every record once."""
    assert EVALUATION, "no evaluation set registered"
    read, _ = READERS[reader]
    folder = evaluation_builds(kind)
    assert_read_exactly(folder, read(folder, split="validation"), split="validation", records=16)


@pytest.mark.slow
@pytest.mark.parametrize("framework", [reader.name for reader in trainers()])
def test_trainer_check_passes_on_a_build_of_a_subset_of_the_classes(evaluation_builds, framework):
    """ImageNet-A's build: 4 classes of its labels file's 12, labels 7..16 not renumbered; every check passes."""
    from helpers import trainer_report

    for module in TRAINERS[framework].needs:
        pytest.importorskip(module)
    code, report, failed = trainer_report(evaluation_builds("imagenet-a"), "--split", "validation", "--framework",
                                          framework, "--device", "cpu", "--model", "small", "--steps", 5,
                                          "--batch-size", 4)
    assert code == 0 and not failed, report
    assert report["records"] == 16


@pytest.fixture(scope="module")
def class_folders(tmp_path_factory):
    """convert --classes-from-folders on 4 classes that each hold img000.jpg ... img011.jpg."""
    root = tmp_path_factory.mktemp("classes")
    for k, name in enumerate(["ant", "bee", "cat", "dog"]):
        (root / "train" / name).mkdir(parents=True)
        for i in range(12):
            Image.new("RGB", (40 + i, 32), (60 * k, 20 * i, 90)).save(root / "train" / name / f"img{i:03d}.jpg")
    out = root / "build"
    result = run_process("convert", "--train-dir", root / "train", "--classes-from-folders", "--output-dir", out,
                         "--train-shards", 4, "--layout-threads", 2, "--workers", 1)
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.parametrize("epoch", [dali_epoch, dali_torch_epoch, torch_epoch], ids=["dali-tf", "dali-torch", "torch"])
def test_trainer_check_epoch_passes_on_one_file_name_in_every_class(class_folders, epoch):
    """A record is its place (shard, offset): img000.jpg in each of 4 classes is 4 records, not one image
    present 4 times."""
    from imagenet_build.trainercheck.checks import Report, check_epoch

    seen = epoch(class_folders)
    assert Counter(name for *_, name, _ in seen)["img000.jpg"] == 4
    report = Report()
    paths = sorted(str(p) for p in class_folders.glob("train-?????-of-?????"))
    check_epoch(report, seen, read_manifest(str(class_folders)), "train", paths, 2, classes=4)
    assert report.ok, report.checks


def test_shards_are_found_by_one_rule(tmp_path):
    """naming.split_shards: exactly <split>-NNNNN-of-NNNNN; not an index beside a shard, not a split whose
    name starts alike, not a folder."""
    from imagenet_build.format.naming import split_shards

    for name in ["train-00000-of-00002", "train-00001-of-00002", "train-00000-of-00002.idx",
                 "train-small-00000-of-00001", "train-00000-of-00002.tmp", "validation-00000-of-00001"]:
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "train-00002-of-00002").mkdir()
    assert split_shards(str(tmp_path), "train") == [str(tmp_path / "train-00000-of-00002"),
                                                     str(tmp_path / "train-00001-of-00002")]
    assert split_shards(str(tmp_path), "train-small") == [str(tmp_path / "train-small-00000-of-00001")]


def test_a_resized_builds_top_folder_names_its_size_folders(converted, tmp_path):
    """verify and every reader on the folder above a --resize build's size folders name them."""
    from imagenet_build.torch import RecordDataset

    for size in ("shorter-160", "shorter-224"):
        shutil.copytree(converted, tmp_path / size)
    fragment = "its sub-folders shorter-160/, shorter-224/ hold builds: name one of them"
    with pytest.raises(BuildError, match=fragment):
        RecordDataset(tmp_path)
    result = run_process("verify", tmp_path)
    assert result.returncode == 1 and fragment in result.stderr, result.stderr
    result = run_process("trainer-check", tmp_path, "--framework", "torch", "--device", "cpu")
    assert result.returncode == 1 and fragment in result.stderr, result.stderr
