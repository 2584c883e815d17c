"""writer/commit.py, the commit check: a shard's facts as its files give them, each entry held to them and to its
name, a kept shard's to the plan, a manifest's figures to its entries; each refusal in its exact words, and
nothing written where one is found."""

import dataclasses
import json
import os
import shutil
from collections import Counter

import pytest

from imagenet_build.catalog.classes import load_catalog
from imagenet_build.format import build_figures
from imagenet_build.format.destination import destination
from imagenet_build.format.naming import DATASET_INFO_JSON, FEATURES_JSON, MANIFEST_NAME, index_name
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.jsonfile import shown
from imagenet_build.plan import SplitPlan
from imagenet_build.sources import scan_class_folders
from imagenet_build.writer.commit import (
    ShardFacts,
    commit,
    commit_tfds,
    entry_problem,
    kept_problem,
    manifest_problem,
    read_facts,
    reported,
)
from imagenet_build.writer.shard_writer import write_shard

FIRST, SECOND = "train-00000-of-00002", "train-00001-of-00002"


@pytest.fixture(scope="module")
def written(sample_dir, tmp_path_factory):
    """The sample's train split in two shards, written by the shard writer: (plan, folder, entries)."""
    catalog = load_catalog(sample_dir / "labels.txt")
    plan = SplitPlan(scan_class_folders("train", sample_dir / "train", catalog, "fail"), catalog, {}, 2, 1)
    dest = destination(tmp_path_factory.mktemp("commit") / "out", None)
    os.makedirs(dest.index)
    entries = [result.entry for spec in plan for result in write_shard(spec, (dest,), "fail")]
    plan.synsets = catalog.synsets
    return plan, dest, entries


def manifest_of(plan, entries, complete=True):
    """The manifest convert would write for these entries (the plan's labels counted once all are there)."""
    labels = Counter(plan.input.labels) if complete else None
    figures = build_figures.split_figures(plan.num_shards, entries, [], labels)
    base = build_figures.manifest_base({"index_dir": "dali_idx"}, {}, plan.synsets)
    return build_figures.assemble(base, {"train": figures}, entries, complete)


@pytest.fixture
def good(written):
    plan, _, entries = written
    entries = json.loads(json.dumps(entries))
    return manifest_of(plan, entries), {entry["name"]: reported(entry) for entry in entries}


def facts_of(dest, name, hash_shard=True):
    return read_facts(os.path.join(dest.output, name), os.path.join(dest.index, index_name(name)), hash_shard)


# ------------------------------------------------------------------ a shard's facts


def test_the_facts_read_from_a_shards_files_are_its_writers_figures(written):
    _, dest, entries = written
    for entry in entries:
        assert facts_of(dest, entry["name"]) == reported(entry)
        assert facts_of(dest, entry["name"], hash_shard=False) == reported(entry)._replace(sha256=None)
    assert reported({k: v for k, v in entries[0].items() if k != "index_bytes"}).index_bytes is None


def test_what_is_no_readable_file_has_no_facts(written, tmp_path):
    _, dest, entries = written
    shard, index = os.path.join(dest.output, FIRST), os.path.join(dest.index, index_name(FIRST))
    assert read_facts(str(tmp_path / "none"), index) is None and read_facts(shard, str(tmp_path / "none")) is None
    os.mkfifo(tmp_path / "fifo")  # read, it would block
    assert read_facts(str(tmp_path / "fifo"), index) is None and read_facts(shard, str(tmp_path / "fifo")) is None
    assert read_facts(str(tmp_path), index) is None  # a folder


def test_an_index_that_does_not_cover_its_shard_counts_no_records(written, tmp_path):
    _, dest, entries = written
    index = tmp_path / "short.idx"
    lines = open(os.path.join(dest.index, index_name(FIRST))).read().splitlines(keepends=True)
    index.write_text("".join(lines[:-1]))
    facts = read_facts(os.path.join(dest.output, FIRST), str(index))
    assert facts.records is None and facts.bytes == entries[0]["bytes"] and facts.index_bytes == index.stat().st_size


def test_the_facts_of_a_shard_on_an_object_store(written, bucket):
    import fsspec

    _, dest, entries = written
    fs = fsspec.filesystem("s3")
    fs.put_file(os.path.join(dest.output, FIRST), f"{bucket}/{FIRST}")
    fs.put_file(os.path.join(dest.index, index_name(FIRST)), f"{bucket}/idx/{index_name(FIRST)}")
    assert read_facts(f"{bucket}/{FIRST}", f"{bucket}/idx/{index_name(FIRST)}") == reported(entries[0])
    assert read_facts(f"{bucket}/{FIRST}", f"{bucket}/idx/none.idx") is None
    assert read_facts(f"{bucket}/none", f"{bucket}/idx/{index_name(FIRST)}") is None
    assert read_facts(f"{bucket}/none", f"{bucket}/idx/{index_name(FIRST)}", hash_shard=False) is None


# ------------------------------------------------------------------ an entry against its files and its name


def test_an_entry_as_its_writer_wrote_it_agrees_with_its_files(written):
    _, dest, entries = written
    assert [entry_problem(entry, facts_of(dest, entry["name"])) for entry in entries] == ["", ""]
    old = {k: v for k, v in entries[0].items() if k != "index_bytes"}  # an entry without it: nothing to compare
    assert entry_problem(old, facts_of(dest, FIRST)) == ""
    assert entry_problem(dict(entries[0], sha256="0" * 64), facts_of(dest, FIRST, hash_shard=False)) == ""  # tfds


@pytest.mark.parametrize("field,value,problem", [
    ("name", "train-00000-of-0002", "not a shard's name"),
    ("split", "validation", 'listed under split "validation"'),
    ("records", 999, "records 999, its files' 24"),
    ("records", 10 ** 400, "records 1000000000000000000000000000000000000..., its files' 24"),
    ("bytes", 1, None),
    ("sha256", "0" * 64, None),
    ("index_bytes", 3, None),
    ("index_sha256", "1" * 64, None),
])
def test_an_entry_that_disagrees_with_its_name_or_its_files_is_named(written, field, value, problem):
    _, dest, entries = written
    facts = facts_of(dest, FIRST)
    if problem is None:
        problem = f"{field} {shown(value)}, its files' {shown(getattr(facts, field))}"
        assert len(problem) < 120
    assert entries[0]["records"] == 24
    assert entry_problem(dict(entries[0], **{field: value}), facts) == problem


def test_an_entry_without_files_or_a_covering_index_is_named(written):
    _, dest, entries = written
    assert entry_problem(entries[0], None) == "its shard or its index is not a file that can be read"
    assert entry_problem(entries[0], facts_of(dest, FIRST)._replace(records=None)) == "its index does not cover it"
    assert entry_problem(dict(entries[0], split="validation"), None) == 'listed under split "validation"'


# ------------------------------------------------------------------ a kept shard against the plan


def test_a_kept_entry_adds_up_to_the_plans_images_each_left_out_once_with_its_label(written):
    plan, dest, entries = written
    spec, facts = plan.spec(0), facts_of(dest, FIRST)
    assert kept_problem(entries[0], facts, spec) == ""
    assert kept_problem(entries[0], None, spec) == "its shard or its index is not a file that can be read"
    first, second = spec.entries[0], spec.entries[1]
    one = {"file": first.relpath, "label": first.label, "reason": "r"}
    fewer = dict(entries[0], records=23, skipped=[one])  # as if the shard held one record less
    assert kept_problem(fewer, facts._replace(records=23), spec) == ""
    assert kept_problem(dict(entries[0], skipped=[one]), facts, spec) == \
        "24 records and 1 left out, of the plan's 24 images"
    never = dict(one, file="n01440764/n01440764_999.JPEG")
    other_label = dict(one, label=first.label % 4 + 1)
    for lie in (never, other_label):
        assert kept_problem(dict(fewer, skipped=[lie]), facts._replace(records=23), spec) == \
            f"left out {json.dumps(lie['file'])} (label {lie['label']}): no such input of the shard, or not once"
    twice = dict(entries[0], records=22, skipped=[one, one])
    assert kept_problem(twice, facts._replace(records=22), spec).startswith(f"left out {json.dumps(first.relpath)}")
    both = dict(twice, skipped=[one, {"file": second.relpath, "label": second.label, "reason": "r"}])
    assert kept_problem(both, facts._replace(records=22), spec) == ""
    shorter = dataclasses.replace(spec, entries=spec.entries[1:])
    assert kept_problem(entries[0], facts, shorter) == "24 records and 0 left out, of the plan's 23 images"


# ------------------------------------------------------------------ a manifest against its shards and itself


def test_a_manifest_as_convert_assembles_it_passes(good, written):
    manifest, facts = good
    assert manifest_problem(manifest, facts) == "" and manifest_problem(manifest, facts, [FIRST, SECOND]) == ""
    plan, _, entries = written
    started = manifest_of(plan, entries[:1], complete=False)  # a run under way: one of two shards done
    assert manifest_problem(started, facts, [FIRST, SECOND]) == ""  # the other's file: not listed yet


def change(manifest, edit):
    edited = json.loads(json.dumps(manifest))
    edit(edited)
    return edited


PROBLEMS = [
    (lambda m: m["shards"][0].update(records="24"), 'shards[0].records: "24" is not a whole number >= 0'),
    (lambda m: m["shards"].append(m["shards"][0]), f"{FIRST}: listed 2 times"),
    (lambda m: m["shards"][1].update(bytes=5), f"{SECOND}: bytes 5, its files' "),
    (lambda m: m["splits"].pop("train"), "splits.train: missing, yet shards of it are listed"),
    (lambda m: m["splits"]["train"].update(shards=3), f"{FIRST}: not one of the 3 shards of splits.train"),
    (lambda m: m["shards"].pop(), f"{SECOND}: shard missing, in a complete manifest"),
    (lambda m: m.update(shards=[]), "train: no shard listed, in a complete manifest"),
    (lambda m: m["splits"]["train"].update(records=47), "splits.train.records is 47, its shard entries add up to 48"),
    (lambda m: m["splits"]["train"].update(bytes=5), "splits.train.bytes is 5, its shard entries add up to "),
    (lambda m: m["splits"]["train"].update(shards_done=1), "splits.train.shards_done is 1, 2 listed"),
    (lambda m: m["splits"]["train"]["label_counts"].update({"1": 13}),
     "splits.train.label_counts add up to 49, of 48 records"),
    (lambda m: m["splits"]["train"].update(label_counts={"1": 12, "2": 12, "3": 12, "5": 12}),
     'splits.train.label_counts: "5" is no label of the build'),
    (lambda m: m["splits"]["train"].update(label_counts={"0": 12, "2": 12, "3": 12, "4": 12}),
     'splits.train.label_counts: "0" is no label of the build'),
    (lambda m: m["splits"]["train"].update(label_counts={"\u00b2": 12, "2": 12, "3": 12, "4": 12}),
     'splits.train.label_counts: "\\u00b2" is no label of the build'),
    (lambda m: m["totals"].update(records=49), "totals.records is 49, its shard entries add up to 48"),
    (lambda m: m["totals"].update(bytes=1), "totals.bytes is 1, its shard entries add up to "),
]


@pytest.mark.parametrize("edit,problem", PROBLEMS)
def test_what_a_manifest_says_against_its_shards_or_itself_is_named(good, edit, problem):
    manifest, facts = good
    assert manifest_problem(change(manifest, edit), facts).startswith(problem)


def test_a_shard_the_folder_holds_that_a_complete_manifest_leaves_out_is_named(good):
    manifest, facts = good
    assert manifest_problem(manifest, facts, [FIRST, SECOND, "train-00002-of-00003"]) == \
        "train-00002-of-00003: in the folder, not listed"
    assert manifest_problem(manifest, facts, [FIRST]) == ""
    for optional in (lambda m: m.pop("totals"), lambda m: m.update(totals={}),  # no totals: none to hold
                     lambda m: m["splits"]["train"].pop("shards_done")):
        assert manifest_problem(change(manifest, optional), facts) == ""
    assert manifest_problem(manifest, dict(facts, **{SECOND: None})) == \
        f"{SECOND}: its shard or its index is not a file that can be read"


# ------------------------------------------------------------------ writing: only what holds


def test_commit_writes_what_holds_and_nothing_where_something_does_not(good, written, tmp_path):
    manifest, facts = good
    lying = change(manifest, lambda m: m["shards"][0].update(records=999))
    with pytest.raises(BuildError) as refused:
        commit(tmp_path, lying, facts)
    assert str(refused.value) == (f"{tmp_path / MANIFEST_NAME}: not written: {FIRST}: records 999, its files' 24 "
                                  "(imagenet-build verify says what else is wrong)")
    assert os.listdir(tmp_path) == []
    with pytest.raises(BuildError, match="in the folder, not listed"):
        commit(tmp_path, manifest, facts, [FIRST, SECOND, "train-00002-of-00003"])
    written_manifest = commit(tmp_path, manifest, facts)
    assert json.loads((tmp_path / MANIFEST_NAME).read_text()) == written_manifest
    assert sorted(os.listdir(tmp_path)) == sorted([DATASET_INFO_JSON, FEATURES_JSON, MANIFEST_NAME])


def test_tfds_files_are_written_only_beside_a_manifest_its_shards_bear_out(good, written, tmp_path):
    manifest, _ = good
    _, dest, _ = written
    folder = tmp_path / "build"
    shutil.copytree(dest.output, folder)
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest))
    assert commit_tfds(str(folder), manifest) == [FEATURES_JSON, DATASET_INFO_JSON]
    for name in (FEATURES_JSON, DATASET_INFO_JSON):
        os.remove(folder / name)
    for lie, problem in ((lambda m: m["shards"][1].update(records=25), f"{SECOND}: records 25, its files' 24"),
                         (lambda m: m["shards"][1].update(sha256="0" * 64), None)):  # its bytes: verify's to read
        edited = change(manifest, lie)
        if problem is None:
            assert commit_tfds(str(folder), edited) == [FEATURES_JSON, DATASET_INFO_JSON]
            continue
        with pytest.raises(BuildError) as refused:
            commit_tfds(str(folder), edited)
        assert problem in str(refused.value) and not (folder / DATASET_INFO_JSON).exists()
    shutil.copy(folder / FIRST, folder / "train-00002-of-00003")
    with pytest.raises(BuildError, match="train-00002-of-00003: in the folder, not listed"):
        commit_tfds(str(folder), manifest)
    os.remove(folder / "train-00002-of-00003")
    os.rename(folder / "dali_idx", folder / "elsewhere")
    with pytest.raises(BuildError, match=f"{FIRST}: its shard or its index is not a file that can be read"):
        commit_tfds(str(folder), manifest)
    elsewhere = change(manifest, lambda m: m["options"].update(index_dir="elsewhere"))
    assert commit_tfds(str(folder), elsewhere) == [FEATURES_JSON, DATASET_INFO_JSON]  # where its manifest says
    os.rename(folder / "elsewhere", folder / "dali_idx")
    (folder / "dali_idx" / "train-x").mkdir()  # a folder named as a shard is no shard the folder holds
    os.mkdir(folder / "train-00002-of-00003")
    assert commit_tfds(str(folder), manifest) == [FEATURES_JSON, DATASET_INFO_JSON]


def test_the_facts_tuple_names_the_entrys_fields():
    assert ShardFacts._fields == ("records", "bytes", "sha256", "index_bytes", "index_sha256")
