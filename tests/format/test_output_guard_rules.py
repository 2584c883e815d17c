"""format/output_guard.py's rules in this process, each refusal in its exact line: what each file of a build is
called, which folders are a build's or its index folder's, which file a verb may leave in a build, the inputs,
the folders a verb fills, and an object store's prefix judged by names (the command-line runs of every option are
in test_output_guard.py)."""

import json
import os

import pytest

from imagenet_build.format.folder_contents import MAY_HOLD
from imagenet_build.format.output_guard import PICTURE, check_output_file, check_output_folder
from imagenet_build.infra.errors import InputError

SHARD = "train-00000-of-00004"


def refused(path, option="-o", may_write=(), inputs=()):
    with pytest.raises(InputError) as error:
        check_output_file(path, option, may_write, inputs)
    assert error.value.path == (str(path) if str(path) else "''")  # an empty path shown as one
    return error.value.problem


def over(what, build, here=""):
    return f"-o would write over {what} of the build in {build}, which holds only {MAY_HOLD}{here}; name a file " \
           "outside the build"


def a_trainer_picture(path):
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    from imagenet_build.format.naming import TRAINER_PICTURE_KEY

    legend = PngInfo()
    legend.add_text(TRAINER_PICTURE_KEY, json.dumps({"rows": []}))
    Image.new("RGB", (8, 8)).save(path, pnginfo=legend)


def test_each_file_of_a_build_is_named_for_what_it_is(build):
    (build / "notes.txt").write_text("a stranger")
    (build / "folder").mkdir()
    a_trainer_picture(build / "batches.png")
    real = os.path.realpath(build)
    for name, what in ((SHARD, "a shard"), ("manifest.json", "manifest.json"), ("labels.txt", "labels.txt"),
                       ("verify.json", "verify.json"), ("report.html", "report.html"), ("notes.txt", "a file"),
                       ("new.html", "a new file"), ("batches.png", "a picture of trainer-check")):
        assert refused(build / name) == over(what, real), name
    assert refused(build / "folder") == over("a folder", real)
    assert refused(build / "dali_idx" / f"{SHARD}.idx") == f"-o would write inside the build folder {real} (a DALI " \
                                                           "index); name a file outside the build"


def test_an_index_folder_of_its_own_is_judged_as_one(build, tmp_path):
    """Indexes kept apart from their shards (convert --index-dir): the folder holds indexes and no shard."""
    index = tmp_path / "indexes"
    index.mkdir()
    os.rename(build / "dali_idx" / f"{SHARD}.idx", index / f"{SHARD}.idx")
    real = os.path.realpath(index)
    for name, what in ((f"{SHARD}.idx", "a DALI index"), ("page.html", "a new file")):
        assert refused(index / name, may_write=["page.html"]) == (
            f"-o would write over {what} of the index folder {real}, which holds only {MAY_HOLD}; here it writes "
            "only page.html; name a file outside the build")


def test_a_verb_leaves_only_its_own_file_in_a_build_and_says_which(build):
    real = os.path.realpath(build)
    (build / "holiday.png").write_bytes(b"not trainer-check's")
    check_output_file(build / "report.html", "-o", ["report.html"])
    check_output_file(build / "trainer-check.png", "-o", [PICTURE])
    check_output_file(build / "new.png", "-o", [PICTURE])  # a new name for trainer-check's picture
    assert refused(build / "holiday.png", may_write=[PICTURE]) == over(
        "a file", real, "; here it writes only trainer-check.png")
    assert refused(build / "new.html", may_write=["report.html", PICTURE]) == over(
        "a new file", real, "; here it writes only report.html or trainer-check.png")
    (build / "report.html").mkdir()  # its own name, but a folder: not a file to write
    assert refused(build / "report.html", may_write=["report.html"]) == "is a folder; give a file name"


def test_nothing_is_written_below_a_build_or_its_index_folder(build, tmp_path):
    real = os.path.realpath(build)
    (build / "dali_idx" / "deeper").mkdir()
    for path, folder in ((build / "val" / "x.html", real), (build / "dali_idx" / "deeper" / "x.html",
                                                            f"{real}/dali_idx")):
        assert refused(path) == f"-o would write inside the build folder {folder} (a new file); name a file " \
                                "outside the build"
    check_output_file(tmp_path / "page.html", "-o")  # beside the build: fine
    assert refused("", "--show") == "--show names no file (an empty path): give a file name"


def test_an_input_and_what_is_inside_an_input_folder_are_not_written(tmp_path):
    folder, listed = tmp_path / "xml", tmp_path / "synsets.txt"
    folder.mkdir()
    listed.write_text("n01440764\n")
    inputs = ["s3://bucket/elsewhere", str(listed), str(folder) + "/"]
    assert refused(listed, inputs=inputs) == f"-o would write over the input {listed}; name another file"
    assert refused(folder / "a.csv", inputs=inputs) == f"-o would write inside the input {folder}/; name a file " \
                                                       "outside it"
    check_output_file(tmp_path / "boxes.csv", "-o", inputs=inputs)


def test_an_object_stores_input_is_no_local_path(tmp_path, monkeypatch):
    """An input on an object store is no file here: taken as a local path, s3://bucket/boxes.csv would be the file
    s3:/bucket/boxes.csv below the working folder, and writing that file would be refused as writing over it."""
    monkeypatch.chdir(tmp_path)
    os.makedirs("s3:/bucket/boxes")
    check_output_file("s3:/bucket/boxes.csv", "-o", inputs=["s3://bucket/boxes.csv"])
    check_output_file("s3:/bucket/boxes/x.csv", "-o", inputs=["s3://bucket/boxes"])


def test_a_folder_to_fill_may_not_be_a_build_or_below_one(build, tmp_path):
    real = os.path.realpath(build)
    for folder, where in ((build, "is"), (build / "dali_idx", "is inside"), (build / "val", "is inside")):
        with pytest.raises(InputError) as error:
            check_output_folder(folder, "prepare-val")
        assert error.value.problem == f"prepare-val: {where} the build folder {real}, which holds only {MAY_HOLD}; " \
                                      "name a folder outside any build"
    check_output_folder(tmp_path / "elsewhere", "prepare-val")


def test_a_resized_builds_size_folders_are_builds_of_their_own(build, tmp_path):
    top = tmp_path / "resized"
    top.mkdir()
    os.rename(build, top / "shorter-40")
    size = os.path.realpath(top / "shorter-40")
    check_output_file(top / "shorter-40" / "report.html", "-o", ["report.html"])
    assert refused(top / "notes.html") == over("a new file", os.path.realpath(top))
    for below in ("dali_idx", "val"):
        os.makedirs(top / "shorter-40" / below, exist_ok=True)
        assert refused(top / "shorter-40" / below / "x.html") == f"-o would write inside the build folder {size} " \
                                                                  "(a new file); name a file outside the build"


def test_an_object_stores_prefix_is_judged_by_names(bucket, build):
    import fsspec

    fs, root = fsspec.core.url_to_fs(bucket)
    fs.put(str(build / "manifest.json"), f"{root}/b/manifest.json")
    url = f"{bucket}/b"
    for name, what in ((SHARD, "a shard"), (f"dali_idx/{SHARD}.idx", "a DALI index"),
                       ("manifest.json", "manifest.json"), ("labels.txt", "labels.txt"),
                       ("verify.json", "verify.json"), ("page.html", "a new file")):
        parent = f"{url}/{name}".rsplit("/", 1)[0]
        assert refused(f"{url}/{name}") == over(what, parent), name
    check_output_file(f"{url}/report.html", "-o", ["report.html"])
    check_output_file(f"{bucket}/elsewhere/page.html", "-o")  # no manifest beside it
    assert refused(f"{bucket}/elsewhere/{SHARD}") == over("a shard", f"{bucket}/elsewhere")


def test_a_link_is_judged_by_its_own_place_and_a_bare_name_by_the_folder_it_is_given_in(build, tmp_path, monkeypatch):
    """A link under a build's name is the build's file still (whatever it leads to); a bare name is the working
    folder's."""
    real = os.path.realpath(build)
    outside = tmp_path / "outside.html"
    outside.write_text("elsewhere")
    os.symlink(outside, build / "page.html")
    assert refused(build / "page.html") == over("a file", real)
    monkeypatch.chdir(build)
    assert refused("page.html") == over("a file", real)


def test_a_name_the_verb_may_write_is_still_no_stranger_or_folder(build):
    real = os.path.realpath(build)
    (build / "page.html").write_text("a stranger")
    assert refused(build / "page.html", may_write=["page.html"]) == over("a file", real, "; here it writes only "
                                                                                        "page.html")
    (build / "pages").mkdir()
    assert refused(build / "pages", may_write=["pages"]) == over("a folder", real, "; here it writes only pages")
    a_trainer_picture(build / "batches.png")
    check_output_file(build / "batches.png", "-o", [PICTURE])  # trainer-check's own picture, written again


def test_a_folder_named_like_a_size_folder_inside_a_full_build_is_the_builds(build):
    real = os.path.realpath(build)
    (build / "shorter-40").mkdir()
    assert refused(build / "shorter-40" / "x.html") == f"-o would write inside the build folder {real} (a new file)" \
                                                       "; name a file outside the build"


def test_a_prefix_is_a_builds_by_its_files_names_or_a_manifest_beside_them(bucket):
    import fsspec

    fs, root = fsspec.core.url_to_fs(bucket)
    fs.pipe(f"{root}/other/notes.txt", b"not a build")
    check_output_file(f"{bucket}/other/page.html", "-o")  # a prefix with files, none a manifest
    for name, what in (("manifest.json", "manifest.json"), ("verify.json", "verify.json")):
        assert refused(f"{bucket}/other/{name}") == over(what, f"{bucket}/other")
