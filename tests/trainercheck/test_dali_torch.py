"""trainer-check through DALI into PyTorch (--framework dali-torch), on the CPU: where TensorFlow is absent
--framework dali trains this way, with every check of the other readers; and imagenet_build.dali, the same
pipeline for a user's own loop."""

import json
import subprocess
import sys
from collections import Counter

import pytest

from helpers import trainer_report
from imagenet_build.format.manifest import read_manifest
from imagenet_build.infra.errors import BuildError

# torch before TensorFlow in one process, and without triton (see tests/readers/test_torch.py)
sys.modules.setdefault("triton", None)
torch = pytest.importorskip("torch")
pytest.importorskip("nvidia.dali.plugin.pytorch")

CHECKS = {"epoch", "ranks", "labels", "batches", "normalisation", "loss", "overfit"}
# The command line in a process where TensorFlow cannot be imported (an import of it raises ImportError)
WITHOUT_TF = ("import sys; sys.modules['tensorflow'] = None\n"
              "from imagenet_build.cli import main; sys.argv = ['imagenet-build'] + sys.argv[1:]; main()")


def without_tensorflow(*args):
    return subprocess.run([sys.executable, "-c", WITHOUT_TF, *map(str, args)], capture_output=True, text=True)


@pytest.mark.slow
def test_dali_trains_in_pytorch_where_tensorflow_is_absent_with_the_registrys_defaults(converted):
    """--framework dali without TensorFlow trains through DALI into PyTorch, every check passing; the options not
    given take readers.py's defaults on the CPU: batches of 16 on the small model, 2 DALI threads (the steps' 30,
    from the same defaults, is pinned in tests/trainercheck/test_trainers.py)."""
    result = without_tensorflow("trainer-check", converted, "--device", "cpu", "--num-shards", 2, "--steps", 6,
                                "--json")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    assert report["framework"] == "dali-torch" and report["ok"], report["checks"]
    assert {c["name"] for c in report["checks"] if c["ok"]} == CHECKS
    assert (report["records"], report["ranks"], report["device"]) == (48, 2, "cpu")
    assert (report["steps"], report["batch_size"], report["model"], report["workers"]) == (6, 16, "small", 2)
    assert report["dali"] and report["torch"] and report["loss"]["last"] < report["loss"]["first"]


def test_dali_tf_says_what_it_misses_where_tensorflow_is_absent(converted):
    result = without_tensorflow("trainer-check", converted, "--framework", "dali-tf", "--device", "cpu")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: trainer-check --framework dali-tf needs TensorFlow, which is not installed: in a clone of "
        "imagenet-build, pip install -c constraints.txt '.[tf]' (or: trainer-check --framework dali-torch or torch, "
        "installed here)"]


def test_dali_takes_tensorflow_where_it_and_the_plugin_are_installed(monkeypatch):
    from imagenet_build.trainercheck.trainers import for_framework

    pytest.importorskip("nvidia.dali.plugin.tf")
    assert for_framework("dali").name == "dali-tf"
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    assert for_framework("dali").name == "dali-torch"


@pytest.mark.slow
def test_pixels_normalised_twice_fail(converted):
    code, report, failed = trainer_report(converted, "--framework", "dali-torch", "--device", "cpu", "--steps", 3,
                                          "--mean", 0, 0, 0, "--std", 5000, 5000, 5000)
    assert code == 1 and failed == {"normalisation"}, report["checks"]


def test_a_gpu_is_refused_where_dali_sees_none(converted):
    from nvidia.dali import backend

    if backend.GetCUDADeviceCount():
        pytest.skip("DALI sees a GPU here: tests/readers/test_dali_cuda.py runs the GPU path")
    result = without_tensorflow("trainer-check", converted, "--framework", "dali-torch", "--device", "gpu")
    assert result.returncode == 1 and result.stderr.strip() == (
        "error: --device gpu: no GPU is visible to DALI; use --device cpu or auto"), result.stderr


# ------------------------------------------------------------------ imagenet_build.dali


def epoch(folder, split="validation", **options):
    """Every batch of one epoch of imagenet_build.dali's pipeline (CPU) through DALI's PyTorch iterator."""
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    from imagenet_build.dali import READER_NAME, pipeline

    options = {"batch_size": 8, "device_id": None, "num_threads": 1, **options}
    pipe = pipeline(folder, split, **options)
    return [batch[0] for batch in DALIGenericIterator(pipe, ["images", "labels"], reader_name=READER_NAME,
                                                      last_batch_policy=LastBatchPolicy.PARTIAL)]


def test_the_pipeline_gives_a_splits_records_once_normalised_and_0_based(converted):
    batches = epoch(converted)
    images = torch.cat([b["images"] for b in batches])
    labels = torch.cat([b["labels"] for b in batches])
    assert images.shape == (16, 3, 224, 224) and images.dtype == torch.float32 and labels.dtype == torch.int64
    wanted = read_manifest(str(converted))["splits"]["validation"]["label_counts"]
    assert {str(k + 1): n for k, n in Counter(labels.tolist()).items()} == wanted
    assert float(images.mean().abs()) < 1 and 0.25 < float(images.std()) < 4


def test_layout_size_and_ranks(converted):
    """layout HWC (TensorFlow's), another size; two ranks share the epoch (the train split, shuffled and
    augmented by default) as DALI cuts it: contiguous ranges, every record once."""
    assert epoch(converted, layout="HWC", size=64)[0]["images"].shape[1:] == (64, 64, 3)
    ranks = [torch.cat([b["labels"] for b in epoch(converted, "train", shard_id=k, num_shards=2, seed=3)])
             for k in range(2)]
    assert [len(r) for r in ranks] == [24, 24]
    wanted = read_manifest(str(converted))["splits"]["train"]["label_counts"]
    assert {str(k + 1): n for k, n in Counter(torch.cat(ranks).tolist()).items()} == wanted


@pytest.mark.parametrize("options,message", [
    ({"layout": "NCHW"}, "layout 'NCHW': one of CHW, HWC"),
    ({"shard_id": 2, "num_shards": 2}, "shard_id 2 is not in [0, 2)"),
])
def test_wrong_arguments_are_one_line(converted, options, message):
    from imagenet_build.dali import pipeline

    with pytest.raises(BuildError, match=f"^{message}$".replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        pipeline(converted, batch_size=4, device_id=None, **options)


def test_a_missing_folder_and_a_split_without_shards(converted, tmp_path):
    from imagenet_build.dali import pipeline

    with pytest.raises(BuildError, match=f"^{tmp_path / 'nowhere'}: not a folder$"):
        pipeline(tmp_path / "nowhere", batch_size=4)
    with pytest.raises(BuildError, match="holds no test shards"):
        pipeline(converted, "test", batch_size=4)
