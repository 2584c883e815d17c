"""A batch of the PyTorch reader read in one call (readers/torch_batch.py, RecordDataset.__getitems__): the same
samples as read one by one, through our collate or any other; labels, offsets and images in one block of memory,
one storage from a DataLoader worker; normalised in the worker where the transform normalises; a record that does
not decode named by its place; and what the lighter parse of a record (format/record_schema.Features) gives."""

import pytest

from run_helpers import error_message, torch_or_skip

torch = torch_or_skip()
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")

from imagenet_build.format.record_schema import Features, decode_example  # noqa: E402
from imagenet_build.format.tfrecord import read_records  # noqa: E402
from imagenet_build.readers.torch_batch import Batch  # noqa: E402
from imagenet_build.torch import RecordDataset, SampleTransform, collate, normalise  # noqa: E402

EVALUATION = dict(training=False, size=32, resize=40)


def dataset(folder, **transform):
    return RecordDataset(folder, "train", decode=False, shuffle=False,
                         transform=SampleTransform(**{**EVALUATION, **transform}))


def storage_of(tensor):
    return tensor.untyped_storage().data_ptr()


def test_a_batch_read_in_one_call_is_its_samples_read_one_by_one(converted):
    """__getitems__ gives a Batch: collated, the labels, offsets, shards, file names and images (the evaluation
    crop: no draw) of the samples read one by one, labels, offsets and images in one block of memory; as a
    sequence, the samples themselves, which PyTorch's default_collate batches alike."""
    data = dataset(converted, normalise=False)
    indices = [5, 0, 17, 3, 9]
    batch = data.__getitems__(indices)
    assert isinstance(batch, Batch) and len(batch) == len(indices)
    one_by_one = [data[i] for i in indices]
    collated = collate(batch)
    assert list(collated) == list(one_by_one[0])
    assert collated["image"].shape == (5, 3, 32, 32) and collated["image"].dtype == torch.uint8
    assert collated["image"].is_contiguous()
    assert torch.equal(collated["image"], torch.stack([s["image"] for s in one_by_one]))
    for key in ("label", "offset"):
        assert collated[key].dtype == torch.int64 and collated[key].tolist() == [s[key] for s in one_by_one]
    for key in ("shard", "filename"):
        assert collated[key] == [s[key] for s in one_by_one]
    assert storage_of(collated["label"]) == storage_of(collated["offset"]) == storage_of(collated["image"])
    assert [s["filename"] for s in batch] == collated["filename"] and batch[1:3][0]["offset"] == batch[1]["offset"]
    other = torch.utils.data.default_collate(batch)
    assert torch.equal(other["image"], collated["image"]) and other["label"].tolist() == collated["label"].tolist()


def test_a_normalising_transform_normalises_the_batch(converted):
    """With normalise=True the batch is float32, (x - mean) / std of the uint8 batch."""
    mean, std = (10.0, 20.0, 30.0), (2.0, 4.0, 8.0)
    plain = collate(dataset(converted, normalise=False).__getitems__(list(range(6))))["image"]
    batch = collate(dataset(converted, mean=mean, std=std).__getitems__(list(range(6))))
    assert batch["image"].dtype == torch.float32
    assert torch.allclose(batch["image"], normalise(plain, mean, std), atol=1e-5)
    assert storage_of(batch["label"]) == storage_of(batch["image"])


def test_from_a_worker_a_batch_is_one_storage_and_every_record_once(converted):
    """Through a DataLoader's 2 workers, training crops: every record of the epoch once, and each batch's labels,
    offsets and images arrive in one storage (one file descriptor a batch, not one a tensor)."""
    data = RecordDataset(converted, "train", decode=False, transform=SampleTransform(size=32, normalise=False))
    loader = torch.utils.data.DataLoader(data, batch_size=7, num_workers=2, collate_fn=collate)
    seen = []
    for batch in loader:
        assert storage_of(batch["label"]) == storage_of(batch["offset"]) == storage_of(batch["image"])
        assert batch["image"].shape[1:] == (3, 32, 32) and batch["image"].dtype == torch.uint8
        seen += zip(batch["shard"], batch["offset"].tolist())
    expected = [(s["shard"], s["offset"]) for s in RecordDataset(converted, "train", decode=False)]
    assert sorted(seen) == sorted(expected)


def test_a_record_that_does_not_decode_is_named_in_a_batch(build):
    """A garbled image among a batch's records: one line naming its shard, byte and file name."""
    from helpers import SHARD, edit_record

    def garble(example):
        example.features.feature["image/encoded"].bytes_list.value[0] = b"\xff\xd8 not a jpeg"

    edit_record(build, SHARD, 0, garble)
    data = dataset(build)
    first = data.records.starts[1]
    name = RecordDataset(build, "train", decode=False, shuffle=False)[first]["filename"]
    message = error_message(lambda: data.__getitems__([0, first, 2]))
    assert message.startswith(f"{build / SHARD}: byte 0 ({name}): does not decode as JPEG (") and "\n" not in message


def test_the_lighter_parse_gives_each_feature_as_decode_example_does(converted):
    """Features decodes a feature when asked for: each key's values those of decode_example; a key the record
    lacks is the default (or KeyError), and is not there."""
    shard = sorted(converted.glob("train-*"))[0]
    with open(shard, "rb") as f:
        payloads = [payload for _, payload, _ in read_records(f, shard.stat().st_size)][:5]
    for payload in payloads:
        full, lazy = decode_example(payload), Features(payload)
        assert all(lazy[key] == values and key in lazy for key, values in full.items())
        assert "image/class/real_labels" not in lazy and lazy.get("image/class/real_labels", []) == []
        with pytest.raises(KeyError):
            lazy["image/class/real_labels"]
