"""The execute stage: a request (no options object) runs to a build whose manifest's figures are its shards'."""

import json
import shutil
from collections import Counter

from conftest import run_cli
from imagenet_build.format import build_figures
from imagenet_build.request import ConvertOptions, convert_request
from imagenet_build.writer.convert_run import convert


def test_a_request_runs_to_a_manifest_whose_figures_are_its_shards(sample_dir, tmp_path):
    copy = tmp_path / "sample"
    shutil.copytree(sample_dir, copy)
    broken = sorted((copy / "train").rglob("*.JPEG"))[5]
    broken.write_bytes(b"not a JPEG")
    out = tmp_path / "out"
    request = convert_request(ConvertOptions(
        output_dir=str(out), train_dir=str(copy / "train"), validation_dir=str(copy / "validation"),
        labels_file=str(copy / "labels.txt"), validation_labels_file=str(copy / "validation_labels.txt"),
        train_shards=4, validation_shards=2, layout_threads=2, workers=1, on_error="skip"))
    summary = convert(request)
    assert summary["ok"] and [s["file"] for s in summary["skipped"]] == [f"{broken.parent.name}/{broken.name}"]
    manifest = json.loads((out / "manifest.json").read_text())
    shards = manifest["shards"]
    assert manifest["totals"] == build_figures.totals(shards) and manifest["totals"]["skipped"] == 1
    for split, figures in manifest["splits"].items():
        mine = [s for s in shards if s["split"] == split]
        assert {k: figures[k] for k in ("shards", "records", "bytes")} == build_figures.figures_of(mine)
    train = manifest["splits"]["train"]  # the labels the train split listed, less the one left out
    counts = Counter({int(k): v for k, v in train["label_counts"].items()})
    assert sum(counts.values()) == train["records"] == 47
    label = (copy / "labels.txt").read_text().split().index(broken.parent.name) + 1
    assert counts == Counter({k: 12 for k in range(1, 5)}) - Counter({label: 1})
    assert set(manifest["inputs"]["shards"]) == {s["name"] for s in shards}  # each shard's inputs' state, apart
    assert all("input_state" not in s for s in shards)
    assert run_cli("verify", out, "--workers", 1).exit_code == 0


def test_a_worker_killed_mid_shard_leaves_no_temporary_file_in_a_build_that_succeeds(sample_dir, tmp_path,
                                                                                    monkeypatch):
    """An engine that runs a killed worker's task again elsewhere (Spark) succeeds, but the worker's temporary
    shard and index stay where it died: the run removes them once every worker has ended."""
    from imagenet_build.writer import convert_run

    out = tmp_path / "out"
    real_run_job = convert_run.run_job
    left = [out / ".train-00001-of-00004.31679.tmp", out / "dali_idx" / ".train-00001-of-00004.idx.31679.tmp"]

    def a_worker_dies_mid_shard(*args, **kwargs):
        for path in left:
            path.write_bytes(b"half a shard")
        real_run_job(*args, **kwargs)

    monkeypatch.setattr(convert_run, "run_job", a_worker_dies_mid_shard)
    request = convert_request(ConvertOptions(
        output_dir=str(out), train_dir=str(sample_dir / "train"), validation_dir=str(sample_dir / "validation"),
        labels_file=str(sample_dir / "labels.txt"),
        validation_labels_file=str(sample_dir / "validation_labels.txt"),
        train_shards=4, validation_shards=2, layout_threads=2, workers=1))
    assert convert(request)["ok"]
    assert [path for path in left if path.exists()] == []
    assert run_cli("verify", out, "--workers", 1).exit_code == 0  # no stray file either
