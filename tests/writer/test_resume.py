"""Resume: a previous run's shard is kept only when its files, its plan and its inputs are as they were; a
folder made with other options is refused naming each option that changed."""

import json
import os
import shutil

import pytest

from imagenet_build.catalog.classes import load_catalog
from imagenet_build.format import build_figures
from imagenet_build.format import manifest as manifest_mod
from imagenet_build.format.destination import destination
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.workers import Workers
from imagenet_build.plan import SplitPlan
from imagenet_build.sources import scan_class_folders
from imagenet_build.writer.commit import reported
from imagenet_build.writer.resume import read_previous, shards_to_keep
from imagenet_build.writer.shard_writer import ShardWriteResult, write_shard

OPTIONS = {"splits": ["train"], "train_shards": 4, "validation_shards": None, "layout_threads": 2,
           "index_dir": "dali_idx", "classes_from_folders": False}


@pytest.fixture
def previous(sample_dir, tmp_path):
    """A private copy of the sample's train split, its four shards written, and the manifest vouching for them."""
    shutil.copytree(sample_dir / "train", tmp_path / "train")
    catalog = load_catalog(sample_dir / "labels.txt")
    plan = SplitPlan(scan_class_folders("train", tmp_path / "train", catalog, "fail"), catalog, {}, 4, 2)
    (tmp_path / "out" / "dali_idx").mkdir(parents=True)
    dest = destination(tmp_path / "out", None)
    results = [result for spec in plan for result in write_shard(spec, (dest,), "fail")]
    base = build_figures.manifest_base(OPTIONS, {}, catalog.synsets)
    manifest = build_figures.assemble(base, {}, [r.entry for r in results], True,
                                      {r.entry["name"]: r.input_state for r in results})
    manifest_mod.write_manifest(dest.output, manifest)
    return plan, dest, results


def kept(plan, dest, on_error="fail", verify_inputs=False):
    previous = manifest_mod.read_manifest(dest.output)
    with Workers(1) as pool:
        return shards_to_keep(previous, [plan], dest, on_error, pool, verify_inputs)


def test_what_is_as_it_was_is_kept_with_its_result(previous):
    plan, dest, results = previous
    found = kept(plan, dest)
    assert list(found) == plan.names
    assert all(isinstance(r, ShardWriteResult) for r in found.values())
    assert [r[:2] for r in found.values()] == [r[:2] for r in results]  # the entry as listed, the inputs' state now
    assert [r.facts for r in found.values()] == [reported(r.entry) for r in results]  # its files: the writer's word


def test_a_touched_input_redoes_its_shard_unless_its_bytes_are_the_same(previous):
    plan, dest, _ = previous
    image = plan.input.root + "/" + plan.spec(2).entries[0].relpath
    os.utime(image, ns=(10**18, 10**18))
    assert list(kept(plan, dest)) == [n for n in plan.names if n != plan.names[2]]
    assert list(kept(plan, dest, verify_inputs=True)) == plan.names  # re-read: the same bytes
    with open(image, "ab") as f:
        f.write(b"\0")  # other bytes now: the shard it feeds would differ
    assert plan.names[2] not in kept(plan, dest, verify_inputs=True)


def test_a_changed_shard_or_index_or_plan_keeps_nothing_of_it(previous):
    plan, dest, _ = previous
    with open(os.path.join(dest.output, plan.names[1]), "ab") as f:
        f.write(b"\0")
    with open(os.path.join(dest.index, plan.names[3] + ".idx"), "ab") as f:
        f.write(b"\n")
    assert list(kept(plan, dest)) == [plan.names[0], plan.names[2]]
    assert kept(plan, dest, on_error="skip") == {}  # another fingerprint: other bytes for a bad input


def test_a_folder_of_other_options_is_refused_naming_each_change(previous):
    _, dest, _ = previous
    assert read_previous(dest.output, False, OPTIONS)["complete"] is True
    assert read_previous(dest.output, True, dict(OPTIONS, train_shards=8)) is None  # --overwrite
    other = dict(OPTIONS, train_shards=8, classes_from_folders=True)
    with pytest.raises(BuildError) as refused:
        read_previous(dest.output, False, other)
    assert str(refused.value) == (
        f"{dest.output}: holds a build made with other options (--train-shards: 4 before, 8 now; "
        "--classes-from-folders: not given before, given now); use --overwrite to replace it, or another --output-dir")
    manifest = json.loads(open(os.path.join(dest.output, "manifest.json")).read())
    manifest["shards"] = "none"
    with open(os.path.join(dest.output, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    with pytest.raises(BuildError, match=r"shards: \"none\" is not a list; use --overwrite to start over"):
        read_previous(dest.output, False, OPTIONS)
