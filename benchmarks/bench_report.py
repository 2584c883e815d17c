"""`report` on a build of ILSVRC2012's full cardinality: wall time of the whole command, and what it read.

Generates once into --work (reused when present) what convert writes for 1,281,167 train and 50,000
validation images in 1024 + 128 shards, written directly through the build's own writer (shards, DALI
indexes, manifest.json) instead of through convert: the records are slim's Examples of the shipped
1000 classes (1281 or 1282 a class, shuffled over the shards), the validation labels of the shipped
list, boxes on 544,546 train images; as in bench_cardinality.py every image is tiny (16 distinct
JPEGs of 24..64 px, ~0.3-1 kB), so the build takes ~1 GB, not 140 GB. The shards then cost what the
report's reads of them cost: the DALI indexes, a sample of records' heads and tails, the records shown.
What real images add, decoding each thumbnail from a 500 x 375 JPEG, is measured apart and printed.

Usage: python benchmarks/bench_report.py --work DIR [--repeats 3]
"""

import argparse
import io
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

TRAIN_IMAGES = 1_281_167
VALIDATION_IMAGES = 50_000
BOXED_IMAGES = 544_546
SHARDS = {"train": 1024, "validation": 128}


def pictures():
    from PIL import Image

    rng = random.Random(0)
    out = []
    for _ in range(16):
        w, h = rng.choice([(32, 24), (24, 32), (48, 32), (64, 48), (40, 40), (32, 48)])
        image = Image.frombytes("RGB", (w, h), rng.randbytes(w * h * 3))
        data = io.BytesIO()
        image.save(data, "JPEG", quality=75)
        out.append((data.getvalue(), w, h))
    return out


def labels_of(split, synsets):
    """Each record's label, in the order the shards hold them (train: every class's images, shuffled)."""
    from imagenet_build.catalog.classes import read_validation_labels

    if split == "validation":
        label_of = {s: k for k, s in enumerate(synsets, start=1)}
        return [label_of[s] for s in read_validation_labels()]
    base, left = divmod(TRAIN_IMAGES, len(synsets))
    labels = [k for k in range(1, len(synsets) + 1) for _ in range(base + (1 if k <= left else 0))]
    random.Random(12345).shuffle(labels)
    return labels


def payloads(labels, start, stop, synsets, texts, images, boxed_every):
    from imagenet_build.encode.example import encode_example_parts

    for i in range(start, stop):
        label = labels[i]
        data, w, h = images[i % len(images)]
        boxes = [(0.125, 0.25, 0.75, 0.875)] if boxed_every and i % boxed_every == 0 else []
        yield encode_example_parts(encoded=data, filename=f"{synsets[label - 1]}_{10000 + i}.JPEG", height=h, width=w,
                                   label=label, synset=synsets[label - 1], text=texts[synsets[label - 1]], boxes=boxes)


def generate(out):
    """The build, written through writer/shard_writer.py and format/build_figures.py as convert writes them."""
    from imagenet_build.catalog.classes import (
        DEFAULT_LABELS_FILE,
        DEFAULT_METADATA_FILE,
        read_labels_file,
        read_metadata_file,
    )
    from imagenet_build.format.build_figures import assemble, manifest_base, split_figures
    from imagenet_build.format.manifest import write_manifest
    from imagenet_build.format.naming import shard_name
    from imagenet_build.writer.shard_writer import shard_entry, write_records

    synsets, texts = read_labels_file(DEFAULT_LABELS_FILE), read_metadata_file(DEFAULT_METADATA_FILE)
    images = pictures()
    (out / "dali_idx").mkdir(parents=True, exist_ok=True)
    entries, splits = [], {}
    for split, count in SHARDS.items():
        labels = labels_of(split, synsets)
        boxed_every = TRAIN_IMAGES // BOXED_IMAGES if split == "train" else 0
        done = []
        for k in range(count):
            start, stop = len(labels) * k // count, len(labels) * (k + 1) // count
            name = shard_name(split, k, count)
            figures = write_records(name, out, out / "dali_idx",
                                    payloads(labels, start, stop, synsets, texts, images, boxed_every))
            done.append(shard_entry(split, name, figures))
            entries.append(done[-1])
        counts = {}
        for label in labels:
            counts[label] = counts.get(label, 0) + 1
        splits[split] = split_figures(count, done, [], counts)
    base = manifest_base({"index_dir": "dali_idx", "train_shards": 1024, "validation_shards": 128, "layout_threads": 2},
                         {}, synsets)
    write_manifest(out, assemble(base, splits, entries, complete=True, input_states={e["name"]: "" for e in entries}))


def thumbnail_cost(count):
    """Seconds to thumbnail `count` real-size (500 x 375, quality 90) JPEGs, as the page does."""
    from PIL import Image

    from imagenet_build.report.thumbs import thumbnail

    rng = random.Random(1)
    noise = Image.frombytes("RGB", (125, 94), rng.randbytes(125 * 94 * 3)).resize((500, 375))
    data = io.BytesIO()
    noise.save(data, "JPEG", quality=90)
    started = time.perf_counter()
    for _ in range(count):
        thumbnail(data.getvalue())
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="scratch folder (~1.5 GB free; reused when present)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    out = Path(args.work).resolve() / "build"
    if not (out / "manifest.json").exists():
        started = time.perf_counter()
        generate(out)
        print(f"generated the build in {time.perf_counter() - started:.0f} s", flush=True)
    page = out.parent / "report.html"
    runs = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "imagenet_build", "report", str(out), "-o", str(page), "--json"],
                                capture_output=True, text=True)
        runs.append(time.perf_counter() - started)
        if result.returncode:
            raise SystemExit(f"report failed:\n{result.stderr}")
        print(f"  {runs[-1]:.1f} s", file=sys.stderr, flush=True)
    read = json.loads(result.stdout)["read"]
    shown = read["whole"]
    print(f"report of {read['records']:,} records in {sum(SHARDS.values())} shards, {os.cpu_count()} cores, "
          f"{args.repeats} run(s): median {statistics.median(runs):.1f} s (min {min(runs):.1f} s)")
    print(f"  read: {sum(SHARDS.values())} DALI indexes, {read['heads']:,} records' heads (the charts' sample "
          f"with their tails), {shown} records whole; page {page.stat().st_size / 1e6:.1f} MB")
    print(f"  load average during the runs: {os.getloadavg()[0]:.1f}")
    print(f"  thumbnails of {shown} real-size 500 x 375 JPEGs would add {thumbnail_cost(shown):.1f} s")


if __name__ == "__main__":
    main()
