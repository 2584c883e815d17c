"""One shard and its index, written atomically: the figures are the files', a worker's result is typed (the
manifest's entry, and apart from it its inputs' state), one read of the images serves every target."""

import hashlib
import shutil

import pytest

from imagenet_build.catalog.classes import load_catalog
from imagenet_build.encode.resize import ResizeOptions, parse_targets
from imagenet_build.format.dali_index import check_index
from imagenet_build.format.destination import destination
from imagenet_build.format.manifest import ShardEntry, schema_problem
from imagenet_build.format.tfrecord import OVERHEAD
from imagenet_build.infra.errors import InputError
from imagenet_build.plan import SplitPlan
from imagenet_build.sources import input_identities, scan_class_folders
from imagenet_build.writer.shard_writer import (
    ShardSink,
    ShardWriteResult,
    codec_of,
    rebuilt_sha256,
    write_records,
    write_shard,
)

PAYLOADS = [(b"first",), (b"second ", b"in two parts"), (b"",)]


def files(folder):
    return sorted(p.name for p in folder.rglob("*") if p.is_file())


def test_the_figures_are_those_of_the_files_written(tmp_path):
    (tmp_path / "idx").mkdir()
    figures = write_records("train-00000-of-00001", tmp_path, tmp_path / "idx", PAYLOADS)
    shard = (tmp_path / "train-00000-of-00001").read_bytes()
    index = (tmp_path / "idx" / "train-00000-of-00001.idx").read_bytes()
    assert figures.records == 3 and figures.bytes == len(shard) == 3 * OVERHEAD + len(b"firstsecond in two parts")
    assert figures.sha256 == hashlib.sha256(shard).hexdigest()
    assert (figures.index_bytes, figures.index_sha256) == (len(index), hashlib.sha256(index).hexdigest())
    entries = [(0, OVERHEAD + 5), (OVERHEAD + 5, OVERHEAD + 19), (2 * OVERHEAD + 24, OVERHEAD)]
    assert check_index(index, entries, len(shard)) == []
    assert files(tmp_path) == ["train-00000-of-00001", "train-00000-of-00001.idx"]  # no temporary file left


def test_an_unfinished_shard_leaves_nothing(tmp_path):
    def failing():
        yield (b"first",)
        raise InputError("image.JPEG", "broken")

    with pytest.raises(InputError):
        write_records("train-00000-of-00001", tmp_path, tmp_path, failing())
    with ShardSink("train-00000-of-00002", tmp_path, tmp_path) as sink:
        sink.add((b"record",))  # closed without finish()
    assert files(tmp_path) == []


@pytest.fixture(scope="module")
def plan(sample_dir):
    catalog = load_catalog(sample_dir / "labels.txt")
    return SplitPlan(scan_class_folders("train", sample_dir / "train", catalog, "fail"), catalog, {}, 4, 2)


def dest_in(folder):
    (folder / "dali_idx").mkdir(parents=True)
    return destination(folder, None)


def test_a_shards_result_is_its_manifest_entry_and_its_inputs_state(plan, tmp_path):
    spec = plan.spec(1)
    (result,) = write_shard(spec, (dest_in(tmp_path / "out"),), "fail")
    assert isinstance(result, ShardWriteResult)
    assert set(result.entry) <= set(ShardEntry.__annotations__)  # nothing else slipped into the entry
    assert schema_problem({"format": 2, "complete": True, "options": {}, "num_classes": 4, "synsets": ["a"] * 4,
                           "splits": {}, "shards": [result.entry]}) == ""
    assert result.input_state == spec.input_state(input_identities(spec))
    shard = (tmp_path / "out" / spec.name).read_bytes()
    assert result.entry["sha256"] == hashlib.sha256(shard).hexdigest() == rebuilt_sha256(spec, "fail")
    assert result.entry["records"] == len(spec.entries)
    assert result.entry["fingerprint"] == spec.fingerprint("fail", codec_of(result.entry["reencoded"]))


def test_one_read_writes_every_target_as_a_run_for_that_target_alone(plan, tmp_path):
    spec = plan.spec(0)
    resize = ResizeOptions(parse_targets("shorter:48,96"), 90, True, False)
    both = write_shard(spec, (dest_in(tmp_path / "48"), dest_in(tmp_path / "96")), "fail", resize)
    assert [r.entry["name"] for r in both] == [spec.name] * 2
    for target, result in zip(resize.targets, both):
        alone = tmp_path / f"alone-{target.size}"
        (single,) = write_shard(spec, (dest_in(alone),), "fail", resize.only([target]))
        assert single == result and result.entry["resized"] > 0
        assert (alone / spec.name).read_bytes() == (tmp_path / str(target.size) / spec.name).read_bytes()


def test_a_bad_image_stops_the_shard_or_is_listed_as_left_out(sample_dir, tmp_path):
    copy = tmp_path / "sample"
    shutil.copytree(sample_dir, copy)
    catalog = load_catalog(copy / "labels.txt")
    spec = SplitPlan(scan_class_folders("train", copy / "train", catalog, "fail"), catalog, {}, 4, 2).spec(2)
    bad = spec.entries[3]
    (copy / "train" / bad.relpath).write_bytes(b"not a JPEG")
    with pytest.raises(InputError, match=bad.filename):
        write_shard(spec, (dest_in(tmp_path / "fail"),), "fail")
    assert files(tmp_path / "fail") == []
    (result,) = write_shard(spec, (dest_in(tmp_path / "skip"),), "skip")
    assert [(s["file"], s["label"]) for s in result.entry["skipped"]] == [(bad.relpath, bad.label)]
    assert result.entry["records"] == len(spec.entries) - 1
