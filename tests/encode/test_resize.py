"""convert --resize: stored sizes, the full-size build's layout and boxes, one pass = separate runs, the filters,
EXIF orientation, verify's warning (a run's builds: tests/writer/test_builds.py; read back: tests/e2e)."""

import io
import json
import subprocess
import sys

import pytest
from PIL import Image

from conftest import RESIZE_TARGETS, run_cli, run_process, sample_args, tree_digest
from imagenet_build.encode import resample, resize
from imagenet_build.encode.jpeg_header import exif_orientation, walk
from imagenet_build.encode.resize import Target
from imagenet_build.format.record_schema import decode_example
from imagenet_build.format.tfrecord import read_records
from run_helpers import records


def source_file(sample, example):
    name = example["image/filename"][0].decode()
    if name.startswith("ILSVRC2012_val_"):
        return sample / "validation" / name
    return sample / "train" / example["image/class/synset"][0].decode() / name


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
    for target in RESIZE_TARGETS.split(":")[1].split(","):
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
            header = walk(encoded).header
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


