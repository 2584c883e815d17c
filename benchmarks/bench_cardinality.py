"""convert at the full ILSVRC2012 cardinality, tiny images: wall time and peak RSS per source.

Generates once into --work (reused when present):
  inputs/train/<synset>/<synset>_<n>.JPEG   1,281,167 images in the 1000 classes of the shipped
                                            labels file, 1281 or 1282 a class (the real counts
                                            run 732..1300; the total and the names are what cost
                                            memory, the spread does not), n from 10000 so the
                                            names are as long as the real ones
  inputs/validation/ILSVRC2012_val_%08d.JPEG  50,000 flat, labelled by the shipped validation labels
  inputs/bboxes.csv                         615,299 boxes over 544,546 train images (the real counts)
  ILSVRC2012_img_train.tar, ILSVRC2012_img_val.tar   the same files as the ILSVRC2012 archives
Every image is the same 8x8 JPEG (286 bytes); the files of a folder are hard links to its
first one, so the folders cost directory entries, not blocks.

Then runs `python -m imagenet_build convert` as a whole process per source (default 1024/128
shards, default workers, `sync` before each) and reports its wall time, the peak RSS of its
largest process (getrusage of the waited-for descendants, as /usr/bin/time -v) and the peak
RSS of the main process alone (its VmHWM, read as it exits).
Usage: python benchmarks/bench_cardinality.py --work DIR [--repeats 1] [--sources folders,tarballs]
"""

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

TRAIN_IMAGES = 1_281_167
VALIDATION_IMAGES = 50_000
BOXED_IMAGES = 544_546
BOXES = 615_299
FIRST_NUMBER = 10000

# Runs the command's main process with an exit hook that writes its own VmHWM (its peak RSS)
# to the file named in argv[1]; forked workers leave through os._exit and write nothing.
MAIN = (
    "import atexit, runpy, sys\n"
    "def hwm(path=sys.argv[1]):\n"
    "    with open('/proc/self/status') as f:\n"
    "        kb = [l.split()[1] for l in f if l.startswith('VmHWM:')][0]\n"
    "    open(path, 'w').write(kb)\n"
    "atexit.register(hwm)\n"
    "sys.argv = ['imagenet-build'] + sys.argv[2:]\n"
    "runpy.run_module('imagenet_build', run_name='__main__', alter_sys=True)\n"
)

# A fresh process per run, so RUSAGE_CHILDREN covers that run only.
PROBE = (
    "import resource, subprocess, sys, time; t = time.perf_counter(); "
    "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE); "
    "s = time.perf_counter() - t; sys.stderr.write(r.stderr.decode()[-2000:]); "
    "print(s, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024); sys.exit(r.returncode)"
)


def tiny_jpeg():
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8, 8), (120, 60, 30)).save(out, "JPEG", quality=75, optimize=True)
    return out.getvalue()


def class_counts(classes, total):
    base, left = divmod(total, classes)
    return [base + (1 if c < left else 0) for c in range(classes)]


def write_linked(folder, names, data):
    """names in folder, all one file: the first written, the others hard links to it (max 65,000)."""
    folder.mkdir(parents=True)
    first = folder / names[0]
    first.write_bytes(data)
    for name in names[1:]:
        os.link(first, folder / name)


def make_inputs(inputs, data):
    from imagenet_build.catalog.classes import DEFAULT_LABELS_FILE, read_labels_file, read_validation_labels

    synsets = read_labels_file(DEFAULT_LABELS_FILE)
    counts = class_counts(len(synsets), TRAIN_IMAGES)
    assert len(read_validation_labels()) == VALIDATION_IMAGES
    # boxes: BOXED_IMAGES spread evenly over the train images, the first BOXES - BOXED_IMAGES with two
    double = BOXES - BOXED_IMAGES
    position = boxed = 0
    with open(inputs / "bboxes.csv.tmp", "w") as csv:
        for synset, count in zip(synsets, counts):
            names = [f"{synset}_{FIRST_NUMBER + k}.JPEG" for k in range(count)]
            write_linked(inputs / "train" / synset, names, data)
            for name in names:
                if (position + 1) * BOXED_IMAGES // TRAIN_IMAGES > position * BOXED_IMAGES // TRAIN_IMAGES:
                    csv.write(f"{name},0.125,0.25,0.75,0.875\n")
                    if boxed < double:
                        csv.write(f"{name},0.0,0.0,0.5,0.5\n")
                    boxed += 1
                position += 1
    assert boxed == BOXED_IMAGES, boxed
    os.rename(inputs / "bboxes.csv.tmp", inputs / "bboxes.csv")
    write_linked(inputs / "validation", [f"ILSVRC2012_val_{i:08d}.JPEG" for i in range(1, VALIDATION_IMAGES + 1)],
                 data)


def add_bytes(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    tar.addfile(info, io.BytesIO(data))


def make_tars(work, inputs, data):
    """The archives, streamed: one class tar (~1.3 MB) in memory at a time."""
    train = work / "ILSVRC2012_img_train.tar"
    with tarfile.open(str(train) + ".tmp", "w", format=tarfile.GNU_FORMAT) as outer:
        for folder in sorted((inputs / "train").iterdir()):
            inner = io.BytesIO()
            with tarfile.open(fileobj=inner, mode="w", format=tarfile.GNU_FORMAT) as tar:
                for name in sorted(os.listdir(folder)):
                    add_bytes(tar, name, data)
            add_bytes(outer, f"{folder.name}.tar", inner.getvalue())
    os.rename(str(train) + ".tmp", train)
    val = work / "ILSVRC2012_img_val.tar"
    with tarfile.open(str(val) + ".tmp", "w", format=tarfile.GNU_FORMAT) as tar:
        for name in sorted(os.listdir(inputs / "validation")):
            add_bytes(tar, name, data)
    os.rename(str(val) + ".tmp", val)


def generate(work):
    inputs = work / "inputs"
    data = tiny_jpeg()
    if not (work / "inputs.done").exists():
        shutil.rmtree(inputs, ignore_errors=True)
        inputs.mkdir(parents=True)
        started = time.perf_counter()
        make_inputs(inputs, data)
        (work / "inputs.done").write_text("")
        print(f"generated the folders and the box CSV in {time.perf_counter() - started:.0f} s", flush=True)
    if not (work / "ILSVRC2012_img_val.tar").exists():
        started = time.perf_counter()
        make_tars(work, inputs, data)
        print(f"packed the archives in {time.perf_counter() - started:.0f} s", flush=True)
    return inputs


def run(cmd, out, hwm_file):
    """(wall s, peak RSS MB of the largest process, peak RSS MB of the main process)."""
    if out.exists():
        shutil.rmtree(out)
    if hwm_file.exists():
        hwm_file.unlink()
    subprocess.run(["sync"], check=True)
    main = [sys.executable, "-c", MAIN, str(hwm_file), *cmd]
    result = subprocess.run([sys.executable, "-c", PROBE, *main], capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{result.stderr}")
    seconds, largest = result.stdout.split()[-2:]
    return float(seconds), float(largest), int(hwm_file.read_text()) / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="scratch folder (several GB free; reused when present)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--sources", default="folders,tarballs")
    parser.add_argument("--workers", type=int, default=0, help="convert --workers (default: one per core)")
    args = parser.parse_args()
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    inputs = generate(work)
    out, hwm_file = work / "out", work / "main-hwm"
    common = ["convert", "--output-dir", str(out), "--bounding-box-file", str(inputs / "bboxes.csv")]
    if args.workers:
        common += ["--workers", str(args.workers)]
    commands = {
        "folders": common + ["--train-dir", str(inputs / "train"), "--validation-dir", str(inputs / "validation")],
        "tarballs": common + ["--train-tar", str(work / "ILSVRC2012_img_train.tar"),
                              "--validation-tar", str(work / "ILSVRC2012_img_val.tar")],
    }
    names = args.sources.split(",")
    for name in ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar"):  # warm the cache
        subprocess.run(["cat", str(work / name)], stdout=subprocess.DEVNULL, check=True)
    runs = {name: [] for name in names}
    for _ in range(args.repeats):
        for name in names:
            runs[name].append(run(commands[name], out, hwm_file))
            print(f"  {name}: {runs[name][-1][0]:.1f} s, largest {runs[name][-1][1]:.0f} MB, "
                  f"main {runs[name][-1][2]:.0f} MB", file=sys.stderr, flush=True)
    manifest = json.loads((out / "manifest.json").read_text())
    records = manifest["totals"]["records"]
    shutil.rmtree(out)
    print(f"{TRAIN_IMAGES:,} + {VALIDATION_IMAGES:,} images ({records:,} records in the last build), "
          f"{BOXES:,} boxes over {BOXED_IMAGES:,} images, 1024 + 128 shards, {os.cpu_count()} cores, "
          f"{args.repeats} run(s) each" + (" (median)" if args.repeats > 1 else ""))
    print(f"  {'source':10s} {'wall':>8s} {'peak RSS, largest process':>27s} {'main process':>14s}")
    for name, r in runs.items():
        wall, largest, main_rss = (statistics.median(x[i] for x in r) for i in range(3))
        print(f"  {name:10s} {wall:6.1f} s {largest:24.0f} MB {main_rss:11.0f} MB")


if __name__ == "__main__":
    main()
