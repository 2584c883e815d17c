"""Odd but real-world JPEGs through every decoder a build serves: TensorFlow's, DALI's (CPU) and torchvision's.

The rule images.decide applies follows what these decoders were seen to read (the first test holds the
cases' expectations to them); a build from a folder of such images stores only what all of them read,
re-encodes the rest saying why, and refuses what none reads; verify finds a stored JPEG DALI cannot read.
"""

import json
import subprocess
import sys

import pytest

from conftest import run_cli
from helpers import encode_example, records_of, write_shard
from imagenet_build.encode import images, jpeg_header
from imagenet_build.encode.images import REFUSE, STORE
from imagenet_build.format.record_schema import decode_example
from jpeg_cases import CASES, decode_all, segments

SERVED = ("tensorflow", "dali-cpu", "torchvision")
pytestmark = pytest.mark.slow


def file_name(case):
    return f"case{list(CASES).index(case):02d}.jpg"


def read_at(result, data, decoder):
    """(read, (height, width)) of a decoder's result, the size as the header has it (DALI turns an image
    by its EXIF orientation: turned back here; verify warns about those)."""
    ok, height, width, _ = result
    turned = decoder == "dali-cpu" and jpeg_header.exif_orientation(data) >= 5
    return ok, (width, height) if turned else (height, width)


@pytest.fixture(scope="module")
def odd_build(tmp_path_factory):
    """A folder dataset of every case, converted with --on-error skip; every case and every stored record
    through each decoder (one process per decoder for all of them)."""
    root = tmp_path_factory.mktemp("odd")
    (root / "photos" / "odd").mkdir(parents=True)
    for case, (data, _) in CASES.items():
        (root / "photos" / "odd" / file_name(case)).write_bytes(data)
    out = root / "out"
    result = run_cli("convert", "--train-dir", root / "photos", "--classes-from-folders", "--on-error", "skip",
                     "--output-dir", out, "--train-shards", 1, "--layout-threads", 1, "--workers", 1, "--json")
    assert result.exit_code == 0, result.output
    records = {}
    (root / "stored").mkdir()
    for payload in records_of(out / "train-00000-of-00001"):
        record = decode_example(payload)
        name = record["image/filename"][0].decode()
        records[name] = record
        (root / "stored" / name).write_bytes(record["image/encoded"][0])
    files = [root / "photos" / "odd" / file_name(case) for case in CASES] + [root / "stored" / n for n in records]
    read = {}
    for decoder in SERVED + ("pillow",):
        results = decode_all(files, decoder)
        read[decoder] = {"input": dict(zip(CASES, results)), "stored": dict(zip(records, results[len(CASES):]))}
    return {"summary": json.loads(result.stdout), "records": records, "read": read, "out": out}


@pytest.mark.parametrize("case", list(CASES))
def test_the_rule_follows_what_the_decoders_read(case, odd_build):
    """Stored: all three read it at its header's size. Re-encoded: libjpeg (torchvision) reads it, and for its
    header DALI does not, a lossless one TensorFlow does not (CMYK and YCCK: slim's rule; arithmetic coding:
    nvJPEG, not run here). Refused: no decoder reads it, Pillow included."""
    data, expected = CASES[case]
    read = {decoder: odd_build["read"][decoder]["input"][case] for decoder in odd_build["read"]}
    if expected == STORE:
        header = images.decide(data).header
        for decoder in SERVED:
            assert read_at(read[decoder], data, decoder) == (True, (header.height, header.width)), (decoder, read)
    elif expected == REFUSE:
        assert not any(result[0] for result in read.values()), read
    else:  # libjpeg reads it (torchvision's decoder is libjpeg-turbo's); the decoder it is re-encoded for does not
        assert read["torchvision"][0], read
        cannot = "dali-cpu" if expected in images.DALI_STOPS else "tensorflow" if expected == images.LOSSLESS else None
        assert cannot is None or not read[cannot][0], read


@pytest.mark.parametrize("case", list(CASES))
def test_every_stored_record_decodes_in_every_served_decoder(case, odd_build):
    """convert stores, re-encodes (the summary says why) or refuses each case as the rule says, and every
    record it stores decodes in TensorFlow's, DALI's and torchvision's decoders at the recorded size."""
    summary, name = odd_build["summary"], file_name(case)
    expected = CASES[case][1]
    skipped = {s["file"]: s["reason"] for s in summary["skipped"]}
    reencoded = {r["file"]: r["reencoded"] for r in summary["reencoded"] if r["reencoded"]}
    if expected == REFUSE:
        assert f"odd/{name}" in skipped and name not in odd_build["records"]
        return
    assert f"odd/{name}" not in skipped
    assert reencoded.get(f"odd/{name}", STORE) == expected
    record = odd_build["records"][name]
    stored = record["image/encoded"][0]
    assert (stored == CASES[case][0]) == (expected == STORE)
    size = (record["image/height"][0], record["image/width"][0])
    for decoder in SERVED:
        assert read_at(odd_build["read"][decoder]["stored"][name], stored, decoder) == (True, size), decoder


def test_the_text_summary_says_why_each_image_was_reencoded(odd_build, tmp_path):
    data = odd_build["out"].parent / "photos"
    result = run_cli("convert", "--train-dir", data, "--classes-from-folders", "--on-error", "skip",
                     "--output-dir", tmp_path / "out", "--train-shards", 1, "--layout-threads", 1, "--workers", 1)
    assert result.exit_code == 0, result.output
    name = file_name("junk before DQT")
    assert f"re-encoded: odd/{name}: extraneous bytes before a header marker" in result.stdout
    assert f"skipped: odd/{file_name('truncated scan')}: truncated JPEG" in result.stdout


DALI_DECODE_EPOCH = r"""
import glob, os, sys
import nvidia.dali.tfrecord as tfrec
from nvidia.dali import fn, pipeline_def, types
folder = sys.argv[1]
paths = sorted(glob.glob(os.path.join(folder, "train-*")))
indexes = [os.path.join(folder, "dali_idx", os.path.basename(p) + ".idx") for p in paths]
@pipeline_def(batch_size=1, num_threads=1, device_id=None)
def pipe():
    r = fn.readers.tfrecord(path=paths, index_path=indexes, name="Reader", features={
        "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
        "image/filename": tfrec.FixedLenFeature((), tfrec.string, "")})
    return r["image/filename"], fn.decoders.image(r["image/encoded"], device="cpu", output_type=types.RGB)
p = pipe()
p.build()
for _ in range(p.reader_meta("Reader")["epoch_size"]):
    names, decoded = p.run()
    print(names.at(0).tobytes().decode(), *decoded.at(0).shape[:2])
"""


def dali_decode_epoch(folder):
    """[(filename, height, width)] of one epoch of DALI's reader and CPU decoder over a build's train shards
    (a training run's pipeline), or None when DALI stops on a record (asserted to be DALI's own error)."""
    result = subprocess.run([sys.executable, "-c", DALI_DECODE_EPOCH, str(folder)], capture_output=True, text=True)
    if result.returncode:
        assert "ModuleNotFoundError" not in result.stderr and "ImportError" not in result.stderr, result.stderr
        assert "nvidia.dali.fn.decoders.image" in result.stderr, result.stderr[-3000:]
        return None
    return [(name, int(h), int(w)) for name, h, w in (line.split() for line in result.stdout.splitlines())]


def test_a_dali_epoch_over_the_build_decodes_every_record(odd_build):
    records = odd_build["records"]
    seen = dali_decode_epoch(odd_build["out"])
    assert seen is not None and sorted(name for name, _, _ in seen) == sorted(records)


def test_verify_names_each_stored_jpeg_the_rule_would_not_store(tmp_path):
    """A shard written by hand, with JPEGs convert would re-encode: verify reports each (record, its byte
    offset, the byte of the image), where it used to call the shard sound; DALI's epoch dies on it."""
    folder = tmp_path / "shards"
    (folder / "dali_idx").mkdir(parents=True)
    cases = ["baseline", "junk before DQT", "RST marker among the header segments", "CMYK", "baseline"]
    payloads = [encode_example(encoded=CASES[case][0], filename=f"{k}.jpg", height=48, width=64, label=1,
                               synset="n00000001", text="one") for k, case in enumerate(cases)]
    write_shard(folder, "train-00000-of-00001", payloads)
    result = run_cli("verify", folder, "--workers", 1, "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 1 and report["summary"]["problem_counts"] == {"readers": 3}, report
    offsets = [sum(16 + len(p) for p in payloads[:k]) for k in range(len(payloads))]
    found = [(p["file"], p["record"], p["offset"], p["message"]) for p in report["problems"]]
    dqt = [pos for marker, pos in segments(CASES["baseline"][0]) if marker == 0xDB][0]
    assert [f[:3] for f in found] == [("train-00000-of-00001", k, offsets[k]) for k in (1, 2, 3)]
    assert found[0][3].startswith(f"extraneous bytes before a header marker at byte {dqt} of image/encoded: "
                                  "DALI's parser stops on it")
    assert found[1][3].startswith("a marker without a length among the header segments at byte")
    assert found[2][3].startswith("CMYK JPEG (its frame header at byte")
    assert dali_decode_epoch(folder) is None
    write_shard(folder, "train-00000-of-00001", [payloads[0], payloads[3], payloads[4]])
    assert dali_decode_epoch(folder) == [("0.jpg", 48, 64), ("3.jpg", 48, 64), ("4.jpg", 48, 64)]
