"""convert from Hugging Face's .tar.gz layout against the extracted folders (the same images).

Makes N ImageNet-sized JPEGs in class folders (or reuses --work), packs them as
the Hugging Face `data/train_images_{0..4}.tar.gz` (flat, `<name>_<synset>.JPEG`,
gzip level 6 as `tar czf` writes), then runs, alternating, with `sync` before each:
  folders   imagenet-build convert --train-dir
  hf        imagenet-build convert --from data/   (decompressed once into a spool, then read by pread)
and, in this process, the spool pass alone (decompress + list, the part a .tar.gz adds).
With --cardinality: instead, 1000 classes x 1281 tiny JPEGs (1.28 M, ImageNet's count) as the
five archives, converted once to 1024 shards: the peak RSS of the full listing and plan.
Usage: python benchmarks/bench_source_gzip.py [--images 10000] [--repeats 3] [--with-path DIR] [--cardinality]
"""

import gzip
import math
import os
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from common import bench_parser, fresh_memory_seconds, kept_inputs, measure  # noqa: E402


def pack(inputs, data):
    data.mkdir(parents=True)
    images = sorted((inputs / "train").glob("*/*.JPEG"), key=lambda p: p.name)
    for k in range(5):
        with gzip.GzipFile(data / f"train_images_{k}.tar.gz", "wb", compresslevel=6, mtime=0) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
                for image in images[k::5]:
                    tar.add(image, arcname=f"{image.stem}_{image.parent.name}.JPEG")


def spool_pass(data):
    """(wall s, CPU s of this process, bytes decompressed) to decompress and list the five archives in turn."""
    from imagenet_build.sources.inflate import spool_and_list

    archives = sorted(data.glob("train_images_*.tar.gz"))
    with tempfile.TemporaryDirectory(dir=data.parent) as spool:
        wall, cpu = time.perf_counter(), time.process_time()
        for k, archive in enumerate(archives):
            spool_and_list(str(archive), os.path.join(spool, f"{k}.tar"))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        return wall, cpu, sum(p.stat().st_size for p in Path(spool).iterdir())


def cardinality(work, per_class=1281):
    """Peak RSS (driver or any worker) and time of a convert of 1000 x per_class tiny images in five archives."""
    import io

    from PIL import Image

    from imagenet_build.catalog.classes import DEFAULT_LABELS_FILE, read_labels_file

    data = work / "tiny" / "data"
    if not data.exists():
        data.mkdir(parents=True)
        picture = io.BytesIO()
        Image.new("RGB", (8, 8), (200, 30, 30)).save(picture, "JPEG")
        picture = picture.getvalue()
        synsets = read_labels_file(DEFAULT_LABELS_FILE)
        archives = [tarfile.open(fileobj=gzip.GzipFile(data / f"train_images_{k}.tar.gz", "wb", compresslevel=1,
                                                       mtime=0), mode="w", format=tarfile.GNU_FORMAT)
                    for k in range(5)]
        n = 0
        for synset in synsets:
            for i in range(per_class):
                info = tarfile.TarInfo(f"{synset}_{i}_{synset}.JPEG")
                info.size = len(picture)
                archives[n % 5].addfile(info, io.BytesIO(picture))
                n += 1
        for tar in archives:
            gz = tar.fileobj
            tar.close()
            gz.close()
    out = work / "tiny-out"
    cmd = [sys.executable, "-m", "imagenet_build", "convert", "--from", str(data), "--train-shards", "1024",
           "--output-dir", str(out)]
    wall, cpu, rss = measure(cmd, [out], env=dict(os.environ, PYTHONPATH=str(HERE.parent)))
    shutil.rmtree(out, ignore_errors=True)
    print(f"1000 x {per_class} tiny images from 5 .tar.gz: {wall:.0f} s, CPU {cpu:.0f} s, peak RSS {rss:.0f} MB")


def main():
    parser = bench_parser(__doc__)
    parser.add_argument("--with-path", help="also run the .tar.gz convert with this folder on PYTHONPATH")
    parser.add_argument("--cardinality", action="store_true", help="the full-cardinality memory run instead")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-gzip-"))
    if args.cardinality:
        return cardinality(work)
    inputs = kept_inputs(work, args.images)
    data = work / "hf" / "data"
    if not data.exists():
        pack(inputs, data)
    ib = [sys.executable, "-m", "imagenet_build", "convert", "--labels-file", str(inputs / "labels.txt"),
          "--train-shards", str(args.shards), "--layout-threads", str(math.gcd(8, args.shards))]
    out = work / "out"
    plain = dict(os.environ, PYTHONPATH=str(HERE.parent))
    commands = {
        "folders": (ib + ["--train-dir", str(inputs / "train"), "--output-dir", str(out)], plain),
        "hf .tar.gz": (ib + ["--from", str(data), "--output-dir", str(out)], plain),
    }
    if args.with_path:  # e.g. a patched spool.py or another inflate library
        other = dict(plain, PYTHONPATH=f"{HERE.parent}{os.pathsep}{args.with_path}")
        commands["hf, with-path"] = (commands["hf .tar.gz"][0], other)
    for path in [*data.iterdir(), *(inputs / "train").rglob("*.JPEG")]:
        path.read_bytes()  # warm the cache: both read from memory
    runs = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, (cmd, env) in commands.items():
            runs[name].append(measure(cmd, [out], env=env))
    spools = [spool_pass(data) for _ in range(args.repeats)]
    images = sum(1 for _ in (inputs / "train").rglob("*.JPEG"))
    packed = sum(p.stat().st_size for p in data.iterdir())
    print(f"{images} images, 5 archives {packed / 1e6:.0f} MB, {os.cpu_count()} cores, {args.repeats} runs each "
          f"(median); load average {os.getloadavg()[0]:.1f}")
    med, cpu_med = {}, {}
    for name, r in runs.items():
        med[name] = statistics.median(s for s, _, _ in r)
        cpu_med[name] = statistics.median(c for _, c, _ in r)
        print(f"  {name:12s} {med[name]:6.2f} s  {images / med[name]:7.0f} img/s  CPU {cpu_med[name]:6.2f} s  "
              f"peak RSS {max(m for _, _, m in r):.0f} MB  runs {', '.join(f'{s:.2f}' for s, _, _ in r)}")
    wall = statistics.median(w for w, _, _ in spools)
    cpu = statistics.median(c for _, c, _ in spools)
    image_bytes = sum(p.stat().st_size for p in (inputs / "train").rglob("*.JPEG"))
    print(f"  spool pass alone (decompress + list, one core): {wall:.2f} s wall, {cpu:.2f} s CPU "
          f"({packed / 1e6 / cpu:.0f} MB/s of CPU); bytes decompressed per image byte: "
          f"{spools[0][2] / image_bytes:.3f} (the tars' headers and padding included)")
    print(f"  touching 1 GB of memory not used lately: {fresh_memory_seconds():.2f} s of CPU (a .tar.gz convert "
          "writes twice the bytes of a folders one: the spool, then the shards)")
    for name in commands:
        if name != "folders":
            print(f"  {name} / folders: {med['folders'] / med[name]:.2f}x in wall time, "
                  f"{cpu_med['folders'] / cpu_med[name]:.2f}x in CPU time")


if __name__ == "__main__":
    main()
