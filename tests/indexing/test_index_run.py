"""`index` over files and folders (indexing/index_run.py): the TFRecord files found, each indexed once into its
folder's dali_idx/ or --index-dir, broken framing refused with no index, two files for one index refused, the index
folder locked; on local disk and in an object store."""

import io
import os
import sys

import pytest

from helpers import record
from imagenet_build.indexing import index_run
from imagenet_build.indexing.index_run import index_shards
from imagenet_build.infra import write_door
from imagenet_build.infra.errors import BuildError, InputError, UsageError
from imagenet_build.infra.lock import FolderLock

SHARD = record(b"first") + record(b"second payload") + record(b"third")  # records of 21, 30, 21 bytes
GOOD = b"0 21\n21 30\n51 21\n"


@pytest.fixture
def shard(tmp_path):
    path = tmp_path / "train-00000-of-00001"
    path.write_bytes(SHARD)
    return path


def test_find_tfrecords_takes_named_files_and_the_shards_in_folders(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    for name in ("train-00001-of-00002", "train-00000-of-00002", "b.tfrecord", "notes.txt", "train-00000-of-00002.idx"):
        (folder / name).write_bytes(b"")
    (folder / "a-00000-of-00001").mkdir()  # a folder named like a shard is not one
    other = tmp_path / "any-name.bin"
    other.write_bytes(b"")
    assert index_run.find_tfrecords([folder, other]) == [
        str(folder / n) for n in ("b.tfrecord", "train-00000-of-00002", "train-00001-of-00002")] + [str(other)]


@pytest.mark.parametrize("content", ["nothing", "other files", "a folder named like a shard"])
def test_find_tfrecords_refuses_a_folder_without_shards(tmp_path, content):
    folder = tmp_path / "out"
    folder.mkdir()
    if content == "other files":
        (folder / "notes.txt").write_bytes(b"")
    if content == "a folder named like a shard":
        (folder / "x.tfrecord").mkdir()
    with pytest.raises(BuildError) as info:
        index_run.find_tfrecords([folder])
    assert str(info.value) == f"{folder}: holds no TFRecord files (<name>-NNNNN-of-NNNNN or *.tfrecord)"
    with pytest.raises(BuildError) as info:
        index_run.find_tfrecords([tmp_path / "gone"])
    assert str(info.value) == f"{tmp_path / 'gone'}: no such file or folder"


def test_index_shards_indexes_the_sound_files_and_refuses_the_broken(tmp_path, monkeypatch):
    import types

    for name, data in (("b.tfrecord", SHARD), ("a.tfrecord", SHARD[:21]), ("c.tfrecord", SHARD + b"x"),
                       ("d.tfrecord", SHARD[:-1])):
        (tmp_path / name).write_bytes(data)
    clock = iter([1000.0, 1001.23456])  # its start and its end, whatever the machine's speed
    monkeypatch.setattr(index_run, "time", types.SimpleNamespace(monotonic=lambda: next(clock)))
    result = index_shards([tmp_path], workers=1)
    idx = tmp_path / "dali_idx"
    assert result.pop("seconds") == 1.235
    assert result == {
        "ok": False,
        "indexed": [{"file": str(tmp_path / "a.tfrecord"), "index": str(idx / "a.tfrecord.idx"), "records": 1},
                    {"file": str(tmp_path / "b.tfrecord"), "index": str(idx / "b.tfrecord.idx"), "records": 3}],
        "refused": [{"file": str(tmp_path / "c.tfrecord"), "offset": 72,
                     "message": "1 trailing byte(s) that are not a record"},
                    {"file": str(tmp_path / "d.tfrecord"), "offset": 51,
                     "message": "record of 5 bytes runs past the end of the file (71 bytes)"}],
        "records": 4,
    }
    assert (idx / "b.tfrecord.idx").read_bytes() == GOOD and (idx / "a.tfrecord.idx").read_bytes() == b"0 21\n"
    assert sorted(os.listdir(idx)) == ["a.tfrecord.idx", "b.tfrecord.idx"]


def test_index_shards_into_an_index_dir_and_each_file_once(tmp_path, shard):
    result = index_shards([shard, shard.parent, str(shard)], index_dir=str(tmp_path / "elsewhere"))
    assert result["ok"] and result["records"] == 3 and result["refused"] == []
    assert result["indexed"] == [{"file": str(shard), "index": str(tmp_path / "elsewhere" / f"{shard.name}.idx"),
                                  "records": 3}]


def test_two_files_that_would_share_one_index_are_refused(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "s.tfrecord").write_bytes(SHARD)
    first, second = str(tmp_path / "a" / "s.tfrecord"), str(tmp_path / "b" / "s.tfrecord")
    with pytest.raises(UsageError) as info:
        index_shards([first, second], index_dir=str(tmp_path / "idx"))
    assert str(info.value) == (f"{first} and {second} would both be indexed as {tmp_path / 'idx' / 's.tfrecord.idx'}; "
                               "index them into separate --index-dir folders")
    assert not (tmp_path / "idx").exists()
    alias = tmp_path / "alias"
    alias.symlink_to(tmp_path / "a")  # the same file by another path: indexed once, into its folder's dali_idx
    assert [r["index"] for r in index_shards([first, alias / "s.tfrecord"])["indexed"]] == [
        str(tmp_path / "a" / "dali_idx" / "s.tfrecord.idx")]


def test_a_file_that_cannot_be_read_is_refused_with_the_systems_reason(tmp_path):
    missing = str(tmp_path / "gone.tfrecord")
    assert index_run._index_one(missing, str(tmp_path / "gone.idx")) == (missing, None,
                                                                          (None, "No such file or directory"))


def test_index_is_refused_while_another_command_writes_the_index_folder(tmp_path, shard):
    with FolderLock(tmp_path / "dali_idx", command="imagenet-build convert"):
        with pytest.raises(BuildError, match=r"dali_idx: in use by another imagenet-build \('imagenet-build convert'"):
            index_shards([shard])
    assert not (tmp_path / "dali_idx" / f"{shard.name}.idx").exists()


def test_object_names_are_not_local_paths(memory_prefix):
    """`x/../s` and `s` are two objects in a store: two files for one index, refused (not taken as one file)."""
    for name in ("x/../s.tfrecord", "s.tfrecord"):
        write_door.write_bytes(f"{memory_prefix}/{name}", SHARD)
    first, second = f"{memory_prefix}/x/../s.tfrecord", f"{memory_prefix}/s.tfrecord"
    with pytest.raises(UsageError, match="would both be indexed as"):
        index_shards([first, second], index_dir=f"{memory_prefix}/idx")


def test_an_object_that_cannot_be_read_is_refused_naming_it(memory_prefix):
    """An object store's error may carry no strerror: its own text is the reason."""
    _, records, (offset, message) = index_run._index_one(f"{memory_prefix}/gone.tfrecord", f"{memory_prefix}/gone.idx")
    assert records is None and offset is None and message.endswith("/gone.tfrecord"), message


def test_the_index_folder_of_each_file_is_checked_before_anything_is_written(tmp_path, shard):
    """Each folder an index would go into is held to format/output_guard.py's rule: never another build's folder."""
    build = tmp_path / "build"
    build.mkdir()
    (build / "manifest.json").write_text("{}")
    with pytest.raises(InputError) as refused:
        index_shards([shard], index_dir=str(build))
    assert (refused.value.path, str(refused.value).split(",")[0]) == (
        str(build), f"{build}: --index-dir would write the index of {shard} into the build folder {build}")
    assert sorted(os.listdir(build)) == ["manifest.json"]


@pytest.mark.parametrize("workers", [-1, 1.5, True])
def test_a_worker_count_that_is_not_one_is_refused_naming_the_option(shard, workers):
    with pytest.raises(UsageError) as refused:
        index_shards([shard], workers=workers)
    assert str(refused.value) == f"--workers must be a whole number of at least 0, not {workers!r}"


class Terminal(io.StringIO):
    """stderr as a terminal: the bar is drawn into it."""

    def isatty(self):
        return True


def test_on_a_terminal_a_bar_counts_the_files_indexed(tmp_path, monkeypatch):
    """In this process too (mutation testing sees only the calls a test makes in its own process)."""
    for n in range(3):
        (tmp_path / f"train-0000{n}-of-00003").write_bytes(SHARD)
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert index_shards([tmp_path], workers=1)["records"] == 9
    frames = sys.stderr.getvalue().replace("\r", "\n").strip().splitlines()
    assert frames[0].startswith("index:   0%") and " 0/3 [" in frames[0], frames
    assert frames[-1].startswith("index: 100%") and " 3/3 [" in frames[-1] and "file/s]" in frames[-1], frames
