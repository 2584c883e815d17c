"""The version of imagenet-build, from one source (the package's metadata, made from imagenet_build.__version__):
`--version`, every manifest and every verb's --json document name it."""

import importlib.metadata
import json
import shutil

import imagenet_build
from conftest import run_cli, run_process
from imagenet_build.cli import cli

VERSION = importlib.metadata.version("imagenet-build")


def test_one_version_the_metadata_the_package_and_the_command_share(converted):
    assert VERSION == imagenet_build.__version__
    assert run_process("--version").stdout == f"imagenet-build, version {VERSION}\n"
    assert json.loads((converted / "manifest.json").read_text())["imagenet_build_version"] == VERSION


def json_runs(sample_dir, converted, tmp_path):
    """Each verb with --json, run: where that is cheap, doing its work; else refused (the error document)."""
    shard = tmp_path / "train-00000-of-00004"
    shutil.copy(converted / shard.name, shard)
    build = tmp_path / "build"
    shutil.copytree(converted, build)
    return {
        "convert": ["convert", "--output-dir", tmp_path / "out"],  # no input named: refused
        "verify": ["verify", converted, "--quick"],
        "index": ["index", shard],
        "trainer-check": ["trainer-check", tmp_path / "nowhere"],  # refused
        "report": ["report", tmp_path / "nowhere"],  # refused
        "bboxes": ["bboxes", sample_dir / "bbox", "-o", tmp_path / "boxes.csv"],
        "prepare-val": ["prepare-val", tmp_path / "nowhere"],  # refused
        "sample": ["sample", tmp_path / "sample", "--classes", 1, "--per-class", 1, "--validation-per-class", 0],
        "tfds": ["tfds", build],
    }


def test_every_verbs_json_document_names_the_version(sample_dir, converted, tmp_path):
    runs = json_runs(sample_dir, converted, tmp_path)
    with_json = {name for name, command in cli.commands.items() if any("--json" in p.opts for p in command.params)}
    assert set(runs) == with_json  # a verb with --json and no run here fails
    for verb, args in runs.items():
        result = run_cli(*args, "--json")
        document = json.loads(result.stdout)
        assert document["imagenet_build_version"] == VERSION, (verb, result.output)
    assert json.loads(run_cli(*runs["verify"], "--json").stdout)["ok"] is True
