"""Inputs that lie (a JPEG header, an image no JPEG can hold, a reversed box, an empty class, a byte order mark):
each named in one line, or left out and listed."""

import io
import json

import pytest
from PIL import Image

from conftest import (
    run_cli,
    run_process,
    sample_args,
    tree_digest,
)
from imagenet_build.encode.jpeg_header import walk
from run_helpers import a_train_image, convert_json


def lying_jpeg(path, claimed=(65500, 65500)):
    """A real 66x113 JPEG whose frame header claims another size."""
    image = Image.new("RGB", (66, 113), (120, 40, 200))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=90)
    data = bytearray(buffer.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5: sof + 9] = claimed[1].to_bytes(2, "big") + claimed[0].to_bytes(2, "big")
    walk(bytes(data))  # still a well-formed header
    path.write_bytes(bytes(data))


def test_a_jpeg_header_that_lies_is_refused_by_convert(sample_copy, tmp_path):
    image = a_train_image(sample_copy)
    lying_jpeg(image, claimed=(8000, 8000))  # 64 Mpx over ~1 KB of data
    result = run_cli(*sample_args(sample_copy, tmp_path / "out", "--workers", 1))
    assert result.exit_code == 1 and image.name in result.stderr and "under 1 bit per 8 blocks" in result.stderr
    lying_jpeg(image)  # 4.3 Gpx: past Pillow's limit, whatever its data
    result = run_cli(*sample_args(sample_copy, tmp_path / "out", "--workers", 1))
    assert result.exit_code == 1 and "decompression-bomb limit" in result.stderr
    assert not list((tmp_path / "out").rglob(".*.tmp"))


def wide_png(path, width=70_000):
    """A PNG one pixel high and wider than a JPEG can be: a few hundred bytes."""
    Image.new("RGB", (width, 1), (10, 200, 30)).save(path, "PNG")


@pytest.mark.parametrize("resize", [[], ["--resize", "shorter:48,400"]], ids=["full-size", "resized"])
def test_an_image_no_jpeg_can_hold_is_named_and_skippable(sample_copy, tmp_path, resize):
    image = a_train_image(sample_copy)
    wide_png(image)  # re-encoded (a PNG): a JPEG side stops at 65,500
    out = tmp_path / "out"
    failed = run_process(*sample_args(sample_copy, out, "--workers", 2, *resize))
    assert failed.returncode == 1
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {image}: 70,000x1 pixels: a JPEG holds at most 65,500 "
                                                   "pixels a side"), failed.stderr
    assert not list(out.rglob(".*.tmp"))
    skipped = run_process(*sample_args(sample_copy, out, "--workers", 2, "--on-error", "skip", "--json", *resize))
    assert skipped.returncode == 0, skipped.stderr
    summary = json.loads(skipped.stdout)
    builds = list(summary["builds"].values()) if resize else [summary]
    relpath = f"{image.parent.name}/{image.name}"
    for build in builds:
        assert [s["file"] for s in build["skipped"]] == [relpath]
        assert run_cli("verify", build["output_dir"]).exit_code == 0
    assert not list(out.rglob(".*.tmp"))


def write_build(folder, records):
    """A one-shard build of hand-made records [(jpeg bytes, height, width, boxes)], and its index."""
    from imagenet_build.encode.example import encode_example_parts
    from imagenet_build.writer.shard_writer import write_records

    (folder / "dali_idx").mkdir(parents=True)
    payloads = [encode_example_parts(encoded=data, filename=f"n0000000{i}_{i}.JPEG", height=h, width=w, label=1,
                                     synset="n01440764", text="tench", boxes=boxes)
                for i, (data, h, w, boxes) in enumerate(records)]
    write_records("train-00000-of-00001", folder, folder / "dali_idx", payloads)


def test_verify_applies_the_same_rules_to_stored_records(tmp_path):
    good = tmp_path / "good.jpg"
    Image.new("RGB", (66, 113), (1, 2, 3)).save(good, "JPEG")
    bomb = tmp_path / "bomb.jpg"
    lying_jpeg(bomb, claimed=(8000, 8000))
    write_build(tmp_path / "build", [
        (good.read_bytes(), 113, 66, ()),
        (bomb.read_bytes(), 8000, 8000, ()),
        (good.read_bytes(), 100, 66, ()),  # record and header disagree
        (good.read_bytes(), 113, 66, ((0.5, 0.1, 0.2, 0.9),)),  # xmin > xmax
    ])
    result = run_cli("verify", tmp_path / "build", "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1
    by_record = {p["record"]: p["message"] for p in report["problems"] if p["check"] == "example"}
    assert set(by_record) == {1, 2, 3}
    assert "under 1 bit per 8 blocks" in by_record[1]
    assert "header says 66x113, record says 66x100" in by_record[2]
    assert "xmin > xmax" in by_record[3]


def test_reversed_box_in_the_csv_is_refused_with_its_line(sample_copy, tmp_path):
    csv = sample_copy / "bboxes.csv"
    lines = csv.read_text().splitlines()
    name, xmin, ymin, xmax, ymax = lines[2].split(",")
    lines[2] = ",".join([name, xmax, ymin, xmin, ymax]) if float(xmin) < float(xmax) else lines[2]
    csv.write_text("\n".join(lines) + "\n")
    result = run_cli(*sample_args(sample_copy, tmp_path / "out", "--workers", 1))
    assert result.exit_code == 1 and "line 3: xmin > xmax" in result.stderr


def test_summary_counts_images_with_boxes_and_rows_naming_no_image(sample_copy, tmp_path):
    csv = sample_copy / "bboxes.csv"
    rows = [line for line in csv.read_text().splitlines() if line]
    csv.write_text("\n".join(rows + ["n09999999_1.JPEG,0.1,0.1,0.5,0.5"]) + "\n")
    summary = convert_json(sample_copy, tmp_path / "out")
    named = {row.split(",")[0] for row in rows}
    assert summary["boxes"] == {"rows": len(rows) + 1, "images_with_boxes": len(named), "rows_naming_no_image": 1}


def test_empty_class_folder_fails_or_is_listed(sample_copy, tmp_path):
    folder = sorted((sample_copy / "train").iterdir())[1]
    for image in folder.iterdir():
        image.unlink()
    result = run_cli(*sample_args(sample_copy, tmp_path / "out", "--workers", 1))
    assert result.exit_code == 1 and folder.name in result.stderr and "no *.JPEG images" in result.stderr
    skipped = run_cli(*sample_args(sample_copy, tmp_path / "out", "--workers", 1, "--on-error", "skip", "--json"))
    assert skipped.exit_code == 0
    assert any(s["file"] == f"{folder.name}/" for s in json.loads(skipped.stdout)["skipped"])


def test_a_byte_order_mark_is_not_part_of_the_labels(sample_copy, tmp_path, converted):
    labels = sample_copy / "labels.txt"
    labels.write_bytes(b"\xef\xbb\xbf" + labels.read_bytes())
    out = tmp_path / "out"
    assert run_cli(*sample_args(sample_copy, out, "--workers", 1)).exit_code == 0
    assert {k: v for k, v in tree_digest(out).items() if k != "manifest.json"} == {
        k: v for k, v in tree_digest(converted).items() if k != "manifest.json"}
    labels.write_bytes(b"\xef\xbb\xbfn00000001\n")
    result = run_cli(*sample_args(sample_copy, tmp_path / "other", "--workers", 1))
    assert result.exit_code == 1 and "\ufeff" not in result.stderr
