"""Every reader returns a --real-labels build's ReaL labels when asked (real_labels=True): 0-based as the labels,
the right list for each record, padded with -1 in a batch; asked of shards without them, one clear error."""

import sys
from collections import Counter

import pytest

from helpers import convert_with_real_labels, records_of
from imagenet_build.format.record_schema import REAL_LABELS, decode_example
from imagenet_build.infra.errors import BuildError

# torch before TensorFlow in one process, and without triton (see test_torch.py)
sys.modules.setdefault("triton", None)
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")


@pytest.fixture(scope="module")
def with_real(sample_dir, tmp_path_factory):
    """The sample converted with a real.json: multi-label, single-label and empty entries (labels 1..4)."""
    planted = {0: [0, 2], 1: [1], 3: [3], 6: [3, 2, 1, 0]}
    return convert_with_real_labels(sample_dir, tmp_path_factory.mktemp("with-real"), planted)


def expected(folder):
    """Counter of (0-based label, 0-based ReaL labels) over the validation records, from their bytes."""
    pairs = Counter()
    for shard in sorted(folder.glob("validation-*")):
        for payload in records_of(shard):
            record = decode_example(payload)
            pairs[record["image/class/label"][0] - 1, tuple(v - 1 for v in record[REAL_LABELS])] += 1
    return pairs


def torch_map(folder, split="validation"):
    from imagenet_build.torch import RecordDataset

    dataset = RecordDataset(folder, split, decode=False, real_labels=True)
    return [(s["label"], tuple(s["real_labels"].tolist())) for s in map(dataset.__getitem__, range(len(dataset)))]


def torch_iterable(folder, split="validation"):
    from imagenet_build.torch import IterableRecordDataset

    return [(s["label"], tuple(s["real_labels"].tolist()))
            for s in IterableRecordDataset(folder, split, decode=False, real_labels=True)]


def tf_data(folder, split="validation"):
    pytest.importorskip("tensorflow")
    from imagenet_build.tfdata import make_dataset

    dataset = make_dataset(folder, training=split == "train", repeat=False, drop_remainder=False, augment=False,
                           batch_size=5, image_size=16, real_labels=True)
    return [(int(label), tuple(v for v in row if v >= 0))
            for _, labels, real in dataset for label, row in zip(labels.numpy(), real.numpy().tolist())]


def dali(folder, split="validation"):
    """imagenet_build.dali's pipeline (CPU, evaluation) through DALI's PyTorch iterator."""
    pytest.importorskip("nvidia.dali")
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    from imagenet_build.dali import READER_NAME, pipeline

    pipe = pipeline(folder, split, batch_size=5, device_id=None, training=False, num_threads=1, size=16,
                    real_labels=True)
    got = []
    for batch in DALIGenericIterator(pipe, ["images", "labels", "real"], reader_name=READER_NAME,
                                     last_batch_policy=LastBatchPolicy.PARTIAL):
        labels, real = batch[0]["labels"], batch[0]["real"]
        assert real.dtype == torch.int64 and real.shape[0] == len(labels)
        got += [(int(label), tuple(v for v in row if v >= 0)) for label, row in zip(labels, real.tolist())]
    return got


READERS = {"torch-map": torch_map, "torch-iterable": torch_iterable, "tf-data": tf_data, "dali": dali}


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_returns_each_records_real_labels(with_real, reader):
    got = Counter(READERS[reader](with_real))
    assert got == expected(with_real)
    assert got[1, (0, 2)] + got[0, (0, 2)] + got[2, (0, 2)] + got[3, (0, 2)] == 1  # the planted multi-label entry
    assert sum(n for (_, real), n in got.items() if not real) == 12  # and the images ReaL gives no label


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_refuses_real_labels_of_a_build_without_them(converted, with_real, reader):
    with pytest.raises(BuildError, match=r"manifest.json: the build carries no ReaL labels \(convert --real-labels"):
        READERS[reader](converted)
    with pytest.raises(BuildError, match="train-00000-of-00004: a train shard: ReaL labels are in the validation"):
        READERS[reader](with_real, "train")


def test_shards_without_a_manifest_are_judged_by_their_first_record(converted, with_real, tmp_path):
    pytest.importorskip("tensorflow")
    from imagenet_build.tfdata import make_dataset

    for build, folder in ((converted, tmp_path / "without"), (with_real, tmp_path / "with")):
        folder.mkdir()
        for shard in build.glob("validation-*"):
            (folder / shard.name).write_bytes(shard.read_bytes())
    first = tmp_path / "without" / "validation-00000-of-00002"
    with pytest.raises(BuildError, match=f"{first}: its records carry no {REAL_LABELS}"):
        make_dataset(sorted(str(p) for p in (tmp_path / "without").iterdir()), training=False, batch_size=4,
                     real_labels=True)
    dataset = make_dataset(str(tmp_path / "with" / "validation-*"), training=False, batch_size=4, image_size=16,
                           real_labels=True)
    assert sum(len(labels) for _, labels, _ in dataset) == 16


def test_a_batchs_real_accuracy_is_one_comparison(with_real):
    """collate pads to [B, L] with -1: the ReaL accuracy docs/real-labels.md gives equals the sum over samples."""
    from imagenet_build.torch import RecordDataset, collate

    dataset = RecordDataset(with_real, "validation", decode=False, real_labels=True, shuffle=False)
    samples = [dataset[i] for i in range(len(dataset))]
    predictions = torch.tensor([s["label"] if i % 2 else 3 for i, s in enumerate(samples)])
    batch = collate(samples)
    real = batch["real_labels"]
    assert real.shape == (16, 4) and real.dtype == torch.int64 and (real[real < 0] == -1).all()
    labelled = (real >= 0).any(dim=1)
    correct = (real == predictions[:, None]).any(dim=1)
    by_sample = [int(p) in s["real_labels"].tolist() for p, s in zip(predictions, samples) if len(s["real_labels"])]
    assert int(labelled.sum()) == len(by_sample) == 4 and int(correct[labelled].sum()) == sum(by_sample)
    assert collate(samples[:0] + [s for s in samples if not len(s["real_labels"])][:3])["real_labels"].shape == (3, 0)


DALI_READ = r"""
import glob, os, sys
from nvidia.dali import fn, pipeline_def
import nvidia.dali.tfrecord as tfrec
folder = sys.argv[1]
paths = sorted(glob.glob(os.path.join(folder, "validation-*")))
indexes = [os.path.join(folder, "dali_idx", os.path.basename(p) + ".idx") for p in paths]
@pipeline_def(batch_size=1, num_threads=1, device_id=None)
def pipe():
    r = fn.readers.tfrecord(path=paths, index_path=indexes, name="Reader", features={
        "image/filename": tfrec.FixedLenFeature((), tfrec.string, ""),
        "image/class/real_labels": tfrec.VarLenFeature(tfrec.int64, -1)})
    return r["image/filename"], r["image/class/real_labels"]
p = pipe()
p.build()
for _ in range(p.reader_meta("Reader")["epoch_size"]):
    name, real = p.run()
    print(name.at(0).tobytes().decode(), *real.at(0).tolist())
"""


def test_dalis_reader_reads_the_real_labels(with_real):
    """DALI (CPU) reads the feature as a VarLenFeature of int64: the records' lists, 1-based as stored."""
    import subprocess

    pytest.importorskip("nvidia.dali")
    result = subprocess.run([sys.executable, "-c", DALI_READ, str(with_real)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    got = {name: tuple(map(int, labels)) for name, *labels in map(str.split, result.stdout.splitlines())}
    stored = {}
    for shard in sorted(with_real.glob("validation-*")):
        for payload in records_of(shard):
            record = decode_example(payload)
            stored[record["image/filename"][0].decode()] = tuple(record[REAL_LABELS])
    assert len(got) == 16 and got == stored and got["ILSVRC2012_val_00000001.JPEG"] == (1, 3)
