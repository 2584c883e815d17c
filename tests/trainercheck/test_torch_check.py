"""trainer-check --framework torch (trainercheck/torch_check.py), on the CPU: passing on the sample, its DataLoader
workers bounded, each fault and mistake in one line, object-store folders, any split write_arrays writes."""

import io
import json
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import run_cli, run_process
from helpers import (
    SHARD,
    expect_error,
    index_lines,
    set_index,
    trainer_report,
)
from imagenet_build.infra.errors import BuildError
from run_helpers import torch_or_skip

torch = torch_or_skip()
# torchvision 0.29 marks its image decoding deprecated (in favour of TorchCodec); it still works
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")

from imagenet_build.torch import (  # noqa: E402
    decode_images,
)


def check(folder, *more):
    return trainer_report(folder, "--framework", "torch", "--device", "cpu", "--steps", 4, *more)


@pytest.mark.parametrize("asked,gpu,cores,records,batch,used,note", [
    (None, False, 16, 1000, 16, 2, ""),  # the reader's defaults (the registry's): 2 on the CPU, 8 on a GPU
    (None, True, 16, 1000, 256, 4, ""),  # ... cut silently to the batches of an epoch (1000 in 256s: 4)
    (None, True, 4, 100000, 256, 4, ""),
    (8, False, 16, 1000, 16, 8, ""),
    (0, False, 16, 1000, 16, 0, ""),
    (1000, False, 2, 48, 16, 2, "--workers 1000: 2 used, one per usable core (more would only contend)"),
    (6, False, 16, 48, 16, 3, "--workers 6: 3 used, one per batch of an epoch (48 records in batches of 16; more "
                              "would sit idle)"),
    (3, False, 2, 48, 48, 1, "--workers 3: 1 used, one per batch of an epoch (48 records in batches of 48; more "
                             "would sit idle)"),
])
def test_dataloader_workers_are_bounded_by_the_cores_and_the_batches(monkeypatch, asked, gpu, cores, records,
                                                                    batch, used, note):
    """--workers 1000 started ~530 processes (10 GB, minutes to stop), and more workers than cores made PyTorch
    warn on every loader: the count is cut to the usable cores and to an epoch's batches, a note says so."""
    from imagenet_build.trainercheck import torch_loader

    monkeypatch.setattr(torch_loader.os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert torch_loader.usable_cores() == cores
    from imagenet_build.trainercheck.torch_check import TRAINER
    from imagenet_build.trainercheck.trainers import with_defaults

    default = with_defaults(TRAINER, gpu, {"workers": None})["workers"]
    assert torch_loader.worker_count(asked, default, records, batch) == (used, note)


@pytest.mark.slow
def test_torch_trainer_check_passes_on_the_sample_and_more_workers_than_cores_are_cut_with_a_note(converted):
    """trainer-check --framework torch as a whole process over 3 ranks passes every check; --workers 1000: the
    report's workers are the usable cores (or the batches), a note says why (the readable report too), and
    PyTorch's 4-line warning about more workers than cores is gone."""
    from imagenet_build.trainercheck.checks import format_report
    from imagenet_build.trainercheck.torch_loader import usable_cores

    result = run_process("trainer-check", converted, "--framework", "torch", "--device", "cpu", "--steps", 4,
                         "--num-shards", 3, "--batch-size", 16, "--workers", 1000, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and {c["name"] for c in report["checks"]} == {
        "epoch", "ranks", "labels", "batches", "normalisation", "loss", "overfit"}
    assert report["device"] == "cpu" and report["framework"] == "torch" and report["records"] == 48
    assert report["images_per_second"] > 0 and report["training_images_per_second"] > 0
    assert report["overfit_loss"]["last"] < 0.5 * report["overfit_loss"]["first"]
    used = min(usable_cores(), 3)  # 48 records in batches of 16
    assert report["workers"] == used and report["notes"] == [
        f"--workers 1000: {used} used, " + ("one per usable core (more would only contend)" if used < 3 else
                                            "one per batch of an epoch (48 records in batches of 16; more would "
                                            "sit idle)")]
    assert "Warning" not in result.stderr and "worker processes in total" not in result.stderr, result.stderr
    assert format_report(report)[-2:] == [f"note: {report['notes'][0]}", "OK: the data trains"]


def test_torch_trainer_check_refuses_a_short_index(build):
    lines = index_lines(build)
    set_index(build, lines[:-2])
    expect_error(["trainer-check", build, "--framework", "torch", "--device", "cpu", "--steps", 2], 1,
                 f"{SHARD}.idx: line {len(lines) - 2}: the last entry ends", f"(the index of {build / SHARD})")


def test_bad_data_met_by_a_dataloader_worker_is_one_line(build):
    """PyTorch rebuilds a worker's error with the worker's traceback in its message: not shown to the user."""
    shard = bytearray((build / SHARD).read_bytes())
    shard[12 + 40] ^= 0x55  # a byte of the first record's payload: its CRC no longer matches
    (build / SHARD).write_bytes(bytes(shard))
    line = expect_error(["trainer-check", build, "--framework", "torch", "--device", "cpu", "--steps", 2,
                         "--workers", 2], 1, SHARD, "CRC")
    assert "Traceback" not in line and "worker process" not in line


def test_usage_errors_and_a_missing_extra_are_one_line(converted):
    result = run_cli("trainer-check", converted, "--framework", "torch", "--compare-tf")
    assert result.exit_code == 2 and "--compare-tf goes with --framework dali" in result.output
    result = run_cli("trainer-check", converted, "--framework", "dali-torch", "--compare-tf")
    assert result.exit_code == 2 and "--compare-tf goes with --framework dali-tf" in result.output
    result = run_cli("trainer-check", converted, "--framework", "dali-torch", "--workers", 0)
    assert result.exit_code == 2 and "--workers 0: dali-torch takes at least 1" in result.output
    hide_torch = ("import sys; sys.modules['torch'] = None; from imagenet_build.cli import main; "
                  f"sys.argv = ['imagenet-build', 'trainer-check', {str(converted)!r}, '--framework', 'torch']; main()")
    result = subprocess.run([sys.executable, "-c", hide_torch], capture_output=True, text=True)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: trainer-check --framework torch needs PyTorch, which is not installed: "
        "in a clone of imagenet-build, pip install -c constraints.txt '.[torch]'"]


@pytest.mark.parametrize("lossless", [False, True], ids=["JPEG", "PNG"])
def test_trainer_check_reads_any_split_write_arrays_writes(tmp_path, lossless):
    """write_arrays writes any split name (test, ...), as JPEG or PNG: trainer-check --split reads each of them
    (PNG records stopped it: "does not decode as JPEG")."""
    from imagenet_build import write_arrays

    images = np.random.default_rng(0).integers(0, 255, (12, 32, 32, 3), dtype=np.uint8)
    write_arrays(images, np.arange(12) % 4, tmp_path, "test", 2, lossless=lossless)
    code, report, failed = check(tmp_path, "--split", "test", "--steps", 2, "--batch-size", 4, "--workers", 0)
    assert report["records"] == 12 and report["split"] == "test" and not {"epoch", "ranks", "labels"} & failed
    assert not {"batches", "normalisation"} & failed, report["checks"]


def test_a_batch_that_does_not_decode_names_the_image_given_for_it_and_the_decoders_words():
    """decode_images finds which image of a batch fails and names it by the `where` given for it, with the
    decoder's own first line (not a placeholder), so that the record can be found."""
    good = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 200, 30)).save(good, "JPEG")
    with pytest.raises(BuildError) as caught:
        decode_images([good.getvalue(), b"\xff\xd8 not a jpeg"], where=["a.JPEG at 0", "b.JPEG at 99"])
    text = str(caught.value)
    assert text.startswith("b.JPEG at 99: does not decode as JPEG (") and "(None)" not in text, text
    assert len(text) > len("b.JPEG at 99: does not decode as JPEG ()") + 5
