"""Every gzip input, truncated or lying in its trailer, stops the command with one line naming it.

A gzip stream carries the CRC-32 and length of what it holds, and ends with them: a stream cut
short, or whose trailer disagrees with its data, is a damaged download. The one reading of a gzip
stream (infra/deflate.py) checks both, and the end of the tar inside; GZIP_INPUTS is every
command that reads one (held to the `.tar.gz` files the sample writers write by
test_every_gzip_file_a_sample_writer_writes_is_read_here_or_said_unread).
"""

import gzip
import io
import shutil
import tarfile
import zlib

import pytest

from conftest import run_cli
from imagenet_build.sources.copies import sample_kinds

SHARDS = ["--train-shards", 2, "--validation-shards", 1, "--layout-threads", 1, "--workers", 1]
BOXES = "ILSVRC2012_bbox_train_v2.tar.gz"


def convert_from(root, out):
    return ["convert", "--from", root, "--output-dir", out, "--labels-file", root / "labels.txt",
            "--validation-labels-file", root / "validation_labels.txt", *SHARDS]


def convert_bbox_tar(root, out):
    return ["convert", "--train-dir", root / "train", "--bbox-tar", root / BOXES, "--output-dir", out,
            "--labels-file", root / "labels.txt", *SHARDS]


def bboxes(root, out):
    return ["bboxes", root / BOXES, "--output", out]


# name -> (the copy kind of the sample, the gzip file damaged, the command reading it)
GZIP_INPUTS = {
    "box archive, convert --from": ("ilsvrc", BOXES, convert_from),
    "box archive, --bbox-tar": ("ilsvrc", BOXES, convert_bbox_tar),
    "box archive, bboxes": ("ilsvrc", BOXES, bboxes),
    "ImageNetV2": ("imagenet-v2", "imagenetv2-matched-frequency.tar.gz", convert_from),
    "Hugging Face": ("hf", "data/train_images_0.tar.gz", convert_from),
    "face-blurred": ("blurred", "train_blurred.tar.gz", convert_from),
}
UNREAD = {"data/test_images.tar.gz": "unlabelled: left out with a note, never read",
          "data/train_images_1.tar.gz": "read as train_images_0.tar.gz is",
          "data/train_images_2.tar.gz": "read as train_images_0.tar.gz is",
          "data/train_images_3.tar.gz": "read as train_images_0.tar.gz is",
          "data/train_images_4.tar.gz": "read as train_images_0.tar.gz is",
          "data/val_images.tar.gz": "read as train_images_0.tar.gz is",
          "val_blurred.tar.gz": "read as train_blurred.tar.gz is"}
DAMAGES = ("truncated", "truncated at a member's end", "tar cut inside a whole gzip stream", "CRC lie",
           "length lie")


def test_every_gzip_file_a_sample_writer_writes_is_read_here_or_said_unread(small_copy):
    for copy_kind in sample_kinds():
        root = small_copy(copy_kind)
        for path in root.rglob("*.gz"):
            name = str(path.relative_to(root))
            assert any(name == g for lay, g, _ in GZIP_INPUTS.values() if lay == copy_kind) or name in UNREAD, name


def member_ends(tar):
    """Where each member of the tar ends (its data padded to a block)."""
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        return [m.offset_data + -(-m.size // 512) * 512 for m in t]


def gzip_flushed(tar, at):
    """The tar gzipped with a full flush at each offset of `at`: (the stream, where each flush ends in it)."""
    compress = zlib.compressobj(9, zlib.DEFLATED, 31)
    out, ends, start = [], [], 0
    for end in at:
        out.append(compress.compress(tar[start:end]) + compress.flush(zlib.Z_FULL_FLUSH))
        ends.append(sum(map(len, out)))
        start = end
    out.append(compress.compress(tar[start:]) + compress.flush())
    return b"".join(out), ends


def damage(data, kind):
    tar = gzip.decompress(data)
    ends = member_ends(tar)
    if kind == "truncated":
        return data[: len(data) // 2]
    if kind == "truncated at a member's end":  # the stream ends just after a member: its tar headers stop there
        stream, flushed = gzip_flushed(tar, ends[:2])
        return stream[: flushed[1]]
    if kind == "tar cut inside a whole gzip stream":
        return gzip.compress(tar[: ends[1]], mtime=0)
    damaged = bytearray(data)
    damaged[-8 if kind == "CRC lie" else -1] ^= 1
    return bytes(damaged)


CASES = [(name, kind) for name in GZIP_INPUTS for kind in DAMAGES]


@pytest.mark.parametrize("name,kind", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_a_damaged_gzip_input_is_one_error_line_naming_it(small_copy, tmp_path, name, kind):
    copy_kind, gz, command = GZIP_INPUTS[name]
    root = tmp_path / "copy"
    shutil.copytree(small_copy(copy_kind), root)
    path = root / gz
    path.write_bytes(damage(path.read_bytes(), kind))
    result = run_cli(*command(root, tmp_path / "out"))
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), result.stderr
    word = {"CRC lie": "gzip", "length lie": "gzip"}.get(kind, "truncated")
    assert word in lines[0], lines[0]


@pytest.mark.parametrize("kind", ["CRC lie", "length lie", "truncated"])
def test_the_parallel_inflate_refuses_what_the_one_thread_way_refuses(tmp_path, kind):
    """rapidgzip (an archive that does not compress well, on 2 threads) stops at the same damage, and what it
    cannot finish is inflated again the one-thread way, whose one line is the error."""
    import os

    from imagenet_build.infra.errors import InputError
    from imagenet_build.sources.inflate import gunzip

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for n in range(4):
            info = tarfile.TarInfo(f"x{n}.bin")
            info.size = 1 << 20
            tar.addfile(info, io.BytesIO(os.urandom(info.size)))
    path = tmp_path / "a.tar.gz"
    path.write_bytes(gzip.compress(out.getvalue(), mtime=0))
    gunzip(str(path), str(tmp_path / "whole"), threads=2)
    assert (tmp_path / "whole").read_bytes() == out.getvalue()
    path.write_bytes(damage(path.read_bytes(), kind))
    with pytest.raises(InputError, match="truncated" if kind == "truncated" else "not a valid gzip"):
        gunzip(str(path), str(tmp_path / "damaged"), threads=2)
    assert not (tmp_path / "damaged").exists() and not (tmp_path / "damaged.part").exists()
