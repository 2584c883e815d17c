"""`report` reads only what it shows, and bad input gets what every verb gives: one line, or a page that lists
the problem (a corrupt shard), never a traceback."""

import hashlib
import json
import os
import subprocess
import sys

import pytest

from conftest import run_cli
from helpers import expect_error
from imagenet_build.format.build_folder import BuildFolder
from imagenet_build.report.records import HEAD, LABEL_HEAD, TAIL, Shards, read_fields, read_label

pytest.importorskip("matplotlib")


class Counted:
    """A shard file that counts the bytes read from it."""

    def __init__(self, f):
        self.f, self.read_bytes = f, 0

    def seek(self, at):
        self.f.seek(at)

    def read(self, n):
        data = self.f.read(n)
        self.read_bytes += len(data)
        return data


def test_a_records_fields_come_from_its_head_and_tail_alone(build):
    """Fields read from a record's head and tail are those of the whole record; only the image is left unread."""
    from imagenet_build.verify.record import Record

    shards = Shards(BuildFolder.open(build), ["train", "validation"])
    assert shards.total == 64 and not shards.problems
    for k in range(shards.total):
        place = shards.place(k)
        with open(place.path, "rb") as raw:
            f = Counted(raw)
            fields = read_fields(f, place)
            assert f.read_bytes <= HEAD + TAIL < place.size  # the sample's images are larger than that
            f.read_bytes = 0
            assert read_label(f, place) == fields.label and f.read_bytes <= LABEL_HEAD
            whole = read_fields(raw, place, with_image=True)
            raw.seek(place.offset + 12)
            record = Record(place.number, place.offset, raw.read(place.size - 16), True)
        assert fields == whole._replace(image=None)
        assert whole.image == record.one["image/encoded"] and fields.encoded_bytes == len(whole.image)
        assert (fields.label, fields.synset) == record.label_pair()
        assert (fields.width, fields.height) == (record.one["image/width"], record.one["image/height"])
        assert fields.filename == record.one["image/filename"].decode()
        assert fields.boxes == list(zip(*(record.lists[f"image/object/bbox/{c}"] for c in ("xmin", "ymin", "xmax",
                                                                                           "ymax"))))


def test_a_folder_with_no_build_is_one_line(tmp_path):
    expect_error(["report", tmp_path], 1, f"{tmp_path}: holds no build")
    expect_error(["report", tmp_path / "nothing"], 1, "not a folder")
    (tmp_path / "manifest.json").write_text("{")
    expect_error(["report", tmp_path], 1, "manifest.json: not valid JSON")
    assert not (tmp_path / "report.html").exists()


def test_a_corrupt_shard_is_listed_on_a_page_that_still_renders(build):
    # a record's image bytes damaged (its CRC no longer holds), and a shard cut short (its index overruns it)
    offset, size = map(int, (build / "dali_idx" / "train-00001-of-00004.idx").read_text().splitlines()[2].split())
    with open(build / "train-00001-of-00004", "r+b") as f:
        f.seek(offset + size // 2)
        f.write(b"\xff" * 64)
    with open(build / "validation-00000-of-00002", "r+b") as f:
        f.truncate(1000)
    result = run_cli("report", build, "--verify", "--workers", 1, "--per-class", 12)
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "the page lists them" in lines[0], result.stderr
    html = (build / "report.html").read_text()
    assert "FAILED" in html and "payload CRC mismatch" in html
    assert "train-00001-of-00004, record 2" in html  # the record the report could not show
    assert "validation-00000-of-00002.idx: line 8: the last entry ends at byte" in html  # the shard cut short
    assert html.count("<img") > 20  # the rest of the build is shown


def test_it_reads_the_classes_asked_for_and_says_what_it_read(build):
    result = run_cli("report", build, "--classes", 2, "--per-class", 1, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["ok"] and document["page"] == str(build / "report.html") and document["builds"] == [str(build)]
    assert document["read"] == {"records": 64, "heads": 64, "whole": 2}  # a small build: every head; 2 thumbnails
    html = (build / "report.html").read_text()
    assert html.count("<span class=tile>") == 2 and "label 1: n01440764" in html and "label 4: n01491361" in html


def test_a_verify_json_of_another_manifest_is_a_note(build):
    """verify.json names the manifest it judged by sha256: one rewritten with the same bytes (a resumed
    convert that kept every shard) is still the build verified; other bytes are not."""
    verify = run_cli("verify", build, "--json", "--workers", 1)
    (build / "verify.json").write_text(verify.stdout)
    manifest = build / "manifest.json"
    assert json.loads(verify.stdout)["summary"]["manifest_sha256"] == hashlib.sha256(manifest.read_bytes()).hexdigest()
    os.utime(build / "verify.json", (0, 0))  # older than the manifest, yet of its very bytes
    assert run_cli("report", build).exit_code == 0
    assert "judged another manifest.json" not in (build / "report.html").read_text()
    manifest.write_text(json.dumps(json.loads(manifest.read_text()), indent=1))  # the same build, other bytes
    assert run_cli("report", build).exit_code == 0
    assert "verify.json judged another manifest.json than this folder" in (build / "report.html").read_text()


def test_a_verify_json_without_the_manifests_digest_older_than_it_is_a_note(build):
    verify = json.loads(run_cli("verify", build, "--json", "--workers", 1).stdout)
    del verify["summary"]["manifest_sha256"]  # as an earlier verify wrote it
    (build / "verify.json").write_text(json.dumps(verify))
    os.utime(build / "verify.json", (0, 0))
    assert run_cli("report", build).exit_code == 0
    assert "verify.json is older than manifest.json" in (build / "report.html").read_text()


def test_an_unreadable_verify_json_is_a_note(build):
    (build / "verify.json").write_text("not json")
    (build / "trainer-check.json").write_text(json.dumps({"ok": True, "checks": [], "show": "gone.png"}))
    assert run_cli("report", build).exit_code == 0
    html = (build / "report.html").read_text()
    assert "verify.json: not valid JSON" in html and "gone.png: the picture" in html


def test_a_missing_report_extra_is_one_line(build):
    blocked = ("import sys; sys.modules['matplotlib'] = None; sys.argv = ['imagenet-build'] + sys.argv[1:]; "
               "from imagenet_build.cli import main; main()")
    result = subprocess.run([sys.executable, "-c", blocked, "report", str(build)], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: imagenet-build report needs matplotlib, which is not installed: in a clone of imagenet-build, "
        "pip install -c constraints.txt '.[report]'"]
    assert not (build / "report.html").exists()
