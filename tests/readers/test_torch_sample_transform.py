"""The PyTorch reader's per-sample path (readers/torch_sample_transform.py): BatchTransform's crops (a statistical
test over many draws), the crop it draws is the crop it decodes (at each DCT scale), evaluation's centre crop,
mirroring, normalisation, what the fast way does not take (PNG, CMYK), a damaged image named by its record, and
every record once through DataLoader workers."""

import io
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from run_helpers import error_message, torch_or_skip

torch = torch_or_skip()
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")

from imagenet_build.readers.torch_sample_transform import centre_box, dct_scale  # noqa: E402
from imagenet_build.torch import (  # noqa: E402
    BatchTransform,
    RecordDataset,
    SampleTransform,
    collate,
    decode_images,
    normalise,
)

PLAIN = dict(mean=(0, 0, 0), std=(1, 1, 1))


def jpeg(height, width, seed=0, mode="RGB"):
    """A JPEG of smooth random colours (no symmetry)."""
    rng = np.random.default_rng(seed)
    small = Image.fromarray(rng.integers(0, 256, (5, 5, 3), dtype=np.uint8)).resize((width, height), Image.BILINEAR)
    out = io.BytesIO()
    small.convert(mode).save(out, format="JPEG", quality=95)
    return out.getvalue()


def psnr(a, b):
    error = np.mean((np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)) ** 2)
    return 10 * np.log10(255 ** 2 / max(error, 1e-12))


def two_sample_distance(a, b):
    """Kolmogorov-Smirnov distance between two samples."""
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    below_a, below_b = np.searchsorted(a, grid, "right") / len(a), np.searchsorted(b, grid, "right") / len(b)
    return float(np.max(np.abs(below_a - below_b)))


def test_its_crops_are_drawn_as_batch_transforms():
    """3000 crops of a 375x500 image each way, seeds apart: areas, aspects, tops and lefts alike (KS distance below
    0.05, where 3000 draws of one law differ by 0.035 at most 99 times in 100); the same seed, the same boxes."""
    sample, batch = SampleTransform(seed=11), BatchTransform("cpu", seed=12)
    ours = np.array([sample.box(375, 500) for _ in range(3000)], dtype=np.float64)
    theirs = np.array([batch.crop_box(375, 500) for _ in range(3000)], dtype=np.float64)
    for boxes in (ours, theirs):
        assert np.all(boxes[:, 0] + boxes[:, 2] <= 375) and np.all(boxes[:, 1] + boxes[:, 3] <= 500)
    laws = {"area": lambda b: b[:, 2] * b[:, 3], "aspect": lambda b: b[:, 3] / b[:, 2],
            "top": lambda b: b[:, 0] / np.maximum(376 - b[:, 2], 1),
            "left": lambda b: b[:, 1] / np.maximum(501 - b[:, 3], 1)}
    for name, law in laws.items():
        assert two_sample_distance(law(ours), law(theirs)) < 0.05, name
    same = SampleTransform(seed=12)
    assert [same.box(375, 500) for _ in range(20)] == [tuple(map(int, b)) for b in theirs[:20]]


def ramp_jpeg(height=160, width=240):
    """A JPEG (quality 100, no chroma subsampling) whose red is each pixel's column and green its row."""
    ramp = np.zeros((height, width, 3), np.uint8)
    ramp[..., 0], ramp[..., 1] = np.arange(width)[None, :], np.arange(height)[:, None]
    out = io.BytesIO()
    Image.fromarray(ramp).save(out, format="JPEG", quality=100, subsampling=0)
    return out.getvalue()


def measured(images, height=160, width=240):
    """(area fraction, aspect, mirrored) of each output crop of the ramp, read off its red and green."""
    found = []
    for image in images:
        red, green = image[0].double(), image[1].double()
        size = red.shape[-1]
        w = float(red.max() - red.min()) * size / (size - 1)
        h = float(green.max() - green.min()) * size / (size - 1)
        found.append((w * h / (width * height), w / h, float(red[:, 0].mean() > red[:, -1].mean())))
    return np.array(found)


def test_the_crops_it_gives_follow_batch_transforms_law():
    """300 training outputs each way of a ramp JPEG (each pixel holds its column and row): the areas and aspects
    of the crops SampleTransform gives are those BatchTransform gives (KS distance below 0.14: 300 draws of one law
    differ by 0.133 at most once in 100), about half mirrored either way."""
    data = ramp_jpeg()
    sample = SampleTransform(size=32, normalise=False, seed=1)
    ours = measured([sample(data) for _ in range(300)])
    theirs = measured(BatchTransform("cpu", size=32, mean=(0, 0, 0), std=(1, 1, 1), seed=2)([data] * 300))
    for column in (0, 1):
        assert two_sample_distance(ours[:, column], theirs[:, column]) < 0.14, column
    assert 0.38 < ours[:, 2].mean() < 0.62 and 0.38 < theirs[:, 2].mean() < 0.62


@pytest.mark.parametrize("height, width, box, eighths", [
    (375, 500, (40, 60, 300, 280), 8),  # ImageNet-sized: every crop decoded whole
    (1200, 1600, (100, 200, 900, 1000), 2),  # 900 x 1000 covers 224 at 1/4 of its size
    (1200, 1600, (0, 0, 1200, 1600), 2),  # at 1/8 150 x 200, less than 224: 1/4
    (1200, 1600, (300, 300, 500, 460), 4),
])
def test_the_crop_it_decodes_is_the_crop_it_drew(height, width, box, eighths):
    """The box decoded at the DCT scale the crop needs and resized by fast_image_resize is torchvision's
    resized_crop of the whole decoded image, within what two resizers and a scaled IDCT differ by."""
    from torchvision.transforms.v2 import functional

    assert dct_scale(box, 224) == eighths
    data = jpeg(height, width)
    ours = SampleTransform(**PLAIN).turbo_crop(data, height, width, box)[..., :3]
    theirs = functional.resized_crop(decode_images([data])[0], *box, [224, 224], antialias=True).permute(1, 2, 0)
    assert ours.shape == (224, 224, 3) and psnr(ours, theirs.numpy()) > 33


def test_evaluation_takes_batch_transforms_centre_crop():
    """training=False: the centre crop BatchTransform takes, in the stored image's pixels, decoded and resized."""
    assert centre_box(300, 400, 100, 150) == (50.0, 100.0, 200.0, 200.0)
    assert centre_box(100, 400, 64, 50) == (0.0, 136.0, 100.0, 128.0)
    data = jpeg(300, 400, seed=2)
    ours = SampleTransform(training=False, size=100, resize=150, **PLAIN)(data)
    theirs = BatchTransform("cpu", training=False, size=100, resize=150, **PLAIN)([data])[0]
    assert ours.shape == (3, 100, 100) and ours.dtype == torch.float32 and psnr(ours, theirs) > 33


def test_training_mirrors_about_half_and_normalises():
    """The whole square image each time: each output the resized image or its mirror, about half mirrored, then
    (x - mean) / std per channel; seeded draws repeat."""
    data = jpeg(96, 96, seed=3)
    whole = dict(size=32, area=(1, 1), aspect=(1, 1))
    plain = SampleTransform(training=False, resize=32, size=32, **PLAIN)(data)
    transform = SampleTransform(**whole, **PLAIN, seed=4)
    images = [transform(data) for _ in range(64)]
    mirrored = [torch.equal(image, plain.flip(-1)) for image in images]
    assert all(m or torch.equal(image, plain) for image, m in zip(images, mirrored))
    assert 20 <= sum(mirrored) <= 44, sum(mirrored)
    again = SampleTransform(**whole, **PLAIN, seed=4)
    assert all(torch.equal(a, again(data)) for a in images[:8])
    mean, std = (10.0, 20.0, 30.0), (2.0, 4.0, 8.0)
    normalised = SampleTransform(training=False, resize=32, size=32, mean=mean, std=std)(data)
    expected = (plain - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)
    assert torch.allclose(normalised, expected, atol=1e-4)
    crop = SampleTransform(training=False, resize=32, size=32, normalise=False)(data)
    assert crop.dtype == torch.uint8 and torch.equal(crop.float(), plain)
    buffer = torch.empty((2, 3, 32, 32))
    batch = normalise(torch.stack([crop, crop]), mean, std, out=buffer)
    assert batch.data_ptr() == buffer.data_ptr() and torch.allclose(batch[1], expected, atol=1e-4)
    last = normalise(crop[None], mean, std, out=buffer)  # an epoch's last, shorter batch: the buffer's first rows
    assert last.shape == (1, 3, 32, 32) and last.data_ptr() == buffer.data_ptr()
    assert torch.allclose(last[0], expected, atol=1e-4)
    assert torch.allclose(normalise(crop[None], mean, std)[0], expected, atol=1e-4)


@pytest.mark.parametrize("kind", ["png", "cmyk", "greyscale", "decoded tensor"])
def test_what_the_fast_way_does_not_take_is_read_the_slower_way(kind):
    """A PNG (write_arrays(..., lossless=True)), a CMYK JPEG, a greyscale one and an image decoded already: the
    same centre crop as BatchTransform's, of the same colours."""
    rgb = np.asarray(Image.open(io.BytesIO(jpeg(120, 160, seed=5))).convert("RGB"))
    out = io.BytesIO()
    if kind == "png":
        Image.fromarray(rgb).save(out, "PNG")
    else:
        Image.fromarray(rgb).convert({"cmyk": "CMYK", "greyscale": "L"}.get(kind, "RGB")).save(out, "JPEG", quality=95)
    data = out.getvalue()
    given = decode_images([data])[0] if kind == "decoded tensor" else data
    ours = SampleTransform(training=False, size=64, resize=80, **PLAIN)(given)
    theirs = BatchTransform("cpu", training=False, size=64, resize=80, **PLAIN)([data])[0]
    assert ours.shape == (3, 64, 64) and psnr(ours, theirs) > 30, kind


def test_an_image_that_does_not_decode_is_named_by_its_record(build):
    """A record whose image is no JPEG past its first marker: one line naming shard, byte and file name."""
    from helpers import SHARD, edit_record

    def garble(example):
        example.features.feature["image/encoded"].bytes_list.value[0] = b"\xff\xd8 not a jpeg"

    edit_record(build, SHARD, 0, garble)
    dataset = RecordDataset(build, "train", decode=False, shuffle=False, transform=SampleTransform())
    first = dataset.records.starts[1]
    name = RecordDataset(build, "train", decode=False, shuffle=False)[first]["filename"]
    message = error_message(lambda: dataset[first])
    assert message.startswith(f"{build / SHARD}: byte 0 ({name}): does not decode as JPEG (") and "\n" not in message


def test_every_record_once_through_dataloader_workers(converted):
    """Two DataLoader workers, the transform in each: every record of the epoch once, with its label, as
    float32 3 x 224 x 224 batches; two epochs crop differently; torch.manual_seed repeats a run."""
    dataset = RecordDataset(converted, "train", decode=False, transform=SampleTransform())
    expected = Counter((s["offset"], s["shard"], s["label"]) for s in RecordDataset(converted, "train", decode=False))

    def epoch(number):
        dataset.set_epoch(number)
        loader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=2, collate_fn=collate)
        batches = list(loader)
        assert all(b["image"].shape[1:] == (3, 224, 224) and b["image"].dtype == torch.float32 for b in batches)
        got = Counter(place for b in batches for place in zip(b["offset"].tolist(), b["shard"], b["label"].tolist()))
        assert got == expected
        return {(s, o): image for b in batches for s, o, image in zip(b["shard"], b["offset"].tolist(), b["image"])}

    torch.manual_seed(7)
    first = epoch(0)
    second = epoch(1)
    torch.manual_seed(7)
    again = epoch(0)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert sum(not torch.equal(first[k], second[k]) for k in first) > len(first) // 2
