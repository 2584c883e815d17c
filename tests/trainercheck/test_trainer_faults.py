"""Faults every path of trainer-check fails the same way, whichever reader reads: DALI's and PyTorch's.

Each test runs once per reader trainer-check runs through (the registry's); one whose extra is not installed
skips, saying so.
"""

import shutil
import sys

import pytest

import imagenet_build.trainercheck  # noqa: F401  (registers every reader, the trainers' among them)
from helpers import SHARD, edit_record, expect_error, records_of, trainer_report
from imagenet_build.trainercheck.trainers import TRAINERS, trainers

# torchvision 0.29 marks its image decoding deprecated (in favour of TorchCodec); it still works
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")


@pytest.fixture(params=[reader.name for reader in trainers()])
def framework(request):
    """(name, check) of each reader trainer-check runs through (the registry's): check(folder, *args) is (exit
    code, JSON report, failed check names) of a short CPU run."""
    reader = TRAINERS[request.param]
    if "torch" in reader.needs:
        sys.modules.setdefault("triton", None)  # tests/readers/test_torch.py: torch without triton beside TensorFlow
    for module in reader.needs:
        pytest.importorskip(module)
    args = ("--framework", reader.name, "--device", "cpu", "--steps", 4)
    return request.param, lambda folder, *more: trainer_report(folder, *args, *more)


@pytest.mark.slow
def test_zero_based_labels_fail_the_label_check(build, framework):
    name, check = framework

    def shift(example):
        example.features.feature["image/class/label"].int64_list.value[0] -= 1
        boxes = example.features.feature["image/object/bbox/label"].int64_list.value
        boxes[:] = [v - 1 for v in boxes]

    for shard in sorted(build.glob("train-*")):
        for number in range(len(records_of(shard))):
            edit_record(build, shard.name, number, shift)
    code, report, failed = check(build)
    details = {c["name"]: c["detail"] for c in report["checks"]}
    assert code == 1 and "labels" in failed and "outside [0, 4)" in details["labels"]
    if name in ("torch", "dali-torch"):  # training in PyTorch stops on the label, named, before it reaches a GPU
        assert "loss" in failed and "label -1 outside [0, 4)" in details["loss"]


@pytest.mark.slow
def test_a_shard_present_twice_fails_the_epoch(build, framework):
    """A copy of a shard under another number: beside the set (00004-of-00004) it breaks the shard set, refused
    before reading; numbered into a whole set (00004-of-00005, the others renamed) the epoch finds its records
    twice."""
    name, check = framework
    shutil.copy(build / SHARD, build / "train-00004-of-00004")
    shutil.copy(build / "dali_idx" / f"{SHARD}.idx", build / "dali_idx" / "train-00004-of-00004.idx")
    expect_error(["trainer-check", build, "--framework", name, "--device", "cpu"], 1,
                 f"{build / 'train-00004-of-00004'}: shard number beyond -of-00004: the train split is not whole; "
                 f"run imagenet-build verify {build}")
    for k in range(5):
        for folder, suffix in ((build, ""), (build / "dali_idx", ".idx")):
            (folder / f"train-{k:05d}-of-00004{suffix}").rename(folder / f"train-{k:05d}-of-00005{suffix}")
    code, report, failed = check(build, "--num-shards", 2)
    detail = next(c["detail"] for c in report["checks"] if c["name"] == "epoch")
    assert code == 1 and "epoch" in failed and "more than once" in detail


@pytest.mark.slow
def test_a_sound_one_class_build_passes(tmp_path, framework):
    """A build of one class: its loss is 0 from the first step (cross-entropy over one class), so the overfit
    check cannot ask it to halve; it failed every such build ("did not halve: labels do not match the images?").
    It passes, saying why, and a second class of labels in it still fails the labels check."""
    np = pytest.importorskip("numpy")
    from imagenet_build import write_arrays

    images = np.random.default_rng(0).integers(0, 255, (24, 32, 32, 3), dtype=np.uint8)
    write_arrays(images, np.zeros(24, dtype=np.int64), tmp_path / "one", num_shards=2)
    _, check = framework
    code, report, failed = check(tmp_path / "one", "--batch-size", 8)
    details = {c["name"]: c["detail"] for c in report["checks"]}
    assert code == 0 and not failed, report
    assert "1 class, whose cross-entropy is 0 whatever the images" in details["overfit"], details
