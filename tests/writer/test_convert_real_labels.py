"""convert --real-labels real.json: each validation record carries its ReaL labels, matched by its ILSVRC2012 name
whatever copy it came from; a real.json of the wrong shape is one line; builds without it keep their bytes."""

import json
import shutil

import pytest

from conftest import layout_args, run_cli, shard_files
from helpers import expect_error, expect_one_error_line, records_of
from imagenet_build.catalog.classes import DEFAULT_LABELS_FILE, imagenet_synsets, load_catalog, read_labels_file
from imagenet_build.catalog.real_labels import read_real_labels
from imagenet_build.format.record_schema import REAL_LABELS, decode_example
from imagenet_build.sources.copies import sample_kinds

# real.json entries planted (entry number: 0-based indices into the sorted synsets); every other entry empty.
# The sample's classes are the first four sorted synsets (labels 1..4): 999 and 4 name synsets it lacks.
PLANTED = {1: [0, 2], 2: [1], 3: [], 4: [999, 3], 5: [4], 16: [3, 2, 1, 0]}
EXPECTED = {1: (1, 3), 2: (2,), 4: (4,), 16: (4, 3, 2, 1)}  # in the build's labels; the rest ()


def write_real_json(path, planted=PLANTED, entries=50000):
    real = [[] for _ in range(entries)]
    for number, labels in planted.items():
        real[number - 1] = labels
    path.write_text(json.dumps(real))
    return path


@pytest.fixture(scope="module")
def real_json(tmp_path_factory):
    return write_real_json(tmp_path_factory.mktemp("real") / "real.json")


def real_labels_of(out, split="validation"):
    """{image/filename: its real labels (None where the record has no such feature)} of a split's records."""
    found = {}
    for shard in sorted(out.glob(f"{split}-*")):
        for payload in records_of(shard):
            record = decode_example(payload)
            labels = record.get(REAL_LABELS)
            found[record["image/filename"][0].decode()] = None if labels is None else tuple(labels)
    return found


def expected_for(names):
    return {name: EXPECTED.get(int(name[len("ILSVRC2012_val_"):-len(".JPEG")]), ()) for name in names}


def test_the_sample_classes_are_the_first_sorted_synsets(ilsvrc):
    """What PLANTED assumes."""
    assert (ilsvrc / "labels.txt").read_text().split() == list(imagenet_synsets()[:4])


def test_the_shipped_labels_file_is_the_sorted_synsets_so_index_i_is_label_i_plus_1(tmp_path):
    synsets = read_labels_file(DEFAULT_LABELS_FILE)
    assert synsets == sorted(synsets) and len(synsets) == 1000
    real = read_real_labels(write_real_json(tmp_path / "real.json", {1: [0, 999], 2: [17]}), load_catalog())
    assert real.labels(1) == ((1, 1000), 0) and real.labels(2) == ((18,), 0) and real.labels(3) == ((), 0)


def test_real_labels_land_on_their_records(ilsvrc, reference, real_json, tmp_path):
    """Multi-label, single-label and empty entries, and labels of synsets the build lacks (left out, said)."""
    out = tmp_path / "out"
    result = run_cli("convert", "--from", ilsvrc, "--real-labels", real_json, "--output-dir", out,
                     *layout_args(ilsvrc), "--json")
    assert result.exit_code == 0, result.output
    found = real_labels_of(out)
    assert len(found) == 16 and found == expected_for(found)
    assert set(real_labels_of(out, "train").values()) == {None}  # train records: no such feature
    notes = json.loads(result.stdout)["notes"]
    assert "validation: ReaL labels from real.json: 4 of 16 images labelled, 12 with none" in notes, notes
    assert "validation: 2 ReaL label(s) of these images left out: their synsets are not classes of this build" \
        in notes, notes
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["options"]["real_labels"].startswith("real.json sha256:")
    ours, theirs = shard_files(out), shard_files(reference)
    assert {k: v for k, v in ours.items() if "train-" in k} == {k: v for k, v in theirs.items() if "train-" in k}
    assert "real_labels" not in json.loads((reference / "manifest.json").read_text())["options"]


def test_tensorflows_parser_reads_the_real_labels(ilsvrc, real_json, tmp_path):
    tf = pytest.importorskip("tensorflow")
    from helpers import slim_features

    out = tmp_path / "out"
    result = run_cli("convert", "--from", ilsvrc, "--real-labels", real_json, "--output-dir", out,
                     *layout_args(ilsvrc))
    assert result.exit_code == 0, result.output
    features = dict(slim_features(tf), **{REAL_LABELS: tf.io.VarLenFeature(tf.int64)})
    found = {}
    for shard in sorted(out.glob("validation-*")):
        for raw in tf.data.TFRecordDataset(str(shard)):
            parsed = tf.io.parse_single_example(raw, features)
            found[parsed["image/filename"].numpy().decode()] = tuple(parsed[REAL_LABELS].values.numpy().tolist())
    assert len(found) == 16 and found == expected_for(found)


ILSVRC_COPIES = [short for short, kind in sample_kinds().items() if not kind.evaluation]
EVALUATION_SETS = [short for short, kind in sample_kinds().items() if kind.evaluation]


@pytest.mark.parametrize("kind", ILSVRC_COPIES)
def test_every_copy_matches_real_labels_by_the_validation_file_name(ilsvrc, real_json, tmp_path, kind):
    """One rule for every registered copy with ILSVRC2012's validation images: labels found by the image's
    original name, whatever the copy calls it (a synset suffix, `.jpg`, a WebDataset key, a Kaggle path)."""
    from imagenet_build.tools.sample_dataset import make_sample

    source = tmp_path / "copy"
    make_sample(source, kind=kind, tarballs=kind == "ilsvrc", classes=4, per_class=12, validation_per_class=4)
    out = tmp_path / "out"
    result = run_cli("convert", "--from", source, "--real-labels", real_json, "--output-dir", out,
                     *layout_args(ilsvrc), "--bounding-box-file", ilsvrc / "bboxes.csv")
    assert result.exit_code == 0, result.output
    found = real_labels_of(out)
    assert len(found) >= 15 and found == expected_for(found)  # blurred: lacks an image, as the release does


@pytest.mark.parametrize("kind", EVALUATION_SETS)
def test_an_evaluation_set_is_refused_real_labels(real_json, tmp_path, kind):
    """ReaL relabels ILSVRC2012's validation images: an evaluation set's images are others (even where their
    files bear ILSVRC2012_val_ names, as the samples' do), so asking for ReaL labels on one is one line, not a
    build carrying labels of other pictures."""
    from imagenet_build.tools.sample_dataset import make_sample

    source = tmp_path / "copy"
    make_sample(source, kind=kind, classes=4, per_class=2, validation_per_class=2)
    expect_one_error_line(("convert", "--from", source, "--real-labels", real_json, "--output-dir", tmp_path / "out",
                           *layout_args(source)), "holds images of its own: ReaL has no labels for them",
                          out=tmp_path / "out")


@pytest.mark.parametrize("content,fragment", [
    ("[[]]", "holds 1 entries, expected 50,000: one per ILSVRC2012 validation image"),
    ('{"1": [0]}', "holds a JSON dict, expected a list of 50,000 lists"),
    ("[[0], [1", "not valid JSON"),
    ("[" * 100_000, "nested deeper than 64 levels"),
    (json.dumps([[]] * 7 + [7] + [[]] * 49992), "entry 8 (ILSVRC2012_val_00000008.JPEG) is 7, expected a list"),
    (json.dumps([[]] * 8 + [[1000]] + [[]] * 49991), "entry 9 (ILSVRC2012_val_00000009.JPEG): class index 1000 out "
                                                      "of range 0..999"),
    (json.dumps([[-1]] + [[]] * 49999), "entry 1 (ILSVRC2012_val_00000001.JPEG): class index -1 out of range"),
    (json.dumps([["3"]] + [[]] * 49999), "entry 1 (ILSVRC2012_val_00000001.JPEG): \"3\" is not a class index"),
    (json.dumps([[True]] + [[]] * 49999), "true is not a class index"),
    (json.dumps([[2.0]] + [[]] * 49999), "2.0 is not a class index"),
    (json.dumps([[5, 5]] + [[]] * 49999), "entry 1 (ILSVRC2012_val_00000001.JPEG): class index 5 listed twice"),
], ids=["short", "not-a-list", "not-json", "nested", "entry-not-a-list", "index-1000", "index-negative",
        "index-a-string", "index-a-bool", "index-a-float", "index-twice"])
def test_a_wrong_real_json_is_one_line_naming_it(sample_dir, tmp_path, content, fragment):
    real = tmp_path / "real.json"
    real.write_text(content)
    out = tmp_path / "out"
    out.mkdir()
    expect_one_error_line(["convert", "--train-dir", sample_dir / "train", "--validation-dir",
                           sample_dir / "validation", "--real-labels", real, "--output-dir", out,
                           *layout_args(sample_dir)], f"{real}: ", fragment, out=out)


def test_real_labels_refused_without_ilsvrc_validation_images(sample_dir, real_json, tmp_path):
    """No validation split at all; validation images not named ILSVRC2012_val_*; classes none of ReaL's."""
    out = tmp_path / "out"
    out.mkdir()
    expect_error(["convert", "--train-dir", sample_dir / "train", "--real-labels", real_json, "--output-dir", out,
                  *layout_args(sample_dir)], 2, "--real-labels", "has no validation split")
    tree = tmp_path / "tree"
    for split in ("train", "validation"):
        for synset in ("n01440764", "n01443537"):
            shutil.copytree(sample_dir / "train" / synset, tree / split / synset)
    expect_error(["convert", "--train-dir", tree / "train", "--validation-dir", tree / "validation",
                  "--classes-from-folders", "--real-labels", real_json, "--output-dir", out,
                  "--train-shards", 1, "--validation-shards", 1, "--layout-threads", 1], 1,
                 f"{tree / 'validation'}/n01440764/n01440764_", "not an ILSVRC2012_val_<8 digits>.JPEG name")
    for synset in ("n01440764", "n01443537"):
        for split in ("train", "validation"):
            (tree / split / synset).rename(tree / split / f"class-{synset}")
    expect_error(["convert", "--train-dir", tree / "train", "--validation-dir", tree / "validation",
                  "--classes-from-folders", "--real-labels", real_json, "--output-dir", out,
                  "--train-shards", 1, "--validation-shards", 1, "--layout-threads", 1], 1,
                 f"{real_json}: none of the 1000 ILSVRC2012 synsets")
    assert not list(out.iterdir())


def test_a_rerun_with_another_real_json_or_none_is_refused_naming_it(sample_dir, real_json, tmp_path):
    out = tmp_path / "out"
    args = ["convert", "--train-dir", sample_dir / "train", "--validation-dir", sample_dir / "validation",
            "--output-dir", out, *layout_args(sample_dir)]
    assert run_cli(*args, "--real-labels", real_json).exit_code == 0
    again = run_cli(*args, "--real-labels", real_json, "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["shards_written"] == 0, again.output
    other = write_real_json(tmp_path / "other.json", {1: [1]})
    expect_error([*args, "--real-labels", other], 1, "other options", "--real-labels: real.json sha256:",
                 "before, other.json sha256:", "--overwrite")
    expect_error(args, 1, "other options", "--real-labels: real.json sha256:", "before, none now")
    assert real_labels_of(out) == expected_for(real_labels_of(out))  # the build as it was
    renamed = tmp_path / "elsewhere" / "real-copy.json"  # the same bytes, another name: the same build, resumed
    renamed.parent.mkdir()
    renamed.write_bytes(real_json.read_bytes())
    resumed = run_cli(*args, "--real-labels", renamed, "--json")
    assert resumed.exit_code == 0 and json.loads(resumed.stdout)["shards_written"] == 0, resumed.output
    recorded = json.loads((out / "manifest.json").read_text())["options"]["real_labels"]
    assert recorded.startswith("real-copy.json sha256:") and real_labels_of(out) == expected_for(real_labels_of(out))
