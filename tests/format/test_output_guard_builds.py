"""format/output_guard.py's rules for the verbs that write a build's own kind of files, in this process, each refusal
in its exact line: where `index` may write an index (its build's own index folder, or a folder of indexes outside
every build), where `convert` may write a build (never inside another, nor its indexes there), an object store's
prefixes by their manifests, and a page or a folder to fill refused below a build's prefix or as a URL."""

import json
import os
import shutil

import pytest

from imagenet_build.format.folder_contents import MAY_HOLD
from imagenet_build.format.output_guard import (
    check_build_folders,
    check_index_folder,
    check_output_file,
    check_output_folder,
)
from imagenet_build.infra.errors import InputError

SHARD = "train-00000-of-00004"
OUTSIDE = f", which holds only {MAY_HOLD}; name a folder outside any build"


def refused(call, *args):
    with pytest.raises(InputError) as error:
        call(*args)
    return error.value.path, error.value.problem


@pytest.fixture
def two(converted, tmp_path):
    shutil.copytree(converted, tmp_path / "build")
    shutil.copytree(converted, tmp_path / "other")
    return tmp_path / "build", tmp_path / "other"


def test_a_builds_own_indexes_go_into_its_own_index_folder(two, tmp_path):
    build, other = two
    check_index_folder(str(build / "dali_idx"), [str(build / SHARD), str(build / "validation-00000-of-00002")])
    manifest = json.loads((build / "manifest.json").read_text())
    manifest["options"]["index_dir"] = "idx"
    (build / "manifest.json").write_text(json.dumps(manifest))
    check_index_folder(str(build / "idx"), [str(build / SHARD)])  # where its manifest keeps them
    assert refused(check_index_folder, str(build / "dali_idx"), [str(build / SHARD)]) == (
        str(build / "dali_idx"), f"--index-dir would write the index of {build / SHARD} into the build folder "
                                 f"{os.path.realpath(build)}{OUTSIDE}")
    (other / "manifest.json").write_text("not JSON")  # verify says why; its indexes go where they go by default
    check_index_folder(str(other / "dali_idx"), [str(other / SHARD)])
    loose = tmp_path / "loose"
    loose.mkdir()
    shutil.copy(other / SHARD, loose / SHARD)  # a folder of shards with no manifest: no build, dali_idx its own
    check_index_folder(str(loose / "dali_idx"), [str(loose / SHARD)])


@pytest.mark.parametrize("where", ["its index folder", "the build folder", "below its index folder"])
def test_another_files_index_never_goes_into_a_build(two, where):
    build, other = two
    folder = {"its index folder": build / "dali_idx", "the build folder": build,
              "below its index folder": build / "dali_idx" / "sub"}[where]
    shards = [str(other / SHARD)]
    if where == "its index folder":
        shards.insert(0, str(build / SHARD))  # its own: the other one is named
    assert refused(check_index_folder, str(folder), shards) == (
        str(folder), f"--index-dir would write the index of {other / SHARD} into the build folder "
                     f"{os.path.realpath(build)}{OUTSIDE}")


def test_a_folder_of_indexes_outside_every_build_takes_any_index_and_nothing_else_does(two, tmp_path):
    _, other = two
    folder = tmp_path / "indexes"
    check_index_folder(str(folder), [str(other / SHARD)])  # not there yet
    folder.mkdir()
    for name in ("a.tfrecord.idx", "train-00001-of-00004.idx", ".imagenet-build.lock", ".a.idx.123.tmp"):
        (folder / name).write_text("")
    check_index_folder(str(folder), [str(other / SHARD)])
    (folder / "n01440764_1.JPEG").write_text("")
    assert refused(check_index_folder, str(folder), [str(other / SHARD)]) == (
        str(folder), "--index-dir holds files that are not DALI indexes (n01440764_1.JPEG); choose an empty or new "
                     "--index-dir")
    for name in ("b.JPEG", "c.JPEG", "d.txt"):
        (folder / name).write_text("")
    assert refused(check_index_folder, str(folder), [str(other / SHARD)])[1] == (
        "--index-dir holds files that are not DALI indexes (b.JPEG, c.JPEG, d.txt ...); choose an empty or new "
        "--index-dir")


def test_a_build_is_written_only_outside_every_other(two, tmp_path):
    build, _ = two
    real = os.path.realpath(build)
    check_build_folders(str(build), str(build / "dali_idx"), False)  # a rerun: its own
    check_build_folders(str(tmp_path / "new"), str(tmp_path / "new" / "dali_idx"), False)
    check_build_folders(str(tmp_path / "new"), str(tmp_path / "indexes"), True)
    check_build_folders(str(build), str(build / "idx" / "sub"), True)  # inside its own folder: its own
    assert refused(check_build_folders, str(build / "sub"), str(build / "sub" / "dali_idx"), False) == (
        str(build / "sub"), f"--output-dir: is inside the build folder {real}{OUTSIDE}")
    assert refused(check_build_folders, str(tmp_path / "new"), str(build), True) == (
        str(build), f"--index-dir: is the build folder {real}{OUTSIDE}")
    assert refused(check_build_folders, str(tmp_path / "new"), str(build / "dali_idx" / "sub"), True) == (
        str(build / "dali_idx" / "sub"), f"--index-dir: is inside the build folder {real}{OUTSIDE}")
    check_build_folders(str(tmp_path / "new"), str(build / "dali_idx"), False)  # not given: the output's own


def test_an_object_stores_builds_are_judged_by_their_manifests(two, bucket):
    import fsspec

    build, other = two
    fs, root = fsspec.core.url_to_fs(bucket)
    fs.put(str(build), f"{root}/complete", recursive=True)
    complete = f"{bucket}/complete"
    check_index_folder(f"{complete}/dali_idx", [f"{complete}/{SHARD}"])
    assert refused(check_index_folder, f"{complete}/dali_idx", [str(other / SHARD)]) == (
        f"{complete}/dali_idx", f"--index-dir would write the index of {other / SHARD} into the build folder "
                                f"{complete}{OUTSIDE}")
    check_index_folder(f"{bucket}/indexes", [str(other / SHARD)])
    check_build_folders(f"{bucket}/new", f"{bucket}/new/dali_idx", False)
    check_build_folders(f"{bucket}/new", f"{bucket}/indexes", True)
    assert refused(check_build_folders, f"{complete}/sub", f"{complete}/sub/dali_idx", False) == (
        f"{complete}/sub", f"--output-dir: is inside the build folder {complete}{OUTSIDE}")
    assert refused(check_build_folders, f"{bucket}/new/", f"{complete}/", True) == (
        f"{complete}/", f"--index-dir: is the build folder {complete}{OUTSIDE}")
    assert refused(check_output_file, f"{complete}/dali_idx/x.html", "-o") == (
        f"{complete}/dali_idx/x.html", f"-o would write inside the build folder {complete} (a new file); name a file "
                                       "outside the build")
    check_output_file(f"{bucket}/pages/x.html", "-o")


def test_a_folder_to_fill_is_a_local_folder(tmp_path):
    assert refused(check_output_folder, "s3://bucket/sample", "sample OUT") == (
        "s3://bucket/sample", "sample OUT: an object store's URL; name a local folder")
    os.mkfifo(tmp_path / "fifo")
    assert refused(check_output_folder, str(tmp_path / "fifo"), "sample OUT") == (
        str(tmp_path / "fifo"), "is a FIFO, not a folder; name a folder")
