"""convert as a user meets it: determinism, resume after kill -9, bad inputs (what it imports: tests/architecture)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import (
    children_of,
    run_cli,
    run_process,
    sample_args,
    tree_digest,
    wait_until_gone,
)
from imagenet_build.tools.sample_dataset import make_sample


def convert_ok(sample, out, *more, **kw):
    result = run_cli(*sample_args(sample, out, "--workers", 1, *more, **kw))
    assert result.exit_code == 0, result.output
    return result


def test_output_is_the_same_for_one_and_two_workers(sample_dir, converted, tmp_path):
    convert_ok(sample_dir, tmp_path / "one")
    assert tree_digest(tmp_path / "one") == tree_digest(converted)


def test_json_summary(sample_dir, tmp_path):
    result = convert_ok(sample_dir, tmp_path / "out", "--json")
    summary = json.loads(result.stdout)
    assert summary["ok"] is True
    assert summary["splits"]["train"]["records"] == 48
    assert summary["splits"]["validation"] == {"layout": "flat", "images": 16, "records": 16, "shards": 2}
    kinds = sorted(r["reencoded"] for r in summary["reencoded"] if r["reencoded"])
    assert kinds == ["CMYK JPEG", "CMYK JPEG", "PNG"]


def test_flat_and_folder_validation_give_the_same_shards(sample_dir, tmp_path):
    folders = tmp_path / "val-folders"
    labels = (sample_dir / "validation_labels.txt").read_text().split()
    for number, synset in enumerate(labels, start=1):
        name = f"ILSVRC2012_val_{number:08d}.JPEG"
        (folders / synset).mkdir(parents=True, exist_ok=True)
        shutil.copy(sample_dir / "validation" / name, folders / synset / name)
    convert_ok(sample_dir, tmp_path / "flat", train=False)
    result = run_cli(
        "convert", "--validation-dir", folders, "--output-dir", tmp_path / "folders",
        "--labels-file", sample_dir / "labels.txt", "--validation-shards", 2, "--layout-threads", 2, "--workers", 1,
    )
    assert result.exit_code == 0, result.output
    flat, prepared = tree_digest(tmp_path / "flat"), tree_digest(tmp_path / "folders")
    flat.pop("manifest.json"), prepared.pop("manifest.json")
    assert flat == prepared


def test_rerun_keeps_what_the_manifest_vouches_for_and_redoes_the_rest(sample_dir, converted, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(converted, out)
    first = run_cli(*sample_args(sample_dir, out, "--workers", 1, "--json"))
    assert json.loads(first.stdout)["shards_written"] == 0
    (out / "train-00002-of-00004").unlink()
    damaged = bytearray((out / "validation-00001-of-00002").read_bytes())
    damaged[100] ^= 0xFF
    (out / "validation-00001-of-00002").write_bytes(bytes(damaged))
    (out / "dali_idx" / "train-00000-of-00004.idx").write_text("0 16\n")
    again = run_cli(*sample_args(sample_dir, out, "--workers", 1, "--json"))
    summary = json.loads(again.stdout)
    assert summary["shards_written"] == 3 and summary["shards_kept"] == 3
    assert tree_digest(out) == tree_digest(converted)


@pytest.mark.parametrize("where", ["beside", "inside-spelled-otherwise"])
def test_indexes_beside_the_shards_or_a_folder_spelled_otherwise(sample_dir, converted, tmp_path, where, monkeypatch):
    """--index-dir OUTPUT puts each index next to its shard (the other layout DALI's users keep); a relative
    --index-dir with a trailing slash is the same folder as its absolute spelling. Either way the build
    resumes, verifies sound and holds convert's shards and indexes."""
    monkeypatch.chdir(tmp_path)
    index = {"beside": "out", "inside-spelled-otherwise": "./out/idx/"}[where]
    args = sample_args(sample_dir, "out", "--workers", 1, "--json", "--index-dir", index)
    first = run_cli(*args)
    assert first.exit_code == 0, first.output
    again = run_cli(*args)
    assert again.exit_code == 0 and json.loads(again.stdout)["shards_kept"] == 6, again.output
    for spelled in (index, str(tmp_path / index), None):
        verify = run_cli("verify", "out", *(["--index-dir", spelled] if spelled else []))
        assert verify.exit_code == 0, verify.output
    folder = tmp_path / "out" / ("" if where == "beside" else "idx")
    for shard in converted.glob("*-of-*"):
        assert (tmp_path / "out" / shard.name).read_bytes() == shard.read_bytes()
        index = f"{shard.name}.idx"
        assert (folder / index).read_bytes() == (converted / "dali_idx" / index).read_bytes()
    (folder / "train-00007-of-00008.idx").write_text("0 16\n")  # an index with no shard is still found
    orphan = run_cli("verify", "out", "--json")
    assert orphan.exit_code == 1 and any(p["message"] == "index file with no shard"
                                         for p in json.loads(orphan.stdout)["problems"])


def test_overwrite_starts_over(sample_dir, converted, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(converted, out)
    result = run_cli(*sample_args(sample_dir, out, "--workers", 1, "--overwrite", "--json"))
    assert json.loads(result.stdout)["shards_written"] == 6
    assert tree_digest(out) == tree_digest(converted)


def test_other_options_on_an_existing_build_are_refused(sample_dir, converted, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(converted, out)
    args = sample_args(sample_dir, out, "--workers", 1)
    args[args.index("--train-shards") + 1] = "2"
    args[args.index("--layout-threads") + 1] = "1"
    result = run_cli(*args)
    assert result.exit_code == 1 and "--overwrite" in result.output
    assert result.stderr.strip().splitlines() == [  # the options that changed, as typed: not the manifest's dict
        f"error: {out}: holds a build made with other options (--train-shards: 4 before, 2 now; "
        "--layout-threads: 2 before, 1 now); use --overwrite to replace it, or another --output-dir"]
    validation_only = sample_args(sample_dir, out, "--workers", 1, train=False)
    result = run_cli(*validation_only)
    assert "(splits built: train, validation before, validation now; --train-shards: 4 before, none now)" \
        in result.stderr, result.stderr


@pytest.fixture(scope="module")
def larger_sample(tmp_path_factory):
    out = tmp_path_factory.mktemp("larger")
    make_sample(out, classes=8, per_class=150, validation_per_class=2, min_size=200, max_size=400)
    return out


def larger_args(sample, out):
    return [
        "convert", "--train-dir", sample / "train", "--labels-file", sample / "labels.txt",
        "--output-dir", out, "--train-shards", 32, "--layout-threads", 4, "--workers", 2,
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "kill_after_shards,whole_group", [(0, True), (1, True), (5, True), (2, False)],
    ids=["at-start", "after-1-shard", "after-5-shards", "main-process-only"],
)
def test_kill_9_at_any_moment_then_rerun_gives_the_same_bytes(larger_sample, tmp_path, kill_after_shards, whole_group):
    reference = tmp_path / "reference"
    assert run_process(*larger_args(larger_sample, reference)).returncode == 0
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "imagenet_build", *map(str, larger_args(larger_sample, out))],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if out.is_dir() and len(list(out.glob("train-*"))) >= kill_after_shards and children_of(proc.pid):
            break  # (the output folder is made, and locked, before the workers start)
        time.sleep(0.002)
    assert proc.poll() is None, "the build ended before it could be killed: make the sample larger"
    workers = children_of(proc.pid)
    if whole_group:
        os.killpg(proc.pid, signal.SIGKILL)  # main process and workers at once
    else:
        os.kill(proc.pid, signal.SIGKILL)  # orphaned workers must notice and stop
    proc.wait()
    assert workers and wait_until_gone(workers) == []  # no process of the killed run lives on
    assert run_process(*larger_args(larger_sample, out)).returncode == 0
    assert tree_digest(out) == tree_digest(reference)
    assert not list(out.rglob(".*.tmp"))


@pytest.mark.slow
def test_ctrl_c_saves_progress_and_the_rerun_keeps_it(larger_sample, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "imagenet_build", *map(str, larger_args(larger_sample, out))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    while proc.poll() is None and len(list(out.glob("train-*"))) < 8:
        time.sleep(0.002)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate()
    if proc.returncode == 0:
        pytest.skip("the build finished before the interrupt arrived")
    assert proc.returncode == 1 and "run the same command again to resume" in err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] is False and len(manifest["shards"]) >= 1
    rerun = run_process(*larger_args(larger_sample, out), "--json")
    assert rerun.returncode == 0
    assert json.loads(rerun.stdout)["shards_kept"] >= len(manifest["shards"])


# ------------------------------------------------------------------ bad inputs


def expect_error(args, *fragments, code=1):
    result = run_cli(*args)
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.output
    return lines[0]


def test_missing_train_dir(sample_dir, tmp_path):
    args = sample_args(sample_dir, tmp_path / "out", "--workers", 1)
    args[args.index("--train-dir") + 1] = str(tmp_path / "nowhere")
    expect_error(args, "nowhere", "folder not found")


def test_empty_train_dir(sample_dir, tmp_path):
    (tmp_path / "empty").mkdir()
    args = sample_args(sample_dir, tmp_path / "out", "--workers", 1)
    args[args.index("--train-dir") + 1] = str(tmp_path / "empty")
    expect_error(args, "empty", "holds no <synset>/*.JPEG images")


def test_nothing_to_convert(tmp_path):
    expect_error(["convert", "--output-dir", tmp_path / "out"], "--train-dir", "(see: imagenet-build convert --help)",
                 code=2)


def test_a_layout_slim_cannot_take_is_a_usage_error_before_any_scan(sample_dir, tmp_path):
    """The tool's own usage errors say which --help to read, as click's do; shard counts are checked for
    the splits being built only, before anything is read or made."""
    args = sample_args(sample_dir, tmp_path / "out", "--workers", 1, validation=False)
    args[args.index("--layout-threads") + 1] = "3"
    expect_error(args, "4 shards cannot be split over 3 layout threads", "(see: imagenet-build convert --help)",
                 code=2)
    assert not (tmp_path / "out").exists()
    args[args.index("--train-shards") + 1] = "3"  # validation's 2 shards do not matter: no validation input
    assert run_cli(*args).exit_code == 0


@pytest.mark.parametrize("kind", ["fifo", "device-link", "dangling-link"])
def test_an_input_that_is_no_regular_file_is_refused_before_any_read(sample_copy, tmp_path, kind):
    """A FIFO named like an image blocked a worker forever, a link to /dev/zero grew one to 10 GB."""
    synset = sorted(p.name for p in (sample_copy / "train").iterdir())[1]
    path = sample_copy / "train" / synset / f"{synset}_99.JPEG"
    {"fifo": lambda: os.mkfifo(path), "device-link": lambda: path.symlink_to("/dev/zero"),
     "dangling-link": lambda: path.symlink_to(tmp_path / "nowhere")}[kind]()
    result = run_process(*sample_args(sample_copy, tmp_path / "out", "--workers", 1), timeout=120)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert f"{synset}_99.JPEG: not a regular file" in result.stderr


def test_a_file_name_that_is_not_utf8_is_one_line(sample_copy, tmp_path):
    """A name the file system gives as bytes that are not UTF-8 (latin-1 é): one line naming it escaped."""
    synset = sorted(p.name for p in (sample_copy / "train").iterdir())[0]
    folder = os.fsencode(sample_copy / "train" / synset)
    first = sorted(os.listdir(folder))[0]
    os.rename(os.path.join(folder, first), os.path.join(folder, f"{synset}_\xe9.JPEG".encode("latin-1")))
    result = run_process(*sample_args(sample_copy, tmp_path / "out", "--workers", 1))
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"{synset}/{synset}_\\udce9.JPEG: file name is not UTF-8" in result.stderr, result.stderr


def test_class_folder_not_in_labels_file(sample_copy, tmp_path):
    (sample_copy / "train" / "n09999999").mkdir()
    expect_error(sample_args(sample_copy, tmp_path / "out", "--workers", 1), "n09999999", "not in the labels file")


def test_labels_file_with_unknown_synset(sample_copy, tmp_path):
    with open(sample_copy / "labels.txt", "a") as f:
        f.write("n00000042\n")
    expect_error(sample_args(sample_copy, tmp_path / "out", "--workers", 1), "labels.txt", "n00000042", "no text")


def test_labels_file_with_repeated_synset(sample_copy, tmp_path):
    first = (sample_copy / "labels.txt").read_text().split()[0]
    with open(sample_copy / "labels.txt", "a") as f:
        f.write(first + "\n")
    expect_error(sample_args(sample_copy, tmp_path / "out", "--workers", 1), "labels.txt", "repeats line 1")


def first_train_image(sample):
    synset = (sample / "labels.txt").read_text().split()[0]
    return sample / "train" / synset / f"{synset}_1.JPEG"


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda p: p.write_bytes(b""), "empty file (0 bytes)"),
        (lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "truncated JPEG"),
        (lambda p: p.write_text("this is not an image\n"), "not an image"),
    ],
    ids=["zero-byte", "truncated", "not-an-image"],
)
def test_bad_image_fails_with_its_name_and_leaves_no_shard(sample_copy, tmp_path, damage, message):
    image = first_train_image(sample_copy)
    damage(image)
    before = tree_digest(sample_copy)
    out = tmp_path / "out"
    line = expect_error(sample_args(sample_copy, out, "--workers", 1), image.name, message)
    assert str(image) in line
    assert tree_digest(sample_copy) == before  # inputs untouched
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] is False
    listed = {entry["name"] for entry in manifest["shards"]}
    on_disk = {p.name for p in out.glob("train-*")} | {p.name for p in out.glob("validation-*")}
    assert on_disk == listed  # nothing under a final name that the manifest does not vouch for
    assert not list(out.rglob(".*.tmp"))


def test_on_error_skip_leaves_bad_inputs_out_and_lists_them(sample_copy, tmp_path):
    image = first_train_image(sample_copy)
    image.write_bytes(b"")
    (sample_copy / "train" / "n09999999").mkdir()
    before = tree_digest(sample_copy)
    result = run_cli(*sample_args(sample_copy, tmp_path / "out", "--workers", 1, "--on-error", "skip", "--json"))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    skipped = {s["file"]: s["reason"] for s in summary["skipped"]}
    assert skipped[f"{image.parent.name}/{image.name}"] == "empty file (0 bytes)"
    assert "n09999999/" in skipped
    assert summary["splits"]["train"]["records"] == 47
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["totals"]["skipped"] == 1 and manifest["splits"]["train"]["records"] == 47
    assert manifest["splits"]["train"]["left_out"][0]["file"] == "n09999999/"
    assert tree_digest(sample_copy) == before


def test_validation_image_without_a_label(sample_copy, tmp_path):
    labels = (sample_copy / "validation_labels.txt").read_text().splitlines()
    (sample_copy / "validation_labels.txt").write_text("\n".join(labels[:-1]) + "\n")
    expect_error(
        sample_args(sample_copy, tmp_path / "out", "--workers", 1, train=False),
        f"ILSVRC2012_val_{len(labels):08d}.JPEG", "no label",
    )


def test_output_folder_holding_something_else(sample_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.pdf").write_text("precious")
    expect_error(sample_args(sample_dir, out, "--workers", 1), "thesis.pdf", "not from imagenet-build")
    expect_error(sample_args(sample_dir, out, "--workers", 1, "--overwrite"), "thesis.pdf")
    assert (out / "thesis.pdf").read_text() == "precious"


def test_bad_bounding_box_csv(sample_copy, tmp_path):
    with open(sample_copy / "bboxes.csv", "a") as f:
        f.write("n01440764_1.JPEG,0.1,0.2,oops,0.4\n")
    expect_error(sample_args(sample_copy, tmp_path / "out", "--workers", 1), "bboxes.csv", "not a number")


def test_more_shards_than_images(sample_dir, tmp_path):
    args = sample_args(sample_dir, tmp_path / "out", "--workers", 1)
    args[args.index("--train-shards") + 1] = "64"
    expect_error(args, "would be empty", "--train-shards")


def test_whole_process_error_is_one_line_and_exit_code(sample_dir, tmp_path):
    result = run_process("convert", "--train-dir", tmp_path / "missing", "--output-dir", tmp_path / "out")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and result.stderr.startswith("error: ")


def test_slims_lists_of_files_to_re_encode_are_spoken_of_only_in_an_imagenet_build(sample_dir, tmp_path):
    """The sample's CMYK and PNG files are re-encoded in every build; whether slim's list of ImageNet's 23
    such files names them means something only where the classes are ImageNet's 1000."""
    sample = run_cli(*sample_args(sample_dir, tmp_path / "sample", "--workers", 1, "--json"))
    reencoded = json.loads(sample.stdout)["reencoded"]
    assert {r["reencoded"] for r in reencoded} == {"CMYK JPEG", "PNG"} and all(r["note"] == "" for r in reencoded)
    assert "slim's list" not in run_cli(*sample_args(sample_dir, tmp_path / "sample", "--workers", 1)).stdout
    imagenet = run_cli("convert", "--train-dir", sample_dir / "train", "--output-dir", tmp_path / "imagenet",
                       "--on-error", "skip", "--train-shards", 2, "--layout-threads", 1, "--workers", 1, "--json")
    assert imagenet.exit_code == 0, imagenet.output  # the shipped 1000 synsets, 996 of them without images
    notes = [r["note"] for r in json.loads(imagenet.stdout)["reencoded"]]
    assert notes and all("but not in slim's list of files to re-encode" in note for note in notes)
