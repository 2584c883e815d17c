"""Helpers the test modules share: framing damage, editing a build's shards and indexes, DALI's own epoch.

Test modules import these from here, never from each other, so a skip in one
module never travels into another.
"""

import contextlib
import gzip
import io
import json
import struct
import subprocess
import sys
import tarfile
from pathlib import Path

from imagenet_build.encode.example import encode_example_parts
from imagenet_build.format import tfrecord
from imagenet_build.format.dali_index import index_text
from imagenet_build.format.record_schema import example_message_class
from imagenet_build.format.tfrecord import OVERHEAD, frame, read_records

SHARD = "train-00001-of-00004"
OTHER = "train-00002-of-00004"


def encode_example(**fields):
    """A slim Example serialized as one bytes object, as convert writes it (encode_example_parts' head, image,
    tail joined)."""
    return b"".join(encode_example_parts(**fields))


def record(payload):
    head, foot = tfrecord.frame(payload)
    return head + payload + foot


def with_length(data, length):
    """data with its first record's length replaced and the length CRC made valid again."""
    raw = struct.pack("<q", length)
    return raw + struct.pack("<I", tfrecord.masked_crc32c(raw)) + data[12:]


GOOD = record(b"first") + record(b"second payload")
FRAMING_DAMAGE = {
    "flipped length CRC": (bytes([GOOD[0] ^ 1]) + GOOD[1:], 0, "length CRC mismatch"),
    "sign bit set": (with_length(GOOD, -5), 0, "negative record length"),
    "length past the end": (with_length(GOOD, 10**6), 0, "runs past the end"),
    "truncated last record": (GOOD[:-3], 21, "runs past the end"),
    "trailing garbage": (GOOD + b"garbage", len(GOOD), "trailing byte"),
    "trailing zero bytes": (GOOD + bytes(40), len(GOOD), "length CRC mismatch"),
}


def records_of(path):
    data = Path(path).read_bytes()
    return [payload for _, payload, _ in read_records(io.BytesIO(data), len(data))]


def write_shard(folder, name, payloads, index=True):
    """Rewrite a shard (and, unless told not to, a correct index for it) from payloads."""
    data, entries, offset = b"", [], 0
    for payload in payloads:
        head, foot = frame(payload)
        data += head + payload + foot
        entries.append((offset, OVERHEAD + len(payload)))
        offset += OVERHEAD + len(payload)
    (folder / name).write_bytes(data)
    if index:
        (folder / "dali_idx" / f"{name}.idx").write_text(index_text(entries))


def edit_record(folder, name, number, change):
    """Apply change(example) to record `number` of a shard; shard and index rewritten consistently."""
    payloads = records_of(folder / name)
    example = example_message_class()()
    example.ParseFromString(payloads[number])
    change(example)
    payloads[number] = example.SerializeToString(deterministic=True)
    write_shard(folder, name, payloads)


def index_lines(folder, name=SHARD):
    return (folder / "dali_idx" / f"{name}.idx").read_text().splitlines(keepends=True)


def set_index(folder, lines, name=SHARD):
    (folder / "dali_idx" / f"{name}.idx").write_text("".join(lines))


def dali_epoch(folder, split="train"):
    """(records, distinct names) DALI's reader delivers in one epoch over the build's shards and indexes (CPU),
    or None when DALI refuses or fails on them (asserted to be DALI's own error, not an import failure)."""
    code = r"""
import glob, os, sys
from nvidia.dali import fn, pipeline_def
import nvidia.dali.tfrecord as tfrec
folder, split = sys.argv[1], sys.argv[2]
paths = sorted(glob.glob(os.path.join(folder, split + "-*")))
indexes = [os.path.join(folder, "dali_idx", os.path.basename(p) + ".idx") for p in paths]
@pipeline_def(batch_size=1, num_threads=1, device_id=None)
def pipe():
    r = fn.readers.tfrecord(path=paths, index_path=indexes, name="Reader",
        features={"image/filename": tfrec.FixedLenFeature((), tfrec.string, "")})
    return r["image/filename"]
p = pipe()
p.build()
n = p.reader_meta("Reader")["epoch_size"]
names = [p.run()[0].at(0).tobytes() for _ in range(n)]
print(n, len(set(names)))
"""
    result = subprocess.run([sys.executable, "-c", code, str(folder), split], capture_output=True, text=True)
    if result.returncode:
        # DALI refused or failed: that must be DALI's own error about the data, not a missing module
        assert "ModuleNotFoundError" not in result.stderr and "ImportError" not in result.stderr, result.stderr
        raised = [line for line in result.stderr.splitlines() if line.startswith("RuntimeError: ")]
        assert raised and "pipeline" in raised[-1], result.stderr  # DALI's own: "Critical error ... pipeline"
        return None
    size, distinct = result.stdout.split()[-2:]
    return int(size), int(distinct)


def slim_features(tf):
    """slim's features as a TensorFlow training script parses them."""
    return {
        "image/encoded": tf.io.FixedLenFeature([], tf.string, default_value=""),
        "image/format": tf.io.FixedLenFeature([], tf.string, default_value="jpeg"),
        "image/filename": tf.io.FixedLenFeature([], tf.string, default_value=""),
        "image/colorspace": tf.io.FixedLenFeature([], tf.string, default_value=""),
        "image/channels": tf.io.FixedLenFeature([], tf.int64, default_value=0),
        "image/height": tf.io.FixedLenFeature([], tf.int64, default_value=0),
        "image/width": tf.io.FixedLenFeature([], tf.int64, default_value=0),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
        "image/class/synset": tf.io.FixedLenFeature([], tf.string, default_value=""),
        "image/class/text": tf.io.FixedLenFeature([], tf.string, default_value=""),
        "image/object/bbox/xmin": tf.io.VarLenFeature(dtype=tf.float32),
        "image/object/bbox/ymin": tf.io.VarLenFeature(dtype=tf.float32),
        "image/object/bbox/xmax": tf.io.VarLenFeature(dtype=tf.float32),
        "image/object/bbox/ymax": tf.io.VarLenFeature(dtype=tf.float32),
        "image/object/bbox/label": tf.io.VarLenFeature(dtype=tf.int64),
    }


def read_with_tensorflow(path):
    """Every record of a shard through TensorFlow's own reader and parser, slim's features."""
    import tensorflow as tf

    features = slim_features(tf)
    records = []
    for raw in tf.data.TFRecordDataset(path):
        parsed = tf.io.parse_single_example(raw, features)
        records.append(
            {
                k: (v.values.numpy().tolist() if isinstance(v, tf.sparse.SparseTensor) else v.numpy())
                for k, v in parsed.items()
            }
        )
    return records


def tar_of(members, format=tarfile.GNU_FORMAT):
    """A tar in memory (GNU unless said): members are (name, bytes), (name, None) for a folder or (name, its
    target) for a symbolic link."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=format) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(data, str):
                info.type, info.linkname = tarfile.SYMTYPE, data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def rewrite_tar_gz(archive, change):
    """The .tar.gz rewritten with change([(name, bytes)]) -> [(name, bytes)]."""
    with tarfile.open(archive) as tar:
        members = [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]
    with gzip.GzipFile(archive, "wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for name, data in change(members):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def expect_one_error_line(args, *fragments, out, nothing_written=True):
    """The command fails with one `error:` line holding the fragments, no traceback, and no shard or spool
    left under a final name in `out`."""
    from conftest import run_cli

    result = run_cli(*args)
    assert result.exit_code != 0, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    if nothing_written:
        assert not out.exists() or not [p for p in out.rglob("*") if p.is_file()], list(out.rglob("*"))
    assert not [p for p in out.rglob(".imagenet-build-spool-*")]
    return lines[0]


def expect_error(args, code, *fragments):
    """The CLI in this process exits `code` with one `error:` line holding every fragment, no traceback."""
    from conftest import run_cli

    result = run_cli(*args)
    assert result.exit_code == code, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def trainer_report(folder, *args):
    """(exit code, JSON report, names of the failed checks) of `trainer-check FOLDER ARGS --json`."""
    import json

    from conftest import run_cli

    result = run_cli("trainer-check", folder, "--json", *args)
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    return result.exit_code, report, {c["name"] for c in report["checks"] if not c["ok"]}


def convert_with_real_labels(sample_dir, where, planted):
    """The sample converted with a real.json whose entries `planted` ({0-based image index: class indices})
    label its first validation images, the rest empty: the build folder."""
    from conftest import layout_args, run_cli

    real = [[] for _ in range(50000)]
    for index, classes in planted.items():
        real[index] = classes
    (where / "real.json").write_text(json.dumps(real))
    out = where / "out"
    result = run_cli("convert", "--train-dir", sample_dir / "train", "--validation-dir", sample_dir / "validation",
                     "--real-labels", where / "real.json", "--output-dir", out, *layout_args(sample_dir))
    assert result.exit_code == 0, result.output
    return out



def _edit_manifest(change):
    def damage(folder):
        manifest = json.loads((folder / "manifest.json").read_text())
        change(manifest)
        (folder / "manifest.json").write_text(json.dumps(manifest))
    return damage


def _replace_by_folder(folder):
    (folder / SHARD).unlink()
    (folder / SHARD).mkdir()


def _missing(folder):
    (folder / SHARD).unlink()
    (folder / "dali_idx" / f"{SHARD}.idx").unlink()


def _copied(folder, name, index_name):
    import shutil

    shutil.copy(folder / SHARD, folder / name)
    shutil.copy(folder / "dali_idx" / f"{SHARD}.idx", folder / "dali_idx" / index_name)


def _orphan(folder):
    import shutil

    shutil.copy(folder / "dali_idx" / f"{SHARD}.idx", folder / "dali_idx" / "train-00009-of-00004.idx")


def _fifo(folder):
    import os

    os.mkfifo(folder / "train-00004-of-00005")


def _dangling(folder):
    import os

    os.symlink(folder / "nowhere", folder / "validation-00002-of-00003")


# Damage to a build's folder that verify finds at the folder's level (its listing and its folder checks, none
# of which read a record): what verify's tests damage a copy of the converted sample with, and what `report`
# must find as well (tests/report/test_report_problems.py)
FOLDER_DAMAGE = {
    "a shard and its index missing": _missing,
    "a shard replaced by a folder": _replace_by_folder,
    "a stray file": lambda folder: (folder / "notes.txt").write_text("hello"),
    "an index with no shard": _orphan,
    "a shard of another total": lambda folder: _copied(folder, "train-00001-of-00008", "train-00001-of-00008.idx"),
    "a FIFO named like a shard": _fifo,
    "a link to nothing named like a shard": _dangling,
    "a record dropped, shard and index agreeing": lambda folder: write_shard(folder, SHARD,
                                                                            records_of(folder / SHARD)[:-1]),
    "a split's records that are not its shards' sum": _edit_manifest(
        lambda m: m["splits"]["train"].update(records=999)),
    "a split missing from the manifest": _edit_manifest(lambda m: m["splits"].pop("validation")),
    "totals that are not the shards' sum": _edit_manifest(lambda m: m["totals"].update(bytes=1)),
    "a shard listed twice": _edit_manifest(lambda m: m["shards"].append(dict(m["shards"][0]))),
    "a shard listed under another split": _edit_manifest(lambda m: m["shards"][0].update(split="validation")),
    "an incomplete build": _edit_manifest(lambda m: m.update(complete=False)),
}


def archive_members(archive):
    """[(name, bytes)] of the files of a zip, a .tar or a .tar.gz (folders left out), in archive order."""
    import zipfile

    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            return [(i.filename, z.read(i)) for i in z.infolist() if not i.filename.endswith("/")]
    with tarfile.open(archive) as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]


def sample_options(sample, **more):
    """convert's options (the Python API's) for the session sample, as conftest.sample_args gives them."""
    return dict(labels_file=str(sample / "labels.txt"), train_dir=str(sample / "train"),
                bounding_box_file=str(sample / "bboxes.csv"), validation_dir=str(sample / "validation"),
                validation_labels_file=str(sample / "validation_labels.txt"), train_shards=4, validation_shards=2,
                layout_threads=2, workers=1, **more)


def as_killed_run(build, job="1" * 16):
    """A complete build made into what a run killed before its manifest leaves: each shard's receipt in the job
    folder (as its task wrote it: [[output, entry, inputs' state]]), no manifest nor TFDS files. Returns the
    receipts' paths by shard name."""
    manifest = json.loads((build / "manifest.json").read_text())
    folder = build / ".convert-job" / "results" / job
    folder.mkdir(parents=True)
    paths = {}
    for number, entry in enumerate(manifest["shards"]):
        result = [[str(build), entry, manifest["inputs"]["shards"][entry["name"]]]]
        paths[entry["name"]] = folder / f"{entry['name']}.json"
        paths[entry["name"]].write_text(json.dumps({"job": job, "task": number, "key": entry["name"],
                                                    "result": result}))
    for name in ("manifest.json", "features.json", "dataset_info.json"):
        (build / name).unlink()
    return paths


def edit_json(path, change):
    """Rewrite the JSON file at `path` with `change(document)` applied."""
    document = json.loads(Path(path).read_text())
    change(document)
    Path(path).write_text(json.dumps(document))


def user_copy_of(sample, where):
    """The sample's files without the note `sample` writes beside them: a user's own copy holding the same files,
    which convert reads as any copy (its labels files are only what options name)."""
    import shutil

    from imagenet_build.sources.samples import SAMPLE_NOTE

    shutil.copytree(sample, where, ignore=shutil.ignore_patterns(SAMPLE_NOTE))
    return where


def request_for(sample_dir, out, engine):
    """convert's request for the sample as sample_args gives it, one worker, run by `engine` (an Engine class)."""
    import dataclasses

    from imagenet_build.request import ConvertOptions, convert_request

    options = ConvertOptions(
        output_dir=str(out), train_dir=str(sample_dir / "train"), validation_dir=str(sample_dir / "validation"),
        labels_file=str(sample_dir / "labels.txt"), validation_labels_file=str(sample_dir / "validation_labels.txt"),
        bounding_box_file=str(sample_dir / "bboxes.csv"), train_shards=4, validation_shards=2, layout_threads=2,
        workers=1)
    return dataclasses.replace(convert_request(options), engine=engine(1))


@contextlib.contextmanager
def placed(copy, folder, pool):
    """A copy as convert reads it: its spool, where it has one, placed in `folder` and every split decompressed
    (writer/spooling.py's part), removed afterwards."""
    from imagenet_build.sources.spool import SpooledCopy

    if not isinstance(copy, SpooledCopy):
        yield
        return
    with copy.spool.placed_in(str(folder)) as spool:
        spool.decompress(pool)
        yield
