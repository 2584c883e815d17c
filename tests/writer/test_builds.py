"""A --resize run's builds (writer/builds.py): each resumed, options that change the bytes refused, the lanczos3
filter deterministic and never mixed, bad options in one line, the counts of the summary and the manifest,
an image past the bounds named or skipped, an output that holds something else or lies in an input refused."""

import io
import json
import shutil

import pytest
from PIL import Image

from conftest import RESIZE_TARGETS, run_cli, run_process, sample_args, tree_digest
from helpers import expect_error
from imagenet_build.encode import resize
from imagenet_build.encode.resize import Target
from imagenet_build.infra.errors import InputError, UsageError
from run_helpers import records


def test_rerun_resumes_each_build_and_other_options_are_refused(sample_dir, resized, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(resized, out)
    again = run_cli(*sample_args(sample_dir, out, "--resize", RESIZE_TARGETS, "--workers", 1, "--json"))
    summary = json.loads(again.stdout)
    assert [b["shards_written"] for b in summary["builds"].values()] == [0, 0, 0]
    (out / "shorter-96" / "train-00001-of-00004").unlink()
    again = run_cli(*sample_args(sample_dir, out, "--resize", RESIZE_TARGETS, "--workers", 1, "--json"))
    summary = json.loads(again.stdout)
    assert {k: b["shards_written"] for k, b in summary["builds"].items()} == {
        "shorter-48": 0, "shorter-96": 1, "shorter-400": 0}
    assert summary["shards_read"] == 1
    assert tree_digest(out) == tree_digest(resized)
    other = run_cli(*sample_args(sample_dir, out, "--resize", "shorter:96", "--quality", 80, "--workers", 1))
    assert other.exit_code == 1 and "other options" in other.stderr and "--overwrite" in other.stderr
    other = run_cli(*sample_args(sample_dir, out, "--resize", "shorter:96", "--resize-filter", "lanczos3"))
    assert other.exit_code == 1 and "--resize-filter: catmull-rom before, lanczos3 now" in other.stderr
    assert tree_digest(out) == tree_digest(resized)


def test_the_lanczos3_filter_is_deterministic_never_mixed_and_unrecorded_as_before_the_option(
        sample_dir, resized, tmp_path):
    """--resize-filter lanczos3: other bytes than the default Catmull-Rom's, the same with 1 or 2 workers, named in
    the shards' fingerprint, and left out of the manifest as in builds made before the option (when Lanczos3 was
    the only filter): such a build resumes with --resize-filter lanczos3, and a rerun without it is refused,
    naming the option, instead of mixing filters."""
    one, two = tmp_path / "one", tmp_path / "two"
    result = run_cli(*sample_args(sample_dir, one, "--resize", "shorter:48", "--resize-filter", "lanczos3",
                                  "--workers", 1, "--json"))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["resize"]["filter"] == "lanczos3"
    result = run_process(*sample_args(sample_dir, two, "--resize", "shorter:48", "--resize-filter", "lanczos3",
                                      "--workers", 2))
    assert result.returncode == 0, result.stderr
    assert tree_digest(one) == tree_digest(two)
    shards = sorted(p.name for p in (one / "shorter-48").glob("*-of-*"))
    assert shards and all((one / "shorter-48" / name).read_bytes() != (resized / "shorter-48" / name).read_bytes()
                          for name in shards)  # every image is resized at 48: each shard differs
    manifest = json.loads((one / "shorter-48" / "manifest.json").read_text())
    assert manifest["options"]["resize"] == {"target": "shorter:48", "quality": 90, "larger_only": True,
                                             "exif_transpose": False}
    catmull_rom = {s["name"]: s["fingerprint"] for s in
                   json.loads((resized / "shorter-48" / "manifest.json").read_text())["shards"]}
    assert all(s["fingerprint"] != catmull_rom[s["name"]] for s in manifest["shards"])
    assert resize.codec("lanczos3") != resize.codec() and "CatmullRom" in resize.codec()
    assert "Lanczos3" in resize.codec("lanczos3")
    again = run_cli(*sample_args(sample_dir, one, "--resize", "shorter:48", "--workers", 1))
    assert again.exit_code == 1 and "--resize-filter: lanczos3 before, catmull-rom now" in again.stderr
    resumed = run_cli(*sample_args(sample_dir, one, "--resize", "shorter:48", "--resize-filter", "lanczos3",
                                   "--workers", 1, "--json"))
    assert resumed.exit_code == 0 and json.loads(resumed.stdout)["builds"]["shorter-48"]["shards_written"] == 0
    assert tree_digest(one) == tree_digest(two)


@pytest.mark.parametrize("args,fragment", [
    (["--resize", "shortest:96"], "expected shorter:N or longer:N"),
    (["--resize", "shorter:96,96"], "repeated"),
    (["--resize", "shorter:0"], "between 1 and"),
    (["--resize", "shorter:65500", "--resize-all"], "between 1 and 13,377"),  # 65500 x 65500: 4.3 Gpx an image
    (["--resize", "longer:13378"], "decompression-bomb limit of 178,956,970 pixels"),
    (["--resize", ""], "expected shorter:N or longer:N"),  # not a full-size build
    (["--resize", "shorter:\u0662\u0662\u0664"], "expected shorter:N or longer:N"),  # Arabic-Indic 224: int() takes it
    (["--quality", "80"], "--quality goes with --resize"),
    (["--exif-transpose"], "--exif-transpose goes with --resize"),
    (["--resize-all"], "--resize-all goes with --resize"),
    (["--resize-filter", "catmull-rom"], "--resize-filter goes with --resize"),
    (["--resize", "shorter:96", "--resize-filter", "bicubic"], "'bicubic' is not one of 'catmull-rom', 'lanczos3'"),
])
def test_bad_resize_options_are_one_line_and_exit_2(sample_dir, tmp_path, args, fragment):
    result = run_cli(*sample_args(sample_dir, tmp_path / "out", *args))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr


def test_an_unbounded_size_is_refused_before_any_input_is_read(tmp_path):
    result = run_cli("convert", "--train-dir", tmp_path / "no-such-folder", "--output-dir", tmp_path / "out",
                     "--resize", "shorter:20000", "--resize-all")
    assert result.exit_code == 2 and "between 1 and 13,377" in result.stderr, result.output
    assert not (tmp_path / "out").exists()


def test_the_one_pass_line_counts_its_builds(sample_dir, resized, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(resized / "shorter-96", out / "shorter-96")
    result = run_cli(*sample_args(sample_dir, out, "--resize", "shorter:96", "--workers", 1))
    assert result.exit_code == 0 and "one pass: 0 shards read once for 1 build in " in result.stdout, result.stdout
    shutil.copytree(resized / "shorter-48", out / "shorter-48")
    result = run_cli(*sample_args(sample_dir, out, "--resize", "shorter:48,96", "--workers", 1))
    assert "one pass: 0 shards read once for 2 builds in " in result.stdout, result.stdout


def test_the_summary_and_the_manifest_count_the_resized_images(sample_dir, converted, tmp_path):
    """The summary said only "re-encoded as RGB JPEG: 3" (the CMYK and PNG inputs) where every image was resized:
    each build's summary and manifest count the images decoded, resized and encoded, a rerun that keeps every
    shard too; the others are those within the size, stored as the full-size build stores them."""
    shorter = [min(e["image/height"][0], e["image/width"][0]) for _, e in records(converted)]
    wanted = {"shorter-48": sum(side > 48 for side in shorter), "shorter-96": sum(side > 96 for side in shorter)}
    assert wanted["shorter-48"] == len(shorter) == 64 and 0 < wanted["shorter-96"] < 64
    args = sample_args(sample_dir, tmp_path / "out", "--resize", "shorter:48,96", "--workers", 1)
    result = run_cli(*args, "--json")
    builds = json.loads(result.stdout)["builds"]
    assert {folder: build["resized"] for folder, build in builds.items()} == wanted
    for folder, count in wanted.items():
        manifest = json.loads((tmp_path / "out" / folder / "manifest.json").read_text())
        assert manifest["totals"]["resized"] == count
    again = run_cli(*args)
    assert again.exit_code == 0 and "shards written: 0" in again.stdout, again.output
    assert "  resized: 64 of 64 images\n" in again.stdout
    assert (f"  resized: {wanted['shorter-96']} of 64 images; {64 - wanted['shorter-96']} within the size, stored "
            "as the full-size build stores them\n") in again.stdout
    assert "resized" not in json.loads((converted / "manifest.json").read_text())["totals"]


def test_a_plain_convert_into_a_resized_runs_folder_names_its_builds(sample_dir, resized, tmp_path):
    """A convert without --resize into the top folder of a --resize run called its size folders "files that are
    not from imagenet-build": it names them as that run's builds, and nothing is written."""
    out = tmp_path / "out"
    shutil.copytree(resized, out)
    result = run_cli(*sample_args(sample_dir, out, "--workers", 1))
    assert result.exit_code == 1, result.output
    assert result.stderr == (f"error: {out}: holds the builds of a --resize run (shorter-400/, shorter-48/, "
                             "shorter-96/); a build without --resize needs a folder of its own: choose an empty or "
                             "new --output-dir (or give those builds' --resize to resume them)\n")
    assert tree_digest(out) == tree_digest(resized)
    (out / "notes.txt").write_text("mine")  # a stranger beside them: the folder is refused as any other
    result = run_cli(*sample_args(sample_dir, out, "--workers", 1))
    assert result.exit_code == 1 and "holds files that are not from imagenet-build (notes.txt, " in result.stderr


def jpeg_bytes(size):
    out = io.BytesIO()
    Image.new("RGB", size, (90, 30, 150)).save(out, "JPEG")
    return out.getvalue()


def test_an_image_whose_resized_size_passes_the_bounds_is_this_images_error(monkeypatch):
    everything = resize.ResizeOptions((Target("shorter", 100), Target("longer", 100)), larger_only=False)
    # 1 x 2000 to shorter:100 is 100 x 200,000: past JPEG's side, said before anything is decoded
    thin, fitting = resize.stored_resized(jpeg_bytes((1, 2000)), "thin.JPEG", everything)
    assert isinstance(thin, InputError) and thin.path == "thin.JPEG"
    assert "resized to shorter:100 it would be 100x200,000: a JPEG holds at most 65,500" in thin.problem
    assert (fitting.width, fitting.height) == (1, 100)  # the other target's result is its own
    # Pillow's limit lowered to 10,000 pixels, so that a small image stands for a huge one
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 5000)
    big, fitting = resize.stored_resized(jpeg_bytes((20, 40)), "small.JPEG", everything)
    assert isinstance(big, InputError) and "100x200: 20,000 pixels, beyond Pillow's decompression-bomb limit of " \
        "10,000" in big.problem
    assert (fitting.width, fitting.height) == (50, 100)
    with pytest.raises(UsageError, match="between 1 and 100 "):
        resize.parse_targets("longer:101")


def test_a_resized_image_past_the_bounds_is_named_or_skipped_by_convert(sample_copy, tmp_path):
    image = sorted((sample_copy / "train").glob("*/*.JPEG"))[5]
    image.write_bytes(jpeg_bytes((1, 2000)))  # shorter:48 --resize-all: 48 x 96,000
    args = sample_args(sample_copy, tmp_path / "out", "--resize", "shorter:48,400", "--resize-all", "--workers", 1)
    expect_error(args, 1, str(image), "resized to shorter:48 it would be 48x96,000: a JPEG holds at most 65,500")
    assert not list((tmp_path / "out").rglob(".*.tmp"))
    skipped = run_cli(*args, "--on-error", "skip", "--json")
    assert skipped.exit_code == 0, skipped.output
    builds = json.loads(skipped.stdout)["builds"]
    for build in builds.values():  # 48 x 96,000 and 400 x 800,000
        assert [s["file"] for s in build["skipped"]] == [f"{image.parent.name}/{image.name}"]
        assert run_cli("verify", build["output_dir"]).exit_code == 0


def test_output_holding_something_else_is_refused(sample_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result = run_cli(*sample_args(sample_dir, out, "--resize", "shorter:96", "--workers", 1))
    assert result.exit_code == 1 and "notes.txt" in result.stderr and "not a resized build" in result.stderr
    # what a build folder may hold besides builds (format/folder_contents.py: folder_entries): the kept listings
    # of .tar.gz inputs
    (out / "notes.txt").unlink()
    (out / ".imagenet-build-listings").mkdir()
    result = run_cli(*sample_args(sample_dir, out, "--resize", "shorter:96", "--workers", 1))
    assert result.exit_code == 0, result.output


def test_an_output_folder_inside_the_train_folder_is_refused_before_the_scan(sample_dir, tmp_path):
    """Already there, the folder would be scanned as a class folder first: the refusal must come before."""
    inside = tmp_path / "sample"
    shutil.copytree(sample_dir, inside)
    (inside / "train" / "out").mkdir()
    expect_error(sample_args(inside, inside / "train" / "out", "--resize", "shorter:96"), 2,
                 "--output-dir", "is inside --train-dir")
