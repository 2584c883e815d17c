"""Bounding boxes: ImageNet's XML -> slim's CSV lines, by slim's rules (process_bounding_boxes.py), one test each.

Each rule is checked through boxes_to_csv_lines, the one path `bboxes`, --bbox-tar and the copies
carrying XML (the bbox archive, Kaggle's tree and zip) go through: coordinates truncated to whole
pixels and divided by the image's size, corners ordered, clamped to the image, boxes with no area
dropped, boxes of another synset of the labels file skipped, four decimals, lines sorted.
"""

import pytest

from imagenet_build.catalog.boxes import boxes_to_csv_lines, parse_box_lines, unpack_boxes, xml_boxes
from imagenet_build.infra.errors import InputError

SYNSETS = ("n01440764", "n01443537")


def annotation(width, height, boxes, names=None, synset=SYNSETS[0]):
    """A Pascal-VOC annotation as ImageNet's are: <size>, then one <object> per box (xmin, ymin, xmax, ymax), each
    named `synset` unless `names` says otherwise."""
    names = names or [synset] * len(boxes)
    objects = "".join(
        f"<object><name>{name}</name><bndbox><xmin>{x0}</xmin><ymin>{y0}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax>"
        "</bndbox></object>" for name, (x0, y0, x1, y1) in zip(names, boxes))
    return (f"<annotation><size><width>{width}</width><height>{height}</height><depth>3</depth></size>{objects}"
            "</annotation>").encode()


def csv_lines(*files, synsets=SYNSETS):
    """slim's CSV lines of [(synset folder, stem, XML bytes)], and the counts."""
    lines, counts, problems = boxes_to_csv_lines("annotations", synsets, files=files)
    assert problems == []
    return lines, counts


def test_coordinates_are_truncated_to_pixels_then_divided_by_the_image_size():
    lines, _ = csv_lines((SYNSETS[0], "n01440764_1", annotation(100, 200, [("10.9", "20.5", "30", "150")])))
    assert lines == ["n01440764_1.JPEG,0.1000,0.1000,0.3000,0.7500"]  # x by the width, y by the height


def test_corners_given_the_wrong_way_round_are_put_in_order():
    lines, _ = csv_lines((SYNSETS[0], "n01440764_1", annotation(100, 200, [(30, 150, 10, 20)])))
    assert lines == ["n01440764_1.JPEG,0.1000,0.1000,0.3000,0.7500"]


def test_a_box_reaching_past_the_image_is_clamped_to_it():
    lines, _ = csv_lines((SYNSETS[0], "n01440764_1", annotation(100, 200, [(-5, -7, 120, 250)])))
    assert lines == ["n01440764_1.JPEG,0.0000,0.0000,1.0000,1.0000"]


def test_a_box_with_no_area_is_dropped_and_counted():
    boxes = [(10, 10, 10, 50),  # no width
             (10, 30, 50, 30),  # no height
             (120, 10, 150, 50),  # wholly right of the image: no width once clamped
             (10, 10, 50, 50)]
    lines, counts = csv_lines((SYNSETS[0], "n01440764_1", annotation(100, 100, boxes)))
    assert lines == ["n01440764_1.JPEG,0.1000,0.1000,0.5000,0.5000"]
    assert (counts["saved_boxes"], counts["skipped_boxes"], counts["saved_files"]) == (1, 3, 1)
    _, counts = csv_lines((SYNSETS[0], "n01440764_2", annotation(100, 100, boxes[:3])))
    assert (counts["saved_files"], counts["skipped_files"]) == (0, 1)  # a file left with no box is no saved file


def test_boxes_of_another_synset_of_the_labels_file_are_skipped():
    """As slim: every box of a file carries the first <name>'s label; a file in one synset's folder labelled
    with another synset of the labels file gives no box, one labelled with a synset outside it keeps them."""
    other = annotation(100, 100, [(10, 10, 50, 50), (20, 20, 60, 60)], names=[SYNSETS[1], SYNSETS[0]])
    outside = annotation(100, 100, [(10, 10, 50, 50)], names=["n09999999"])
    lines, counts = csv_lines((SYNSETS[0], "n01440764_1", other), (SYNSETS[0], "n01440764_2", outside))
    assert lines == ["n01440764_2.JPEG,0.1000,0.1000,0.5000,0.5000"]
    assert counts["skipped_boxes"] == 2
    assert [box[0] for box in xml_boxes(other)] == [SYNSETS[1], SYNSETS[1]]  # the first <name> for both


def test_folders_of_synsets_outside_the_labels_file_are_skipped():
    outside = annotation(100, 100, [(10, 10, 50, 50)], synset="n09999999")
    lines, counts = csv_lines(("n09999999", "n09999999_1", outside),
                              (SYNSETS[1], "n01443537_1", annotation(100, 100, [(10, 10, 50, 50)], synset=SYNSETS[1])))
    assert lines == ["n01443537_1.JPEG,0.1000,0.1000,0.5000,0.5000"]
    assert (counts["xml_files"], counts["skipped_files"]) == (2, 1)
    everything, _ = csv_lines(("n09999999", "n09999999_1", annotation(100, 100, [(10, 10, 50, 50)])),
                              synsets=None)
    assert everything == ["n09999999_1.JPEG,0.1000,0.1000,0.5000,0.5000"]  # no labels file: every folder


def test_values_have_four_decimals_and_lines_are_sorted():
    lines, _ = csv_lines((SYNSETS[1], "n01443537_9", annotation(3, 3, [(1, 0, 2, 3)], synset=SYNSETS[1])),
                         (SYNSETS[0], "n01440764_5", annotation(3, 7, [(0, 1, 2, 3)])))
    assert lines == ["n01440764_5.JPEG,0.0000,0.1429,0.6667,0.4286",
                     "n01443537_9.JPEG,0.3333,0.0000,0.6667,1.0000"]


def test_counting_boxes_stops_at_the_first_xmin_of_minus_one():
    """slim's loop: a box whose xmin is -1 ends the file's boxes, those after it included."""
    lines, _ = csv_lines((SYNSETS[0], "n01440764_1", annotation(100, 100, [(10, 10, 50, 50), (-1, 0, 20, 20),
                                                                           (30, 30, 60, 60)])))
    assert lines == ["n01440764_1.JPEG,0.1000,0.1000,0.5000,0.5000"]


def test_a_missing_coordinate_counts_as_minus_one_as_slims_getint_has_it():
    """A box with its <xmin> but no <ymax>: -1, then clamped to the image, as slim's GetInt and its clamp do."""
    data = (b"<annotation><size><width>100</width><height>100</height></size><object><name>n01440764</name>"
            b"<bndbox><xmin>10</xmin><ymin>20</ymin><xmax>50</xmax></bndbox></object></annotation>")
    assert xml_boxes(data) == [("n01440764", 0.1, 0.0, 0.5, 0.2)]


@pytest.mark.parametrize("data,problem", [
    (b"<annotation><size>", "malformed XML"),
    (annotation(0, 100, [(1, 1, 2, 2)]), "has a zero side"),
    (b"<annotation><object><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>2</xmax><ymax>2</ymax></bndbox></object>"
     b"</annotation>", "no <size>"),
    (annotation(100, 100, [("ten", 1, 2, 2)]), "not a number"),
])
def test_a_bad_file_is_counted_or_with_strict_an_error_naming_it(data, problem):
    _, counts, problems = boxes_to_csv_lines("annotations", SYNSETS, files=[(SYNSETS[0], "n01440764_1", data)])
    assert counts["bad_files"] == 1 and problem in problems[0]["problem"]
    with pytest.raises(InputError, match=f"annotations:n01440764/n01440764_1.xml: .*{problem}"):
        boxes_to_csv_lines("annotations", SYNSETS, strict=True, files=[(SYNSETS[0], "n01440764_1", data)])


def test_the_csv_lines_read_back_as_the_boxes_of_each_image_in_line_order():
    lines, _ = csv_lines((SYNSETS[0], "n01440764_1", annotation(100, 100, [(50, 50, 90, 90), (10, 10, 20, 20)])))
    boxes = parse_box_lines(lines, "bboxes.csv")
    assert list(boxes) == ["n01440764_1.JPEG"]
    assert unpack_boxes(boxes["n01440764_1.JPEG"]) == ((0.1, 0.1, 0.2, 0.2), (0.5, 0.5, 0.9, 0.9))


@pytest.mark.parametrize("kind", ["hard link", "symlink", "FIFO"])
def test_a_box_archive_member_that_is_no_file_is_one_error_naming_it(tmp_path, kind):
    """The box archive is read as one stream, where a link cannot be followed: a link (or a FIFO) is refused
    naming it, never dropped unsaid (the XML it stands for would be boxes missing from the build)."""
    import gzip
    import io
    import tarfile

    xml = annotation(100, 100, [(1, 1, 50, 50)])
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo(f"{SYNSETS[0]}/{SYNSETS[0]}_1.xml")
        info.size = len(xml)
        tar.addfile(info, io.BytesIO(xml))
        other = tarfile.TarInfo(f"{SYNSETS[0]}/{SYNSETS[0]}_2.xml")
        other.type = {"hard link": tarfile.LNKTYPE, "symlink": tarfile.SYMTYPE, "FIFO": tarfile.FIFOTYPE}[kind]
        other.linkname = info.name if kind == "hard link" else f"{SYNSETS[0]}_1.xml"
        tar.addfile(other)
    archive = tmp_path / "ILSVRC2012_bbox_train_v2.tar.gz"
    archive.write_bytes(gzip.compress(out.getvalue(), mtime=0))
    with pytest.raises(InputError) as raised:
        boxes_to_csv_lines(archive, SYNSETS)
    assert raised.value.path == f"{archive}:{SYNSETS[0]}/{SYNSETS[0]}_2.xml"
    assert raised.value.problem == ("a link, FIFO or device, not a file: the archive is read as one stream, where a "
                                    "link cannot be followed; extract it and give the folder")
