"""The bboxes verb (catalog/boxes.py): slim's CSV from the box XML's folder or .tar.gz, the folder holding it read
as the archive, no XML found said in one line, --strict, the CSV on stdout."""

import json
import shutil
import tarfile

import pytest

from conftest import run_cli
from helpers import expect_error

SYNSETS = ["n01440764", "n01443537", "n01484850"]


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
