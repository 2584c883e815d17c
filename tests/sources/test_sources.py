"""convert --from: any copy of ImageNet, told apart by its kind, gives the shards of the ILSVRC tarballs; --subset."""

import io
import json
import shutil

import pytest

from conftest import layout_args, run_cli, shard_files
from helpers import expect_error
from imagenet_build.format.record_schema import decode_example
from imagenet_build.format.tfrecord import read_records
from imagenet_build.sources.copies import sample_kinds


@pytest.mark.parametrize("given", [
    ["."],
    ["ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar", "ILSVRC2012_bbox_train_v2.tar.gz"],
], ids=["folder-of-archives", "the-archives"])
def test_from_the_ilsvrc_archives_gives_their_shards(ilsvrc, reference, tmp_path, given):
    out = tmp_path / "out"
    result = run_cli("convert", *[arg for p in given for arg in ("--from", ilsvrc / p)], "--output-dir", out,
                     *layout_args(ilsvrc), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["found"].startswith("ILSVRC2012 (image-net.org) tarballs: 48 train, 16 validation, ")
    assert shard_files(out) == shard_files(reference)


def test_from_the_extracted_folders_gives_the_same_records(ilsvrc, reference, tmp_path):
    tree = tmp_path / "tree"
    for name in ("train", "validation", "labels.txt", "validation_labels.txt"):
        (shutil.copytree if (ilsvrc / name).is_dir() else shutil.copy)(ilsvrc / name, tree / name)
    out = tmp_path / "out"
    result = run_cli("convert", "--from", tree, "--bounding-box-file", ilsvrc / "bboxes.csv", "--output-dir", out,
                     *layout_args(ilsvrc))
    assert result.exit_code == 0, result.output
    assert "found: ILSVRC2012 (image-net.org) folders: 48 train, 16 validation" in result.stdout
    assert shard_files(out) == shard_files(reference)


def test_from_refuses_what_it_does_not_know_and_mixed_options(ilsvrc, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    expect_error(["convert", "--from", tmp_path / "notes.txt", "--output-dir", tmp_path / "o"], 1,
                                "notes.txt", "none of the copies of ImageNet")
    expect_error(["convert", "--from", tmp_path / "nowhere", "--output-dir", tmp_path / "o"], 1,
                                "nowhere", "not found")
    (tmp_path / "empty").mkdir()
    expect_error(["convert", "--from", tmp_path / "empty", "--output-dir", tmp_path / "o"], 1,
                 f"{tmp_path / 'empty'}: an empty folder: --from takes a copy of ImageNet")
    expect_error(["convert", "--from", ilsvrc, "--train-dir", ilsvrc / "train",
                                 "--output-dir", tmp_path / "o"], 2, "--from", "not both")
    for archive, folder in (("ILSVRC2012_img_train.tar", "train"), ("ILSVRC2012_img_val.tar", "validation")):
        expect_error(["convert", "--from", ilsvrc / archive, "--from", ilsvrc / folder, "--output-dir",
                      tmp_path / "o"], 2, "split twice", archive, folder)  # not one of them silently dropped
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("source", ["tarballs", "folders"])
def test_subset_keeps_the_listed_images_with_their_labels(ilsvrc, reference, tmp_path, source):
    names = sorted(p.name for p in (ilsvrc / "train").glob("*/*.JPEG"))[::3]
    listing = tmp_path / "subset.txt"
    listing.write_text("\ufeff" + "\n".join(names) + "\n")
    out = tmp_path / "out"
    given = {"tarballs": ["--from", ilsvrc],
             "folders": ["--train-dir", ilsvrc / "train", "--validation-dir", ilsvrc / "validation",
                         "--bounding-box-file", ilsvrc / "bboxes.csv"]}[source]
    result = run_cli("convert", *given, "--subset", listing, "--output-dir", out, *layout_args(ilsvrc),
                     "--train-shards", 2, "--json")
    assert result.exit_code == 0, result.output
    if source == "folders":  # the same images, the same bytes, whichever way they are read
        tarballs = run_cli("convert", "--from", ilsvrc, "--subset", listing, "--output-dir", tmp_path / "tarballs",
                           *layout_args(ilsvrc), "--train-shards", 2)
        assert tarballs.exit_code == 0 and shard_files(out) == shard_files(tmp_path / "tarballs"), tarballs.output
    summary = json.loads(result.stdout)
    assert summary["splits"]["train"]["records"] == len(names) and summary["splits"]["validation"]["records"] == 16
    labels = {}
    for shard in sorted(out.glob("train-*")):
        data = shard.read_bytes()
        for _, payload, _ in read_records(io.BytesIO(data), len(data)):
            record = decode_example(payload)
            labels[record["image/filename"][0].decode()] = record["image/class/label"][0]
    synsets = (ilsvrc / "labels.txt").read_text().split()
    assert set(labels) == set(names)
    assert all(labels[n] == synsets.index(n.split("_")[0]) + 1 for n in names)  # 1000-class values kept
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["options"]["subset"].startswith("subset.txt sha256:")


def test_subset_naming_an_image_the_source_lacks_is_an_error(ilsvrc, tmp_path):
    listing = tmp_path / "subset.txt"
    listing.write_text("n01440764_1.JPEG\nn09999999_7.JPEG\n")
    result = run_cli("convert", "--from", ilsvrc, "--subset", listing, "--output-dir", tmp_path / "o",
                     *layout_args(ilsvrc), "--train-shards", 1, "--layout-threads", 1)
    assert result.exit_code == 1 and "n09999999_7.JPEG" in result.stderr
    skipped = run_cli("convert", "--from", ilsvrc, "--subset", listing, "--output-dir", tmp_path / "o",
                      *layout_args(ilsvrc), "--train-shards", 1, "--layout-threads", 1, "--on-error", "skip", "--json")
    assert skipped.exit_code == 0, skipped.output
    assert {"file": "n09999999_7.JPEG", "reason": "listed in --subset " + str(listing) + ", not in the source",
            "split": "train"} in json.loads(skipped.stdout)["skipped"]


def test_a_misspelt_shipped_subset_is_a_usage_error_naming_the_lists(ilsvrc, tmp_path):
    expect_error(["convert", "--from", ilsvrc, "--subset", "imagenet-5pct", "--output-dir", tmp_path / "o"], 2,
                 "imagenet-5pct", "imagenet-10pct, imagenet-1pct")
    expect_error(["convert", "--from", ilsvrc, "--subset", tmp_path / "list.txt", "--output-dir", tmp_path / "o"], 1,
                 "list.txt", "not found")  # a path: the file is missing


def test_the_shipped_subsets_are_simclrs_lists():
    from imagenet_build.catalog.classes import SUBSET_TRAIN_IMAGES, read_subset

    for name, count in SUBSET_TRAIN_IMAGES.items():
        label, names = read_subset(name)
        assert label == name and len(names) == count
        assert all(n.endswith(".JPEG") and n.startswith("n") for n in names)


def test_expect_imagenet_knows_the_subset_counts():
    from imagenet_build.verify.label_checks import expected_totals

    assert expected_totals(None) == ({"train": 1281167, "validation": 50000}, "ILSVRC2012")
    manifest = {"options": {"subset": "imagenet-10pct"}, "inputs": {}}
    assert expected_totals(manifest)[0] == {"train": 128116, "validation": 50000}


@pytest.mark.parametrize("kind", [*sample_kinds(), "folders"])
def test_every_reader_announces_each_image_to_the_kernel_before_reading_it(ilsvrc, tmp_path, monkeypatch, kind):
    """With a cold cache (ImageNet's 140 GB, or a spool of it, on disk) the disk must have several reads in
    flight: every reader tells the kernel (POSIX_FADV_WILLNEED) of each image before it reads it. Every copy
    registered, as `sample --layout` writes it (ilsvrc: its archives), and the ILSVRC folders."""
    import os

    from imagenet_build.sources import find_copy
    from imagenet_build.sources.spool import SpooledCopy
    from imagenet_build.tools.sample_dataset import make_sample

    source = tmp_path / kind / "copy"
    if kind == "folders":  # the extracted folders alone (beside the archives, the archives are read)
        source.mkdir(parents=True)
        for name in ("train", "validation"):
            (source / name).symlink_to(ilsvrc / name)
    else:
        make_sample(source, kind=kind, tarballs=kind == "ilsvrc", classes=4, per_class=12,
                    validation_per_class=4)
    copy = find_copy([source])
    assert (copy.description == "ILSVRC2012 (image-net.org) folders") == (kind == "folders")
    announced = []
    fadvise = os.posix_fadvise

    def recorded(fd, offset, length, advice):
        if advice == os.POSIX_FADV_WILLNEED:
            announced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return fadvise(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", recorded)
    out = tmp_path / "out"
    boxes = [] if copy.carries_boxes else ["--bounding-box-file", ilsvrc / "bboxes.csv"]
    labels = ilsvrc if kind == "folders" else source  # the labels files each kind's sample is written with
    result = run_cli("convert", "--from", source, "--output-dir", out, *layout_args(labels), *boxes, "--json")
    assert result.exit_code == 0, result.output
    images = sum(split["images"] for split in json.loads(result.stdout)["splits"].values())
    assert images and len(announced) >= images
    if isinstance(copy, SpooledCopy):  # read from the decompressed spool, not the archives
        assert all(".imagenet-build-spool-" in path for path in announced)


def test_a_piece_given_twice_is_one_grammatical_line(tmp_path):
    from imagenet_build.tools.sample_dataset import make_sample

    for name in ("a", "b"):
        make_sample(tmp_path / name, kind="hf", classes=2, per_class=3, validation_per_class=2)
    expect_error(["convert", "--from", tmp_path / "a" / "data", "--from", tmp_path / "b" / "data" /
                  "test_images.tar.gz", "--output-dir", tmp_path / "o"], 2,
                 "--from was given two paths for one piece of the copy (test): ", "give each piece once")


def test_a_folder_of_archives_and_extracted_folders_says_which_it_read(ilsvrc, reference, tmp_path):
    """The sample with --tarballs holds both: the archives are read, and the folders named as not read."""
    out = tmp_path / "out"
    result = run_cli("convert", "--from", ilsvrc, "--output-dir", out, *layout_args(ilsvrc), "--json")
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    assert f"{ilsvrc / 'train'}, {ilsvrc / 'validation'} not read: the ILSVRC2012 archives beside them are; give " \
           "--from the folders themselves to convert them instead" in notes, notes
    assert shard_files(out) == shard_files(reference)


def test_what_image_net_ships_beside_the_archives_is_named_left_out_with_why(ilsvrc, reference, tmp_path):
    """The test archive (either name), the extracted test/ folder and the devkit: a note names each, and why."""
    root = tmp_path / "download"
    root.mkdir()
    for name in ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar", "ILSVRC2012_bbox_train_v2.tar.gz"):
        (root / name).symlink_to(ilsvrc / name)
    for name in ("ILSVRC2012_img_test_v10102019.tar", "ILSVRC2012_devkit_t12.tar.gz", "ILSVRC2012_devkit_t3.tar.gz"):
        (root / name).write_bytes(b"not read")
    (root / "test").mkdir()
    result = run_cli("convert", "--from", root, "--output-dir", tmp_path / "out", *layout_args(ilsvrc), "--json")
    assert result.exit_code == 0, result.output
    devkit = "the development kit: the synsets and validation labels it holds are shipped with imagenet-build"
    assert (f"left out: {root / 'ILSVRC2012_devkit_t12.tar.gz'} ({devkit}); {root / 'ILSVRC2012_devkit_t3.tar.gz'} "
            f"({devkit}); {root / 'ILSVRC2012_img_test_v10102019.tar'} (the test images have no labels); "
            f"{root / 'test'} (the test images have no labels)") in json.loads(result.stdout)["notes"]
    assert shard_files(tmp_path / "out") == shard_files(reference)


@pytest.mark.parametrize("val", ["train-style names", "empty"])
def test_a_root_whose_val_folder_is_no_split_is_one_line_not_a_build_without_it(ilsvrc, tmp_path, val):
    """A root of train/ and val/ (Kaggle's ILSVRC/Data/CLS-LOC, say) whose val/ holds neither validation images
    nor class folders: refused naming val/, not converted to a train-only build; its test/ noted left out."""
    root = tmp_path / "CLS-LOC"
    shutil.copytree(ilsvrc / "train", root / "train")
    (root / "val").mkdir()
    if val != "empty":
        for image in sorted((ilsvrc / "train").glob("*/*.JPEG"))[:3]:
            shutil.copy(image, root / "val")
    expect_error(["convert", "--from", root, "--output-dir", tmp_path / "o", *layout_args(ilsvrc)], 1,
                 f"{root / 'val'}: holds neither ILSVRC2012_val_*.JPEG images nor <synset>/ class folders",
                 "(it is empty)" if val == "empty" else "such as n01440764_", "give --from the other split's folder")
    shutil.copytree(ilsvrc / "validation", root / "validation")  # the split, given by another folder: noted
    (root / "test").mkdir()
    result = run_cli("convert", "--from", root, "--output-dir", tmp_path / "o", *layout_args(ilsvrc), "--json")
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    assert f"left out: {root / 'test'} (the test images have no labels)" in notes
    assert f"{root / 'val'} not read: it holds neither ILSVRC2012_val_*.JPEG images nor <synset>/ class folders" \
           in notes[0] and notes[0].endswith(f"; the validation split is {root / 'validation'}"), notes




