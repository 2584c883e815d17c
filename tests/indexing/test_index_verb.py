"""The index verb: equal to what convert wrote, refusing broken framing with no index left, a folder without
TFRecords, two files that would share one index."""

import fcntl
import json
import os
import pty
import shutil
import struct
import subprocess
import sys
import termios

import pytest

from conftest import run_cli
from helpers import FRAMING_DAMAGE, OTHER, SHARD, record


def test_index_equals_what_convert_wrote(converted, tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    for p in converted.glob("*-of-*"):
        shutil.copy(p, shards)
    result = run_cli("index", shards, "--workers", 1, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert len(report["indexed"]) == 6 and report["records"] == 64
    for p in converted.glob("*-of-*"):
        index = f"dali_idx/{p.name}.idx"
        assert (shards / index).read_bytes() == (converted / index).read_bytes()
    other = tmp_path / "elsewhere"
    assert run_cli("index", shards / SHARD, "--index-dir", other).exit_code == 0
    assert (other / f"{SHARD}.idx").read_bytes() == (converted / "dali_idx" / f"{SHARD}.idx").read_bytes()


@pytest.mark.parametrize("defect", ["length past the end", "sign bit set", "trailing garbage", "flipped length CRC"])
def test_index_refuses_broken_framing_and_leaves_no_index(tmp_path, converted, defect):
    data, offset, message = FRAMING_DAMAGE[defect]
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(data)
    good = tmp_path / "good.tfrecord"
    shutil.copy(converted / SHARD, good)
    result = run_cli("index", bad, good, "--index-dir", tmp_path / "idx", "--workers", 1)
    assert result.exit_code == 1
    assert f"refused: {bad} at byte {offset}: " in result.stderr and message in result.stderr
    assert not (tmp_path / "idx" / "bad.tfrecord.idx").exists()
    assert not list((tmp_path / "idx").glob(".*"))  # no temporary left either
    assert (tmp_path / "idx" / "good.tfrecord.idx").exists()  # the sound file is still indexed


@pytest.mark.parametrize("content", ["nothing", "no shard-named file"])
def test_index_of_a_folder_without_tfrecords(tmp_path, content):
    """One line and exit 1, whether the folder is empty or holds only other files (a folder named like a
    shard is not a shard)."""
    if content != "nothing":
        (tmp_path / "notes.txt").write_text("hello")
        (tmp_path / "train-00000-of-00001").mkdir()
        (tmp_path / "old.tfrecord.idx").write_text("0 16\n")
    result = run_cli("index", tmp_path)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"error: {tmp_path}: holds no TFRecord files (<name>-NNNNN-of-NNNNN or *.tfrecord)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == (
        [] if content == "nothing" else ["notes.txt", "old.tfrecord.idx", "train-00000-of-00001"])


def test_index_refuses_two_files_that_would_share_one_index(tmp_path, converted):
    """a/s.tfrecord and b/s.tfrecord into one --index-dir: one index would be the other file's (DALI then
    fails or reads wrong records); a file named twice is indexed once."""
    for folder, shard in (("a", SHARD), ("b", OTHER)):
        (tmp_path / folder).mkdir()
        shutil.copy(converted / shard, tmp_path / folder / "s.tfrecord")
    clash = run_cli("index", tmp_path / "a" / "s.tfrecord", tmp_path / "b" / "s.tfrecord", "--index-dir",
                    tmp_path / "same")
    assert clash.exit_code == 2 and clash.stderr.count("\n") == 1 and "would both be indexed as" in clash.stderr
    assert not (tmp_path / "same").exists()
    twice = run_cli("index", tmp_path / "a" / "s.tfrecord", tmp_path / "a", "--index-dir", tmp_path / "same",
                    "--json")
    assert twice.exit_code == 0 and len(json.loads(twice.stdout)["indexed"]) == 1
    assert (tmp_path / "same" / "s.tfrecord.idx").read_bytes() == (
        converted / "dali_idx" / f"{SHARD}.idx").read_bytes()


def test_on_a_terminal_a_bar_counts_the_files_indexed(tmp_path):
    """The bar shows on a terminal alone (in a log or a pipe there is none): one step per file, named for the verb."""
    for n in range(3):
        (tmp_path / f"train-0000{n}-of-00003").write_bytes(record(b"image"))
    master, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns (a new pty has 0)
    try:
        done = subprocess.run([sys.executable, "-m", "imagenet_build", "index", str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=terminal, text=True, timeout=120)
        shown = os.read(master, 65536).decode()
    finally:
        os.close(terminal)
        os.close(master)
    assert done.returncode == 0, shown
    frames = shown.replace("\r", "\n").strip().splitlines()
    assert frames[0].startswith("index:   0%") and " 0/3 [" in frames[0], shown
    assert frames[-1].startswith("index: 100%") and " 3/3 [" in frames[-1] and "file/s]" in frames[-1], shown
