"""DALI's GPU path through PyTorch: the "mixed" decoder (nvJPEG, the GPU's hardware JPEG decoder where DALI
uses it) held to the CPU pipeline, and trainer-check --framework dali-torch on the GPU.

Runs where DALI sees a GPU (docs/gpu.md: `scripts/gpu_check.sh` runs these there); elsewhere each test
skips, saying so. nvJPEG's chroma upsampling is not libjpeg-turbo's (on the sample's sharp colour stripes a
mean of ~9 levels before resizing), so pixels are compared on average, after the resize both pipelines do.
"""

import sys

import pytest

from helpers import trainer_report

sys.modules.setdefault("triton", None)  # see test_torch.py: torch without triton beside TensorFlow
torch = pytest.importorskip("torch")
pytest.importorskip("nvidia.dali.plugin.pytorch")


def gpus():
    from nvidia.dali import backend

    return backend.GetCUDADeviceCount()  # 0 without a driver; an exception here is a broken install, a failure


pytestmark = [
    pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning"),
    pytest.mark.skipif(not gpus(), reason="no GPU visible to DALI here: the GPU path runs on a GPU machine "
                       "(docs/gpu.md)"),
]


def evaluation_epoch(folder, device_id):
    """Every train record once, in order (evaluation: no shuffle, the centre crop): images and labels on the host."""
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    from imagenet_build.dali import READER_NAME, pipeline

    pipe = pipeline(folder, "train", batch_size=16, device_id=device_id, training=False, num_threads=2)
    images, labels = [], []
    for batch in DALIGenericIterator(pipe, ["images", "labels"], reader_name=READER_NAME,
                                     last_batch_policy=LastBatchPolicy.PARTIAL):
        assert batch[0]["images"].device.type == ("cuda" if device_id is not None else "cpu")
        images.append(batch[0]["images"].cpu())
        labels.append(batch[0]["labels"].cpu())
    return torch.cat(images), torch.cat(labels)


def test_the_mixed_decoder_decodes_every_record_as_the_cpu_does(converted):
    """Every stored record of the sample (grayscale, progressive, EXIF-rotated, re-encoded CMYK and PNG among
    them) decodes on the GPU; the same records in the same order as on the CPU, the pixels close on average."""
    on_gpu, gpu_labels = evaluation_epoch(converted, 0)
    on_cpu, cpu_labels = evaluation_epoch(converted, None)
    assert on_gpu.shape == on_cpu.shape == (48, 3, 224, 224) and torch.equal(gpu_labels, cpu_labels)
    assert bool(torch.isfinite(on_gpu).all())
    difference = (on_gpu - on_cpu).abs().mean(dim=(1, 2, 3))  # normalised units: 1 is ~57 levels
    assert float(difference.max()) < 0.3, difference.tolist()


@pytest.mark.slow
def test_trainer_check_passes_on_the_gpu(converted):
    code, report, failed = trainer_report(converted, "--framework", "dali-torch", "--device", "gpu", "--steps", 60,
                                          "--batch-size", 32, "--num-shards", 2)
    assert code == 0 and report["ok"] and not failed, report["checks"]
    assert (report["device"], report["model"], report["records"]) == ("gpu", "resnet50", 48)


def test_device_auto_takes_the_gpu(converted):
    code, report, failed = trainer_report(converted, "--framework", "dali-torch", "--device", "auto", "--steps", 2,
                                          "--batch-size", 8)
    assert report["device"] == "gpu" and report["model"] == "resnet50", report
