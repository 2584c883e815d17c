"""Nothing the tool writes lands on a build or in an input: every option naming a file or folder to write, against
every file of a build and every way of reaching one (format/output_guard.py), is refused in one line naming the path,
and the build and the inputs are byte for byte what they were."""

import json
import os
import shutil

import pytest

from conftest import tree_digest
from helpers import expect_error

SHARD = "train-00000-of-00004"


@pytest.fixture
def setting(build, tmp_path):
    """A build holding what the checking verbs leave there, a box XML folder and a labels file as inputs."""
    (build / "verify.json").write_text(json.dumps({"ok": True}))
    (build / "trainer-check.json").write_text(json.dumps({"ok": True, "checks": []}))
    xml = tmp_path / "xml" / "n01440764"
    xml.mkdir(parents=True)
    (xml / "n01440764_1.xml").write_text(
        "<annotation><size><width>10</width><height>10</height></size><object><name>n01440764</name><bndbox>"
        "<xmin>1</xmin><ymin>1</ymin><xmax>5</xmax><ymax>5</ymax></bndbox></object></annotation>")
    (tmp_path / "synsets.txt").write_text("n01440764\n")
    return build, tmp_path


# Every option naming a file to write: the command line for a target, and what the verb may write in a build
WRITERS = {
    "report -o": lambda b, t, target: ["report", b, "-o", target],
    "trainer-check --show": lambda b, t, target: ["trainer-check", b, "--framework", "torch", "--show", target],
    "bboxes -o": lambda b, t, target: ["bboxes", t / "xml", "--synsets", t / "synsets.txt", "-o", target],
}


def _link(t, name, to):
    os.symlink(to, t / name)
    return t / name


# Every file of a build, and every way of reaching one: (build, tmp) -> the path given
TARGETS = {
    "a shard": lambda b, t: b / SHARD,
    "an index": lambda b, t: b / "dali_idx" / f"{SHARD}.idx",
    "the manifest": lambda b, t: b / "manifest.json",
    "verify.json": lambda b, t: b / "verify.json",
    "trainer-check.json": lambda b, t: b / "trainer-check.json",
    "a new file in the build": lambda b, t: b / "notes.html",
    "a file in the index folder": lambda b, t: b / "dali_idx" / "page.html",
    "a path that climbs out of the index folder": lambda b, t: b / "dali_idx" / ".." / "manifest.json",
    "a link to a shard": lambda b, t: _link(t, "page.html", b / SHARD),
    "a folder reached through a link": lambda b, t: _link(t, "into-build", b) / SHARD,
}
# What is an input of one writer only: bboxes' XML folder and its synsets file
INPUT_TARGETS = {
    "inside the input folder": lambda b, t: t / "xml" / "n01440764" / "boxes.csv",
    "the input file": lambda b, t: t / "synsets.txt",
}
CASES = [(w, target) for w in WRITERS for target in TARGETS] + \
        [("bboxes -o", target) for target in INPUT_TARGETS]


@pytest.mark.parametrize("writer,target", CASES)
def test_no_option_writes_onto_a_build_or_an_input(setting, writer, target):
    build, tmp = setting
    path = {**TARGETS, **INPUT_TARGETS}[target](build, tmp)
    before, inputs = tree_digest(build), tree_digest(tmp / "xml")
    synsets = (tmp / "synsets.txt").read_bytes()
    line = expect_error(WRITERS[writer](build, tmp, path), 1, str(path))
    assert "would write" in line or "is a folder" in line, line
    assert tree_digest(build) == before and tree_digest(tmp / "xml") == inputs
    assert (tmp / "synsets.txt").read_bytes() == synsets
    assert not [p for p in tmp.rglob(".*.tmp")]


def test_each_verb_writes_its_own_file_in_a_build_folder(setting):
    """The page (report.html) and trainer-check's picture are what a build folder takes; a picture under another
    name is trainer-check's too (verify passes it: format/folder_contents.py)."""
    from imagenet_build.format.output_guard import PICTURE, check_output_file

    build, _ = setting
    check_output_file(build / "report.html", "report -o", may_write=["report.html"])
    check_output_file(build / "trainer-check.png", "--show", may_write=[PICTURE])
    check_output_file(build / "batches.png", "--show", may_write=[PICTURE])
    for name, may_write in (("batches.png", ["report.html"]), ("report.html", [PICTURE])):
        with pytest.raises(Exception, match="would write over"):
            check_output_file(build / name, "-o", may_write=may_write)


def test_a_resized_builds_size_folder_takes_its_page_and_nothing_below_it(resized_build):
    from imagenet_build.format.output_guard import check_output_file
    from imagenet_build.infra.errors import InputError

    size = resized_build / "shorter-40"
    for fine in (resized_build / "report.html", size / "report.html"):
        check_output_file(fine, "report -o", may_write=["report.html"])
    for bad in (size / "train-00000-of-00004", size / "dali_idx" / "x.html", resized_build / "notes.html"):
        with pytest.raises(InputError, match="would write"):
            check_output_file(bad, "report -o", may_write=["report.html"])


@pytest.fixture
def resized_build(tmp_path, build):
    top = tmp_path / "resized"
    top.mkdir()
    shutil.copytree(build, top / "shorter-40")
    return top


# Every option naming a folder to write into
FOLDER_WRITERS = {
    "prepare-val": lambda folder: ["prepare-val", folder],
    "sample OUT": lambda folder: ["sample", folder],
}
FOLDER_TARGETS = {
    "the build folder": lambda b, t: b,
    "its index folder": lambda b, t: b / "dali_idx",
    "a new folder inside the build": lambda b, t: b / "val",
    "the build through a link": lambda b, t: _link(t, "linked-build", b),
}


@pytest.mark.parametrize("writer", list(FOLDER_WRITERS))
@pytest.mark.parametrize("target", list(FOLDER_TARGETS))
def test_no_folder_option_fills_a_build(setting, writer, target):
    build, tmp = setting
    folder = FOLDER_TARGETS[target](build, tmp)
    (build / "ILSVRC2012_val_00000001.JPEG").write_bytes(b"a flat validation image prepare-val would place")
    before = tree_digest(build)
    expect_error(FOLDER_WRITERS[writer](folder), 1, str(folder), "the build folder")
    assert tree_digest(build) == before and not (build / "val").exists()


def test_an_empty_path_is_named_as_such(build):
    expect_error(["trainer-check", build, "--framework", "torch", "--show", ""], 1,
                 "--show names no file (an empty path): give a file name")
    expect_error(["report", build, "-o", ""], 1, "report -o names no file (an empty path)")


# ------------------------------------------------------------------ prepare-val's folders are synsets


@pytest.fixture
def flat_val(sample_dir, tmp_path):
    root = tmp_path / "deep" / "er"
    val = root / "val"
    shutil.copytree(sample_dir / "validation", val)
    return val, sample_dir / "validation_labels.txt"


@pytest.mark.parametrize("label", ["../../etc", "BOGUS", "n0144076", "n01440764/x"])
def test_prepare_val_refuses_a_label_that_is_no_synset_before_placing_anything(flat_val, tmp_path, label):
    val, labels = flat_val
    lines = labels.read_text().splitlines()
    lines[2] = label
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines) + "\n")
    before = tree_digest(tmp_path / "deep")
    expect_error(["prepare-val", val, "--labels", bad], 1, f"{bad}: line 3: {label!r} is not a synset")
    assert tree_digest(tmp_path / "deep") == before and sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["er"]


def test_prepare_val_refuses_a_synset_folder_that_leads_elsewhere(flat_val, tmp_path):
    val, labels = flat_val
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    synset = labels.read_text().split()[0]
    os.symlink(elsewhere, val / synset)
    expect_error(["prepare-val", val, "--labels", labels], 1, f"{val / synset}: is a link, not a folder of {val}")
    assert list(elsewhere.iterdir()) == []
