"""Straight from the ILSVRC2012 archives: bboxes, prepare-val, convert --train-tar/--validation-tar/--bbox-tar."""

import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import run_cli, tree_digest
from helpers import expect_error, tar_of
from imagenet_build.tools.sample import make_sample

SYNSETS = ["n01440764", "n01443537", "n01484850"]


# ------------------------------------------------------------------ bboxes


def annotation(name, width, height, objects, size=True):
    boxes = "".join(
        f"<object><name>{label}</name><bndbox><xmin>{x0}</xmin><ymin>{y0}</ymin>"
        f"<xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object>"
        for label, (x0, y0, x1, y1) in objects
    )
    size_xml = f"<size><width>{width}</width><height>{height}</height></size>" if size else ""
    return f"<annotation><filename>{name}</filename>{size_xml}{boxes}</annotation>"


# (synset folder, stem, xml text) and the CSV lines slim's process_bounding_boxes gives for them,
# worked out by hand from its rules.
XML_CASES = [
    ("n01440764", "n01440764_1", annotation("n01440764_1", 200, 100, [("n01440764", (20, 10, 120, 60))])),
    # float coordinates are truncated to int first (GetInt is int(float(text)))
    ("n01440764", "n01440764_2", annotation("%s", 300, 200, [("n01440764", ("30.9", "20.5", "150.99", "100.2"))])),
    # outside the image: clamped; min and max swapped: reordered; two boxes kept in file order
    ("n01443537", "n01443537_1", annotation("x", 100, 50, [("n01443537", (-10, 60, 50, 25)),
                                                             ("n01443537", (90, 0, 120, 50))])),
    # a box that is empty after clamping is dropped, the other kept
    ("n01443537", "n01443537_2", annotation("x", 100, 100, [("n01443537", (150, 10, 200, 20)),
                                                             ("n01443537", (10, 10, 20, 20))])),
    # the first <name> is a different challenge synset: slim labels every box with it and skips them all
    ("n01443537", "n01443537_3", annotation("x", 100, 100, [("n01484850", (10, 10, 20, 20)),
                                                             ("n01443537", (30, 30, 40, 40))])),
    # a name that is not a synset (ImageNet's dog boxes say 'Scottish_deerhound'): kept
    ("n01484850", "n01484850_1", annotation("x", 10, 10, [("Scottish_deerhound", (1, 1, 5, 5))])),
    # a synset folder not in the challenge list: the whole file is skipped
    ("n09999999", "n09999999_1", annotation("x", 10, 10, [("n09999999", (1, 1, 5, 5))])),
    # broken files: named and skipped
    ("n01484850", "n01484850_2", "<annotation><size><width>10</width>"),
    ("n01484850", "n01484850_3", annotation("x", 10, 10, [("n01484850", (1, 1, 5, 5))], size=False)),
    ("n01484850", "n01484850_4", annotation("x", 0, 10, [("n01484850", (1, 1, 5, 5))])),
]
EXPECTED_LINES = [
    "n01440764_1.JPEG,0.1000,0.1000,0.6000,0.6000",
    "n01440764_2.JPEG,0.1000,0.1000,0.5000,0.5000",
    "n01443537_1.JPEG,0.0000,0.5000,0.5000,1.0000",
    "n01443537_1.JPEG,0.9000,0.0000,1.0000,1.0000",
    "n01443537_2.JPEG,0.1000,0.1000,0.2000,0.2000",
    "n01484850_1.JPEG,0.1000,0.1000,0.5000,0.5000",
]


@pytest.fixture
def xml_sources(tmp_path):
    folder = tmp_path / "bbox"
    for synset, stem, text in XML_CASES:
        (folder / synset).mkdir(parents=True, exist_ok=True)
        (folder / synset / f"{stem}.xml").write_text(text)
    archive = tmp_path / "ILSVRC2012_bbox_train_v2.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for synset, stem, _ in reversed(XML_CASES):  # archive order must not matter
            tar.add(folder / synset / f"{stem}.xml", arcname=f"{synset}/{stem}.xml")
    synsets = tmp_path / "synsets.txt"
    synsets.write_text("\n".join(SYNSETS) + "\n")
    return folder, archive, synsets


def test_bboxes_gives_slims_lines_from_folder_and_tar_gz(xml_sources, tmp_path):
    folder, archive, synsets = xml_sources
    for source in (folder, archive):
        out = tmp_path / f"{source.name}.csv"
        result = run_cli("bboxes", source, "--synsets", synsets, "-o", out, "--json")
        assert result.exit_code == 0, result.output
        assert out.read_text().splitlines() == EXPECTED_LINES
        report = json.loads(result.stdout)
        assert report["counts"] == {"xml_files": 10, "saved_files": 5, "skipped_files": 5, "saved_boxes": 6,
                                    "skipped_boxes": 3, "bad_files": 3}
        assert sorted(p["file"] for p in report["problems"]) == [
            "n01484850/n01484850_2.xml", "n01484850/n01484850_3.xml", "n01484850/n01484850_4.xml"]


def test_bboxes_reads_a_folder_holding_the_archive_as_the_archive(xml_sources, tmp_path):
    _, archive, synsets = xml_sources
    holding = tmp_path / "downloads"
    holding.mkdir()
    shutil.copy(archive, holding / archive.name)
    result = run_cli("bboxes", holding, "--synsets", synsets)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == EXPECTED_LINES


@pytest.mark.parametrize("where", ["empty folder", "images folder", "archive of no XML"])
def test_bboxes_finding_no_xml_is_an_error_saying_what_was_looked_for(tmp_path, sample_dir, where):
    source = {"empty folder": tmp_path / "empty", "images folder": sample_dir / "train",
              "archive of no XML": tmp_path / "boxes.tar.gz"}[where]
    if where == "empty folder":
        source.mkdir()
    if where == "archive of no XML":
        with tarfile.open(source, "w:gz") as tar:
            tar.add(sample_dir / "labels.txt", arcname="labels.txt")
    looked = ("<synset>/*.xml members" if where == "archive of no XML"
              else "<synset>/*.xml files and ILSVRC2012_bbox_train_v2.tar.gz")
    expect_error(["bboxes", source], 1, f"{source}: no bounding-box XML found: looked for {looked} in it")
    expect_error(["convert", "--train-dir", sample_dir / "train", "--labels-file", sample_dir / "labels.txt",
                  "--bbox-tar", source, "--output-dir", tmp_path / "out", "--train-shards", 2, "--layout-threads", 1,
                  "--workers", 1], 1, f"{source}: no bounding-box XML found")
    assert not (tmp_path / "out").exists()


def test_bboxes_strict_fails_on_a_bad_file(xml_sources):
    folder, _, synsets = xml_sources
    result = run_cli("bboxes", folder, "--synsets", synsets, "--strict")
    assert result.exit_code == 1 and "n01484850_2.xml" in result.stderr and "malformed XML" in result.stderr


def test_bboxes_to_stdout_with_counts_on_stderr(xml_sources):
    folder, _, synsets = xml_sources
    result = run_cli("bboxes", folder, "--synsets", synsets)
    assert result.stdout.splitlines() == EXPECTED_LINES
    assert "6 boxes written from 5 images" in result.stderr and "skipped: n01484850/n01484850_3.xml" in result.stderr


# ------------------------------------------------------------------ prepare-val


@pytest.fixture
def flat_val(sample_dir, tmp_path):
    val = tmp_path / "val"
    shutil.copytree(sample_dir / "validation", val)
    return val, sample_dir / "validation_labels.txt"


def test_prepare_val_links_and_is_safe_to_run_twice(flat_val):
    val, labels = flat_val
    synsets = labels.read_text().split()
    first = json.loads(run_cli("prepare-val", val, "--labels", labels, "--json").stdout)
    assert first["placed"] == 16 and first["already_in_place"] == 0
    for number, synset in enumerate(synsets, start=1):
        name = f"ILSVRC2012_val_{number:08d}.JPEG"
        assert os.path.samefile(val / name, val / synset / name)  # hard link, flat original kept
    again = json.loads(run_cli("prepare-val", val, "--labels", labels, "--json").stdout)
    assert again["placed"] == 0 and again["already_in_place"] == 16


def test_prepare_val_dry_run_partial_set_conflicts_and_move(flat_val):
    val, labels = flat_val
    synsets = labels.read_text().split()
    before = tree_digest(val)
    dry = json.loads(run_cli("prepare-val", val, "--labels", labels, "--dry-run", "--json").stdout)
    assert dry["placed"] == 16 and tree_digest(val) == before
    (val / "ILSVRC2012_val_00000002.JPEG").unlink()  # a partial set
    (val / synsets[0]).mkdir(exist_ok=True)
    (val / synsets[0] / "ILSVRC2012_val_00000001.JPEG").write_bytes(b"someone else's file")
    result = run_cli("prepare-val", val, "--labels", labels, "--move")
    assert result.exit_code == 1 and "conflict" in result.stderr
    assert (val / synsets[0] / "ILSVRC2012_val_00000001.JPEG").read_bytes() == b"someone else's file"
    assert (val / "ILSVRC2012_val_00000001.JPEG").exists()  # not moved over the conflict
    assert not (val / "ILSVRC2012_val_00000003.JPEG").exists()  # moved
    assert (val / synsets[2] / "ILSVRC2012_val_00000003.JPEG").exists()
    assert "moved: 14" in result.stdout


def test_prepare_val_with_another_labels_file_is_refused_before_anything_moves(flat_val, tmp_path):
    val, labels = flat_val
    assert run_cli("prepare-val", val, "--labels", labels).exit_code == 0
    synsets = labels.read_text().split()
    other = tmp_path / "other_labels.txt"
    other.write_text("\n".join(synsets[1:] + synsets[:1]) + "\n")  # image 1 (and most others) under another synset
    before = tree_digest(val)
    name = "ILSVRC2012_val_00000001.JPEG"
    expect_error(["prepare-val", val, "--labels", other], 1,
                 f"{val / synsets[0] / name}: in folder {synsets[0]}, but {other} gives {synsets[1]} (",
                 "such image(s)): placed by a run with another labels file")
    expect_error(["prepare-val", val, "--labels", other, "--dry-run"], 1, "placed by a run with another labels file")
    assert tree_digest(val) == before
    assert run_cli("prepare-val", val, "--labels", labels).exit_code == 0  # the first labels file: all in place


# ------------------------------------------------------------------ convert from the archives


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    out = tmp_path_factory.mktemp("archives")
    make_sample(out, classes=4, per_class=12, validation_per_class=4, tarballs=True)
    return out


def common(sample):
    return ["--labels-file", sample / "labels.txt", "--validation-labels-file", sample / "validation_labels.txt",
            "--train-shards", 4, "--validation-shards", 2, "--layout-threads", 2, "--workers", 1]


def shards_and_indexes(out):
    digest = tree_digest(out)
    manifest = json.loads(digest and (Path(out) / "manifest.json").read_text())
    digest.pop("manifest.json")
    manifest.pop("inputs")  # says where the images came from: the only thing allowed to differ
    return digest, manifest


def test_convert_from_archives_is_byte_identical_to_folders(archives, tmp_path):
    folders = run_cli("convert", "--train-dir", archives / "train", "--validation-dir", archives / "validation",
                      "--bounding-box-file", archives / "bboxes.csv", "--output-dir", tmp_path / "folders",
                      *common(archives))
    assert folders.exit_code == 0, folders.output
    tars = run_cli("convert", "--train-tar", archives / "ILSVRC2012_img_train.tar",
                   "--validation-tar", archives / "ILSVRC2012_img_val.tar",
                   "--bbox-tar", archives / "ILSVRC2012_bbox_train_v2.tar.gz",
                   "--output-dir", tmp_path / "tars", *common(archives), "--json")
    assert tars.exit_code == 0, tars.output
    assert json.loads(tars.stdout)["splits"]["train"]["layout"] == "tar"
    assert shards_and_indexes(tmp_path / "tars") == shards_and_indexes(tmp_path / "folders")
    mixed = run_cli("convert", "--train-tar", archives / "ILSVRC2012_img_train.tar",
                    "--validation-dir", archives / "validation", "--bounding-box-file", archives / "bboxes.csv",
                    "--output-dir", tmp_path / "mixed", *common(archives))
    assert mixed.exit_code == 0, mixed.output
    assert shards_and_indexes(tmp_path / "mixed") == shards_and_indexes(tmp_path / "folders")


def test_bbox_tar_given_the_folder_holding_the_archive_reads_the_archive(archives, tmp_path):
    summaries = []
    for given in (archives / "ILSVRC2012_bbox_train_v2.tar.gz", archives):
        out = tmp_path / given.name
        result = run_cli("convert", "--train-dir", archives / "train", "--bbox-tar", given, "--output-dir", out,
                         *common(archives)[:2], "--train-shards", 4, "--layout-threads", 2, "--workers", 1, "--json")
        assert result.exit_code == 0, result.output
        summaries.append(json.loads(result.stdout)["boxes"])
    assert summaries[0] == summaries[1] and summaries[0]["images_with_boxes"] > 0
    assert shards_and_indexes(tmp_path / archives.name) == shards_and_indexes(
        tmp_path / "ILSVRC2012_bbox_train_v2.tar.gz")


def test_convert_from_archives_with_two_workers(archives, tmp_path):
    from conftest import run_process

    result = run_process("convert", "--train-tar", archives / "ILSVRC2012_img_train.tar",
                         "--output-dir", tmp_path / "two", *common(archives)[:2], "--train-shards", 4,
                         "--layout-threads", 2, "--workers", 2)
    assert result.returncode == 0, result.stderr
    one = run_cli("convert", "--train-dir", archives / "train", "--output-dir", tmp_path / "one",
                  *common(archives)[:2], "--train-shards", 4, "--layout-threads", 2, "--workers", 1)
    assert one.exit_code == 0
    assert shards_and_indexes(tmp_path / "two") == shards_and_indexes(tmp_path / "one")


def rewrite_train_tar(path, change):
    """Rebuild a tar-of-tars with change(name, data) -> (name, data) or None for each inner member."""
    members = {}
    with tarfile.open(path) as outer:
        for member in outer:
            members[member.name] = outer.extractfile(member).read()
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as outer:
        for name, data in members.items():
            changed = change(name, data)
            if changed is None:
                continue
            info = tarfile.TarInfo(changed[0])
            info.size = len(changed[1])
            outer.addfile(info, io.BytesIO(changed[1]))


def inner_with(data, member, content):
    """An inner class tar with one member's content replaced."""
    source = tarfile.open(fileobj=io.BytesIO(data))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for m in source:
            body = content if m.name == member else source.extractfile(m).read()
            info = tarfile.TarInfo(m.name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return out.getvalue()


def expect_convert_error(sample, *args, fragments, code=1):
    result = run_cli("convert", "--output-dir", sample.parent / "out-bad", *args, *common(sample))
    assert result.exit_code == code, result.output
    line = result.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in line, line


@pytest.fixture
def archive_copy(archives, tmp_path):
    copy = tmp_path / "archives"
    copy.mkdir()
    for name in ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar", "labels.txt", "validation_labels.txt"):
        shutil.copy(archives / name, copy / name)
    return copy


def test_truncated_archives(archive_copy):
    for name, option in (("ILSVRC2012_img_train.tar", "--train-tar"), ("ILSVRC2012_img_val.tar", "--validation-tar")):
        path = archive_copy / name
        data = path.read_bytes()
        path.write_bytes(data[: len(data) * 2 // 3])
        expect_convert_error(archive_copy, option, path, fragments=[name, "truncated"])
        path.write_bytes(data)


def test_missing_inner_class_tar(archive_copy):
    train = archive_copy / "ILSVRC2012_img_train.tar"
    rewrite_train_tar(train, lambda name, data: None if name == "n01443537.tar" else (name, data))
    expect_convert_error(archive_copy, "--train-tar", train, fragments=["no class archive", "n01443537"])


def test_inner_tar_that_is_not_a_tar(archive_copy):
    train = archive_copy / "ILSVRC2012_img_train.tar"
    rewrite_train_tar(train, lambda name, data: (name, b"garbage" * 100) if name == "n01484850.tar" else (name, data))
    expect_convert_error(archive_copy, "--train-tar", train, fragments=["n01484850.tar", "not a tar archive"])


def test_member_that_is_not_a_jpeg(archive_copy):
    train = archive_copy / "ILSVRC2012_img_train.tar"
    rewrite_train_tar(train, lambda name, data: (name, inner_with(data, "n01440764_7.JPEG", b"not an image"))
                      if name == "n01440764.tar" else (name, data))
    expect_convert_error(archive_copy, "--train-tar", train,
                         fragments=["ILSVRC2012_img_train.tar:n01440764/n01440764_7.JPEG", "not an image"])


def test_swapped_archives(archive_copy):
    expect_convert_error(archive_copy, "--train-tar", archive_copy / "ILSVRC2012_img_val.tar",
                         fragments=["validation archive", "swap"])
    expect_convert_error(archive_copy, "--validation-tar", archive_copy / "ILSVRC2012_img_train.tar",
                         fragments=["train archive", "swap"])


def test_not_an_archive_and_both_sources_for_one_split(archive_copy, sample_dir):
    (archive_copy / "x.tar").write_bytes(b"\x00" * 10 + b"hello")
    expect_convert_error(archive_copy, "--train-tar", archive_copy / "x.tar", fragments=["x.tar"])
    expect_convert_error(archive_copy, "--train-tar", archive_copy / "ILSVRC2012_img_train.tar",
                         "--train-dir", sample_dir / "train", fragments=["not both"], code=2)


# ------------------------------------------------------------------ tar listing


def test_the_fast_tar_listing_agrees_with_tarfiles_and_leaves_it_what_it_cannot_read(tmp_path):
    """list_members parses plain ustar headers itself (~4x faster than tarfile: 25 s of CPU for ImageNet's
    1.28 M images otherwise); for every tar it must give what tarfile gives, errors included."""
    from imagenet_build.infra.errors import InputError
    from imagenet_build.sources.tars import RangeFile, list_members, plain_members

    def listings(data):
        """(the fast listing or None where it gives up, the listing of a local file, tarfile's own)."""
        path = tmp_path / "x.tar"
        path.write_bytes(data)
        outcomes = []
        for reader in ("plain", "file", "tarfile"):
            try:
                if reader == "plain":
                    with open(path, "rb") as f:
                        listed = plain_members(f.fileno(), len(data), "x.tar")
                        outcomes.append(listed and listed[0])
                elif reader == "file":
                    with open(path, "rb") as f:
                        outcomes.append(list_members(f, len(data), "x.tar"))
                else:  # no file descriptor: tarfile's listing
                    outcomes.append(list_members(io.BytesIO(data), len(data), "x.tar"))
            except InputError as e:
                outcomes.append(str(e))
        return outcomes

    jpeg = bytes(range(256)) * 40
    files = [("n01440764_10026.JPEG", jpeg), ("n01440764_10027.JPEG", jpeg[:700]), ("tiny.cls", b"7"),
             ("empty", b"")]
    plain = {
        "gnu": tar_of(files, tarfile.GNU_FORMAT),
        "ustar": tar_of(files, tarfile.USTAR_FORMAT),
        "pax, short names": tar_of(files, tarfile.PAX_FORMAT),
        "folders": tar_of([("train", None), ("train/n01440764", None), ("train/n01440764/a.JPEG", jpeg)],
                        tarfile.GNU_FORMAT),
        "ustar prefix (a 130-character path)": tar_of([("d" * 60 + "/" + "e" * 60 + "/a.JPEG", jpeg)],
                                                    tarfile.USTAR_FORMAT),
    }
    old_folder = bytearray(tar_of([("old/", b"")], tarfile.USTAR_FORMAT))  # a V7 folder: type NUL, a trailing /
    old_folder[156] = 0
    old_folder[148:156] = b"%06o\x00 " % (sum(old_folder[:148]) + sum(old_folder[156:512]) + 8 * 32)
    plain["v7 folder"] = bytes(old_folder)
    (tmp_path / "src").mkdir()
    for name, data in files[:2]:
        (tmp_path / "src" / name).write_bytes(data)
    subprocess.run(["tar", "-cf", str(tmp_path / "gnu.tar"), "-C", str(tmp_path / "src"), "."], check=True)
    plain["GNU tar's own"] = (tmp_path / "gnu.tar").read_bytes()
    for kind, data in plain.items():
        fast, listed, slow = listings(data)
        assert fast == listed == slow and isinstance(slow, list) and slow, kind
    assert [m[0] for m in listings(plain["v7 folder"])[2]] == ["old"]

    others = {  # what the fast listing leaves to tarfile: long names, pax headers, base-256 sizes, bad headers
        "gnu long name": tar_of([("a" * 120 + ".JPEG", jpeg)], tarfile.GNU_FORMAT),
        "pax long name": tar_of([("a" * 120 + ".JPEG", jpeg)], tarfile.PAX_FORMAT),
        "non-ascii name": tar_of([("é.JPEG", jpeg)], tarfile.PAX_FORMAT),
        "a symlink": tar_of([*files[:1], ("link", "n01440764_10026.JPEG")], tarfile.GNU_FORMAT),
        "not a tar": b"\x00" * 10 + b"hello",
        "zeros only": bytes(10240),
        "garbage": b"garbage" * 200,
    }
    for kind, data in others.items():
        fast, listed, slow = listings(data)
        assert fast is None and listed == slow, kind
    assert "not a tar archive" in listings(others["garbage"])[2]

    whole = plain["gnu"]
    end = whole.rindex(b"tiny.cls") + 2 * 512  # the last member's header and data
    cut = {"in an image": whole[:700], "after the last member": whole[:end], "in the end marker": whole[:end + 600]}
    for kind, data in cut.items():
        fast, listed, slow = listings(data)
        assert fast == listed == slow and "truncated" in slow, kind

    # a tar inside a tar (the train archive's class tars), read in place from its offset
    outer = tmp_path / "outer.tar"
    outer.write_bytes(tar_of([("n01440764.tar", whole), ("n01443537.tar", plain["ustar"])], tarfile.GNU_FORMAT))
    with open(outer, "rb") as f:
        inner = list_members(f, outer.stat().st_size, "outer.tar")
        for (name, offset, size, *_), data in zip(inner, (whole, plain["ustar"])):
            assert list_members(RangeFile(f, offset, size), size, name) == listings(data)[2]


# ------------------------------------------------------------------ the bytes read are the member listed


def _damage_header(path, offset, change):
    """The tar header block just before byte `offset` of the file rewritten by change(name, size) -> (name, size),
    with a valid checksum: a tar that disagrees with the listing made before it changed."""
    data = bytearray(path.read_bytes())
    at = offset - 512
    name = data[at:at + 100].split(b"\0", 1)[0].decode()
    new_name, new_size = change(name, int(data[at + 124:at + 135], 8))
    data[at:at + 100] = new_name.encode().ljust(100, b"\0")
    data[at + 124:at + 136] = b"%011o\x00" % new_size
    data[at + 148:at + 156] = b"%06o\x00 " % (sum(data[at:at + 148]) + 8 * 32 + sum(data[at + 156:at + 512]))
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("layout", ["ilsvrc", "wds", "hf"])
@pytest.mark.parametrize("change", ["renamed", "resized"])
def test_every_tar_reader_refuses_a_member_whose_header_changed_since_it_was_listed(tmp_path, layout, change):
    """ILSVRC tarballs, WebDataset shards and a decompressed .tar.gz are read by offset: the header block before
    the data, read with it, must be the one the listing read (read_member), else the bytes are another member's."""
    from imagenet_build.catalog.classes import load_catalog
    from imagenet_build.infra.errors import InputError
    from imagenet_build.infra.workers import Workers
    from imagenet_build.plan import SplitPlan
    from imagenet_build.sources import find_copy, reader_for

    source = tmp_path / "copy"
    make_sample(source, layout=layout, tarballs=True, classes=2, per_class=3, validation_per_class=2)
    catalog = load_catalog(source / "labels.txt")
    copy = find_copy([source])
    copy.work_dir = str(tmp_path / "out")
    with Workers(1) as pool:
        copy.prepare(pool)
        split = copy.scan_train(catalog, "fail", pool)
    spec = SplitPlan(split, catalog, None, 1, 1).spec(0)
    with reader_for(spec) as reader:
        reader.read(0)  # as listed: read
    entry = spec.entries[0]
    if layout == "ilsvrc":
        path = source / "ILSVRC2012_img_train.tar"
    elif layout == "wds":
        path = source / entry.relpath.rsplit("/", 1)[0]
    else:  # the decompressed archive the entry lies in, in the spool
        path = Path(spec.source_root) / sorted(n for n in os.listdir(spec.source_root) if n.endswith(".tar"))[
            entry.offset >> 40]
    offset = entry.offset & ((1 << 40) - 1)
    _damage_header(path, offset, {"renamed": lambda name, size: (name.replace("_", "-", 1), size),
                                  "resized": lambda name, size: (name, size - 1)}[change])
    with reader_for(spec) as reader, pytest.raises(InputError, match="the archive changed since it was listed"):
        reader.read(0)
    copy.close()


def test_a_zip_member_read_is_the_one_the_directory_named(tmp_path):
    """member_bytes reads the local header: a directory entry pointing at another member's local header (its
    offset, sizes and CRC copied), a local header whose sizes disagree, or bytes whose CRC-32 is not the
    directory's (stored or deflated) are each refused naming the member."""
    import struct
    import zipfile

    from imagenet_build.infra.errors import InputError
    from imagenet_build.sources.zips import DEFLATED, STORED, member_bytes, pack_extra, write_zip

    jpeg, other = bytes(range(256)) * 20, bytes(range(255, -1, -1)) * 20
    path = tmp_path / "z.zip"
    write_zip(path, [("a/x.JPEG", jpeg, STORED, False), ("a/y.JPEG", other, STORED, False),
                     ("a/z.JPEG", jpeg, DEFLATED, True)])
    with zipfile.ZipFile(path) as z:
        info = {i.filename: i for i in z.infolist()}
    data = bytearray(path.read_bytes())

    def read(name, as_name=None, **lie):
        i = info[name]
        fields = {**dict(csize=i.compress_size, usize=i.file_size, crc=i.CRC), **lie}
        extra = pack_extra(i.compress_type, fields["usize"], fields["crc"])
        shown = as_name or name
        return member_bytes(io.BytesIO(bytes(data)), i.header_offset, fields["csize"], extra, shown, f"z.zip:{shown}")

    assert read("a/x.JPEG") == jpeg and read("a/z.JPEG") == jpeg
    with pytest.raises(InputError, match=r"z.zip:a/x.JPEG: the local header at byte \d+ is a/y.JPEG's"):
        read("a/y.JPEG", as_name="a/x.JPEG")  # x's entry with y's offset, sizes and CRC
    with pytest.raises(InputError, match=r"its local header says 5120 bytes \(5120 inflated\).*the directory 5121"):
        read("a/x.JPEG", csize=5121, usize=5121)
    with pytest.raises(InputError, match="its local header says .* CRC-32"):
        read("a/x.JPEG", crc=info["a/x.JPEG"].CRC ^ 1)
    with pytest.raises(InputError, match="corrupt: CRC-32 [0-9a-f]+ of its inflated bytes"):
        read("a/z.JPEG", crc=info["a/z.JPEG"].CRC ^ 1)  # a data descriptor's local fields are 0: the CRC decides
    at = info["a/x.JPEG"].header_offset
    data[at + 30 + sum(struct.unpack_from("<2H", data, at + 26)) + 10] ^= 1
    with pytest.raises(InputError, match="z.zip:a/x.JPEG: corrupt: CRC-32 [0-9a-f]+ of its bytes"):
        read("a/x.JPEG")  # stored bytes are CRC-checked too
