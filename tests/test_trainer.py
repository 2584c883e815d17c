"""trainer-check on the CPU: passes on the sample, fails with the right check on planted faults."""

import json
import shutil

import pytest

from conftest import run_cli
from helpers import SHARD, edit_record, index_lines, records_of, set_index, trainer_report


@pytest.fixture(autouse=True)
def dali_tf(request):
    """DALI's TF plugin, for every test here but the ones that need no extra."""
    if "needs_no_extra" not in request.keywords:
        pytest.importorskip("nvidia.dali.plugin.tf")


def check(folder, *extra):
    return trainer_report(folder, "--device", "cpu", "--steps", 8, *extra)


@pytest.mark.slow
def test_sample_trains_on_the_cpu(converted):
    code, report, failed = check(converted, "--num-shards", 2)
    assert code == 0 and report["ok"] and not failed, report["checks"]
    assert {c["name"] for c in report["checks"]} == {
        "epoch", "ranks", "labels", "batches", "normalisation", "loss", "overfit"}
    assert report["device"] == "cpu" and report["records"] == 48
    assert report["images_per_second"] > 0 and report["overfit_loss"]["last"] < report["overfit_loss"]["first"]


@pytest.mark.slow
def test_validation_split_and_report_text(converted):
    result = run_cli("trainer-check", converted, "--split", "validation", "--device", "cpu", "--steps", 4)
    assert result.exit_code == 0, result.output
    assert "OK: the data trains" in result.stdout and "images/s" in result.stdout


@pytest.mark.parametrize("fault", ["short index", "empty index"])
@pytest.mark.slow
def test_index_that_drops_records_fails_the_epoch_check(build, fault):
    set_index(build, index_lines(build)[:-2] if fault == "short index" else [])
    code, report, failed = check(build)
    assert code == 1 and "epoch" in failed
    detail = next(c["detail"] for c in report["checks"] if c["name"] == "epoch")
    assert "manifest.json says 48" in detail


@pytest.mark.slow
def test_zero_based_labels_in_the_records_fail_the_label_check(build):
    for shard in sorted(build.glob("train-*")):
        for number in range(len(records_of(shard))):
            def shift(example):
                value = example.features.feature["image/class/label"].int64_list.value
                value[0] -= 1
                boxes = example.features.feature["image/object/bbox/label"].int64_list.value
                boxes[:] = [v - 1 for v in boxes]

            edit_record(build, shard.name, number, shift)
    code, report, failed = check(build)
    assert code == 1 and "labels" in failed
    detail = next(c["detail"] for c in report["checks"] if c["name"] == "labels")
    assert "outside [0, 4)" in detail


@pytest.mark.slow
def test_shard_duplicated_under_two_names_fails(build):
    shutil.copy(build / SHARD, build / "train-00004-of-00004")
    shutil.copy(build / "dali_idx" / f"{SHARD}.idx", build / "dali_idx" / "train-00004-of-00004.idx")
    code, report, failed = check(build, "--num-shards", 2)
    assert code == 1 and "epoch" in failed
    detail = next(c["detail"] for c in report["checks"] if c["name"] == "epoch")
    assert "more than once" in detail


@pytest.mark.slow
def test_normalised_twice_fails(converted):
    code, report, failed = check(converted, "--mean", "0 0 0", "--std", "5000 5000 5000")
    assert code == 1 and "normalisation" in failed


@pytest.mark.needs_no_extra
def test_missing_index_is_a_clear_error(build):
    (build / "dali_idx" / f"{SHARD}.idx").unlink()
    result = run_cli("trainer-check", build, "--device", "cpu")
    assert result.exit_code == 1 and "DALI index missing" in result.stderr


def test_gpu_path(converted):
    """On a machine whose DALI sees a GPU; elsewhere skipped, saying why. A DALI that cannot even
    count devices is a broken install, not a machine without a GPU: that fails."""
    from nvidia.dali import backend

    gpus = backend.GetCUDADeviceCount()  # 0 without a driver; an exception here is a real failure
    if not gpus:
        pytest.skip("no GPU visible to DALI on this machine")
    result = run_cli("trainer-check", converted, "--device", "gpu", "--steps", 10, "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["device"] == "gpu", report["checks"]
