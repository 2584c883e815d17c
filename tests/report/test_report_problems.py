"""What `report` finds wrong with a build, and what it never does: its problems hold every problem verify's folder
checks find (the damage verify's tests make, tests/helpers.py's FOLDER_DAMAGE), records counted by the shards'
indexes; a chart of every class, those of no record too; only the build's own picture of trainer-check; messages
that name the file the user gave."""

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
from html import escape

import pytest

from conftest import run_cli, run_process, sample_args
from helpers import FOLDER_DAMAGE, SHARD, edit_record, expect_error

pytest.importorskip("matplotlib")


def folder_level(verified):
    """(file, message) of each of verify's problems found at the folder's level: by its folder checks (the
    listing's among them: the shard set, an index with no shard) and none of those reading a record."""
    from imagenet_build.verify.check import registered
    from imagenet_build.verify.folder import FolderCheck

    folder_checks = {check.name for check in registered() if issubclass(check, FolderCheck)}
    return [(p["file"], p["message"]) for p in verified["problems"]
            if p["check"] in folder_checks or p["message"] == "index file with no shard"]


@pytest.mark.parametrize("damage", list(FOLDER_DAMAGE))
def test_reports_problems_hold_verifys_folder_level_problems(build, damage):
    FOLDER_DAMAGE[damage](build)
    verified = run_cli("verify", build, "--quick", "--json", "--workers", 1)
    expected = [f"{build / file}: {message}" for file, message in folder_level(json.loads(verified.stdout))]
    assert expected, "verify's folder checks find this damage"
    result = run_cli("report", build, "--json")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    found = json.loads(result.stdout)["problems"]
    assert [line for line in expected if line not in found] == [], found
    assert "Problems this page found" in (build / "report.html").read_text()


def test_records_are_counted_by_the_shards_indexes_not_the_manifest(build):
    FOLDER_DAMAGE["a record dropped, shard and index agreeing"](build)
    result = run_cli("report", build, "--json")
    assert json.loads(result.stdout)["read"]["records"] == 47 + 16
    figures = re.search(r"<tr><td class=l>train</td><td>([\d,]+)</td>", (build / "report.html").read_text())
    assert figures[1] == "47"


@pytest.mark.slow
def test_a_resized_build_missing_a_shard_in_a_size_folder(sample_dir, tmp_path):
    out = tmp_path / "resized"
    assert run_cli(*sample_args(sample_dir, out, "--resize", "shorter:40", "--workers", 1)).exit_code == 0
    (out / "shorter-40" / SHARD).unlink()
    (out / "shorter-40" / "dali_idx" / f"{SHARD}.idx").unlink()
    result = run_cli("report", out, "--json")
    problems = json.loads(result.stdout)["problems"]
    assert result.exit_code == 1 and f"{out / 'shorter-40' / SHARD}: shard missing" in problems, problems
    assert f"{out / 'shorter-40' / SHARD}: listed in manifest.json but missing" in problems


# ------------------------------------------------------------------ the records-per-class chart


def test_a_class_with_no_record_is_in_the_chart_and_its_caption(tmp_path):
    np = pytest.importorskip("numpy")
    from imagenet_build import write_arrays

    images = np.zeros((6, 8, 8, 3), dtype=np.uint8)
    out = tmp_path / "arrays"
    write_arrays(images, [0, 1, 0, 1, 0, 1], out, "train", 1, class_names=["cat", "dog", "eel"])
    run_cli("report", out)
    html = (out / "report.html").read_text()
    captions = re.findall(r"<figcaption><b>Records per class</b>: (.*?)</figcaption>", html)
    assert captions == ["train: 1 of 3 classes hold no record; train, fewest: eel (0)"]


def test_the_chart_of_classes_draws_every_class_of_the_build():
    from imagenet_build.report import charts, figures

    manifest = {"num_classes": 4, "splits": {"train": {"label_counts": {"1": 5, "2": 5, "4": 6}},
                                             "validation": {"records": 0}}}
    counts = figures.label_counts(manifest)
    assert counts == {"train": {1: 5, 2: 5, 3: 0, 4: 6}}
    assert charts.class_chart(counts, {3: "n3 three", 4: "n4 four"}).caption == \
        "train: 1 of 4 classes hold no record; train, fewest: n3 three (0); train, most: n4 four (6)"


# ------------------------------------------------------------------ trainer-check's picture: the build's own


def png(path, data=b""):
    from PIL import Image

    Image.new("RGB", (8, 8), (1, 2, 3)).save(path, "PNG")
    if data:
        path.write_bytes(data)
    return path


@pytest.mark.parametrize("show, why", [
    ("/dev/zero", "is not a file of the build's folder"),
    ("../../../../../../../../etc/hostname", "is not a file of the build's folder"),
    ("elsewhere", "is not a file of the build's folder"),
    ("link.png", "is not a file of the build's folder"),
    ("fake.png", "is not a PNG file"),
    ("sub/trainer-check.png", "is not a file of the build's folder"),
], ids=["dev-zero", "climbs-out", "absolute-elsewhere", "link-out", "not-png", "below"])
def test_only_the_builds_own_picture_is_shown(build, tmp_path, show, why):
    elsewhere = png(tmp_path / "elsewhere.png")
    os.symlink(elsewhere, build / "link.png")
    (build / "fake.png").write_text("not a picture")
    (build / "sub").mkdir()
    png(build / "sub" / "trainer-check.png")
    if show == "elsewhere":
        show = str(elsewhere)
    (build / "trainer-check.json").write_text(json.dumps({"ok": True, "checks": [], "show": show}))
    result = run_process("report", build, timeout=120)  # /dev/zero read whole would grow memory until killed
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr  # the strays made here
    html = (build / "report.html").read_text()
    assert "the batches trained on" not in html
    assert escape(f"{show}: the picture {build / 'trainer-check.json'} names {why}") in html, why


def test_the_builds_own_picture_is_shown_however_trainer_check_json_names_it(build):
    png(build / "trainer-check.png")
    for show in ("trainer-check.png", str(build / "trainer-check.png"), str(build / "dali_idx" / ".." /
                                                                              "trainer-check.png")):
        (build / "trainer-check.json").write_text(json.dumps({"ok": True, "checks": [], "show": show}))
        assert run_cli("report", build).exit_code == 0
        assert 'alt="the batches trained on"' in (build / "report.html").read_text(), show


# ------------------------------------------------------------------ words


def test_classes_takes_ascii_digits_only(build):
    expect_error(["report", build, "--classes", "²"], 2, "a number of classes (1 or more) or 'all'")


def test_an_image_that_does_not_decode_is_named_in_words(build):
    def garble(example):
        example.features.feature["image/encoded"].bytes_list.value[:] = [b"not an image at all"]

    edit_record(build, "train-00000-of-00004", 0, garble)
    result = run_cli("report", build, "--classes", "all", "--per-class", 100, "--json")
    problems = json.loads(result.stdout)["problems"]
    assert f"{build / 'train-00000-of-00004'}, record 0: the image does not decode (not an image format Pillow " \
           "knows)" in problems, problems
    assert "BytesIO" not in (build / "report.html").read_text() + result.output


def test_an_output_that_cannot_be_written_is_named_as_given(build, tmp_path):
    expect_error(["report", build, "-o", tmp_path / "no-such-folder" / "page.html"], 1,
                 f"{tmp_path / 'no-such-folder' / 'page.html'}: folder {tmp_path / 'no-such-folder'} does not exist")


def _small_files():
    """A disk that fills: files past 100 kB cannot be written (a write fails with EFBIG, as ENOSPC would)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))


def test_a_full_disk_names_the_page_and_leaves_nothing(build, tmp_path):
    page = tmp_path / "page.html"
    result = subprocess.run([sys.executable, "-m", "imagenet_build", "report", str(build), "-o", str(page)],
                            capture_output=True, text=True, preexec_fn=_small_files, timeout=120)
    assert result.returncode == 1 and result.stderr.splitlines() == [f"error: {page}: File too large"], result.stderr
    assert list(tmp_path.iterdir()) == [build]
    shutil.rmtree(build)
