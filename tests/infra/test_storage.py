"""infra/storage.py: local paths and object-store URLs, alike."""

import os

from imagenet_build.infra import read_door, storage


def test_paths_and_urls_are_joined_and_split_alike():
    assert storage.join("s3://b/out/", "dali_idx", "x.idx") == "s3://b/out/dali_idx/x.idx"
    assert storage.join("/data/out", "x") == os.path.join("/data/out", "x")
    assert storage.basename("s3://b/out/train-00000-of-00001") == "train-00000-of-00001"
    assert storage.parent("s3://b/out/x") == "s3://b/out" and storage.parent("/a/b/c") == "/a/b"
    assert storage.is_url("gs://b/x") and not storage.is_url("/a/b")


def test_a_missing_folder_lists_empty_and_a_missing_file_hashes_to_none(tmp_path):
    assert storage.listdir(tmp_path / "nowhere") == {}
    assert read_door.sha256(tmp_path / "nowhere") is None
    (tmp_path / "f").write_bytes(b"abc")
    before = storage.stamp(tmp_path / "f")
    os.utime(tmp_path / "f", ns=(1, 2))
    assert storage.stamp(tmp_path / "f") != before  # a rerun sees a touched archive
