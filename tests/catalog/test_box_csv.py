"""catalog/boxes.py's reading of slim's box CSV (--bounding-box-file): each image's boxes in line order, packed and
unpacked to the same floats, and every wrong line refused in its exact words, naming the file and the line."""

import pytest

from imagenet_build.catalog.boxes import parse_box_lines, read_box_csv, unpack_boxes
from imagenet_build.infra.errors import InputError

COLUMNS = "(columns: <image>,xmin,ymin,xmax,ymax)"


def test_boxes_are_kept_per_image_in_line_order_as_python_parses_them(tmp_path):
    path = tmp_path / "bboxes.csv"
    path.write_bytes("\ufeffb.JPEG,0.5,0.1,0.6,0.2\r\n\n  a.JPEG,0,0,1,1  \nb.JPEG,0.1,0.3,0.1,0.3\n".encode())
    boxes = read_box_csv(path)
    assert list(boxes) == ["b.JPEG", "a.JPEG"]  # the first line's image first; the BOM no part of its name
    assert unpack_boxes(boxes["b.JPEG"]) == ((0.5, 0.1, 0.6, 0.2), (0.1, 0.3, 0.1, 0.3))
    assert unpack_boxes(boxes["a.JPEG"]) == ((0.0, 0.0, 1.0, 1.0),)
    assert len(boxes["b.JPEG"]) == 2 * 4 * 8 and unpack_boxes(b"") == ()
    assert parse_box_lines([], "empty.csv") == {}


@pytest.mark.parametrize("line,problem", [
    ("a.JPEG,0.1,0.2,0.3", "expected '<image>.JPEG,<xmin>,<ymin>,<xmax>,<ymax>', got 'a.JPEG,0.1,0.2,0.3'"),
    ("a.JPEG,0.1,0.2,0.3,0.4,0.5", "expected '<image>.JPEG,<xmin>,<ymin>,<xmax>,<ymax>', "
                                   "got 'a.JPEG,0.1,0.2,0.3,0.4,0.5'"),
    (",0.1,0.2,0.3,0.4", "expected '<image>.JPEG,<xmin>,<ymin>,<xmax>,<ymax>', got ',0.1,0.2,0.3,0.4'"),
    ("a.JPEG,0.1,x,0.3,0.4", "not a number in 'a.JPEG,0.1,x,0.3,0.4'"),
    ("a.JPEG,0.1,0.2,0.3,1.5", "box values must be normalised to [0, 1], got 'a.JPEG,0.1,0.2,0.3,1.5'"),
    ("a.JPEG,-0.1,0.2,0.3,0.4", "box values must be normalised to [0, 1], got 'a.JPEG,-0.1,0.2,0.3,0.4'"),
    ("a.JPEG,0.1,0.2,nan,0.4", "box values must be normalised to [0, 1], got 'a.JPEG,0.1,0.2,nan,0.4'"),
    ("a.JPEG,0.1,0.2,0.3,inf", "box values must be normalised to [0, 1], got 'a.JPEG,0.1,0.2,0.3,inf'"),
    ("a.JPEG,0.4,0.2,0.3,0.5", f"xmin > xmax or ymin > ymax in 'a.JPEG,0.4,0.2,0.3,0.5' {COLUMNS}"),
    ("a.JPEG,0.1,0.6,0.3,0.5", f"xmin > xmax or ymin > ymax in 'a.JPEG,0.1,0.6,0.3,0.5' {COLUMNS}"),
])
def test_a_wrong_line_is_refused_naming_the_file_and_its_line(line, problem):
    with pytest.raises(InputError) as refused:
        parse_box_lines(["ok.JPEG,0,0,1,1", "", f" {line} "], "bboxes.csv")
    assert str(refused.value) == f"bboxes.csv: line 3: {problem}"


def test_a_box_csv_that_cannot_be_read_is_named(tmp_path):
    for path, problem in ((tmp_path / "none.csv", "bounding-box file not found"),
                          (tmp_path, "is a folder, expected a CSV file")):
        with pytest.raises(InputError) as refused:
            read_box_csv(path)
        assert str(refused.value) == f"{path}: {problem}"
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"a.JPEG,0,0,1,1\n\xff\n")
    with pytest.raises(InputError) as refused:
        read_box_csv(bad)
    assert str(refused.value).startswith(f"{bad}: not UTF-8 text (byte ")
