"""convert --from Kaggle's imagenet-object-localization-challenge: the zip read in place, or its extracted tree."""

import json
import os
import struct
import zipfile

import pytest

from conftest import layout_args, run_cli, shard_files
from helpers import expect_error
from imagenet_build.sources.kaggle_listing import OLD_TARBALL, SOLUTION, ZIP_NAME
from imagenet_build.sources.kaggle_sample import sample_members
from imagenet_build.sources.zips import DEFLATED, STORED, central_members, end_record, write_zip

FOUND = "found: Kaggle zip: 48 train, 16 validation, 34 annotated"


@pytest.fixture(scope="module")
def kaggle(ilsvrc, tmp_path_factory):
    """The sample written as Kaggle's zip (through `sample --layout kaggle`'s writer)."""
    out = tmp_path_factory.mktemp("kaggle")
    from imagenet_build.sources.kaggle_sample import write_sample

    write_sample(ilsvrc, out)
    return out / ZIP_NAME


def convert(ilsvrc, source, out, *more):
    result = run_cli("convert", "--from", source, "--output-dir", out, *layout_args(ilsvrc), *more, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_sample_zip_is_zip64_with_both_methods_and_zipfile_reads_it_alike(kaggle):
    """Python's own zip reader agrees with the listing (Zip64 fields, offsets, CRCs)."""
    with zipfile.ZipFile(kaggle) as z:
        assert z.testzip() is None
        theirs = [(i.filename, i.header_offset, i.compress_size, i.file_size, i.CRC, i.compress_type)
                  for i in z.infolist()]
    with open(kaggle, "rb") as f:
        size = os.path.getsize(kaggle)
        mine = [m[:6] for m in central_members(f, *end_record(f, size, str(kaggle)), str(kaggle))]
        f.seek(size - 22 - 20)
        assert f.read(4) == b"PK\x06\x07"  # the Zip64 locator
    assert mine == theirs
    images = [m for m in theirs if m[0].endswith(".JPEG")]
    assert {m[5] for m in images} == {STORED, DEFLATED}


def test_zip_gives_the_shards_of_the_ilsvrc_tarballs(ilsvrc, kaggle, reference, tmp_path):
    summary = convert(ilsvrc, kaggle, tmp_path / "out")
    assert summary["found"] == FOUND[len("found: "):]
    assert shard_files(tmp_path / "out") == shard_files(reference)  # boxes from the XML in the zip included
    assert "3 test images ignored: no labels" in summary["notes"]
    assert not any(SOLUTION in note or "synset_mapping" in note for note in summary["notes"]), summary["notes"]


def test_extracted_tree_and_a_rezipped_tree_give_the_same_shards(ilsvrc, kaggle, reference, tmp_path):
    tree = tmp_path / "tree"
    with zipfile.ZipFile(kaggle) as z:
        z.extractall(tree)
    summary = convert(ilsvrc, tree, tmp_path / "out")
    assert summary["found"] == "Kaggle folders: 48 train, 16 validation, 34 annotated"
    assert shard_files(tmp_path / "out") == shard_files(reference)
    # the same tree zipped by another writer (Python's zipfile, all deflated, no Zip64), under a top folder
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(tree.rglob("*")):
            if path.is_file():
                z.write(path, "copy/" + str(path.relative_to(tree)))
    convert(ilsvrc, other, tmp_path / "out2")
    assert shard_files(tmp_path / "out2") == shard_files(reference)


def test_solution_and_mapping_that_disagree_are_noted(ilsvrc, kaggle, reference, tmp_path):
    tree = tmp_path / "tree"
    with zipfile.ZipFile(kaggle) as z:
        z.extractall(tree)
    solution = tree / SOLUTION
    lines = solution.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("ILSVRC2012_val_00000003,"))
    synsets = (ilsvrc / "labels.txt").read_text().split()
    wrong = next(s for s in synsets if s != lines[row].split(",")[1].split()[0])
    lines[row] = f"ILSVRC2012_val_00000003,{wrong} 1 2 3 4"
    solution.write_text("\n".join(lines) + "\n")
    mapping = tree / "LOC_synset_mapping.txt"
    mapping.write_text("".join(reversed(mapping.read_text().splitlines(keepends=True))))
    summary = convert(ilsvrc, tree, tmp_path / "out")
    notes = " | ".join(summary["notes"])
    assert f"{SOLUTION} disagrees with" in notes and "on 1 validation image(s): ILSVRC2012_val_00000003 (" in notes
    assert "LOC_synset_mapping.txt orders the synsets otherwise" in notes
    assert shard_files(tmp_path / "out") == shard_files(reference)  # the labels file decides
    solution.write_text("id;label\n1;2\n")
    expect_error(["convert", "--from", tree, "--output-dir", tmp_path / "o", *layout_args(ilsvrc)], 1,
                 SOLUTION, "ImageId,PredictionString")
    assert not (tmp_path / "o").exists()


def _data_offset(zip_path, member):
    with zipfile.ZipFile(zip_path) as z:
        info = z.getinfo(member)
    with open(zip_path, "rb") as f:
        f.seek(info.header_offset)
        head = f.read(30)
    name_len, extra_len = struct.unpack_from("<2H", head, 26)
    return info.header_offset + 30 + name_len + extra_len, info.compress_size


def only_right_shards(out, reference):
    """Shards a failed run left under final names are those a clean build writes (a rerun resumes from them)."""
    if not out.exists():
        return True
    expected = shard_files(reference)
    left = {k: v for k, v in shard_files(out).items() if k.startswith(("train-", "validation-"))}
    return all(expected.get(k) == v for k, v in left.items())


def test_bad_zips_are_one_line_each(ilsvrc, kaggle, reference, tmp_path):
    data = kaggle.read_bytes()
    cut = tmp_path / ZIP_NAME
    cut.write_bytes(data[: len(data) // 2])
    expect_error(["convert", "--from", cut, "--output-dir", tmp_path / "o1", *layout_args(ilsvrc)], 1,
                 str(cut), "truncated")
    # a deflated image whose bytes were corrupted: named, with what is wrong
    members = sample_members(ilsvrc)
    name = next(n for n, _, method, _ in members if n.endswith(".JPEG") and method == DEFLATED and "/train/" in n)
    start, size = _data_offset(kaggle, name)
    broken = bytearray(data)
    broken[start + size // 2] ^= 0x55
    bad = tmp_path / "bad" / ZIP_NAME
    bad.parent.mkdir()
    bad.write_bytes(bytes(broken))
    line = expect_error(["convert", "--from", bad, "--output-dir", tmp_path / "o2", *layout_args(ilsvrc)], 1,
                        name.rsplit("/", 1)[1], "corrupt")
    assert "CRC-32" in line or "inflate" in line
    # the CRC check itself: the central directory's CRC of that member made wrong
    with zipfile.ZipFile(kaggle) as z:
        crc = z.getinfo(name).CRC
    at = data.index(name.encode(), data.index(b"PK\x01\x02")) - 46 + 16  # the CRC field of its central entry
    assert struct.unpack_from("<L", data, at)[0] == crc
    wrong = bytearray(data)
    struct.pack_into("<L", wrong, at, crc ^ 1)
    bad.write_bytes(bytes(wrong))
    expect_error(["convert", "--from", bad, "--output-dir", tmp_path / "o3", *layout_args(ilsvrc)], 1,
                 name.rsplit("/", 1)[1], "CRC-32")
    # a Zip64 extra field claiming more bytes than its central entry holds
    wrong = bytearray(data)
    pos = data.index(b"PK\x01\x02")
    while True:
        name_len, extra_len = struct.unpack_from("<2H", data, pos + 28)
        extra = pos + 46 + name_len
        if extra_len and struct.unpack_from("<H", data, extra)[0] == 1:
            break
        pos = extra + extra_len + struct.unpack_from("<H", data, pos + 32)[0]
    struct.pack_into("<H", wrong, extra + 2, 8000)
    bad.write_bytes(bytes(wrong))
    expect_error(["convert", "--from", bad, "--output-dir", tmp_path / "o6", *layout_args(ilsvrc)], 1,
                 "broken zip", "Zip64")
    # a member that is not an image
    swapped = [(n, b"<html>not a picture</html>" if n == name else d, m, dd) for n, d, m, dd in members]
    write_zip(bad, swapped)
    expect_error(["convert", "--from", bad, "--output-dir", tmp_path / "o4", *layout_args(ilsvrc)], 1,
                 name.rsplit("/", 1)[1])
    # a partial copy: no validation images
    write_zip(bad, [m for m in members if "/val/" not in m[0]])
    expect_error(["convert", "--from", bad, "--output-dir", tmp_path / "o5", *layout_args(ilsvrc)], 1,
                 str(bad), "no ILSVRC/Data/CLS-LOC/val/")
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o5").exists()  # refused before writing
    assert all(only_right_shards(tmp_path / f"o{k}", reference) for k in range(2, 5))


def test_kaggle_zip_with_the_ilsvrc_train_tar_is_refused(ilsvrc, kaggle, tmp_path):
    expect_error(["convert", "--from", kaggle, "--from", ilsvrc / "ILSVRC2012_img_train.tar",
                  "--output-dir", tmp_path / "o"], 2, "two different copies", str(kaggle))
    assert not (tmp_path / "o").exists()


def test_the_older_download_is_refused_with_what_to_do(ilsvrc, tmp_path):
    old = tmp_path / ZIP_NAME
    write_zip(old, [("LOC_synset_mapping.txt", b"n01440764 tench\n", DEFLATED, False),
                    (OLD_TARBALL, b"\x1f\x8b" + bytes(100), STORED, False)])
    expect_error(["convert", "--from", old, "--output-dir", tmp_path / "o"], 1, OLD_TARBALL, "tar -xzf")


def test_sample_layout_kaggle_from_the_cli(tmp_path):
    result = run_cli("sample", tmp_path / "s", "--layout", "kaggle", "--classes", 2, "--per-class", 3,
                     "--validation-per-class", 1)
    assert result.exit_code == 0, result.output
    with zipfile.ZipFile(tmp_path / "s" / ZIP_NAME) as z:
        assert z.testzip() is None


def test_a_synset_mapping_listing_a_synset_twice_is_a_note_not_a_crash():
    from imagenet_build.catalog.classes import load_catalog
    from imagenet_build.sources.kaggle import mapping_notes

    catalog = load_catalog()
    lines = [f"{s} some names" for s in catalog.synsets[:3]] + [f"{catalog.synsets[2]} again"]
    assert mapping_notes(lines, "LOC_synset_mapping.txt", catalog) == [
        f"LOC_synset_mapping.txt lists {catalog.synsets[2]} more than once: labels follow {catalog.labels_file}"]
