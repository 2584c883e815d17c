"""The PyTorch datasets' own promises, beyond what test_torch.py's epochs prove: their defaults, the index
folder they are given, the epoch they hold, the seeds of the iterable one's stream and buffer, a batch
without ReaL labels. Each test here failed on a change to readers/torch_dataset.py that the rest of the
suite let through (docs/mutation.md), and reads in this process: mutmut attributes a test to the code it
runs only there, not in DataLoader workers.
"""

import shutil
import sys
from types import SimpleNamespace

import pytest

from imagenet_build.infra.errors import BuildError

sys.modules.setdefault("triton", None)  # as in test_torch.py: triton's LLVM beside TensorFlow's crashes
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")
pytest.importorskip("torchvision")

from imagenet_build.torch import IterableRecordDataset, RecordDataset, collate  # noqa: E402

DATASETS = [RecordDataset, IterableRecordDataset]


def names(dataset):
    """The file names of a dataset's records in the order it gives them (this process, no workers)."""
    if isinstance(dataset, RecordDataset):
        return [dataset[i]["filename"] for i in range(len(dataset))]
    return [sample["filename"] for sample in dataset]


@pytest.mark.parametrize("dataset_class", DATASETS)
def test_the_defaults_are_the_shuffled_train_split_of_seed_0_and_epoch_0_without_boxes(converted, dataset_class):
    default = dataset_class(converted, decode=False)
    assert default.epoch == 0 and default.shuffle and len(default.records.paths) == 4  # train: 4 shards
    explicit = dataset_class(converted, "train", decode=False, boxes=False, seed=0, shuffle=True)
    explicit.set_epoch(0)
    assert names(default) == names(explicit)
    other_seed = dataset_class(converted, "train", decode=False, seed=1)
    assert names(default) != names(other_seed)
    assert "boxes" not in next(iter(default)) and "boxes" in next(iter(dataset_class(converted, decode=False,
                                                                                       boxes=True)))


@pytest.mark.parametrize("dataset_class", DATASETS)
def test_an_index_folder_given_is_the_one_read(converted, tmp_path, dataset_class):
    """index_dir= reads the indexes from there: a build whose indexes were moved reads whole with it, and
    without it is refused naming the missing index."""
    moved = tmp_path / "build"
    shutil.copytree(converted, moved)
    shutil.move(moved / "dali_idx", tmp_path / "indexes")
    with pytest.raises(BuildError, match=r"dali_idx/train-00000-of-00004\.idx"):
        dataset_class(moved, "train", decode=False)
    read = dataset_class(moved, "train", decode=False, shuffle=False, index_dir=str(tmp_path / "indexes"))
    assert names(read) == names(dataset_class(converted, "train", decode=False, shuffle=False))


@pytest.mark.parametrize("dataset_class", DATASETS)
def test_the_epoch_is_held_exactly_as_a_64_bit_integer(converted, dataset_class):
    """A step counter used as the epoch (2**24 + 1 is not a float32) comes back as set."""
    dataset = dataset_class(converted, "validation", decode=False)
    dataset.set_epoch(2**24 + 1)
    assert dataset.epoch == 2**24 + 1
    dataset.set_epoch(2**40 + 3)
    assert dataset.epoch == 2**40 + 3


def test_the_map_style_order_is_drawn_once_an_epoch(converted, monkeypatch):
    """The permutation of 1.28 M records is drawn when the epoch changes, not at every record."""
    dataset = RecordDataset(converted, "train", decode=False)
    drawn = []
    real = dataset.records.epoch_order
    monkeypatch.setattr(dataset.records, "epoch_order", lambda *a: drawn.append(a) or real(*a))
    first = names(dataset)
    assert drawn == []  # drawn by set_epoch(0) in the constructor
    dataset.set_epoch(1)
    assert names(dataset) != first and drawn == [(True, 0, 1)]


def test_the_stream_follows_set_epoch_and_is_seeded_by_it(converted):
    dataset = IterableRecordDataset(converted, "train", decode=False, seed=7)
    dataset.set_epoch(2)
    assert dataset.runs() == dataset.runs(epoch=2) != dataset.runs(epoch=0)
    assert dataset.runs(epoch=3) == [(2, 24, 36), (0, 0, 12), (3, 36, 48), (1, 12, 24)]  # as in every release


def test_a_shuffle_buffer_of_two_shuffles_and_one_does_not(converted):
    """A buffer of one gives the runs' records in their order; a buffer of two already reorders them."""
    one = IterableRecordDataset(converted, "train", decode=False, shuffle_buffer=1)
    in_order = names(RecordDataset(converted, "train", decode=False, shuffle=False))  # record number -> name
    assert names(one) == [in_order[number] for _, first, end in one.runs() for number in range(first, end)]
    two = names(IterableRecordDataset(converted, "train", decode=False, shuffle_buffer=2))
    assert two != names(one) and sorted(two) == sorted(in_order)


def test_the_buffers_seed_stays_the_same_from_release_to_release(converted, monkeypatch):
    """The shuffle buffer of rank 1's DataLoader worker 1 (of 2 each), seed 7, epoch 1: drawn as it was."""
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: SimpleNamespace(id=1, num_workers=2))
    dataset = IterableRecordDataset(converted, "train", decode=False, seed=7, world_size=2, rank=1,
                                    shuffle_buffer=4)
    dataset.set_epoch(1)
    assert dataset.runs(worker=1, workers=2) == [(1, 12, 24)]
    assert names(dataset)[:6] == ["n01491361_7.JPEG", "n01491361_2.JPEG", "n01491361_11.JPEG", "n01443537_12.JPEG",
                                  "n01484850_2.JPEG", "n01443537_6.JPEG"]


def test_an_object_store_build_streams_in_this_process(converted, bucket):
    """The iterable reader opens each shard of an s3:// build through fsspec (a real S3 server on loopback)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(bucket)
    fs.put(str(converted), f"{root}/imagenet", recursive=True)
    remote = IterableRecordDataset(f"{bucket}/imagenet", "validation", decode=False)
    assert names(remote) == names(IterableRecordDataset(converted, "validation", decode=False))


def test_a_batch_without_real_labels_is_an_empty_int64_column():
    """ReaL gives some validation images no label: a batch of only those is [B, 0] int64, as any other."""
    empty = torch.empty(0, dtype=torch.int64)
    batch = collate([{"label": 3, "real_labels": empty}, {"label": 5, "real_labels": empty}])
    assert batch["real_labels"].shape == (2, 0) and batch["real_labels"].dtype == torch.int64
    assert batch["label"].dtype == torch.int64 and batch["label"].tolist() == [3, 5]
    mixed = collate([{"real_labels": torch.tensor([4, 7])}, {"real_labels": empty}])
    assert mixed["real_labels"].tolist() == [[4, 7], [-1, -1]] and mixed["real_labels"].dtype == torch.int64
