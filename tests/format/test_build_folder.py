"""format/build_folder.py: a build opened the one way verify, every reader, trainer-check and report open one; and
which sub-folders of a folder are builds (format/naming.py's builds_below), the same for every verb."""

import json
import shutil

import pytest

from helpers import SHARD, expect_error
from imagenet_build.format.build_folder import BuildFolder
from imagenet_build.format.dali_index import record_entries
from imagenet_build.format.naming import builds_below
from imagenet_build.infra.errors import BuildError


def test_a_sound_build_opens_with_its_manifest_its_index_folder_and_each_splits_records(converted):
    build = BuildFolder.open(converted)
    assert build.path == str(converted) and build.manifest["complete"] and build.manifest_problem == ""
    assert build.index_dir == str(converted / "dali_idx")
    for split in ("train", "validation"):
        opened = build.split(split)
        assert (opened.folder, opened.split, opened.manifest) == (build.path, split, build.manifest)
        assert opened.paths == sorted(str(p) for p in converted.glob(f"{split}-?????-of-?????"))
        assert opened.indexes == [str(converted / "dali_idx" / f"{p.rsplit('/', 1)[1]}.idx") for p in opened.paths]
        assert opened.entries == [record_entries(p) for p in opened.paths]
        assert sum(map(len, opened.entries)) == build.manifest["splits"][split]["records"]
    assert BuildFolder.open(converted, "/elsewhere").index_dir == "/elsewhere"  # the option over the manifest


def test_what_is_no_build_is_one_line(tmp_path, build):
    with pytest.raises(BuildError, match=f"^{tmp_path / 'nothing'}: not a folder$"):
        BuildFolder.open(tmp_path / "nothing")
    with pytest.raises(BuildError, match=r"holds no train shards \(train-NNNNN-of-NNNNN\)$"):
        BuildFolder.open(tmp_path).split("train")
    (build / "manifest.json").write_text("{}")
    message = f"{build / 'manifest.json'}: not an imagenet-build manifest"
    with pytest.raises(BuildError, match=f"^{message}"):
        BuildFolder.open(build)
    judged = BuildFolder.open(build, judging=True)  # verify's: the manifest's problem is a finding
    assert judged.manifest is None and judged.manifest_problem.startswith(message)
    assert judged.path == str(build) and judged.index_dir == str(build / "dali_idx")
    assert BuildFolder.open(build, "/elsewhere", judging=True).index_dir == "/elsewhere"


def test_a_split_opens_whole_with_every_index_covering_its_shard(build):
    index = build / "dali_idx" / f"{SHARD}.idx"
    index.write_text("".join(index.read_text().splitlines(keepends=True)[:-1]))  # its last record left out
    opened = BuildFolder.open(build)
    with pytest.raises(BuildError) as refused:
        opened.split("train")
    assert str(refused.value).startswith(f"{index}: line ") and "\n" not in str(refused.value)
    shards = opened.indexed("train")  # report's: what is wrong named, the rest read
    assert [(s.path.rsplit("/", 1)[1], s.entries is None) for s in shards] == [
        (f"train-0000{k}-of-00004", f"train-0000{k}-of-00004" == SHARD) for k in range(4)]
    assert next(s.problem for s in shards if s.entries is None) == str(refused.value)
    assert [s.index_file for s in shards] == [str(build / "dali_idx" / f"{s.path.rsplit('/', 1)[1]}.idx")
                                              for s in shards]
    assert [s.problem for s in shards if s.entries is not None] == ["", "", ""]
    (build / "train-00002-of-00004").unlink()
    with pytest.raises(BuildError, match=f"^{build / 'train-00002-of-00004'}: shard missing: the train split is "
                                         "not whole; run imagenet-build verify"):
        opened.split_paths("train")
    (build / "train-00003-of-00004").unlink()
    with pytest.raises(BuildError, match=r"train-00002-of-00004: shard missing \(and 1 more\): the train split"):
        opened.split_paths("train")


def test_a_build_in_a_bucket_opens_as_the_local_one(converted, bucket):
    """An object store's prefix is a folder by its URL (no local folder is looked for), a trailing '/' dropped."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(bucket)
    fs.put(str(converted), f"{root}/build-X", recursive=True)  # ends in a letter rstrip must keep
    url = f"{bucket}/build-X"
    build, local = BuildFolder.open(url + "/"), BuildFolder.open(converted)
    assert (build.path, build.index_dir, build.manifest) == (url, f"{url}/dali_idx", local.manifest)
    opened = build.split("validation")
    assert opened.paths == [f"{url}/{p.rsplit('/', 1)[1]}" for p in local.split("validation").paths]
    assert opened.entries == local.split("validation").entries


@pytest.fixture
def top(converted, tmp_path):
    """A folder holding two builds below it: one in a resized build's size folder, one in a folder of another
    name."""
    top = tmp_path / "top"
    shutil.copytree(converted, top / "shorter-32")
    shutil.copytree(converted, top / "mine")
    return top


def test_every_verb_takes_the_same_sub_folders_for_builds(top):
    """The size folders of a resized build's top folder are its builds, as convert makes them; another folder
    holding a manifest is no build of this folder's. verify, trainer-check, tfds and report say so alike (verify
    named every sub-folder holding a manifest while report showed only the size folders)."""
    from imagenet_build.report.report_run import builds_in

    assert builds_below(str(top)) == ["shorter-32"]
    for verb in ("verify", "tfds"):
        line = expect_error([verb, top], 1, "its sub-folders shorter-32/ hold builds: name one of them")
        assert "mine/" not in line
    with pytest.raises(BuildError, match="its sub-folders shorter-32/ hold builds: name one of them"):
        BuildFolder.open(top).split("train")  # every reader, trainer-check's too
    assert [build.path for build, _ in builds_in(str(top))] == [str(top / "shorter-32")]
    (top / "shorter-32" / "manifest.json").unlink()
    with pytest.raises(BuildError, match="holds no build"):
        builds_in(str(top))


def test_a_folder_of_builds_is_told_by_its_size_folders_alone(top):
    (top / "mine" / "manifest.json").write_text(json.dumps({"format": 2}))  # unsound: never read, no build here
    assert builds_below(str(top)) == ["shorter-32"]
