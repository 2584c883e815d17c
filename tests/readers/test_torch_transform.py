"""The PyTorch reader's decoding and augmentation (readers/torch_transform.py), on the CPU: slim's random crop
(area, aspect, places, a fallback, seeded crops stable), mirroring, evaluation's resize and centre crop, a
missing torchvision in one line."""

import io
import sys
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from run_helpers import error_message, torch_or_skip

torch = torch_or_skip()
# torchvision 0.29 marks its image decoding deprecated (in favour of TorchCodec); it still works
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")

from imagenet_build.torch import (  # noqa: E402
    AREA,
    ASPECT,
    BatchTransform,
    RecordDataset,
    decode_images,
)


def test_batch_transform_crop_ranges_and_repeatability(converted):
    transform = BatchTransform("cpu", seed=3)
    for height, width in [(100, 100), (375, 500), (500, 60)]:
        for _ in range(200):
            top, left, h, w = transform.crop_box(height, width)
            assert 0 <= top <= height - h and 0 <= left <= width - w
            if (h, w) != (height, width):
                assert AREA[0] * 0.9 <= h * w / (height * width) <= AREA[1]
                assert ASPECT[0] * 0.9 <= w / h <= ASPECT[1] * 1.1
    encoded = [s["image"] for s in RecordDataset(converted, "train", decode=False, shuffle=False)][:8]
    a, b = BatchTransform("cpu", seed=1)(encoded), BatchTransform("cpu", seed=1)(encoded)
    assert a.shape == (8, 3, 224, 224) and a.dtype == torch.float32 and torch.equal(a, b)
    assert not torch.equal(a, BatchTransform("cpu", seed=2)(encoded))
    evaluation = BatchTransform("cpu", training=False, mean=(0, 0, 0), std=(1, 1, 1))(encoded)
    assert evaluation.shape == (8, 3, 224, 224) and 0 <= float(evaluation.min()) and float(evaluation.max()) <= 255


def uniform_distance(values, lo, hi):
    """Kolmogorov-Smirnov distance between the values and the uniform distribution on [lo, hi]."""
    u = np.sort((np.asarray(values) - lo) / (hi - lo))
    n = len(u)
    return float(np.max(np.maximum(np.arange(1, n + 1) / n - u, u - np.arange(n) / n)))


def test_random_crop_spreads_over_slims_area_and_aspect():
    """4000 crops of a 500x375 image: areas from 5 % to the whole, aspects from 3:4 to 4:3, almost no fallback.
    Below half the area every aspect fits, so there the draws are held to their laws: area uniform, aspect
    log-uniform (these seeded draws are 0.02 from both laws; drawn uniformly, the aspects are 0.09 away)."""
    transform = BatchTransform("cpu", seed=5)
    height, width = 375, 500
    boxes = np.array([transform.crop_box(height, width) for _ in range(4000)])
    h, w = boxes[:, 2], boxes[:, 3]
    area, aspect = h * w / (height * width), w / h
    assert np.mean((h == height) & (w == width)) < 0.01  # fallbacks to the whole image are rare here
    assert AREA[0] * 0.97 <= area.min() < 0.06 and 0.95 < area.max() <= AREA[1]
    assert np.mean(area < 0.15) > 0.08 and np.mean(area > 0.8) > 0.02  # the low and the high deciles are drawn
    assert ASPECT[0] * 0.98 <= aspect.min() < 0.77 and 1.30 < aspect.max() <= ASPECT[1] * 1.02
    small = area < 0.5
    assert small.sum() > 2000
    assert uniform_distance(area[small], AREA[0], 0.5) < 0.04
    assert uniform_distance(np.log(aspect[small]), np.log(ASPECT[0]), np.log(ASPECT[1])) < 0.04


@pytest.mark.parametrize("height, width", [(1, 1000), (1000, 2)])
def test_random_crop_falls_back_to_the_whole_image_where_no_crop_fits(height, width):
    """No box of 5 % of the area or more with an aspect from 3:4 to 4:3 fits in a 1x1000 or a 1000x2 image."""
    transform = BatchTransform("cpu", seed=0)
    assert {transform.crop_box(height, width) for _ in range(20)} == {(0, 0, height, width)}


def test_random_crop_positions_cover_every_place_evenly():
    """A 7x7 crop of a 10x10 image lies at each of the 4 x 4 places, about equally often."""
    transform = BatchTransform("cpu", area=(0.49, 0.49), aspect=(1, 1), seed=0)
    boxes = [transform.crop_box(10, 10) for _ in range(800)]
    assert {(h, w) for _, _, h, w in boxes} == {(7, 7)}
    for place in (Counter(top for top, *_ in boxes), Counter(left for _, left, *_ in boxes)):
        assert sorted(place) == [0, 1, 2, 3] and min(place.values()) > 150, place
    assert len(Counter((top, left) for top, left, *_ in boxes)) == 16  # top and left drawn apart


def test_random_crop_draws_boxes_as_wide_or_high_as_the_image_and_one_pixel_sides():
    """Areas 0.5-1 of a 10x10 image, square: the whole image is drawn (areas from 0.9025) about a fifth of
    the time, not only as the fallback; a 2x2 image gives 1x1 boxes too."""
    transform = BatchTransform("cpu", area=(0.5, 1.0), aspect=(1, 1), seed=0)
    whole = np.mean([transform.crop_box(10, 10)[2:] == (10, 10) for _ in range(400)])
    assert 0.12 < whole < 0.28, whole
    tiny = BatchTransform("cpu", seed=0)
    assert (1, 1) in {tiny.crop_box(2, 2)[2:] for _ in range(100)}


SEED_0_CROPS = [(9, 41, 325, 383), (8, 32, 357, 316), (55, 97, 260, 279), (42, 186, 312, 263),
                (18, 142, 206, 228), (92, 187, 219, 226)]


def test_seeded_crops_stay_the_same_from_release_to_release():
    """A seeded run crops as it did: the default transform (seed 0, 100 attempts) gives these boxes of a 375x500
    image, then the fallback of a 1x1000 image after its 100 attempts, then this box. Any change to the draws
    (their number, precision or order, the attempts, the defaults) changes every seeded run's augmentation."""
    for transform in (BatchTransform("cpu"), BatchTransform("cpu", seed=0, attempts=100)):
        assert [transform.crop_box(375, 500) for _ in SEED_0_CROPS] == SEED_0_CROPS
        assert transform.crop_box(1, 1000) == (0, 0, 1, 1000)
        assert transform.crop_box(375, 500) == (100, 284, 139, 150)


@pytest.mark.parametrize("module, what, call", [
    ("torchvision.transforms.v2.functional", "augmenting images in imagenet_build.torch",
     lambda: BatchTransform("cpu").crop_resize(torch.zeros((3, 8, 8), dtype=torch.uint8))),
    ("torchvision.io", "decoding images in imagenet_build.torch", lambda: decode_images([b"\xff\xd8"])),
])
def test_a_missing_torchvision_is_one_line(monkeypatch, module, what, call):
    monkeypatch.setitem(sys.modules, module, None)
    text = error_message(call)
    assert text.startswith(f"{what} needs torchvision, which is not installed") and "\n" not in text, text


@pytest.mark.parametrize("height, width", [(1, 1), (2, 2), (3, 1), (2, 5)])
def test_random_crop_of_a_tiny_image_is_never_empty(height, width):
    """Rounding a small area's sides can give 0: such a draw is refused, never returned as an empty box."""
    transform = BatchTransform("cpu", area=(0.01, 1.0), seed=0)
    for _ in range(300):
        top, left, h, w = transform.crop_box(height, width)
        assert 0 < h <= height - top and 0 < w <= width - left


def jpeg(height, width, seed=0):
    """A JPEG of smooth random colours (no symmetry), and its decoded CHW uint8 tensor."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(small).resize((width, height), Image.BILINEAR).save(out, format="JPEG", quality=95)
    return out.getvalue(), decode_images([out.getvalue()])[0]


def test_training_mirrors_about_half_the_images():
    """The whole-image crop (area 1, aspect 1 of a square image) resized, mirrored or not: 64 images,
    each exactly the resized image or its mirror, about half of them mirrored; repeatable by seed."""
    from torchvision.transforms.v2 import functional

    encoded, image = jpeg(96, 96)
    resized = functional.resized_crop(image, 0, 0, 96, 96, [32, 32], antialias=True).float()
    transform = BatchTransform("cpu", size=32, area=(1, 1), aspect=(1, 1), mean=(0, 0, 0), std=(1, 1, 1), seed=4)
    out = transform([encoded] * 64)
    mirrored = [torch.equal(o, resized.flip(-1)) for o in out]
    assert all(m or torch.equal(o, resized) for o, m in zip(out, mirrored))
    assert 20 <= sum(mirrored) <= 44, sum(mirrored)


def test_the_defaults_are_the_cpu_training_224_and_evaluation_from_256():
    """BatchTransform() augments on the CPU for training; with training=False it resizes the shorter side to
    256 and keeps the centre 224 x 224 (docs/readers.md)."""
    encoded, image = jpeg(300, 400)
    default = BatchTransform()
    assert default.device == torch.device("cpu") and default.training and default.crop_resize(image).shape == (
        3, 224, 224)
    evaluation = BatchTransform(training=False)
    assert torch.equal(evaluation([encoded]), BatchTransform("cpu", training=False, size=224, resize=256)([encoded]))
    assert not torch.equal(evaluation([encoded]), BatchTransform("cpu", training=False, size=224, resize=257)(
        [encoded]))


@pytest.mark.parametrize("height, width, resize, size, top, left, h, w", [
    (300, 400, 150, 100, 25, 50, 150, 200),  # shorter side to 150, then the centre 100 x 100
    (400, 300, 150, 100, 50, 25, 200, 150),
    (100, 400, 50, 64, 0, 68, 64, 200),  # the shorter side never below size
])
def test_evaluation_resizes_the_shorter_side_and_takes_the_centre(height, width, resize, size, top, left, h, w):
    """Evaluation: the shorter side resized to `resize`, the centre size x size kept; then (x - mean) / std
    per channel with the defaults shared by every reader; channels_last changes the layout, not the values."""
    from torchvision.transforms.v2 import functional

    from imagenet_build.readers.normalisation import DLE_MEAN, DLE_STD

    encoded, image = jpeg(height, width)
    expected = functional.resize(image, [h, w], antialias=True)[:, top:top + size, left:left + size]
    transform = BatchTransform("cpu", training=False, size=size, resize=resize)
    assert torch.equal(transform.crop_resize(image), expected)
    mean, std = torch.tensor(DLE_MEAN).view(3, 1, 1), torch.tensor(DLE_STD).view(3, 1, 1)
    out = transform([encoded])
    assert out.shape == (1, 3, size, size) and torch.allclose(out[0], (expected.float() - mean) / std, atol=1e-5)
    last = BatchTransform("cpu", training=False, size=size, resize=resize, channels_last=True)([encoded])
    assert torch.equal(last, out) and last.is_contiguous(memory_format=torch.channels_last)
    assert not out.is_contiguous(memory_format=torch.channels_last)
