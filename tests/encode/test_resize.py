"""convert --resize: stored sizes, the full-size build's layout and boxes, one pass = separate runs,
EXIF orientation, verify's warning, resume, and TensorFlow and DALI reading what is written."""

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from conftest import children_of, run_cli, run_process, sample_args, tree_digest, wait_until_gone
from helpers import expect_error, read_with_tensorflow
from imagenet_build.encode import resample, resize
from imagenet_build.encode.example import decode_example
from imagenet_build.encode.jpeg_header import exif_orientation, jpeg_facts
from imagenet_build.encode.resize import Target
from imagenet_build.format.tfrecord import read_records
from imagenet_build.infra.errors import InputError, UsageError
from imagenet_build.tools.sample import make_sample

# The session sample's images are 64..160 pixels a side: 48 resizes every one, 96 some, 400 none.
TARGETS = "shorter:48,96,400"


def records(build, split=None):
    """[(shard name, decoded Example)] of a build folder, shard by shard, in record order."""
    out = []
    for shard in sorted(Path(build).glob(f"{split or '*'}-*-of-*")):
        with open(shard, "rb") as f:
            out.extend((shard.name, decode_example(p)) for _, p, _ in read_records(f, shard.stat().st_size))
    return out


def source_file(sample, example):
    name = example["image/filename"][0].decode()
    if name.startswith("ILSVRC2012_val_"):
        return sample / "validation" / name
    return sample / "train" / example["image/class/synset"][0].decode() / name


@pytest.fixture(scope="module")
def resized(sample_dir, tmp_path_factory):
    """The session sample resized to three sizes in one pass, two workers, as a whole process."""
    out = tmp_path_factory.mktemp("resized")
    result = run_process(*sample_args(sample_dir, out, "--resize", TARGETS, "--workers", 2, "--json"))
    assert result.returncode == 0, result.stderr
    return out


def test_one_pass_writes_a_complete_build_per_size(resized):
    assert sorted(p.name for p in resized.iterdir()) == ["shorter-400", "shorter-48", "shorter-96"]
    for folder in ("shorter-48", "shorter-96", "shorter-400"):
        manifest = json.loads((resized / folder / "manifest.json").read_text())
        assert manifest["complete"] is True
        assert manifest["options"]["resize"] == {"target": folder.replace("-", ":"), "quality": 90,
                                                 "larger_only": True, "exif_transpose": False,
                                                 "filter": "catmull-rom"}  # the default, recorded
        assert len(list((resized / folder / "dali_idx").glob("*.idx"))) == 6
        result = run_cli("verify", resized / folder, "--deep", "--json")
        assert result.exit_code == 0 and json.loads(result.stdout)["ok"], result.stdout


def test_three_builds_of_one_pass_equal_three_separate_runs(sample_dir, resized, tmp_path):
    for target in TARGETS.split(":")[1].split(","):
        args = sample_args(sample_dir, tmp_path / "separate", "--resize", f"shorter:{target}", "--workers", 1)
        result = run_cli(*args)
        assert result.exit_code == 0, result.output
    assert tree_digest(tmp_path / "separate") == tree_digest(resized)


def test_decode_scale_depends_on_the_image_and_its_own_target_only():
    # 500x375 at shorter:160/224/288: 4/8 (188 px) is short of 1.6 x 160, so all three decode in full
    size = (500, 375)
    assert [resize.decode_scale(size, Target("shorter", n).size_for(*size)) for n in (160, 224, 288)] == [8, 8, 8]
    # the reduced IDCTs need 1.6x: 1024x768 -> 320x240 decodes at 4/8 (384 px), 321x241 in full; 2/8 from 2x less
    assert resize.decode_scale((1024, 768), (320, 240)) == 4
    assert resize.decode_scale((1024, 768), (321, 241)) == 8
    assert resize.decode_scale((1024, 768), (160, 120)) == 2
    assert resize.decode_scale((1024, 768), (80, 60)) == 1
    # under 8 pixels a side, in full: TurboJPEG would decode a 3x3 image asked at 4/8 (2x2) at 3/8 (also 2x2)
    assert resize.decode_scale((3, 3), (1, 1)) == resize.decode_scale((4, 4), (1, 1)) == 8
    assert resize.decode_scale((8, 8), (1, 1)) == 2


def noisy_jpeg(size=(640, 480)):
    image = Image.radial_gradient("L").resize(size).convert("RGB")
    image.paste(Image.effect_noise((size[0] // 2, size[1] // 2), 40).convert("RGB"), (size[0] // 6, size[1] // 6))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


def test_targets_sharing_a_decode_scale_decode_once_and_equal_separate_runs(monkeypatch):
    data = noisy_jpeg()
    targets = resize.parse_targets("shorter:100,110,400")
    scales = [resize.decode_scale((640, 480), t.size_for(640, 480)) for t in targets]
    assert scales[0] == scales[1] != scales[2]  # 100 and 110 share one decode, 400 decodes in full
    decodes = []
    real = resize._Source._decode

    def counted(source, scale):
        decodes.append(scale)
        return real(source, scale)

    monkeypatch.setattr(resize._Source, "_decode", counted)
    together = resize.stored_resized(data, "x.JPEG", resize.ResizeOptions(targets))
    assert sorted(decodes) == sorted(set(scales))
    separate = [resize.stored_resized(data, "x.JPEG", resize.ResizeOptions((t,)))[0] for t in targets]
    assert [r.data for r in together] == [r.data for r in separate]
    assert [(r.width, r.height) for r in together] == [t.size_for(640, 480) for t in targets]


def psnr(a, b):
    import numpy as np

    mse = np.mean((np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)) ** 2)
    return 10 * np.log10(255 ** 2 / mse)


@pytest.mark.parametrize("kernel,pillows", [("lanczos3", Image.Resampling.LANCZOS),
                                             ("catmull-rom", Image.Resampling.BICUBIC)])
def test_the_fast_filter_is_pillows_and_the_same_bytes_with_every_simd_level(kernel, pillows):
    assert resample.resampler(kernel).startswith("cykooz.resizer ")  # a base dependency on this platform
    CpuExtensions = resample._fast_resize_module().CpuExtensions
    with Image.open(io.BytesIO(noisy_jpeg())) as opened:
        image = opened.convert("RGB")
    box = (0.0, 0.0, 639.5, 479.25)  # a scaled decode's exact extent: fractions
    pillow = image.resize((213, 160), pillows, box=box)
    fast = resample.resize(resample.Pixels(image, None), (213, 160), box, kernel).image
    assert fast.size == (213, 160) and psnr(fast, pillow) > 45  # rounding apart, the same filter
    assert psnr(fast, image.resize((213, 160), Image.Resampling.BILINEAR, box=box)) < psnr(fast, pillow) - 5
    other = Image.Resampling.BICUBIC if pillows == Image.Resampling.LANCZOS else Image.Resampling.LANCZOS
    assert psnr(fast, image.resize((213, 160), other, box=box)) < psnr(fast, pillow) - 5  # not the other filter
    resizer = resample._fast_resizer()
    levels = {CpuExtensions.none, resizer.cpu_extensions}
    if resizer.cpu_extensions == CpuExtensions.avx2:
        levels.add(CpuExtensions.sse4_1)
    outputs = set()
    try:
        for level in levels:
            resizer.cpu_extensions = level
            outputs.add(resample.resize(resample.Pixels(image, None), (213, 160), box, kernel).image.tobytes())
    finally:
        resizer.cpu_extensions = max(levels, key=lambda level: level.value)
    assert len(levels) >= 2 and outputs == {fast.tobytes()}


def test_without_the_fast_resizer_pillows_lanczos_is_used_and_named(monkeypatch):
    data = noisy_jpeg()
    targets = resize.parse_targets("shorter:100,400")
    fast = resize.stored_resized(data, "x.JPEG", resize.ResizeOptions(targets, filter="lanczos3"))
    fast_codec = resize.codec("lanczos3")
    monkeypatch.setattr(resample, "_fast_resizer", lambda: None)
    assert resample.resampler("lanczos3") == "Pillow Lanczos" and resize.codec("lanczos3") != fast_codec  # redone
    assert resample.resampler() == "Pillow bicubic (Catmull-Rom)"
    plain = resize.stored_resized(data, "x.JPEG", resize.ResizeOptions(targets, filter="lanczos3"))
    assert [(r.width, r.height) for r in plain] == [(r.width, r.height) for r in fast] == [(133, 100), (533, 400)]
    for a, b in zip(plain, fast):
        assert a.data != b.data
        with Image.open(io.BytesIO(a.data)) as one, Image.open(io.BytesIO(b.data)) as other:
            assert psnr(one.convert("RGB"), other.convert("RGB")) > 40


@pytest.mark.parametrize("missing", [("cykooz_resizer", "cykooz"), ("simplejpeg",)])
def test_a_build_without_a_fast_package_uses_pillow_and_a_rerun_with_it_redoes_the_shards(sample_dir, resized,
                                                                                          tmp_path, missing):
    """Where cykooz.resizer or simplejpeg has no wheel, convert decodes and encodes with Pillow (and resizes
    with Pillow's Lanczos without cykooz.resizer), a whole sound build; the shards' fingerprint names the
    codec and the resampler, so a rerun where they are installed redoes them all."""
    out = tmp_path / "out"
    args = sample_args(sample_dir, out, "--resize", "shorter:48")
    code = (f"import sys; sys.modules.update(dict.fromkeys({missing!r}))\n"
            "from imagenet_build.cli import main; sys.argv = ['imagenet-build'] + sys.argv[1:]; main()")
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    build = out / "shorter-48"
    assert run_cli("verify", build, "--deep").exit_code == 0

    def shards(folder):
        return {p.name: p.read_bytes() for p in sorted(folder.glob("*-of-*"))}

    with_pillow, with_fast = shards(build), shards(resized / "shorter-48")
    assert with_pillow.keys() == with_fast.keys()
    assert all(with_pillow[name] != with_fast[name] for name in with_fast)  # every record here is resized
    rerun = run_process(*args)
    assert rerun.returncode == 0, rerun.stderr
    assert shards(build) == with_fast  # redone, not kept: the same bytes as a build with it from the start


def test_stored_sizes_obey_the_spec(sample_dir, resized, converted):
    full = {e["image/filename"][0]: e for _, e in records(converted)}
    for size in (48, 96, 400):
        target = Target("shorter", size)
        resized_count = 0
        for _, example in records(resized / f"shorter-{size}"):
            encoded, height, width = example["image/encoded"][0], example["image/height"][0], example["image/width"][0]
            header, _ = jpeg_facts(encoded)
            assert (header.height, header.width) == (height, width)
            with Image.open(io.BytesIO(encoded)) as image:
                assert image.size == (width, height)
            original = full[example["image/filename"][0]]
            w, h = original["image/width"][0], original["image/height"][0]
            if target.fits(w, h):  # within the size: exactly the full-size build's bytes
                assert encoded == original["image/encoded"][0]
                continue
            resized_count += 1
            assert min(width, height) == size and (width, height) == target.size_for(w, h)
            assert abs(width / height - w / h) < 2 / size  # the aspect kept, to the pixel
            assert header.sof == 0xC0 and header.components == 3  # baseline RGB
            assert exif_orientation(encoded) == 1 and b"Exif\0\0" not in encoded[:2000]
        manifest = json.loads((resized / f"shorter-{size}" / "manifest.json").read_text())
        assert sum(s["resized"] for s in manifest["shards"]) == resized_count
        if size == 48:
            assert resized_count == 64  # every image, CMYK and PNG inputs included
        elif size == 96:
            assert 0 < resized_count < 64
        else:
            assert resized_count == 0


def test_layout_boxes_and_every_other_feature_equal_the_full_size_build(resized, converted):
    sized = ("image/encoded", "image/height", "image/width")
    full = [(shard, {k: v for k, v in e.items() if k not in sized}) for shard, e in records(converted)]
    for folder in ("shorter-48", "shorter-96"):
        assert [(shard, {k: v for k, v in e.items() if k not in sized})
                for shard, e in records(resized / folder)] == full  # record i is the same image, same boxes


def test_a_size_no_image_exceeds_gives_the_full_size_shards(resized, converted):
    for shard in converted.glob("*-of-*"):
        assert (resized / "shorter-400" / shard.name).read_bytes() == shard.read_bytes()


def test_longer_side_and_resize_all(sample_dir, converted, tmp_path):
    out = tmp_path / "out"
    result = run_cli(*sample_args(sample_dir, out, "--resize", "longer:100", "--resize-all", "--quality", 80,
                                  "--workers", 1))
    assert result.exit_code == 0, result.output
    full = {e["image/filename"][0]: e for _, e in records(converted)}
    for _, example in records(out / "longer-100"):
        width, height = example["image/width"][0], example["image/height"][0]
        original = full[example["image/filename"][0]]
        assert max(width, height) == 100  # smaller images enlarged too: --resize-all
        assert (width, height) == Target("longer", 100).size_for(original["image/width"][0],
                                                                 original["image/height"][0])
        assert example["image/encoded"][0] != original["image/encoded"][0]
    manifest = json.loads((out / "longer-100" / "manifest.json").read_text())
    assert manifest["options"]["resize"]["quality"] == 80 and manifest["options"]["resize"]["larger_only"] is False


def rotated_name(sample):
    """The sample's EXIF-rotated JPEG (orientation 6)."""
    found = [p for p in (sample / "train").rglob("*.JPEG") if exif_orientation(p.read_bytes()) != 1]
    assert len(found) == 1
    return found[0]


def test_exif_orientation_ignored_by_default_and_applied_with_exif_transpose(sample_dir, resized, tmp_path):
    rotated = rotated_name(sample_dir)
    with Image.open(rotated) as image:
        w, h = image.size
        upright = image.transpose(Image.Transpose.ROTATE_270)  # orientation 6: turn 90 degrees clockwise
        pixels = image.convert("RGB")
    by_name = {e["image/filename"][0].decode(): e for _, e in records(resized / "shorter-48")}
    default = by_name[rotated.name]
    assert (default["image/width"][0], default["image/height"][0]) == Target("shorter", 48).size_for(w, h)
    assert exif_orientation(default["image/encoded"][0]) == 1
    with Image.open(io.BytesIO(default["image/encoded"][0])) as stored:
        _assert_shows(stored, pixels)

    result = run_cli(*sample_args(sample_dir, tmp_path / "out", "--resize", "shorter:48,400", "--exif-transpose",
                                  "--workers", 1))
    assert result.exit_code == 0, result.output
    for size in (48, 400):  # turned upright, also where the size would have left it untouched
        by_name = {e["image/filename"][0].decode(): e for _, e in records(tmp_path / "out" / f"shorter-{size}")}
        turned = by_name[rotated.name]
        want = Target("shorter", size).size_for(h, w) if size == 48 else (h, w)
        assert (turned["image/width"][0], turned["image/height"][0]) == want
        assert exif_orientation(turned["image/encoded"][0]) == 1
        with Image.open(io.BytesIO(turned["image/encoded"][0])) as stored:
            _assert_shows(stored, upright.convert("RGB"))


def _mean_difference(a, b):
    return sum(abs(x - y) for x, y in zip(a.tobytes(), b.tobytes(), strict=True)) / len(a.tobytes())


def _assert_shows(stored, picture):
    """The stored image is `picture` resized, and far from it turned half a turn."""
    expected = picture.resize(stored.size, Image.Resampling.LANCZOS)
    right = _mean_difference(stored.convert("RGB"), expected)
    wrong = _mean_difference(stored.convert("RGB"), expected.transpose(Image.Transpose.ROTATE_180))
    assert right < wrong / 2, (right, wrong)


def test_verify_warns_on_an_untouched_rotated_jpeg_and_not_on_a_plain_one(sample_dir, resized):
    rotated = rotated_name(sample_dir)
    for folder, warned in (("shorter-400", True), ("shorter-48", False)):
        result = run_cli("verify", resized / folder, "--json")
        report = json.loads(result.stdout)
        assert result.exit_code == 0 and report["ok"] is True and report["problems"] == []
        if not warned:
            assert report["warnings"] == [] and report["summary"]["warning_counts"] == {}
            continue
        assert report["summary"]["warning_counts"] == {"exif-orientation": 1}
        (warning,) = report["warnings"]
        shard = resized / folder / warning["file"]
        with open(shard, "rb") as f:
            payloads = [p for _, p, _ in read_records(f, shard.stat().st_size)]
        assert decode_example(payloads[warning["record"]])["image/filename"][0].decode() == rotated.name
        text = run_cli("verify", resized / folder)
        assert text.exit_code == 0 and "warning: exif-orientation: 1 record(s)" in text.stdout
        assert text.stdout.rstrip().endswith("OK: sound")


def test_rerun_resumes_each_build_and_other_options_are_refused(sample_dir, resized, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(resized, out)
    again = run_cli(*sample_args(sample_dir, out, "--resize", TARGETS, "--workers", 1, "--json"))
    summary = json.loads(again.stdout)
    assert [b["shards_written"] for b in summary["builds"].values()] == [0, 0, 0]
    (out / "shorter-96" / "train-00001-of-00004").unlink()
    again = run_cli(*sample_args(sample_dir, out, "--resize", TARGETS, "--workers", 1, "--json"))
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
    # what a build folder may hold besides builds (build/folder.py: folder_entries): an interrupted Beam run's figures
    (out / "notes.txt").unlink()
    (out / ".beam-results").mkdir()
    result = run_cli(*sample_args(sample_dir, out, "--resize", "shorter:96", "--workers", 1))
    assert result.exit_code == 0, result.output


def test_an_output_folder_inside_the_train_folder_is_refused_before_the_scan(sample_dir, tmp_path):
    """Already there, the folder would be scanned as a class folder first: the refusal must come before."""
    inside = tmp_path / "sample"
    shutil.copytree(sample_dir, inside)
    (inside / "train" / "out").mkdir()
    expect_error(sample_args(inside, inside / "train" / "out", "--resize", "shorter:96"), 2,
                 "--output-dir", "is inside --train-dir")


# ------------------------------------------------------------------ readers


def test_tensorflow_reads_every_record_of_a_resized_build(resized):
    tf = pytest.importorskip("tensorflow")

    for folder in ("shorter-48", "shorter-96"):
        for split, count in (("train", 48), ("validation", 16)):
            seen = 0
            for path in sorted((resized / folder).glob(f"{split}-*-of-*")):
                for record in read_with_tensorflow(path):
                    decoded = tf.io.decode_jpeg(record["image/encoded"], channels=3)
                    assert tuple(decoded.shape) == (record["image/height"], record["image/width"], 3)
                    seen += 1
            assert seen == count


def test_dali_reads_every_record_of_a_resized_build(resized):
    dali = pytest.importorskip("nvidia.dali")
    import nvidia.dali.tfrecord as tfrec
    from nvidia.dali import fn

    for folder in ("shorter-48", "shorter-96"):
        build = resized / folder
        expected = set()
        for _, e in records(build, "train"):
            shape = (e["image/height"][0], e["image/width"][0])
            if exif_orientation(e["image/encoded"][0]) >= 5:  # untouched and rotated: DALI turns it (verify warns)
                shape = shape[::-1]
            expected.add((e["image/filename"][0].decode(), *shape))
        paths = [str(p) for p in sorted(build.glob("train-*-of-*"))]
        indexes = [str(build / "dali_idx" / (Path(p).name + ".idx")) for p in paths]

        @dali.pipeline_def(batch_size=8, num_threads=2, device_id=None)
        def pipeline(paths=paths, indexes=indexes):
            r = fn.readers.tfrecord(path=paths, index_path=indexes, name="Reader", pad_last_batch=True, features={
                "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                "image/filename": tfrec.FixedLenFeature((), tfrec.string, ""),
            })
            return r["image/filename"], fn.decoders.image(r["image/encoded"], device="cpu")

        pipe = pipeline()
        pipe.build()
        assert pipe.reader_meta("Reader")["epoch_size"] == 48
        seen = set()
        for _ in range(6):
            names, images = pipe.run()
            for i in range(len(names)):
                height, width, channels = images.at(i).shape
                seen.add((names.at(i).tobytes().decode(), height, width))
                assert channels == 3
        assert seen == expected


# ------------------------------------------------------------------ slow: kill -9, trainer-check


@pytest.fixture(scope="module")
def larger_sample(tmp_path_factory):
    out = tmp_path_factory.mktemp("larger")
    make_sample(out, classes=8, per_class=100, validation_per_class=2, min_size=200, max_size=400)
    return out


def larger_args(sample, out):
    return ["convert", "--train-dir", sample / "train", "--labels-file", sample / "labels.txt", "--output-dir", out,
            "--train-shards", 32, "--layout-threads", 4, "--workers", 2, "--resize", "shorter:128,224"]


@pytest.mark.slow
def test_kill_9_then_rerun_gives_the_same_bytes(larger_sample, tmp_path):
    reference = tmp_path / "reference"
    assert run_process(*larger_args(larger_sample, reference)).returncode == 0
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "imagenet_build", *map(str, larger_args(larger_sample, out))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(out.glob("shorter-224/train-*"))) >= 3:
            break
        time.sleep(0.002)
    assert proc.poll() is None, "the build ended before it could be killed: make the sample larger"
    workers = children_of(proc.pid)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert workers and wait_until_gone(workers) == []  # workers there were, and none outlived the kill
    rerun = run_process(*larger_args(larger_sample, out), "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert sum(b["shards_kept"] for b in json.loads(rerun.stdout)["builds"].values()) >= 1  # the manifest vouched
    assert tree_digest(out) == tree_digest(reference)
    assert not list(out.rglob(".*.tmp"))


@pytest.mark.slow
def test_trainer_check_passes_on_a_resized_build(resized):
    pytest.importorskip("nvidia.dali.plugin.tf")
    result = run_cli("trainer-check", resized / "shorter-96", "--device", "cpu", "--steps", 8, "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["ok"], report["checks"]
    assert report["records"] == 48
