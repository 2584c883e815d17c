"""The pixel work of a resized image: which way each input goes, the decode scale libjpeg-turbo really
uses, buffers kept from image to image, SIMD levels, orientation, and Pillow's way where simplejpeg is
not installed."""

import hashlib
import io
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from imagenet_build.encode import resample, resize
from imagenet_build.encode.jpeg_header import EXTRANEOUS
from imagenet_build.encode.resize import Target
from jpeg_cases import CASES


def photo(size, seed=0):
    """A noisy RGB picture: flat areas and detail, so that every filter and decoder leaves its mark."""
    rng = np.random.default_rng(seed)
    gradient = np.asarray(Image.radial_gradient("L").resize(size), dtype=np.float64)[..., None]
    pixels = gradient * rng.uniform(0.3, 1.0, 3) + rng.normal(0, 12, (size[1], size[0], 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def jpeg(size, seed=0, mode="RGB", **save):
    out = io.BytesIO()
    photo(size, seed).convert(mode).save(out, "JPEG", quality=save.pop("quality", 92), **save)
    return out.getvalue()


def resized(data, spec="shorter:100,224", **options):
    results = resize.stored_resized(data, "x.JPEG", resize.ResizeOptions(resize.parse_targets(spec), **options))
    assert all(isinstance(r, resize.images.StoredImage) for r in results), results
    return results


def psnr(a, b):
    mse = np.mean((np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)) ** 2)
    return 10 * np.log10(255 ** 2 / mse)


def test_jpegs_stored_as_is_go_the_fast_way_and_the_rest_through_pillow(monkeypatch):
    assert resample.fast()  # simplejpeg and cykooz.resizer: dependencies on this platform
    assert "simplejpeg " in resize.codec()
    calls = []
    real = resample.decode_turbo
    monkeypatch.setattr(resample, "decode_turbo", lambda *a: calls.append(a[1]) or real(*a))
    png, cmyk = io.BytesIO(), io.BytesIO()
    photo((300, 200)).save(png, "PNG")
    photo((300, 200)).convert("CMYK").save(cmyk, "JPEG")
    cases = [("x.JPEG", jpeg((300, 200))), ("png.JPEG", png.getvalue()), ("cmyk.JPEG", cmyk.getvalue()),
             ("gray.JPEG", jpeg((300, 200), mode="L")), ("progressive.JPEG", jpeg((300, 200), progressive=True))]
    for name, data in cases:
        (out,) = resize.stored_resized(data, name, resize.ResizeOptions((Target("shorter", 100),)))
        assert (out.width, out.height) == (150, 100) and out.resized
        with Image.open(io.BytesIO(out.data)) as image:
            assert image.mode == "RGB" and image.layer[0][1:3] == (2, 2)  # 4:2:0
    assert calls == ["x.JPEG", "gray.JPEG", "progressive.JPEG"]
    # re-encoded for its header only (DALI stops on it): its image data is a plain JPEG's, the fast way too
    odd, clean = CASES["junk before APP0"][0], CASES["baseline"][0]
    options = resize.ResizeOptions((Target("shorter", 100),), larger_only=False)
    (out,) = resize.stored_resized(odd, "odd.JPEG", options)
    assert calls[-1] == "odd.JPEG" and out.reencoded == EXTRANEOUS
    assert out.data == resize.stored_resized(clean, "clean.JPEG", options)[0].data


@pytest.mark.parametrize("size", [(4, 4), (6, 4), (3, 3), (9, 8), (16, 12), (37, 23), (640, 480), (1024, 768)])
def test_the_scale_the_rule_picks_is_the_scale_libjpeg_turbo_decodes_at(size):
    """TurboJPEG decodes at the smallest scale that gives at least the size asked for: below 8 pixels a
    side its 3/8 gives the size of 4/8 (4x4 -> 2x2), so the rule decodes those in full. 4:4:4 JPEGs, whose
    pixels need no upsampling, decode to the same pixels through Pillow's draft at exactly 1/d."""
    data = jpeg(size, subsampling=0)
    for longer in sorted({1, 2, max(size) // 5, max(size) // 3, max(size) // 2} - {0}):
        out = Target("longer", longer).size_for(*size)
        scale = resize.decode_scale(size, out)
        fast = resample.decode_turbo(data, "x.JPEG", size, scale)
        pillow = resample.decode_pillow(data, "x.JPEG", None, size, scale)
        assert fast.factor == pillow.factor == scale / 8
        assert np.array_equal(fast.array[..., :3], np.asarray(pillow.image)), (size, out, scale)


def test_buffers_kept_from_image_to_image_give_the_bytes_of_fresh_ones():
    inputs = [jpeg((1024, 768), 1), jpeg((300, 200), 2), jpeg((375, 500), 3, mode="L"), jpeg((500, 375), 4),
              jpeg((640, 480), 5, subsampling=0), jpeg((500, 333), 6, progressive=True)]
    fresh = []
    for data in inputs:
        resample._buffers.__dict__.clear()
        fresh.append([r.data for r in resized(data, "shorter:40,100,224", larger_only=False)])
    kept = {}
    for order in (inputs, inputs[::-1]):  # larger and smaller images after each other, every scale's buffer
        for data in order:
            assert [r.data for r in resized(data, "shorter:40,100,224", larger_only=False)] == fresh[inputs.index(data)]
        kept = kept or dict(resample._buffers.by_slot)
    assert sorted(kept, key=str) == [1, 2, 4, 8, "out"]
    assert all(resample._buffers.by_slot[slot] is buffer for slot, buffer in kept.items())  # reused, not remade


def test_a_buffer_too_large_to_keep_is_used_once(monkeypatch):
    monkeypatch.setattr(resample, "KEEP_BUFFER_BYTES", 500 * 375 * 4 - 1)
    resample._buffers.__dict__.clear()
    data = jpeg((500, 375))
    first = resized(data)
    assert 8 not in resample._buffers.by_slot and "out" in resample._buffers.by_slot  # 224: 299x224 kept
    assert [r.data for r in resized(data)] == [r.data for r in first]


SIMD_CHILD = """
import hashlib, sys
from imagenet_build.encode import resample, resize
resample._fast_resizer().cpu_extensions = resample._fast_resize_module().CpuExtensions.none
options = resize.ResizeOptions(resize.parse_targets("shorter:100,224,288"), larger_only=False, filter=sys.argv[1])
digest = hashlib.sha256()
for path in sys.argv[2:]:
    for stored in resize.stored_resized(open(path, "rb").read(), path, options):
        digest.update(stored.data)
print(digest.hexdigest())
"""


@pytest.mark.parametrize("kernel", list(resample.FILTERS))
def test_no_simd_gives_the_same_bytes(tmp_path, kernel):
    """libjpeg-turbo without SIMD (JSIMD_FORCENONE) and fast_image_resize without it: the same bytes, with
    either filter."""
    paths = []
    for i, (size, options) in enumerate([((1024, 768), {}), ((500, 375), {}), ((375, 500), {"subsampling": 0}),
                                       ((640, 427), {"progressive": True}), ((500, 333), {"mode": "L"})]):
        paths.append(tmp_path / f"{i}.JPEG")
        paths[-1].write_bytes(jpeg(size, i, **options))
    digest = hashlib.sha256()
    options = resize.ResizeOptions(resize.parse_targets("shorter:100,224,288"), larger_only=False, filter=kernel)
    for path in paths:
        for stored in resize.stored_resized(path.read_bytes(), str(path), options):
            digest.update(stored.data)
    env = {**os.environ, "JSIMD_FORCENONE": "1"}
    child = subprocess.run([sys.executable, "-c", SIMD_CHILD, kernel, *map(str, paths)], env=env, capture_output=True,
                           text=True, check=True)
    assert child.stdout.strip() == digest.hexdigest()


@pytest.mark.parametrize("method", range(7))
def test_the_fast_way_turns_pixels_as_pillow_does(method):
    data = jpeg((90, 60), subsampling=0)
    fast = resample.decode_turbo(data, "x.JPEG", (90, 60), 8)
    pillow = resample.decode_pillow(data, "x.JPEG", None, (90, 60), 8)
    turned = resample.transpose(fast, method)
    assert turned.array.shape[2] == 4 and turned.image.size == pillow.image.transpose(method).size
    assert np.array_equal(turned.array[..., :3], np.asarray(pillow.image.transpose(method)))


def test_corrupt_image_data_decodes_as_with_pillow():
    """A JPEG whose image data libjpeg only warns about (the full-size build stores it as is): decoded, as
    Pillow decodes it, not refused."""
    data = bytearray(jpeg((500, 375)))
    start = data.index(b"\xff\xda") + 200
    for i in range(start, start + 400, 7):
        data[i] = 0x55 if data[i] != 0x55 else 0x56
    (out,) = resize.stored_resized(bytes(data), "x.JPEG", resize.ResizeOptions((Target("shorter", 100),)))
    assert isinstance(out, resize.images.StoredImage) and (out.width, out.height) == (133, 100)


def test_without_simplejpeg_pillow_decodes_and_encodes_and_the_codec_says_so(monkeypatch):
    data = jpeg((640, 480))
    fast, fast_codec = resized(data, "shorter:100,400"), resize.codec()
    monkeypatch.setattr(resample, "_turbo", lambda: None)
    assert not resample.fast() and "simplejpeg" not in resize.codec() and resize.codec() != fast_codec
    plain = resized(data, "shorter:100,400")
    assert [(r.width, r.height) for r in plain] == [(r.width, r.height) for r in fast] == [(133, 100), (533, 400)]
    for a, b in zip(plain, fast):
        assert a.data != b.data
        with Image.open(io.BytesIO(a.data)) as one, Image.open(io.BytesIO(b.data)) as other:
            assert psnr(one.convert("RGB"), other.convert("RGB")) > 38
