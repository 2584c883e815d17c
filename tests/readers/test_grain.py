"""imagenet_build.grain (readers/grain_source.py): a build's split as a Grain random-access data source, read
through Grain's own DataLoader and MapDataset: every record once an epoch across shards x workers, shuffled by
Grain's seed; a short index and a damaged record refused in one line; a build in an object store (a real S3
protocol server on loopback) read as the local one. Every index defect is test_readers.py's, for every reader."""

from collections import Counter

import pytest

from helpers import SHARD, index_lines, set_index
from imagenet_build.format.dali_index import record_entries
from imagenet_build.infra.errors import BuildError

grain = pytest.importorskip("grain")

from imagenet_build.grain import RecordSource  # noqa: E402


class Place(grain.transforms.Map):
    """What a record is, for counting: (shard, offset, label); a module-level class, pickled to Grain's workers."""

    def map(self, record):
        return {"shard": record["shard"], "offset": record["offset"], "label": record["label"]}


def every_place(folder, split="train"):
    paths = sorted(str(p) for p in folder.glob(f"{split}-?????-of-?????"))
    return Counter((path, offset) for path in paths for offset, _ in record_entries(path))


def test_every_record_once_an_epoch_across_shards_and_workers(converted):
    """Grain's DataLoader, 2 shards (ShardOptions) x 2 worker processes each, shuffled: each record of the split
    once; each shard its own half; another seed another order."""
    source = RecordSource(converted, "train")
    orders, seen = {}, Counter()
    for seed in (3, 4):
        order = []
        for shard in range(2):
            sampler = grain.samplers.IndexSampler(len(source), grain.sharding.ShardOptions(shard, 2), shuffle=True,
                                                  num_epochs=1, seed=seed)
            loader = grain.DataLoader(data_source=source, sampler=sampler, operations=[Place()], worker_count=2)
            places = [(str(r["shard"]), int(r["offset"])) for r in loader]
            assert len(places) == len(source) // 2
            order += places
        assert Counter(order) == every_place(converted)
        orders[seed] = order
        seen.update(order)
    assert orders[3] != orders[4] and set(seen.values()) == {2}


def test_a_map_dataset_shuffled_and_sliced_per_host_reads_each_record_once(converted):
    """MapDataset.source(...).shuffle(seed) sliced [k::3] for 3 hosts, each record once, its label the stored one
    less one; the record's image is the stored JPEG."""
    source = RecordSource(converted, "validation")
    dataset = grain.MapDataset.source(source).shuffle(seed=1)
    parts = [[part[k] for k in range(len(part))] for part in (dataset[host::3] for host in range(3))]
    places = Counter((r["shard"], r["offset"]) for part in parts for r in part)
    assert places == every_place(converted, "validation")
    record = parts[0][0]
    assert record["image"][:2] == b"\xff\xd8" and 0 <= record["label"] < 4 and record["filename"].endswith(".JPEG")


def test_a_short_index_is_refused_before_anything_is_read(build):
    lines = index_lines(build)
    set_index(build, lines[:-1])
    with pytest.raises(BuildError) as refused:
        RecordSource(build, "train")
    message = str(refused.value)
    assert message.startswith(f"{build / 'dali_idx' / SHARD}.idx: line {len(lines) - 1}: the last entry ends")
    assert "\n" not in message


def test_a_damaged_record_is_named_where_it_lies(build):
    """A flipped byte in a record's payload: its CRC fails, one line naming shard and byte; without the CRC
    check the record parses."""
    shard = build / SHARD
    offset, size = record_entries(str(shard))[1]
    data = bytearray(shard.read_bytes())
    data[offset + size // 2] ^= 0xFF  # inside the stored JPEG
    shard.write_bytes(bytes(data))
    source = RecordSource(build, "train")
    number = next(k for k in range(len(source)) if source.paths[source.shard[k]] == str(shard) and
                  source.offset[k] == offset)
    with pytest.raises(BuildError) as refused:
        source[number]
    assert str(refused.value).startswith(f"{shard}: byte {offset}: ") and "run imagenet-build verify" in str(
        refused.value)
    assert RecordSource(build, "train", check_crc=False)[number]["offset"] == offset
    with pytest.raises(IndexError):
        source[len(source)]


def test_a_build_in_an_object_store_reads_as_the_local_one(converted, bucket):
    import fsspec

    fs, root = fsspec.core.url_to_fs(bucket)
    fs.put(str(converted), f"{root}/imagenet", recursive=True)
    url = f"{bucket}/imagenet"
    local, remote = RecordSource(converted, "train"), RecordSource(url, "train")
    assert len(remote) == len(local)
    for k in (0, 17, len(local) - 1):
        got, want = remote[k], local[k]
        assert got["shard"] == want["shard"].replace(str(converted), url)
        assert {key: got[key] for key in ("image", "label", "offset")} == {key: want[key] for key in
                                                                          ("image", "label", "offset")}
