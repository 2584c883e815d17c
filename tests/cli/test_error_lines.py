"""Every verb's bad input as one `error:` line and the right exit code, no traceback: a damaged manifest, each
verb's wrong inputs, a missing extra, a usage mistake (cli/group.py's ending)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import (
    run_cli,
    run_process,
    sample_args,
    tree_digest,
)


def damaged_manifest(converted, tmp_path, change):
    out = tmp_path / "build"
    shutil.copytree(converted, out)
    manifest = json.loads((out / "manifest.json").read_text())
    change(manifest)
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


MANIFEST_DAMAGE = {
    "shards-a-string": (lambda m: m.update(shards="x"), "shards: \"x\" is not a list"),
    "entry-without-sha256": (lambda m: m["shards"][0].pop("sha256"), "shards[0].sha256: missing"),
    "entry-without-records": (lambda m: m["shards"][1].pop("records"), "shards[1].records: missing"),
    "splits-a-list": (lambda m: m.update(splits=[]), "splits: [] is not an object"),
    "synsets-null": (lambda m: m.update(synsets=None), "synsets: null is not a list"),
    "complete-yes": (lambda m: m.update(complete="yes"), "complete: \"yes\" is not true or false"),
}


@pytest.mark.parametrize("damage", MANIFEST_DAMAGE, ids=list(MANIFEST_DAMAGE))
def test_a_manifest_with_wrong_fields_is_named_not_a_crash(sample_dir, converted, tmp_path, damage):
    change, message = MANIFEST_DAMAGE[damage]
    out = damaged_manifest(converted, tmp_path, change)
    before = tree_digest(out)
    verified = run_cli("verify", out, "--json")
    assert verified.exit_code == 1
    problems = json.loads(verified.stdout)["problems"]
    assert any(p["check"] == "manifest" and message in p["message"] for p in problems), problems
    for args in (sample_args(sample_dir, out, "--workers", 1), ["trainer-check", out, "--device", "cpu"]):
        result = run_cli(*args)
        assert result.exit_code == 1 and f"manifest.json: {message}" in result.stderr, result.output
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    assert tree_digest(out) == before


def verb_cases(sample, converted, tmp):
    """(id, args, exit code, fragment of the stderr line, inputs that must not change, outputs that must not appear).

    `index` reports a refused file as `refused: ...` (it goes on with the other files); every
    other failure is one `error: ...` line.
    """
    empty = tmp / "empty.tfrecord"
    empty.write_bytes(b"")
    inside = tmp / "sample-inside"
    shutil.copytree(sample, inside)
    index_args = sample_args(sample, tmp / "o3", "--workers", 1, "--index-dir", sample / "train" / "idx")
    return [
        ("convert-both-sources", sample_args(sample, tmp / "o1", "--train-tar", sample / "labels.txt"), 2,
         "not both", [sample], [tmp / "o1"]),
        ("convert-bad-choice", sample_args(sample, tmp / "o2", "--on-error", "maybe"), 2, "--on-error",
         [sample], [tmp / "o2"]),
        ("convert-output-inside-train-dir", sample_args(inside, inside / "train" / "out"), 2,
         "--output-dir", [inside], [inside / "train" / "out"]),
        ("convert-index-dir-inside-train-dir", index_args, 2, "--index-dir", [sample],
         [tmp / "o3", sample / "train" / "idx"]),
        ("convert-output-inside-from", ["convert", "--from", inside, "--output-dir", inside / "out", "--labels-file",
                                        sample / "labels.txt"], 2, "inside --from", [inside], [inside / "out"]),
        ("verify-missing-folder", ["verify", tmp / "nowhere"], 1, "not a folder", [], []),
        ("verify-quick-and-deep", ["verify", converted, "--quick", "--deep"], 2, "exclude each other", [converted], []),
        ("index-empty-file", ["index", empty], 1, "empty file (0 bytes)", [empty], [tmp / "dali_idx"]),
        ("index-nothing", ["index", tmp / "nowhere"], 1, "no such file", [], []),
        ("bboxes-json-without-output", ["bboxes", sample, "--json"], 2, "--json needs -o", [sample], []),
        ("trainer-check-no-shards", ["trainer-check", sample, "--device", "cpu"], 1, "no train shards", [sample], []),
        ("trainer-check-missing-folder", ["trainer-check", tmp / "nowhere", "--device", "cpu"], 1, "not a folder",
         [], []),
        ("trainer-check-torch-missing-folder", ["trainer-check", tmp / "nowhere", "--framework", "torch"], 1,
         "not a folder", [], []),
    ]


VERB_CASES = ["convert-both-sources", "convert-bad-choice", "convert-output-inside-train-dir",
              "convert-index-dir-inside-train-dir", "convert-output-inside-from", "verify-missing-folder",
              "verify-quick-and-deep",
              "index-empty-file", "index-nothing", "bboxes-json-without-output", "trainer-check-no-shards",
              "trainer-check-missing-folder", "trainer-check-torch-missing-folder"]


def test_the_verb_cases_are_all_run(sample_dir, converted, tmp_path):
    assert [case[0] for case in verb_cases(sample_dir, converted, tmp_path)] == VERB_CASES


@pytest.mark.parametrize("case", VERB_CASES)
def test_every_verb_bad_input_is_one_line_with_the_right_code(sample_dir, converted, tmp_path, case):
    found = {c[0]: c for c in verb_cases(sample_dir, converted, tmp_path)}
    name, args, code, fragment, inputs, absent = found[case]
    before = {str(p): tree_digest(p) if Path(p).is_dir() else Path(p).read_bytes() for p in inputs}
    result = run_process(*args, *([] if "--json" in map(str, args) else ["--json"]))
    assert result.returncode == code, (name, result.stderr)
    lines = result.stderr.splitlines()
    prefix = "refused: " if name.startswith("index-empty") else "error: "
    assert len(lines) == 1 and lines[0].startswith(prefix) and fragment in lines[0], (name, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["ok"] is False and fragment in json.dumps(document)
    if prefix == "error: ":
        assert fragment in document["error"] and document["exit_code"] == code
    assert before == {str(p): tree_digest(p) if Path(p).is_dir() else Path(p).read_bytes() for p in inputs}
    for path in absent:
        assert not Path(path).exists(), (name, path)


def run_without(module, *args):
    """The CLI as a whole process in an environment where `module` cannot be imported."""
    code = ("import sys; sys.modules[sys.argv[1]] = None\n"
            "from imagenet_build.cli import main; sys.argv = ['imagenet-build'] + sys.argv[2:]; main()")
    return subprocess.run([sys.executable, "-c", code, module, *map(str, args)], capture_output=True, text=True)


@pytest.mark.parametrize("module,args,fragment", [
    ("fsspec", ["verify", "s3://bucket/shards", "--json"], "pip install -c constraints.txt '.[s3]'"),
    ("fsspec", ["index", "s3://bucket/shards/train-00000-of-00001"], "pip install -c constraints.txt '.[s3]'"),
    ("s3fs", ["verify", "s3://bucket/shards"], "s3fs, which is not installed"),
    ("nvidia.dali_tf_plugin", ["trainer-check", "{converted}", "--framework", "dali-tf", "--device", "cpu", "--json"],
     "DALI's TensorFlow plugin"),
    ("tensorflow", ["trainer-check", "{converted}", "--framework", "dali-tf", "--device", "cpu"],
     "pip install -c constraints.txt '.[tf]'"),
], ids=["verify-s3-no-fsspec", "index-s3-no-fsspec", "verify-s3-no-s3fs", "trainer-no-plugin", "trainer-no-tf"])
def test_a_missing_extra_is_one_line_naming_it(converted, module, args, fragment):
    result = run_without(module, *[str(a).format(converted=converted) for a in args])
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in result.stderr, result.stderr
    if "--json" in args:
        assert json.loads(result.stdout)["ok"] is False


@pytest.mark.parametrize("cut", ["off by one", "cut at the wrong place"])
def test_trainer_check_on_an_index_off_by_one_is_one_line(converted, tmp_path, cut):
    """An entry off by a byte is refused before DALI starts (the index no longer covers the shard);
    entries that cover it but are cut at the wrong place reach DALI, whose failure is one line too."""
    pytest.importorskip("nvidia.dali.plugin.tf")
    out = tmp_path / "build"
    shutil.copytree(converted, out)
    index = out / "dali_idx" / "train-00001-of-00004.idx"
    lines = index.read_text().splitlines()
    offset, size = map(int, lines[2].split())
    if cut == "off by one":
        lines[2] = f"{offset + 1} {size}"
    else:
        following, rest = map(int, lines[3].split())
        lines[2], lines[3] = f"{offset} {size + 1}", f"{following + 1} {rest - 1}"
    index.write_text("\n".join(lines) + "\n")
    result = run_process("trainer-check", out, "--device", "cpu", "--steps", 2)
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    expected = ("train-00001-of-00004.idx: line 3: starts at byte" if cut == "off by one"
                else "DALI failed reading the train shards")
    assert len(errors) == 1 and expected in errors[0], errors
    assert "Traceback" not in result.stdout + result.stderr


def test_usage_errors_exit_2_in_one_line(tmp_path):
    result = run_process("convert", "--output-dir", tmp_path / "out")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    result = run_process("verify")
    assert result.returncode == 2 and result.stderr.startswith("error: Missing argument")
    assert "imagenet-build verify --help" in result.stderr
