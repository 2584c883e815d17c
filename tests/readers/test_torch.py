"""The PyTorch reader's datasets (imagenet_build.torch: readers/torch_dataset.py, torch_records.py), on the CPU.

Every record once across simulated ranks x DataLoader workers, values equal to
TensorFlow's parse of the same records, CPU decode equal to Pillow's, and the
trainer check passing on the sample and failing on planted faults.
"""

import gc
import io
import os
import random
import re
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from helpers import SHARD, edit_record, index_lines, read_with_tensorflow, set_index
from imagenet_build.format.dali_index import record_entries
from imagenet_build.infra.errors import BuildError
from run_helpers import error_message, torch_or_skip

torch = torch_or_skip()
# torchvision 0.29 marks its image decoding deprecated (in favour of TorchCodec); it still works
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")

from imagenet_build.readers.torch_dataset import _shuffled  # noqa: E402
from imagenet_build.torch import (  # noqa: E402
    BatchTransform,
    IterableRecordDataset,
    RecordDataset,
    collate,
    decode_images,
)


def all_records(folder, split):
    """{(shard path, offset)} of every record, from the shards' own framing."""
    return {(str(p), offset) for p in sorted(folder.glob(f"{split}-*-of-*")) for offset, _ in record_entries(str(p))}


def read_all(dataset_class, folder, split, world_size, workers=2, epoch=0, **kwargs):
    """[(rank, shard, offset, filename)] of one epoch over every rank, each through a DataLoader with workers."""
    got = []
    for rank in range(world_size):
        dataset = dataset_class(folder, split, rank=rank, world_size=world_size, decode=False, **kwargs)
        dataset.set_epoch(epoch)
        loader = torch.utils.data.DataLoader(dataset, batch_size=5, num_workers=workers, collate_fn=collate)
        for batch in loader:
            got += [(rank, s, o, f) for s, o, f in zip(batch["shard"], batch["offset"].tolist(), batch["filename"])]
    return got


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("dataset_class", [RecordDataset, IterableRecordDataset])
def test_every_record_once_across_ranks_and_workers(converted, dataset_class, world_size):
    for split in ("train", "validation"):
        got = read_all(dataset_class, converted, split, world_size)
        sources = Counter((s, o) for _, s, o, _ in got)
        assert set(sources) == all_records(converted, split) and set(sources.values()) == {1}, split
        assert len({f for *_, f in got}) == len(got)
        sizes = Counter(rank for rank, *_ in got)
        assert len(sizes) == world_size and max(sizes.values()) - min(sizes.values()) <= 1


@pytest.mark.parametrize("dataset_class", [RecordDataset, IterableRecordDataset])
def test_order_is_deterministic_per_seed_and_epoch(converted, dataset_class):
    order = lambda **kw: [f for *_, f in read_all(dataset_class, converted, "train", 2, workers=0, **kw)]  # noqa: E731
    assert order(epoch=1) == order(epoch=1)
    assert order(epoch=1) != order(epoch=2) and sorted(order(epoch=1)) == sorted(order(epoch=2))
    assert order(epoch=1) != order(epoch=1, seed=7)
    assert order(epoch=1, shuffle=False) == order(epoch=2, shuffle=False)


@pytest.mark.parametrize("dataset_class", [RecordDataset, IterableRecordDataset])
def test_set_epoch_reaches_persistent_workers(converted, dataset_class):
    """DataLoader(persistent_workers=True) starts its 2 workers once: each epoch's order is still the
    one set_epoch sets, the same as with workers started anew for every epoch."""
    def orders(persistent):
        buffer = {"shuffle_buffer": 4} if dataset_class is IterableRecordDataset else {}
        dataset = dataset_class(converted, "train", decode=False, shuffle=True, **buffer)
        loader = torch.utils.data.DataLoader(dataset, batch_size=5, num_workers=2, collate_fn=collate,
                                             persistent_workers=persistent)
        epochs = []
        for epoch in (1, 2, 3):
            dataset.set_epoch(epoch)
            epochs.append([f for batch in loader for f in batch["filename"]])
        return epochs

    persistent = orders(True)
    assert persistent == orders(False)
    assert len(set(map(tuple, persistent))) == 3 and len({frozenset(o) for o in persistent}) == 1


def test_values_equal_tensorflows_parse(converted):
    pytest.importorskip("tensorflow")

    for split in ("train", "validation"):
        ours = list(RecordDataset(converted, split, decode=False, boxes=True, shuffle=False))
        theirs = [r for p in sorted(converted.glob(f"{split}-*-of-*")) for r in read_with_tensorflow(str(p))]
        assert len(ours) == len(theirs) == {"train": 48, "validation": 16}[split]
        for mine, tf in zip(ours, theirs):
            assert mine["image"] == tf["image/encoded"]
            assert mine["label"] == tf["image/class/label"] - 1
            assert mine["filename"] == tf["image/filename"].decode()
            boxes = np.array([tf[f"image/object/bbox/{c}"] for c in ("xmin", "ymin", "xmax", "ymax")],
                             dtype=np.float32).T.reshape(-1, 4)
            assert np.array_equal(mine["boxes"].numpy(), boxes)
    assert any(len(s["boxes"]) for s in RecordDataset(converted, "train", decode=False, boxes=True))


def test_cpu_decode_equals_pillow(converted):
    """Grayscale, progressive, EXIF-rotated and the re-encoded CMYK and PNG images among them."""
    raw = {s["filename"]: s["image"] for s in RecordDataset(converted, "train", decode=False)}
    modes = set()
    for sample in IterableRecordDataset(converted, "train"):
        with Image.open(io.BytesIO(raw[sample["filename"]])) as image:
            modes.add(image.mode)
            expected = np.asarray(image.convert("RGB")).transpose(2, 0, 1)
        assert sample["image"].dtype == torch.uint8
        assert np.array_equal(sample["image"].numpy(), expected), sample["filename"]
    assert modes == {"RGB", "L"}


@pytest.mark.parametrize("dataset_class", [RecordDataset, IterableRecordDataset])
def test_collate_stacks_decoded_images(converted, dataset_class):
    """Decoded images of one size (here resized by a transform) come out of a DataLoader as one uint8
    N x 3 x H x W tensor, each equal to the sample read alone; images of different sizes as a list."""
    resized = BatchTransform("cpu", training=False, size=32, resize=36).crop_resize
    alone = {s["filename"]: s["image"] for s in RecordDataset(converted, "validation", transform=resized)}
    dataset = dataset_class(converted, "validation", transform=resized)
    batches = list(torch.utils.data.DataLoader(dataset, batch_size=5, num_workers=2, collate_fn=collate))
    assert sorted(name for b in batches for name in b["filename"]) == sorted(alone)
    for batch in batches:
        images = batch["image"]
        assert isinstance(images, torch.Tensor) and images.dtype == torch.uint8
        assert images.shape == (len(batch["filename"]), 3, 32, 32)
        for name, image in zip(batch["filename"], images):
            assert torch.equal(image, alone[name]), name
    samples = [s for s in dataset_class(converted, "validation")][:6]
    assert len({tuple(s["image"].shape) for s in samples}) > 1
    images = collate(samples)["image"]
    assert isinstance(images, list) and all(torch.equal(a, s["image"]) for a, s in zip(images, samples))


def open_descriptors():
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd (Linux)")
@pytest.mark.parametrize("dataset_class", [RecordDataset, IterableRecordDataset])
def test_reading_holds_at_most_one_descriptor_per_shard(converted, dataset_class):
    """Reading a split, twice, leaves open at most one descriptor per shard (the map-style reader keeps one
    per shard for its preads, the streaming one only the shard it reads), never one per record read; a
    dataset dropped closes its own."""
    gc.collect()  # what an earlier test in this process left to the collector is closed before counting, not after
    before = open_descriptors()
    dataset = dataset_class(converted, "train", decode=False)
    built = open_descriptors()  # the shared epoch's memory may hold one
    shards = len(dataset.records.paths)
    assert built - before <= 1 and shards < len(dataset.records) // 4
    counts = []
    for _ in range(2):
        for _ in dataset:
            counts.append(open_descriptors() - built)
    assert len(counts) == 2 * len(dataset.records) and max(counts) <= shards
    del dataset
    gc.collect()
    assert open_descriptors() == before


def test_a_split_of_more_shards_than_kept_open_reads_whole_within_the_cap(converted, monkeypatch):
    """ImageNet's 1,024 train shards would pass a soft limit of 1,024 descriptors in every worker: the
    map-style reader keeps at most MAX_OPEN_SHARDS open, closing the least recently read, and still reads
    every record right (here a cap of 2 over the sample's 4 shards, in shuffled order)."""
    import imagenet_build.readers.torch_records as torch_records

    monkeypatch.setattr(torch_records, "MAX_OPEN_SHARDS", 2)
    expected = {s["filename"]: s["label"] for s in RecordDataset(converted, "train", decode=False, shuffle=False)}
    before = open_descriptors()
    dataset = RecordDataset(converted, "train", decode=False)
    built = open_descriptors()
    got, most = {}, 0
    for sample in dataset:
        got[sample["filename"]] = sample["label"]
        most = max(most, open_descriptors() - built)
    assert got == expected and len(dataset.records.paths) == 4 and most == 2
    del dataset
    gc.collect()
    assert open_descriptors() == before


def test_a_shard_that_cannot_be_opened_is_one_line(build):
    dataset = RecordDataset(build, "train", decode=False, shuffle=False)
    (build / SHARD).chmod(0)
    if os.access(build / SHARD, os.R_OK):  # root reads anything: take the file away instead
        (build / SHARD).unlink()
    assert error_message(lambda: dataset[dataset.records.starts[1]]) in {  # the first record of SHARD, the second shard
        f"{dataset.records.paths[1]}: cannot be opened: {reason}" for reason in ("Permission denied",
                                                                              "No such file or directory")}


def test_too_few_records_and_bad_rank_are_clear_errors(converted):
    with pytest.raises(BuildError, match="for 100 ranks"):
        RecordDataset(converted, "validation", rank=0, world_size=100)
    with pytest.raises(BuildError, match="rank 3 of world_size 3"):
        IterableRecordDataset(converted, "validation", rank=3, world_size=3)
    dataset = IterableRecordDataset(converted, "validation", world_size=8)
    with pytest.raises(BuildError, match="16 record.s. for 24 rank x workers"):
        dataset.runs(worker=0, workers=3)


def test_undecodable_image_names_the_record(build):
    def garble(example):
        example.features.feature["image/encoded"].bytes_list.value[0] = b"\xff\xd8 not a jpeg"

    edit_record(build, SHARD, 0, garble)
    dataset = RecordDataset(build, "train", shuffle=False)
    first = dataset.records.starts[1]
    raw = RecordDataset(build, "train", shuffle=False, decode=False)
    where = f"{dataset.records.paths[1]}: byte 0 ({raw[first]['filename']})"
    assert re.fullmatch(re.escape(where) + r": does not decode as JPEG \(.+\)", error_message(lambda: dataset[first]))
    for batch, what in [([raw[first - 1]["image"], raw[first]["image"]], "image 1 of the batch"),
                        ([raw[first]["image"]], "an image")]:
        assert re.fullmatch(what + r": does not decode as JPEG \(.+\)", error_message(lambda b=batch: decode_images(b)))


def test_bad_index_lines_and_records_are_named_where_they_are(build):
    """The reader parses indexes and unframes records with verify's own code: each fault one error naming
    the file and the line or byte; an index whose last line lacks its newline reads as DALI reads it."""
    lines = index_lines(build)
    second = int(lines[1].split()[0])
    set_index(build, lines[:-1] + [lines[-1].rstrip("\n")])
    assert len(RecordDataset(build, "train", shuffle=False, decode=False)) == 48
    set_index(build, lines[:2] + ["12 x\n"] + lines[3:])
    with pytest.raises(BuildError, match=f"{SHARD}.idx: line 3: not '<offset> <size>'"):
        RecordDataset(build, "train")
    # entries that still cover the shard exactly, but cut at the wrong place: found when the record is read
    (o1, s1), (o2, s2) = (map(int, line.split()) for line in lines[:2])
    set_index(build, [f"{o1} {s1 + 4}\n", f"{o2 + 4} {s2 - 4}\n"] + lines[2:])
    dataset = RecordDataset(build, "train", shuffle=False, decode=False)
    first = dataset.records.starts[1]
    with pytest.raises(BuildError, match=f"{SHARD}: byte 0: the record is .* bytes, its index entry says"):
        dataset[first]
    set_index(build, lines[:-1] + [lines[-1].split()[0] + " 999999\n"])
    with pytest.raises(BuildError, match=f"{SHARD}.idx: line {len(lines)}: the last entry ends at byte .* "
                                         "it runs past the end of the shard"):
        RecordDataset(build, "train", shuffle=False, decode=False)
    set_index(build, lines)
    shard = bytearray((build / SHARD).read_bytes())
    shard[second + 20] ^= 0x55  # in the second record's payload
    (build / SHARD).write_bytes(bytes(shard))
    for dataset_class in (RecordDataset, IterableRecordDataset):
        dataset = dataset_class(build, "train", shuffle=False, decode=False)
        with pytest.raises(BuildError, match=f"{SHARD}: byte {second}: payload CRC mismatch"):
            list(dataset)
    assert len(list(RecordDataset(build, "train", shuffle=False, decode=False, check_crc=False))) == 48
    shard[4] ^= 0x01  # the first record's length: its CRC no longer matches
    (build / SHARD).write_bytes(bytes(shard))
    with pytest.raises(BuildError, match=f"{SHARD}: byte 0: length CRC mismatch"):
        list(RecordDataset(build, "train", shuffle=False, decode=False))


def test_what_is_not_a_build_is_named_in_one_line(converted, tmp_path):
    """A missing folder, a folder whose manifest is not ours, a build without the split: each its own line."""
    missing = tmp_path / "missing"
    assert error_message(lambda: RecordDataset(missing)) == f"{missing}: not a folder"
    (tmp_path / "manifest.json").write_text("{not json")
    assert error_message(lambda: RecordDataset(tmp_path)).startswith(f"{tmp_path / 'manifest.json'}: not valid JSON (")
    assert error_message(lambda: IterableRecordDataset(converted, "test")) == (
        f"{converted}: holds no test shards (test-NNNNN-of-NNNNN)")


def test_the_streams_seeded_order_stays_the_same_from_release_to_release(converted):
    """The iterable reader's shards and shuffle buffer for a (seed, epoch, rank, worker) are drawn as they were:
    a change of the seeding changes every seeded run's order. The sample's train split: 4 shards of 12."""
    rank_1 = IterableRecordDataset(converted, "train", decode=False, world_size=2, rank=1, shuffle_buffer=4)
    assert rank_1.runs(epoch=1) == [(2, 24, 36), (1, 12, 24)]
    assert rank_1.runs(worker=1, workers=2, epoch=3) == [(1, 12, 24)]
    seed_7 = IterableRecordDataset(converted, "train", decode=False, seed=7)
    assert seed_7.runs(epoch=0) == [(3, 36, 48), (0, 0, 12), (2, 24, 36), (1, 12, 24)]
    rank_1.set_epoch(1)
    assert [s["filename"] for s in rank_1][:6] == ["n01484850_8.JPEG", "n01443537_10.JPEG", "n01484850_3.JPEG",
                                                   "n01491361_10.JPEG", "n01484850_4.JPEG", "n01443537_4.JPEG"]
    assert IterableRecordDataset(converted, "train").shuffle_buffer == 1000  # docs/readers.md's default


def test_the_shuffle_buffer_holds_its_size_and_gives_every_sample_once():
    """A buffer of 3 holds 3 samples before it gives one; what is left at the end comes out shuffled too."""
    consumed = []

    def samples():
        for k in range(10):
            consumed.append(k)
            yield k

    out = _shuffled(samples(), 3, random.Random(0))
    first = next(out)
    assert len(consumed) == 4  # 3 held, and the 4th takes the place of the one given
    assert [first, *out] == [1, 3, 0, 4, 2, 6, 8, 5, 7, 9]
    assert list(_shuffled(iter(range(5)), 10, random.Random(0))) == [2, 1, 0, 4, 3]  # never full


@pytest.mark.parametrize("seed, epoch", [(0, 0), (0, 3), (7, 1)])
def test_shuffled_order_is_distributed_samplers(converted, seed, epoch):
    """With one rank the map-style reader's epoch is DistributedSampler's permutation for (seed, epoch)."""
    names = [s["filename"] for s in RecordDataset(converted, "train", decode=False, shuffle=False)]
    dataset = RecordDataset(converted, "train", decode=False, seed=seed)
    dataset.set_epoch(epoch)
    sampler = torch.utils.data.DistributedSampler(names, num_replicas=1, rank=0, shuffle=True, seed=seed)
    sampler.set_epoch(epoch)
    assert [dataset[i]["filename"] for i in range(len(dataset))] == [names[i] for i in sampler]


def test_as_many_ranks_as_records_each_read_one(converted):
    """16 validation records over 16 ranks: one each; over 17, or 24 rank x workers, one line saying so."""
    got = [[s["filename"] for s in RecordDataset(converted, "validation", rank=r, world_size=16, decode=False)]
           for r in range(16)]
    assert all(len(names) == 1 for names in got) and len({n for names in got for n in names}) == 16
    assert error_message(lambda: RecordDataset(converted, "validation", world_size=17)) == (
        "16 record(s) for 17 ranks: each rank needs at least one; use fewer ranks or workers, or more records")
    dataset = IterableRecordDataset(converted, "validation", world_size=8)
    assert error_message(lambda: dataset.runs(worker=0, workers=3)) == (
        "16 record(s) for 24 rank x workers: each rank x worker needs at least one; "
        "use fewer ranks or workers, or more records")


def test_a_record_that_is_not_slims_example_or_a_shard_cut_short_is_one_line(build):
    """Found when the record is read: a record without an image, a bad header, a shard cut after the
    dataset was made; each names the shard and the record's byte, and says what to run."""
    def no_image(example):
        del example.features.feature["image/encoded"]

    edit_record(build, SHARD, 0, no_image)
    dataset = RecordDataset(build, "train", shuffle=False, decode=False)
    first, path = dataset.records.starts[1], dataset.records.paths[1]
    assert error_message(lambda: dataset[first]) == (
        f"{path}: byte 0: not slim's Example (KeyError: 'image/encoded'); run imagenet-build verify")
    shard = bytearray((build / SHARD).read_bytes())
    shard[4] ^= 0x01
    (build / SHARD).write_bytes(bytes(shard))
    assert error_message(lambda: dataset[first]) == (
        f"{path}: byte 0: length CRC mismatch (corrupt record header); run imagenet-build verify")
    last = dataset.records.starts[2] - 1
    offset = dataset.records.offset[last]
    (build / SHARD).write_bytes(bytes(shard[:-1]))
    assert error_message(lambda: dataset[last]) == (
        f"{path}: byte {offset}: the index points past the end of the file; run imagenet-build verify")


def test_object_store_folders_are_read(converted, bucket):
    """A build in an S3 bucket (a real S3 protocol server on loopback) reads as the local folder does,
    DataLoader workers included; its indexes are held to the same rule."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(bucket)
    fs.put(str(converted), f"{root}/imagenet", recursive=True)
    url = f"{bucket}/imagenet"
    for dataset_class in (RecordDataset, IterableRecordDataset):
        local = read_all(dataset_class, converted, "train", 2, shuffle=False)
        remote = read_all(dataset_class, url, "train", 2, shuffle=False)
        assert [(r, s.replace(url, str(converted)), o, f) for r, s, o, f in remote] == local
    image = RecordDataset(url, "validation", shuffle=False)[0]["image"]
    assert torch.equal(image, RecordDataset(converted, "validation", shuffle=False)[0]["image"])
    lines = index_lines(converted)
    fs.pipe_file(f"{root}/imagenet/dali_idx/{SHARD}.idx", "".join(lines[:-1]).encode())
    with pytest.raises(BuildError, match=f"{SHARD}.idx: line {len(lines) - 1}: .*the index of {url}/{SHARD}"):
        RecordDataset(url, "train")
