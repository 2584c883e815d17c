"""The commit's invariant, generated (hypothesis): after every exit 0 of convert, verify passes; after every exit 0
of tfds, verify finds nothing it did not find before, and nothing that the manifest's figures and its shards'
indexes and sizes could show. Each example is a real small build (one input of it left out under --on-error skip,
three re-encoded) whose manifest, or one receipt of a run killed before its manifest, has one part, at any depth,
replaced by a plausible lie (a number off by a little or a lot, another string of the document, another JSON value),
removed, doubled or emptied; convert or tfds then runs on it in this process (imagenet_build.api), and anything it
raises but the tool's own one-line error fails the example."""

import copy
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import as_killed_run, sample_options
from imagenet_build import api
from imagenet_build.infra.errors import BuildError
from imagenet_build.writer.tfds_files import add_tfds_files

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                    database=None)  # the same examples every run, none kept between runs
JUNK = "n01440764/n01440764_999.JPEG"  # no image: left out under --on-error skip
# what only reading every record shows (verify's to find: tfds reads no shard's bytes)
RECORD_CONTENT = ("sha256 differs from the manifest's", "label counts differ from the manifest",
                  "the labels file says", "real_labels", "above the")


@pytest.fixture(scope="module")
def sample(sample_dir, tmp_path_factory):
    copied = tmp_path_factory.mktemp("invariant") / "sample"
    shutil.copytree(sample_dir, copied)
    (copied / "train" / JUNK).write_bytes(b"no image at all")
    return copied


@pytest.fixture(scope="module")
def base(sample, tmp_path_factory):
    out = tmp_path_factory.mktemp("invariant") / "out"
    summary = api.convert(out, **sample_options(sample, on_error="skip"))
    assert [s["file"] for s in summary["skipped"]] == [JUNK] and len(summary["reencoded"]) == 3
    assert api.verify(out, workers=1)["ok"]
    return out


SCALARS = (st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([10 ** 400, 2 ** 63, -(2 ** 63)])
           | st.text(max_size=4) | st.sampled_from(["train", "validation", "", "\u00b2", "n01440764"]))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(
    st.sampled_from(["file", "label", "reason", "note", "reencoded", "name", "x"]), inner, max_size=3), max_leaves=4)


def strings_of(document):
    """Every string in a document, keys too: the other shards' names, hashes, splits, files."""
    found, stack = set(), [document]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.update(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            found.add(item)
    return sorted(found)


@st.composite
def lies(draw, document, start=()):
    """`document` with one part below `start` (a path of keys) changed: a lie told about it."""
    document = copy.deepcopy(document)
    parent, key, node = None, None, document
    for step in start:
        parent, key, node = node, step, node[step]
    while isinstance(node, (dict, list)) and node and (parent is None or draw(st.integers(0, 7))):
        key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
        parent, node = node, node[key]
    if parent is None:
        return document
    how = draw(st.sampled_from(["told", "told", "told", "remove", "double", "empty", "any"]))
    if how == "remove" and isinstance(parent, dict):
        del parent[key]
    elif how == "remove":
        parent.pop(key)
    elif how == "double" and isinstance(node, list) and node:
        node.append(copy.deepcopy(node[draw(st.integers(0, len(node) - 1))]))
    elif how == "empty" and isinstance(node, (list, dict)):
        node.clear()
    elif how == "told" and isinstance(node, int) and not isinstance(node, bool):
        parent[key] = node + draw(st.sampled_from([-1, 1, 2, -node - 1, 10 ** 400]))  # a little off, or a lot
    elif how == "told" and isinstance(node, str):
        parent[key] = draw(st.sampled_from(strings_of(document)))  # another shard's name, hash, split, file
    elif how == "told" and isinstance(node, (list, dict)) and node:  # one of its items gone, or twice
        if isinstance(node, list) and draw(st.booleans()):
            node.append(copy.deepcopy(node[draw(st.integers(0, len(node) - 1))]))
        else:
            node.pop(draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node)))))
    else:
        parent[key] = draw(VALUES)
    return document


def manifest_lies(draw, build):
    manifest = json.loads((build / "manifest.json").read_text())
    start = draw(st.sampled_from([(), ("shards", draw(st.integers(0, 5))), ("shards",), ("splits",),
                                  ("splits", draw(st.sampled_from(["train", "validation"]))), ("inputs",),
                                  ("inputs", "shards"), ("totals",)]))
    return draw(lies(manifest, start))


class Copy:
    """A private copy of the base build for one example, removed after it."""

    def __init__(self, base):
        self.base = base

    def __enter__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="invariant-"))
        shutil.copytree(self.base, self.folder / "out")
        return self.folder / "out"

    def __exit__(self, *exc):
        shutil.rmtree(self.folder)


def converted(build, sample):
    """convert run again on the build: True where it ended well, False where it refused in one line."""
    try:
        api.convert(build, **sample_options(sample, on_error="skip"))
    except BuildError as e:
        assert "\n" not in str(e), str(e)
        return False
    return True


def problems(build):
    return [f"{p['check']}: {p['file']}: {p['message']}" for p in api.verify(build, workers=1)["problems"]]


@SETTINGS
@given(data=st.data())
def test_after_convert_ends_well_on_an_edited_manifest_verify_passes(base, sample, data):
    with Copy(base) as build:
        lie = manifest_lies(data.draw, build)
        (build / "manifest.json").write_text(json.dumps(lie))
        if converted(build, sample):
            assert problems(build) == [], lie


@SETTINGS
@given(data=st.data())
def test_after_convert_ends_well_on_an_edited_receipt_verify_passes(base, sample, data):
    with Copy(base) as build:
        receipts = as_killed_run(build)
        path = receipts[data.draw(st.sampled_from(sorted(receipts)))]
        receipt = json.loads(path.read_text())
        lie = data.draw(lies(receipt, data.draw(st.sampled_from([(), ("result", 0, 1), ("result", 0, 1)]))))
        path.write_text(json.dumps(lie))
        if converted(build, sample):
            assert problems(build) == [], lie


@SETTINGS
@given(data=st.data())
def test_after_tfds_ends_well_verify_finds_nothing_new_nor_what_the_figures_show(base, data):
    with Copy(base) as build:
        for name in ("features.json", "dataset_info.json"):
            (build / name).unlink()
        lie = manifest_lies(data.draw, build)
        (build / "manifest.json").write_text(json.dumps(lie))
        before = problems(build)
        try:
            add_tfds_files(build)
        except BuildError as e:
            assert "\n" not in str(e), str(e)
            return
        after = problems(build)
        assert set(after) <= set(before), lie
        assert all(any(kind in problem for kind in RECORD_CONTENT) for problem in after), (after, lie)
