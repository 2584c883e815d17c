"""The promises under pressure: stale inputs, two writers, lying inputs, broken manifests, missing extras.

Each case runs the verb as a user would and asserts the exit code, one `error:` line on
stderr, a JSON document on stdout with --json, no traceback, the inputs untouched, and
nothing under a final name that a clean build would not write.
"""

import contextlib
import errno
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

import imagenet_build
from conftest import (
    Run,
    children_of,
    run_cli,
    run_process,
    sample_args,
    tree_digest,
    wait_until_gone,
)
from imagenet_build.encode.jpeg_header import parse_jpeg_header
from imagenet_build.infra import atomic
from imagenet_build.infra.lock import LOCK_NAME, FolderLock
from imagenet_build.readback.readers import READERS, missing, trainers


def convert_json(sample, out, *extra):
    result = run_process(*sample_args(sample, out, "--workers", 2, "--json", *extra))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def a_train_image(sample):
    return sorted((sample / "train").glob("*/*.JPEG"))[3]


def different_jpeg(path, size=(97, 61)):
    image = Image.new("RGB", size, (10, 200, 30))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=80)
    path.write_bytes(out.getvalue())


# ------------------------------------------------------------------ a rerun trusts only unchanged inputs


@pytest.mark.parametrize("split", ["train", "validation"])
def test_rerun_redoes_the_shard_of_a_changed_input(sample_copy, tmp_path, split):
    out = tmp_path / "out"
    convert_json(sample_copy, out)
    image = a_train_image(sample_copy) if split == "train" else sorted((sample_copy / "validation").glob("*.JPEG"))[2]
    different_jpeg(image)
    rerun = convert_json(sample_copy, out)
    assert rerun["shards_written"] == 1
    clean = tmp_path / "clean"
    convert_json(sample_copy, clean)
    assert tree_digest(out) == tree_digest(clean)


def test_rerun_of_unchanged_inputs_keeps_everything(sample_copy, tmp_path):
    out = tmp_path / "out"
    first = convert_json(sample_copy, out)
    rerun = convert_json(sample_copy, out)
    assert rerun["shards_written"] == 0 and rerun["shards_kept"] == first["shards_written"]


def test_verify_inputs_reads_what_size_and_mtime_cannot_see(sample_copy, tmp_path):
    out = tmp_path / "out"
    convert_json(sample_copy, out)
    image = a_train_image(sample_copy)
    st = image.stat()
    data = bytearray(image.read_bytes())
    data[-3] ^= 0x55  # same size, scan data changed
    image.write_bytes(bytes(data))
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the old mtime
    assert convert_json(sample_copy, out)["shards_written"] == 0  # what a rerun trusts, as documented
    assert convert_json(sample_copy, out, "--verify-inputs")["shards_written"] == 1
    clean = tmp_path / "clean"
    convert_json(sample_copy, clean)
    assert tree_digest(out) == tree_digest(clean)


def test_verify_inputs_keeps_a_touched_but_unchanged_input(sample_copy, tmp_path):
    out = tmp_path / "out"
    convert_json(sample_copy, out)
    os.utime(a_train_image(sample_copy), ns=(1, 10**18))
    assert convert_json(sample_copy, out, "--verify-inputs")["shards_written"] == 0
    assert convert_json(sample_copy, out)["shards_written"] == 0  # the new mtime is what the manifest holds now


def test_rerun_redoes_shards_of_a_changed_archive(tmp_path):
    from imagenet_build.tools.sample import make_sample

    sample = tmp_path / "sample"
    make_sample(sample, classes=3, per_class=6, validation_per_class=2, tarballs=True)
    args = ["convert", "--validation-tar", sample / "ILSVRC2012_img_val.tar", "--labels-file", sample / "labels.txt",
            "--validation-labels-file", sample / "validation_labels.txt", "--validation-shards", 2,
            "--layout-threads", 1, "--output-dir", tmp_path / "out", "--json"]
    assert run_process(*args).returncode == 0
    os.utime(sample / "ILSVRC2012_img_val.tar", ns=(1, 10**18))
    rerun = run_process(*args)
    assert rerun.returncode == 0 and json.loads(rerun.stdout)["shards_written"] == 2


# ------------------------------------------------------------------ one writer per folder


def hold_lock(folder):
    """A real process holding the folder's lock, as a running build does; returns it once the lock is held."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from imagenet_build.infra.lock import FolderLock\n"
         "with FolderLock(sys.argv[1], 'imagenet-build convert'):\n"
         "    print('held', flush=True); time.sleep(60)", str(folder)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_writer_is_refused_naming_the_holder(sample_dir, converted, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(converted, out)
    before = tree_digest(out)
    holder = hold_lock(out)
    try:
        result = run_process(*sample_args(sample_dir, out, "--workers", 1))
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1 and f"pid {holder.pid}" in result.stderr
        assert "in use by another imagenet-build" in result.stderr
        indexed = run_process("index", out)
        assert indexed.returncode == 0  # index writes dali_idx/, which the holder has not locked
        holder_idx = hold_lock(out / "dali_idx")
        try:
            refused = run_process("index", out)
            assert refused.returncode == 1 and f"pid {holder_idx.pid}" in refused.stderr
            assert run_process(*sample_args(sample_dir, out, "--workers", 1)).returncode == 1
        finally:
            holder_idx.kill()
            holder_idx.wait()
    finally:
        holder.kill()
        holder.wait()
    assert {k: v for k, v in tree_digest(out).items() if LOCK_NAME not in k} == before
    # the holders died (kill -9 at that): the kernel released their locks, the files left behind stay harmless
    assert run_process(*sample_args(sample_dir, out, "--workers", 1)).returncode == 0
    assert run_process("verify", out).returncode == 0


def test_prepare_val_refuses_a_locked_folder(tmp_path, sample_dir):
    val = tmp_path / "val"
    shutil.copytree(sample_dir / "validation", val)
    holder = hold_lock(val)
    try:
        result = run_process("prepare-val", val, "--labels", sample_dir / "validation_labels.txt")
        assert result.returncode == 1 and f"pid {holder.pid}" in result.stderr
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_two_converts_into_one_folder_never_mix_layouts(sample_dir, tmp_path):
    for attempt in range(3):
        out = tmp_path / f"out{attempt}"
        procs = []
        for shards in (4, 8):
            args = sample_args(sample_dir, out, "--workers", 1, train=True, validation=False)
            args[args.index("--train-shards") + 1] = str(shards)
            procs.append(subprocess.Popen([sys.executable, "-m", "imagenet_build", *args],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        results = [(p.wait(), p.stderr.read()) for p in procs]
        codes = sorted(code for code, _ in results)
        assert codes[0] == 0, results
        layouts = {p.name.rsplit("-of-", 1)[1] for p in out.glob("train-*")}
        assert len(layouts) == 1, layouts
        for code, err in results:
            if code:
                assert err.count("\n") == 1 and ("in use by another" in err or "other options" in err), err
        assert run_process("verify", out).returncode == 0


def test_lock_file_left_by_a_killed_run_does_not_block_or_fail_verify(sample_dir, converted, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(converted, out)
    (out / LOCK_NAME).write_text('{"pid": 1, "host": "elsewhere"}')
    assert run_cli("verify", out).exit_code == 0
    assert run_cli(*sample_args(sample_dir, out, "--workers", 1)).exit_code == 0
    assert not (out / LOCK_NAME).exists()


def test_a_killed_runs_spool_is_removed_by_any_rerun(sample_dir, converted, tmp_path):
    """A .tar.gz run killed with kill -9 leaves its spool; the next run into that folder removes it even
    when it reads another copy (only a run that spooled again used to), so verify finds the folder clean.
    A live run's spool is left alone."""
    from imagenet_build.format.naming import SPOOL_PREFIX

    out = tmp_path / "out"
    shutil.copytree(converted, out)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = out / f"{SPOOL_PREFIX}{dead.pid}-train-abc"
    live = out / f"{SPOOL_PREFIX}{os.getpid()}-train-def"
    for spool in (stale, live):
        spool.mkdir()
        (spool / "0000-train_images_0.tar").write_bytes(b"x" * 1000)
    assert run_cli(*sample_args(sample_dir, out, "--workers", 1)).exit_code == 0
    assert not stale.exists() and live.exists()
    shutil.rmtree(live)
    assert run_cli("verify", out).exit_code == 0


def test_lock_is_released_and_leaves_no_folder_it_made(tmp_path):
    folder = tmp_path / "new"
    with FolderLock(folder):
        assert (folder / LOCK_NAME).exists()
    assert not folder.exists()
    with FolderLock(tmp_path / "a" / "b" / "c"):  # every folder it made, as far up as they stay empty
        (tmp_path / "a" / "kept").write_text("written meanwhile")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["kept"]


# ------------------------------------------------------------------ the final manifest write fails


def test_out_of_space_at_the_final_manifest_keeps_the_in_progress_one(sample_dir, converted, tmp_path, monkeypatch):
    real_open = open

    def full_disk_for_the_final_manifest(path, mode="r", *args, **kwargs):
        f = real_open(path, mode, *args, **kwargs)
        if "manifest.json" in str(path) and "w" in mode:
            real_write = f.write

            def write(data):
                if b'"complete": true' in data:
                    real_write(data[: len(data) // 2])
                    raise OSError(errno.ENOSPC, "No space left on device", str(path))
                return real_write(data)

            f.write = write
        return f

    monkeypatch.setattr(atomic, "open", full_disk_for_the_final_manifest, raising=False)
    out = tmp_path / "out"
    result = run_cli(*sample_args(sample_dir, out, "--workers", 1))
    assert result.exit_code == 1 and "No space left on device" in result.stderr
    assert result.stderr.count("\n") == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] is False and manifest["shards"]
    assert not list(out.rglob(".*.tmp"))
    monkeypatch.undo()
    rerun = run_cli(*sample_args(sample_dir, out, "--workers", 1, "--json"))
    assert rerun.exit_code == 0 and json.loads(rerun.stdout)["shards_kept"] >= len(manifest["shards"])
    assert tree_digest(out) == tree_digest(converted)


# ------------------------------------------------------------------ inputs that lie


def lying_jpeg(path, claimed=(65500, 65500)):
    """A real 66x113 JPEG whose frame header claims another size."""
    image = Image.new("RGB", (66, 113), (120, 40, 200))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=90)
    data = bytearray(buffer.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5: sof + 9] = claimed[1].to_bytes(2, "big") + claimed[0].to_bytes(2, "big")
    parse_jpeg_header(bytes(data))  # still a well-formed header
    path.write_bytes(bytes(data))


def test_a_jpeg_header_that_lies_is_refused_by_convert(sample_copy, tmp_path):
    image = a_train_image(sample_copy)
    lying_jpeg(image, claimed=(8000, 8000))  # 64 Mpx over ~1 KB of data
    result = run_cli(*sample_args(sample_copy, tmp_path / "out", "--workers", 1))
    assert result.exit_code == 1 and image.name in result.stderr and "under 1 bit per 8 blocks" in result.stderr
    lying_jpeg(image)  # 4.3 Gpx: past Pillow's limit, whatever its data
    result = run_cli(*sample_args(sample_copy, tmp_path / "out", "--workers", 1))
    assert result.exit_code == 1 and "decompression-bomb limit" in result.stderr
    assert not list((tmp_path / "out").rglob(".*.tmp"))


def wide_png(path, width=70_000):
    """A PNG one pixel high and wider than a JPEG can be: a few hundred bytes."""
    Image.new("RGB", (width, 1), (10, 200, 30)).save(path, "PNG")


@pytest.mark.parametrize("resize", [[], ["--resize", "shorter:48,400"]], ids=["full-size", "resized"])
def test_an_image_no_jpeg_can_hold_is_named_and_skippable(sample_copy, tmp_path, resize):
    image = a_train_image(sample_copy)
    wide_png(image)  # re-encoded (a PNG): a JPEG side stops at 65,500
    out = tmp_path / "out"
    failed = run_process(*sample_args(sample_copy, out, "--workers", 2, *resize))
    assert failed.returncode == 1
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {image}: 70,000x1 pixels: a JPEG holds at most 65,500 "
                                                   "pixels a side"), failed.stderr
    assert not list(out.rglob(".*.tmp"))
    skipped = run_process(*sample_args(sample_copy, out, "--workers", 2, "--on-error", "skip", "--json", *resize))
    assert skipped.returncode == 0, skipped.stderr
    summary = json.loads(skipped.stdout)
    builds = list(summary["builds"].values()) if resize else [summary]
    relpath = f"{image.parent.name}/{image.name}"
    for build in builds:
        assert [s["file"] for s in build["skipped"]] == [relpath]
        assert run_cli("verify", build["output_dir"]).exit_code == 0
    assert not list(out.rglob(".*.tmp"))


def write_build(folder, records):
    """A one-shard build of hand-made records [(jpeg bytes, height, width, boxes)], and its index."""
    from imagenet_build.build.writer import write_records
    from imagenet_build.encode.example import encode_example_parts

    (folder / "dali_idx").mkdir(parents=True)
    payloads = [encode_example_parts(encoded=data, filename=f"n0000000{i}_{i}.JPEG", height=h, width=w, label=1,
                                     synset="n01440764", text="tench", boxes=boxes)
                for i, (data, h, w, boxes) in enumerate(records)]
    write_records("train-00000-of-00001", folder, folder / "dali_idx", payloads)


def test_verify_applies_the_same_rules_to_stored_records(tmp_path):
    good = tmp_path / "good.jpg"
    Image.new("RGB", (66, 113), (1, 2, 3)).save(good, "JPEG")
    bomb = tmp_path / "bomb.jpg"
    lying_jpeg(bomb, claimed=(8000, 8000))
    write_build(tmp_path / "build", [
        (good.read_bytes(), 113, 66, ()),
        (bomb.read_bytes(), 8000, 8000, ()),
        (good.read_bytes(), 100, 66, ()),  # record and header disagree
        (good.read_bytes(), 113, 66, ((0.5, 0.1, 0.2, 0.9),)),  # xmin > xmax
    ])
    result = run_cli("verify", tmp_path / "build", "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1
    by_record = {p["record"]: p["message"] for p in report["problems"] if p["check"] == "example"}
    assert set(by_record) == {1, 2, 3}
    assert "under 1 bit per 8 blocks" in by_record[1]
    assert "header says 66x113, record says 66x100" in by_record[2]
    assert "xmin > xmax" in by_record[3]


def test_reversed_box_in_the_csv_is_refused_with_its_line(sample_copy, tmp_path):
    csv = sample_copy / "bboxes.csv"
    lines = csv.read_text().splitlines()
    name, xmin, ymin, xmax, ymax = lines[2].split(",")
    lines[2] = ",".join([name, xmax, ymin, xmin, ymax]) if float(xmin) < float(xmax) else lines[2]
    csv.write_text("\n".join(lines) + "\n")
    result = run_cli(*sample_args(sample_copy, tmp_path / "out", "--workers", 1))
    assert result.exit_code == 1 and "line 3: xmin > xmax" in result.stderr


def test_summary_counts_images_with_boxes_and_rows_naming_no_image(sample_copy, tmp_path):
    csv = sample_copy / "bboxes.csv"
    rows = [line for line in csv.read_text().splitlines() if line]
    csv.write_text("\n".join(rows + ["n09999999_1.JPEG,0.1,0.1,0.5,0.5"]) + "\n")
    summary = convert_json(sample_copy, tmp_path / "out")
    named = {row.split(",")[0] for row in rows}
    assert summary["boxes"] == {"rows": len(rows) + 1, "images_with_boxes": len(named), "rows_naming_no_image": 1}


def test_empty_class_folder_fails_or_is_listed(sample_copy, tmp_path):
    folder = sorted((sample_copy / "train").iterdir())[1]
    for image in folder.iterdir():
        image.unlink()
    result = run_cli(*sample_args(sample_copy, tmp_path / "out", "--workers", 1))
    assert result.exit_code == 1 and folder.name in result.stderr and "no *.JPEG images" in result.stderr
    skipped = run_cli(*sample_args(sample_copy, tmp_path / "out", "--workers", 1, "--on-error", "skip", "--json"))
    assert skipped.exit_code == 0
    assert any(s["file"] == f"{folder.name}/" for s in json.loads(skipped.stdout)["skipped"])


def test_a_byte_order_mark_is_not_part_of_the_labels(sample_copy, tmp_path, converted):
    labels = sample_copy / "labels.txt"
    labels.write_bytes(b"\xef\xbb\xbf" + labels.read_bytes())
    out = tmp_path / "out"
    assert run_cli(*sample_args(sample_copy, out, "--workers", 1)).exit_code == 0
    assert {k: v for k, v in tree_digest(out).items() if k != "manifest.json"} == {
        k: v for k, v in tree_digest(converted).items() if k != "manifest.json"}
    labels.write_bytes(b"\xef\xbb\xbfn00000001\n")
    result = run_cli(*sample_args(sample_copy, tmp_path / "other", "--workers", 1))
    assert result.exit_code == 1 and "\ufeff" not in result.stderr


# ------------------------------------------------------------------ every verb, bad inputs: one line, the right code


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


# ------------------------------------------------------------------ workers never outlive a killed run


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to list a process's children")
def test_idle_workers_of_a_killed_run_end_with_it():
    """kill -9 of the main process while its pool waits idle (as while inputs are listed): no worker stays."""
    proc = subprocess.Popen([sys.executable, "-c",
                             "import time\nfrom imagenet_build.infra.workers import Workers\n"
                             "with Workers(2):\n    print('pool', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "pool"
    workers = children_of(proc.pid)
    assert len(workers) == 2
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wait_until_gone(workers) == []


# ------------------------------------------------------------------ signals: every process of a run ends with it


def dali_running(run):
    """A DALI pipeline runs in the main process: its threads are there (named "[DALI]...")."""
    names = []
    for task in Path(f"/proc/{run.proc.pid}/task").glob("*/comm"):
        try:
            names.append(task.read_text())
        except OSError:
            continue
    return any(name.startswith("[DALI]") for name in names)


def assert_ended_as_interrupted(code, out, err):
    """What SIGTERM gives every verb: exit 1, one `error: interrupted` line, with --json the document."""
    assert code == 1, (code, err)
    errors = [line for line in err.replace("\r", "\n").splitlines() if line.startswith("error: ")]
    assert errors == ["error: interrupted"], err
    for noise in ("Traceback", "leaked semaphore", "Exception ignored"):
        assert noise not in err, err
    assert json.loads(out) == {"ok": False, "error": "interrupted", "exit_code": 1,
                               "imagenet_build_version": imagenet_build.__version__}


@pytest.fixture(scope="module")
def longer_build(tmp_path_factory):
    """A build that verify --deep takes about a second to read with two workers."""
    from imagenet_build.tools.sample import make_sample

    sample = tmp_path_factory.mktemp("longer")
    make_sample(sample, classes=8, per_class=150, validation_per_class=2, min_size=200, max_size=400)
    out = tmp_path_factory.mktemp("longer-build")
    result = run_process("convert", "--train-dir", sample / "train", "--labels-file", sample / "labels.txt",
                         "--output-dir", out, "--train-shards", 32, "--layout-threads", 4, "--workers", 2)
    assert result.returncode == 0, result.stderr
    return sample, out


SIGNALS = ["kill-9", "sigterm", "sigterm-group", "ctrl-c"]
TRAINERS = [reader.name for reader in trainers()]  # every reader trainer-check runs through (the registry's)


@contextlib.contextmanager
def trainer_check_running(converted, framework, *extra):
    """trainer-check on the CPU, once it reads: the DataLoader's workers at work, or DALI's pipeline."""
    lacking = missing(READERS[framework])  # found, not imported: TensorFlow then torch in this process would crash
    if lacking:
        pytest.skip(f"not installed: {', '.join(lacking)}")
    args = ["trainer-check", converted, "--framework", framework, "--device", "cpu", "--steps", 500, "--json", *extra]
    with Run(*args, *(["--workers", 2] if framework == "torch" else [])) as run:
        if framework == "torch":
            run.wait_for(lambda r: len(r.processes()) >= 3)
        else:
            run.wait_for(dali_running)
        time.sleep(0.5)
        if framework != "torch":
            assert run.processes() == [run.proc.pid]  # DALI's CPU pipelines run on threads: no process of its own
        yield run


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find a run's processes")
@pytest.mark.parametrize("how", SIGNALS)
@pytest.mark.parametrize("framework", TRAINERS)
def test_trainer_check_stopped_leaves_no_process(converted, framework, how):
    """trainer-check's DataLoader workers stayed after kill -9 or SIGTERM (parent pid 1, 300-500 MB each);
    SIGTERM gave exit 143 and no JSON. DALI's CPU pipelines start no process (threads only): whatever
    it would start must end too."""
    with trainer_check_running(converted, framework) as run:
        started = run.processes()
        code, out, err = run.signal(how)
        assert wait_until_gone(started + run.processes()) == []
    if how != "kill-9":
        assert_ended_as_interrupted(code, out, err)


STOPS_REPEATED = 12  # a fault seen once in 12 stops is caught with odds of 1 - (11/12)^12 = 65% a run per kind


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find a run's processes")
@pytest.mark.parametrize("how", ["sigterm", "sigterm-group"])
def test_trainer_check_with_dataloader_workers_stops_in_one_line_every_time(converted, how):
    """SIGTERM to trainer-check --framework torch with DataLoader workers, again and again, at moments spread
    over the run (its loaders fork new workers every epoch, 3 batches here): 1 stop in 12 added a BrokenPipeError
    traceback, or a worker's own traceback (the signal reached it while it forked), or an `Exception ignored`
    KeyboardInterrupt at exit; some took 26 s or more. Every stop: exit 1, `error: interrupted` alone, within
    5 s, no process left."""
    pytest.importorskip("torch")
    args = ["trainer-check", converted, "--framework", "torch", "--device", "cpu", "--steps", 500, "--json",
            "--workers", 8]
    for attempt in range(STOPS_REPEATED):
        with Run(*args) as run:
            run.wait_for(lambda r: len(r.processes()) >= 3)
            time.sleep(0.25 * attempt)
            started = run.processes()
            code, out, err = run.signal(how)
            assert wait_until_gone(started + run.processes()) == [], attempt
        assert_ended_as_interrupted(code, out, err)
        assert "BrokenPipe" not in err and "Warning" not in err, (attempt, err)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find a run's processes")
@pytest.mark.parametrize("framework", TRAINERS)
def test_trainer_check_stopped_leaves_no_picture(converted, tmp_path, framework):
    """--show's PNG is written whole, once the checks are done: a run stopped before leaves nothing under its
    name, and no temporary file (not the one that tried the name before the run either)."""
    shows = tmp_path / "shows"
    shows.mkdir()
    with trainer_check_running(converted, framework, "--show", shows / "batches.png") as run:
        code, out, err = run.signal("ctrl-c")
    assert_ended_as_interrupted(code, out, err)
    assert list(shows.iterdir()) == []


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find a run's processes")
@pytest.mark.parametrize("how", SIGNALS)
def test_verify_stopped_leaves_no_process(longer_build, how):
    """verify --json with two workers, on a terminal: SIGTERM gave exit 143, no JSON and multiprocessing's
    "leaked semaphore" warning."""
    with Run("verify", longer_build[1], "--deep", "--workers", 2, "--json", tty=True) as run:
        run.wait_for(lambda r: len(r.processes()) >= 3)
        time.sleep(0.1)
        started = run.processes()
        code, out, err = run.signal(how)
        assert wait_until_gone(started + run.processes()) == []
    if how != "kill-9":
        assert_ended_as_interrupted(code, out, err)


def sha256_of(path):
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm", "sigterm-group"])
def test_sigterm_during_a_two_worker_convert_records_every_shard_on_disk(longer_build, tmp_path, how):
    """Shards that finished after the signal were on disk but missing from the manifest written on the
    way out, and the rerun wrote them again. (SIGTERM to the whole group ends the workers mid-shard:
    what they were writing is removed, and redone by the rerun.)"""
    sample, reference = longer_build
    out = tmp_path / "out"
    args = ["convert", "--train-dir", sample / "train", "--labels-file", sample / "labels.txt", "--output-dir", out,
            "--train-shards", 32, "--layout-threads", 4, "--workers", 2, "--json"]
    with Run(*args) as run:
        run.wait_for(lambda r: len(list(out.glob("train-*"))) >= 3)
        code, stdout, err = run.signal(how)
    assert code == 1 and err.splitlines() == ["error: interrupted; run the same command again to resume"], err
    assert json.loads(stdout)["error"] == "interrupted; run the same command again to resume"
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {entry["name"]: entry for entry in manifest["shards"]}
    on_disk = sorted(p.name for p in out.glob("train-*"))
    assert on_disk == sorted(listed) and len(on_disk) < 32
    if how == "sigterm":  # the workers finished what they had, and it is recorded
        assert len(on_disk) >= 3
    assert manifest["complete"] is False and manifest["ended"] == "interrupted"
    for name, entry in listed.items():
        assert sha256_of(out / name) == entry["sha256"]
        assert sha256_of(out / "dali_idx" / f"{name}.idx") == entry["index_sha256"]
    assert sorted(p.name for p in (out / "dali_idx").iterdir()) == [f"{name}.idx" for name in on_disk]
    assert not [p for p in out.rglob("*") if p.name.startswith(".") and p.name != LOCK_NAME]
    rerun = run_process(*args)
    assert rerun.returncode == 0
    summary = json.loads(rerun.stdout)
    assert summary["shards_kept"] == len(listed) and summary["shards_written"] == 32 - len(listed)
    assert tree_digest(out) == tree_digest(reference)


def slow_square(x):
    time.sleep(0.5 if x else 0)
    return x * x


def test_tasks_running_when_a_run_stops_finish_and_are_handed_on():
    """Stopped (here by an interrupt while the first result is recorded), a pool hands out no more tasks,
    but what its workers were doing finishes and reaches on_result: convert records a shard written while
    it stops instead of leaving it on disk unlisted."""
    from imagenet_build.infra.errors import Interrupted
    from imagenet_build.infra.workers import Workers

    got = []

    def on_result(task, result):
        got.append(task[0])
        if got == [0]:
            raise KeyboardInterrupt  # as Ctrl-C does, while the other worker is busy with task 1

    try:
        with Workers(2) as pool, pytest.raises(KeyboardInterrupt):
            pool.run(slow_square, [(k,) for k in range(20)], on_result)
    finally:
        Interrupted.stopping = False  # what Workers.run set on the way out
    assert got[:2] == [0, 0] and 1 in got, got  # task 0 again: the interrupt may have come before it was recorded
    assert set(got) <= {0, 1, 2, 3}, got  # nothing started after it stopped: two tasks per worker at most


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_a_dataloader_worker_started_from_another_thread_outlives_that_thread():
    """The kernel's parent-death signal fires when the parent *thread* ends: a worker started from a thread
    that then ended must live on (a watchdog ends it with its process), and still end when that is killed."""
    code = (
        "import multiprocessing, threading, time\n"
        "from imagenet_build.infra.workers import end_with_this_process\n"
        "def child(init):\n"
        "    init(0); time.sleep(60)\n"
        "started = []\n"
        "def start():\n"
        "    p = multiprocessing.get_context('fork').Process(target=child, args=(end_with_this_process(),))\n"
        "    p.start(); started.append(p)\n"
        "thread = threading.Thread(target=start); thread.start(); thread.join()\n"
        "time.sleep(1.5)\n"
        "print('alive' if started[0].is_alive() else 'ended', started[0].pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    state, pid = proc.stdout.readline().split()
    try:
        assert state == "alive"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert wait_until_gone([int(pid)]) == []


# ------------------------------------------------------------------ what verify says of a build that is not complete


def test_a_convert_stopped_by_bad_input_failed_and_verify_says_so(sample_copy, tmp_path):
    """verify said "convert was interrupted" of a build whose convert had failed on a broken image."""
    image = sorted((sample_copy / "validation").glob("*.JPEG"))[2]  # written after every train shard
    image.write_bytes(image.read_bytes()[:300])
    out = tmp_path / "out"
    result = run_cli(*sample_args(sample_copy, out, "--workers", 1))
    assert result.exit_code == 1 and result.stderr.startswith("error: ") and image.name in result.stderr
    error = result.stderr.strip()[len("error: "):]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] is False and manifest["ended"] == "failed" and manifest["error"] == error
    verified = run_cli("verify", out, "--json")
    assert verified.exit_code == 1
    messages = [p["message"] for p in json.loads(verified.stdout)["problems"] if p["file"] == "manifest.json"]
    assert messages == [f"the build is not complete: convert failed: {error}"]


def test_verify_of_a_folder_a_convert_is_writing_names_the_convert(converted, tmp_path):
    """verify during a running convert called its temporary files strays."""
    out = tmp_path / "out"
    shutil.copytree(converted, out)
    (out / ".train-00001-of-00004.4242.tmp").write_bytes(b"half a shard")
    for held in (out, out / "dali_idx"):  # convert's lock on the output, index's on the index folder
        holder = hold_lock(held)
        try:
            result = run_process("verify", out, "--json")
        finally:
            holder.kill()
            holder.wait()
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
        assert re.fullmatch(
            rf"error: {re.escape(str(held))}: imagenet-build convert \(pid {holder.pid} on "
            rf"{re.escape(socket.gethostname())}, since \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC\) "
            r"is writing this folder; verify when it ends", result.stderr.strip()), result.stderr
        assert json.loads(result.stdout)["ok"] is False
    (out / ".train-00001-of-00004.4242.tmp").unlink()
    assert run_process("verify", out).returncode == 0  # the lock files the holders left are nobody's


# A program whose SIGTERM comes while Python runs a __del__ (Finalised()), under the CLI's stop handling
SWALLOWED_STOP = (
    "import os, signal, time\n"
    "from imagenet_build.cli import stop\n"
    "class Finalised:\n"
    "    def __del__(self):\n"
    "        os.kill(os.getpid(), signal.SIGTERM)\n"
    "        sum(range(100000))  # the handler runs here, inside __del__\n"
    "restore = stop.stop_on_signals()\n"
)


def test_a_stop_signal_whose_raise_python_swallowed_still_stops_the_command():
    """A signal that arrives while Python runs a __del__ (or an at-fork hook: trainer-check forks its
    DataLoader workers several times) raises there, where Python prints the exception and drops it:
    a Ctrl-C at that moment let trainer-check run on to its end and exit 0."""
    code = SWALLOWED_STOP + (
        "try:\n"
        "    Finalised()\n"
        "    time.sleep(10)\n"
        "    print('ran on', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('stopped', flush=True)\n"
    )
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout == "stopped\n" and result.stderr == "", result.stderr
    assert time.monotonic() - started < 5  # raised again at once, waking the sleep as the signal did


def test_a_swallowed_stop_raised_again_after_the_stop_got_under_way_is_dropped():
    """The swallowed stop is raised again a moment later (above); when the stop got under way meanwhile (an error
    the same signal set off: a DataLoader worker it ended), that raise came after the command had put Python's
    handlers back, as a KeyboardInterrupt traceback at exit ("Exception ignored in: <module 'threading'>")."""
    code = SWALLOWED_STOP + (
        "Finalised()\n"
        "stop.stopping()  # the command ends on another error the signal set off\n"
        "restore()\n"
        "time.sleep(0.5)\n"
        "print('ended', flush=True)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "ended\n" and result.stderr == "", result.stderr
