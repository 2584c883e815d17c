"""ImageNet-21k's `fall11_whole.tar` is a tar of class tars, as ILSVRC2012's train archive is: the same
reader converts it, given its synsets as the labels file (the shipped metadata names all 21,841)."""

import json

from conftest import run_cli
from imagenet_build.catalog.classes import DEFAULT_LABELS_FILE, DEFAULT_METADATA_FILE, read_labels_file
from imagenet_build.tools.sample_dataset import make_sample


def test_a_tar_of_class_tars_of_imagenet21k_synsets_converts(tmp_path):
    challenge = set(read_labels_file(DEFAULT_LABELS_FILE))
    others = [line.split("\t")[0] for line in DEFAULT_METADATA_FILE.read_text().splitlines()]
    synsets = sorted(s for s in others if s not in challenge)[:5]  # classes ILSVRC2012 does not have
    labels = tmp_path / "synsets21k.txt"
    labels.write_text("".join(s + "\n" for s in synsets))
    sample = tmp_path / "sample"
    make_sample(sample, classes=5, per_class=6, validation_per_class=1, labels_file=labels, tarballs=True)
    (sample / "ILSVRC2012_img_train.tar").rename(sample / "fall11_whole.tar")
    result = run_cli("convert", "--train-tar", sample / "fall11_whole.tar", "--labels-file", labels,
                     "--output-dir", tmp_path / "out", "--train-shards", 2, "--layout-threads", 1, "--workers", 1,
                     "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["splits"]["train"]["records"] == 30 and summary["splits"]["train"]["layout"] == "tar"
    assert run_cli("verify", tmp_path / "out").exit_code == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["synsets"] == synsets and manifest["num_classes"] == 5
