"""Helpers that run the verbs on the session's sample and read what they leave (tests/helpers.py: the shards
and archives made by hand), the PyTorch reader's tests' import of torch, and a machine kept busy."""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from imagenet_build.format.record_schema import decode_example
from imagenet_build.format.tfrecord import read_records


def convert_json(sample, out, *more):
    """convert of the sample as a whole process, two workers: its --json summary."""
    from conftest import run_process, sample_args

    result = run_process(*sample_args(sample, out, "--workers", 2, "--json", *more))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def a_train_image(sample):
    """One train image of the sample, the same every time."""
    return sorted((sample / "train").glob("*/*.JPEG"))[3]


def hold_lock(folder):
    """A real process holding the folder's lock, as a running build does; returns it once the lock is held."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from imagenet_build.infra.lock import FolderLock\n"
         "with FolderLock(sys.argv[1], 'imagenet-build convert'):\n"
         "    print('held', flush=True); time.sleep(3600)", str(folder)],  # killed by the test, however slow
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


TRAIN_RECORDS = 48  # the sample's train records (conftest.sample_dir)


def verify_json(folder, *more):
    """verify FOLDER --json in this process, one worker: (exit code, the document)."""
    import json

    from conftest import run_cli

    result = run_cli("verify", folder, "--workers", 1, "--json", *more)
    return result.exit_code, json.loads(result.stdout)


def checks_failed(report):
    """The checks that found a problem in verify's document."""
    return set(report["summary"]["problem_counts"])


def error_message(call):
    """The message of the BuildError call() raises (it must raise one)."""
    import pytest

    from imagenet_build.infra.errors import BuildError

    with pytest.raises(BuildError) as caught:
        call()
    return str(caught.value)


def records(build, split=None):
    """[(shard name, decoded Example)] of a build folder, shard by shard, in record order."""
    out = []
    for shard in sorted(Path(build).glob(f"{split or '*'}-*-of-*")):
        with open(shard, "rb") as f:
            out.extend((shard.name, decode_example(p)) for _, p, _ in read_records(f, shard.stat().st_size))
    return out


def torch_or_skip():
    """torch, with torchvision beside it, for a test module of the PyTorch reader; else the module skipped.
    TensorFlow (imported by other test modules of this process) and triton, which torch imports when it is
    installed, each carry their own LLVM: loading triton after TensorFlow crashes the process. These tests
    compile nothing with triton, so torch runs here without it."""
    import pytest

    sys.modules.setdefault("triton", None)
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    return torch


@contextlib.contextmanager
def cpu_load():
    """One busy process per core for the `with` block, each as hungry as a test's own: a machine too busy to
    run anything on time, on which a test must hold as it does on a quiet one."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
