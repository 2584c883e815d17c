"""The PyTorch reader's GPU path: the CPU path with the device switched, held to the CPU path.

Runs where torch sees a CUDA device (docs/gpu.md: `scripts/gpu_check.sh` runs these there); on a
machine without one each test skips, saying so. The decoders differ by design (nvJPEG's chroma
upsampling is not libjpeg-turbo's: on the sample's sharp colour stripes, a mean of 9 levels), so
pixels are compared where that does not apply; the crops and flips, drawn from the same CPU
generator, are the same on both devices.
"""

import io

import numpy as np
import pytest
from PIL import Image

from helpers import trainer_report

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytestmark = [
    pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: the GPU path runs on a GPU "
                       "machine (docs/gpu.md)"),
]

from imagenet_build.torch import BatchTransform, RecordDataset, decode_images  # noqa: E402


def stored_jpegs(folder, count=16):
    return [s["image"] for s in RecordDataset(folder, "train", decode=False, shuffle=False)][:count]


def photo_like_jpegs():
    """Smooth pictures as photos are (the sample's are sharp colour stripes over noise, where nvJPEG's
    chroma upsampling and libjpeg-turbo's differ by design): 4:2:0, 4:4:4, progressive and grayscale."""
    y, x = np.mgrid[0:333, 0:500].astype(np.float32)
    pixels = np.stack([128 + 100 * np.sin(x / 40), 128 + 90 * np.cos(y / 30), 255 * x / 500], -1)
    image = Image.fromarray(pixels.clip(0, 255).astype(np.uint8))
    options = [{"subsampling": "4:2:0"}, {"subsampling": "4:4:4"}, {"progressive": True}]
    jpegs = []
    for picture, saved_with in [(image, o) for o in options] + [(image.convert("L"), {})]:
        out = io.BytesIO()
        picture.save(out, "JPEG", quality=90, **saved_with)
        jpegs.append(out.getvalue())
    return jpegs


def test_nvjpeg_decodes_what_the_cpu_decodes(converted):
    """Every stored record (grayscale, progressive, EXIF-rotated and re-encoded ones among them) to the
    same RGB shape; photo-like pictures, and the grayscale records, to the same pixels within
    torchvision's own bound for its two decoders (a mean difference under 2 levels)."""
    stored = stored_jpegs(converted, 48)
    on_cpu, on_gpu = decode_images(stored, "cpu"), decode_images(stored, "cuda")
    assert len(on_gpu) == len(stored) and all(image.device.type == "cuda" for image in on_gpu)
    grayscale = 0
    for cpu, gpu in zip(on_cpu, on_gpu):
        assert gpu.shape == cpu.shape and gpu.shape[0] == 3 and gpu.dtype == torch.uint8
        if torch.equal(cpu[0], cpu[1]) and torch.equal(cpu[1], cpu[2]):
            grayscale += 1
            assert float((gpu.cpu().float() - cpu.float()).abs().mean()) < 2
    assert grayscale > 0
    photos = photo_like_jpegs()
    for cpu, gpu in zip(decode_images(photos, "cpu"), decode_images(photos, "cuda")):
        assert gpu.shape == cpu.shape == (3, 333, 500)
        assert float((gpu.cpu().float() - cpu.float()).abs().mean()) < 2


def test_crop_and_resize_on_cuda_are_the_cpu_ones(converted):
    """The same seed draws the same crops and flips on either device: the same decoded pixels, cropped and
    resized on each, agree within rounding, and a batch on the GPU is repeatable."""
    images = decode_images(stored_jpegs(converted), "cuda")
    on_cpu, on_gpu = BatchTransform("cpu", seed=5), BatchTransform("cuda", seed=5)
    for image in images:
        cpu, gpu = on_cpu.crop_resize(image.cpu()), on_gpu.crop_resize(image)
        assert gpu.device.type == "cuda" and gpu.shape == cpu.shape == (3, 224, 224)
        difference = (gpu.cpu().int() - cpu.int()).abs()
        assert float(difference.float().mean()) < 0.5 and int(difference.max()) <= 4
    encoded = stored_jpegs(converted)
    batch = BatchTransform("cuda", seed=5)(encoded)
    assert batch.shape == (16, 3, 224, 224) and torch.equal(batch, BatchTransform("cuda", seed=5)(encoded))


def test_decoding_leaves_memory_that_queued_work_still_reads_alone(converted):
    """pytorch/vision#9606: torchvision's nvJPEG decode wrote into blocks freed on the caller's stream while
    kernels queued there still read them (trainer-check's loss went NaN at step 5 on an H100). Blocks the
    size of decoded images are filled, summed behind a long kernel, freed, and the batch decoded: each sum
    must come out exact."""
    encoded = stored_jpegs(converted, 48)
    for _ in range(10):
        victims = [torch.ones((3, 120, 120), device="cuda") for _ in range(32)]
        torch.cuda.synchronize()
        torch.cuda._sleep(20_000_000)  # a long kernel ahead of the sums on the caller's stream
        sums = [victim.sum() for victim in victims]
        del victims
        decode_images(encoded, "cuda")
        torch.cuda.synchronize()
        assert [float(total) for total in sums] == [3 * 120 * 120.0] * 32


@pytest.mark.slow
def test_trainer_check_passes_on_cuda(converted):
    code, report, failed = trainer_report(converted, "--framework", "torch", "--device", "cuda", "--steps", 60,
                                          "--batch-size", 64, "--num-shards", 2)
    assert code == 0 and report["ok"] and not failed, report["checks"]
    assert report["device"] == "cuda" and report["model"] == "resnet50" and report["records"] == 48


def test_device_auto_takes_the_gpu(converted):
    code, report, failed = trainer_report(converted, "--framework", "torch", "--device", "auto", "--steps", 2,
                                          "--batch-size", 8)
    assert report["device"] == "cuda" and report["model"] == "resnet50"
