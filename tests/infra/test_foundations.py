"""The small modules everything stands on: workers, atomic writes, storage paths, names, the manifest schema, locks."""

import json
import os
import signal

import pytest

from imagenet_build.build import manifest
from imagenet_build.format import naming
from imagenet_build.infra import atomic, storage
from imagenet_build.infra.errors import BuildError, InputError, input_errors
from imagenet_build.infra.lock import FolderLock
from imagenet_build.infra.workers import Workers

# ------------------------------------------------------------------ workers


def square(x):
    return x * x


def fail_on_three(x):
    if x == 3:
        raise InputError(f"image{x}.JPEG", "broken JPEG")
    return x


def die(x):
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.parametrize("count", [1, 2, 3])
def test_results_do_not_depend_on_the_number_of_workers(count):
    got = {}
    with Workers(count) as pool:
        pool.run(square, [(k,) for k in range(20)], lambda task, result: got.__setitem__(task[0], result))
    assert got == {k: k * k for k in range(20)}


@pytest.mark.parametrize("count", [1, 2])
def test_a_task_error_reaches_the_caller_as_itself(count):
    with Workers(count) as pool, pytest.raises(InputError) as info:
        pool.run(fail_on_three, [(k,) for k in range(6)], lambda task, result: None)
    assert info.value.path == "image3.JPEG" and info.value.problem == "broken JPEG"


def test_a_worker_killed_mid_task_is_one_clear_error():
    with Workers(2) as pool, pytest.raises(BuildError, match="a worker process died"):
        pool.run(die, [(1,)], lambda task, result: None)


# ------------------------------------------------------------------ atomic writes


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "manifest.json"
    atomic.write_atomic(target, b"old")

    def no_space(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space"):
        atomic.write_atomic(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
    atomic.write_atomic(target, b"new")
    assert target.read_bytes() == b"new"


# ------------------------------------------------------------------ storage and names


def test_paths_and_urls_are_joined_and_split_alike():
    assert storage.join("s3://b/out/", "dali_idx", "x.idx") == "s3://b/out/dali_idx/x.idx"
    assert storage.join("/data/out", "x") == os.path.join("/data/out", "x")
    assert storage.basename("s3://b/out/train-00000-of-00001") == "train-00000-of-00001"
    assert storage.parent("s3://b/out/x") == "s3://b/out" and storage.parent("/a/b/c") == "/a/b"
    assert storage.is_url("gs://b/x") and not storage.is_url("/a/b")


def test_a_missing_folder_lists_empty_and_a_missing_file_hashes_to_none(tmp_path):
    assert storage.listdir(tmp_path / "nowhere") == {}
    assert storage.sha256(tmp_path / "nowhere") is None
    (tmp_path / "f").write_bytes(b"abc")
    before = storage.stamp(tmp_path / "f")
    os.utime(tmp_path / "f", ns=(1, 2))
    assert storage.stamp(tmp_path / "f") != before  # a rerun sees a touched archive


def test_shard_names_round_trip_and_reject_others():
    name = naming.shard_name("train", 7, 1024)
    assert name == "train-00007-of-01024" and naming.parse_shard_name(name) == ("train", 7, 1024)
    assert naming.is_build_shard(name) and not naming.is_build_shard("test-00000-of-00001")
    assert naming.parse_shard_name("train-7-of-1024") is None
    assert naming.shard_of_index(naming.index_name("/x/" + name)) == name
    assert naming.is_temp_name(naming.temp_name("/x/manifest.json").name)


def test_the_index_folder_rule():
    assert naming.index_dir_of("/out", None) == os.path.join("/out", "dali_idx")
    assert naming.index_dir_of("/out", {"options": {"index_dir": "idx"}}) == os.path.join("/out", "idx")
    assert naming.index_dir_of("/out", {"options": {"index_dir": "/elsewhere"}}) == "/elsewhere"
    assert naming.index_dir_of("/out", {"options": {"index_dir": "idx"}}, override="/given") == "/given"


def test_input_errors_name_the_path(tmp_path):
    with pytest.raises(InputError, match="nowhere: folder not found"), input_errors(tmp_path / "nowhere",
                                                                                     missing="folder not found"):
        os.listdir(tmp_path / "nowhere")
    with pytest.raises(InputError, match="is a folder, expected a text file"), input_errors(tmp_path,
                                                                                            expected="a text file"):
        open(tmp_path).read()


# ------------------------------------------------------------------ the manifest schema


def good_manifest():
    return {"format": manifest.FORMAT, "complete": True, "options": {"index_dir": "dali_idx"}, "num_classes": 2,
            "synsets": ["n1", "n2"], "splits": {"train": {"shards": 1, "records": 3, "label_counts": {"1": 3}}},
            "shards": [{"split": "train", "name": "train-00000-of-00001", "records": 3, "bytes": 99,
                        "sha256": "a" * 64, "index_sha256": "b" * 64, "skipped": [], "reencoded": []}]}


@pytest.mark.parametrize("change,message", [
    (lambda m: m.pop("complete"), "complete: missing"),
    (lambda m: m.update(num_classes=-1), "num_classes: -1 is not a whole number"),
    (lambda m: m.update(num_classes=True), "num_classes: true is not a whole number"),
    (lambda m: m.update(synsets=["n1"]), "synsets: 1 entries for num_classes 2"),
    (lambda m: m["splits"]["train"].update(label_counts={"one": 3}), "splits.train.label_counts"),
    (lambda m: m["shards"][0].update(records="3"), "shards[0].records"),
    (lambda m: m["options"].update(index_dir=3), "options.index_dir: not a string"),
])
def test_the_schema_names_the_wrong_field(tmp_path, change, message):
    m = good_manifest()
    assert manifest.schema_problem(m) == ""
    change(m)
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        manifest.read_manifest(tmp_path)


def test_a_manifest_of_another_tool_or_format_is_refused(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "something-else/9"}))
    with pytest.raises(ValueError, match="not an imagenet-build manifest"):
        manifest.read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps(dict(good_manifest(), format=manifest.FORMAT + 1)))
    with pytest.raises(ValueError, match="written by a newer imagenet-build"):
        manifest.read_manifest(tmp_path)
    assert manifest.read_manifest(tmp_path / "nowhere") is None


def test_the_first_format_is_still_read(tmp_path):
    """A build made before the version field became a number resumes and verifies as before."""
    (tmp_path / "manifest.json").write_text(json.dumps(dict(good_manifest(), format="imagenet-build/1")))
    assert manifest.read_manifest(tmp_path)["complete"] is True


# ------------------------------------------------------------------ locks


def test_a_held_lock_refuses_a_second_holder_until_released(tmp_path):
    with FolderLock(tmp_path / "out", "imagenet-build convert"):
        with pytest.raises(BuildError, match=f"in use by another imagenet-build .*pid {os.getpid()}"):
            with FolderLock(tmp_path / "out"):
                pass
    with FolderLock(tmp_path / "out"):  # released: free again
        pass
