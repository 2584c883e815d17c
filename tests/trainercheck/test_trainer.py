"""trainer-check on the CPU: passes on the sample, fails with the right check on planted faults."""

import json

import pytest

from conftest import run_cli
from helpers import SHARD, expect_error, index_lines, set_index, trainer_report


@pytest.fixture(autouse=True)
def dali_tf(request):
    """DALI's TF plugin, for every test here but the ones that need no extra."""
    if "needs_no_extra" not in request.keywords:
        pytest.importorskip("nvidia.dali.plugin.tf")


def check(folder, *more):
    return trainer_report(folder, "--device", "cpu", "--steps", 8, *more)


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
def test_index_that_drops_records_is_refused_before_dali_reads(build, fault):
    """DALI reads a short or empty index without a word: trainer-check refuses it first, naming it."""
    lines = index_lines(build)
    set_index(build, lines[:-2] if fault == "short index" else [])
    where = f"line {len(lines) - 2}: the last entry ends" if fault == "short index" else "index file is empty"
    expect_error(["trainer-check", build, "--device", "cpu", "--steps", 2], 1, f"{SHARD}.idx: {where}",
                 f"(the index of {build / SHARD})")


@pytest.mark.slow
def test_normalised_twice_fails(converted):
    code, report, failed = check(converted, "--mean", "0", "0", "0", "--std", "5000", "5000", "5000")
    assert code == 1 and "normalisation" in failed


@pytest.mark.needs_no_extra
@pytest.mark.parametrize("args,mean,std", [
    (["x", "--mean", "0", "0", "0", "--std", "1", "1", "1"], (0, 0, 0), (1, 1, 1)),  # as the README writes it
    (["--mean", "1 2 3", "--std=4,5,6", "x"], (1, 2, 3), (4, 5, 6)),
    (["--std", "-1", "2.5", "1e2", "--mean", "0", "0", "0", "--", "x"], (0, 0, 0), (-1, 2.5, 100)),
])
def test_mean_and_std_take_three_numbers_as_written(args, mean, std):
    from imagenet_build.cli import cli

    with cli.commands["trainer-check"].make_context("trainer-check", args) as ctx:
        assert (ctx.params["mean"], ctx.params["std"], ctx.params["folder"]) == (mean, std, "x")


@pytest.mark.needs_no_extra
def test_mean_with_two_numbers_is_a_usage_error(converted):
    result = run_cli("trainer-check", converted, "--mean", "0", "0", "--std", "1", "1", "1")
    assert result.exit_code == 2 and "three numbers" in result.stderr, result.output


@pytest.mark.needs_no_extra
def test_a_core_install_names_every_missing_part(converted):
    """Without DALI and TensorFlow, trainer-check (--framework dali: DALI into TensorFlow or into PyTorch) names
    what each of its two ways misses and how to install it, and the framework that is installed."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['nvidia.dali'] = sys.modules['tensorflow'] = None\n"
            "from imagenet_build.cli import main; sys.argv = ['imagenet-build'] + sys.argv[1:]; main()")
    result = subprocess.run([sys.executable, "-c", code, "trainer-check", str(converted), "--device", "cpu"],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: trainer-check --framework dali trains through dali-tf or dali-torch, none of them installed: "
        "dali-tf needs NVIDIA DALI, TensorFlow and DALI's TensorFlow plugin, which are not installed: in a clone of "
        "imagenet-build, pip install -c constraints.txt '.[dali,tf]'; then pip install -c constraints.txt "
        "--no-build-isolation 'nvidia-dali-tf-plugin-cuda120>=2.4,<2.5' (after TensorFlow and DALI); dali-torch "
        "needs NVIDIA DALI, which is not installed: in a clone of imagenet-build, pip install -c constraints.txt "
        "'.[dali]' (or: trainer-check --framework torch, installed here)"]


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
