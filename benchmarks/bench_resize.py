"""convert --resize against img2dataset's resizer (and FFCV where it installs), as whole processes, and its quality.

Makes N photo-like JPEGs from crops of scikit-image's sample photographs, colour jitter and sensor
noise: by default ImageNet-like (--corpus imagenet: 500x375, 500x333 and 375x500 mostly, a few of
ImageNet's other sizes up to 800x600, quality 95-97, ~110 KB an image, as ImageNet's are), or
--corpus mixed (sizes from 200x150 to 1024x768, quality 75-95, ~55 KB an image: the first corpus
these figures were measured on); then, alternating, `repeats` times each, with `sync` before every
timed run:
  ours-T      imagenet-build convert --resize shorter:T --workers 1
  i2d-T       img2dataset's own Resizer (keep_ratio, only if bigger, area downscale, the same
              JPEG quality) over the same files, one process, its output framed into one file
  ours-3      convert --resize shorter:160,224,288 (one pass), against the three single runs
Prints medians of wall time, images per CPU-second (user+sys of the process tree: per core),
peak RSS; then PSNR (and SSIM, scikit-image) of every resized image against a reference
made by a full decode and Lanczos in float, for: our fast path (DCT-scaled decode), our
plain path (full decode, same Lanczos, same quality) and img2dataset's.
Needs (in the environment that runs it): img2dataset and scikit-image; the Lanczos is the one convert
uses there (cykooz.resizer where installed, else Pillow's: the output says which).
--filter picks convert's --resize-filter (its default, catmull-rom, unless given); "fast" and "plain" use it.
--filter both times each filter's ours-T (ours-T-catmull-rom, ours-T-lanczos3) against the same img2dataset
runs, all alternating in one run, and gives each filter's quality; ours-3 uses the default filter.
Usage: python benchmarks/bench_resize.py [--images 10000] [--repeats 3] [--corpus imagenet|mixed] [--work DIR]
                                        [--quality-images N] [--filter catmull-rom|lanczos3|both]
"""

import argparse
import io
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import measure  # noqa: E402

from imagenet_build.request import RESIZE_FILTERS  # noqa: E402

# corpus -> (sizes drawn from, JPEG qualities drawn from, sensor noise's standard deviation drawn from)
CORPORA = {
    "imagenet": ([(500, 375)] * 10 + [(500, 333)] * 5 + [(375, 500)] * 4 + [
        (500, 500), (333, 500), (500, 400), (400, 300), (500, 281), (800, 600)], [95, 96, 97], (3, 9)),
    "mixed": ([(500, 375)] * 6 + [(500, 333)] * 3 + [(375, 500)] * 2 + [
        (500, 400), (500, 500), (333, 500), (640, 480), (800, 600), (1024, 768), (200, 150)],
        [75, 85, 90, 92, 95], (1, 4)),
}
PHOTOS = ("astronaut.png chelsea.png coffee.png hubble_deep_field.jpg ihc.png motorcycle_left.png retina.jpg "
          "rocket.jpg camera.png brick.png grass.png gravel.png moon.png").split()
QUALITY = 90
I2D_DRIVER = """
import io, sys, struct
from img2dataset.resizer import Resizer, ResizeMode
size, files, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
resizer = Resizer(size, ResizeMode.keep_ratio, True, encode_quality=%d)
with open(out, "wb") as f:
    for path in open(files).read().split("\\0")[:-1]:
        with open(path, "rb") as image:
            data, *_, error = resizer(io.BytesIO(image.read()))
        assert error is None, error
        f.write(struct.pack("<Q", len(data)) + data)
""" % QUALITY


def make_photos(root, images, classes, corpus):
    """`images` distinct JPEGs in `classes` class folders, the same bytes for the same arguments."""
    import numpy as np
    import skimage
    from PIL import Image

    from imagenet_build.catalog.classes import DEFAULT_LABELS_FILE, read_labels_file

    data = Path(skimage.__file__).parent / "data"
    photos = [Image.open(data / name).convert("RGB") for name in PHOTOS]
    synsets = read_labels_file(DEFAULT_LABELS_FILE)[:classes]
    sizes, qualities, noise = CORPORA[corpus]
    rng = random.Random(0)
    for i in range(images):
        photo = photos[rng.randrange(len(photos))]
        w, h = rng.choice(sizes)
        scale = rng.uniform(0.5, 1.0) * min(photo.width / w, photo.height / h)
        cw, ch = w * scale, h * scale
        x, y = rng.uniform(0, photo.width - cw), rng.uniform(0, photo.height - ch)
        image = photo.resize((w, h), Image.BICUBIC, box=(x, y, x + cw, y + ch))
        if rng.random() < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        pixels = np.asarray(image, dtype=np.float32) * rng.uniform(0.8, 1.2) + rng.uniform(-20, 20)
        pixels += np.random.default_rng(i).normal(0, rng.uniform(*noise), pixels.shape)
        folder = root / "train" / synsets[i % classes]
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(
            folder / f"{synsets[i % classes]}_{i}.JPEG", quality=rng.choice(qualities))
    (root / "labels.txt").write_text("".join(s + "\n" for s in synsets))


def quality(files, size, limit, kernel):
    """{method: (mean PSNR dB, mean SSIM)} over the images a shorter:size build resizes."""
    import numpy as np
    from img2dataset.resizer import ResizeMode, Resizer
    from PIL import Image
    from skimage.metrics import structural_similarity

    from imagenet_build.encode import resample, resize

    target = resize.Target("shorter", size)
    options = resize.ResizeOptions((target,), QUALITY, filter=kernel)
    i2d = Resizer(size, ResizeMode.keep_ratio, True, encode_quality=QUALITY)
    found = {"fast": [], "plain": [], "img2dataset": []}
    for path in files[:limit]:
        data = Path(path).read_bytes()
        with Image.open(io.BytesIO(data)) as image:
            full = image.convert("RGB")
        if target.fits(*full.size):
            continue
        out = target.size_for(*full.size)
        reference = np.stack([np.asarray(c.convert("F").resize(out, Image.LANCZOS)) for c in full.split()], -1)
        # the same decoder, Lanczos and encoder as the fast path, from a full decode
        decoded = resample.decode_turbo(data, path, full.size, 8) if resample.fast() else resample.Pixels(full, None)
        plain = resample.encode(resample.resize(decoded, out, (0, 0, *full.size), kernel), QUALITY, path)
        (fast,) = resize.stored_resized(data, path, options)
        outputs = {"fast": fast.data, "plain": plain, "img2dataset": i2d(io.BytesIO(data))[0]}
        for method, encoded in outputs.items():
            pixels = np.asarray(Image.open(io.BytesIO(encoded)).convert("RGB"), dtype=np.float64)
            if pixels.shape != reference.shape:  # img2dataset rounds the other side its own way
                pixels = pixels[: reference.shape[0], : reference.shape[1]]
                ref = reference[: pixels.shape[0], : pixels.shape[1]]
            else:
                ref = reference
            mse = float(np.mean((pixels - ref) ** 2))
            ssim = structural_similarity(pixels, ref, channel_axis=2, data_range=255)
            found[method].append((10 * np.log10(255 ** 2 / mse), ssim))
    return {m: (statistics.mean(p for p, _ in v), statistics.mean(s for _, s in v), len(v)) for m, v in found.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--quality-images", type=int, default=None, help="images in the PSNR/SSIM figure [all]")
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="imagenet", help="which JPEGs [imagenet]")
    parser.add_argument("--filter", choices=(*RESIZE_FILTERS, "both"), default=RESIZE_FILTERS[0],
                        help=f"convert's --resize-filter, or both side by side [{RESIZE_FILTERS[0]}]")
    parser.add_argument("--work", help="scratch folder (default: a temporary one); inputs there are reused")
    args = parser.parse_args()
    from imagenet_build.encode import resize

    work = Path(args.work or tempfile.mkdtemp(prefix="ib-bench-resize-"))
    inputs = work / "inputs"
    if not (inputs / "labels.txt").exists():
        print(f"making {args.images} JPEGs in {inputs} ...", file=sys.stderr)
        make_photos(inputs, args.images, args.classes, args.corpus)
    files = sorted(str(p) for p in (inputs / "train").rglob("*.JPEG"))
    list_file = work / "files.txt"
    list_file.write_text("\0".join(files) + "\0")
    total = sum(os.path.getsize(f) for f in files)
    ib = [sys.executable, "-m", "imagenet_build", "convert", "--train-dir", str(inputs / "train"), "--labels-file",
          str(inputs / "labels.txt"), "--train-shards", str(args.shards), "--layout-threads", "8", "--workers", "1",
          "--quality", str(QUALITY)]
    filters = RESIZE_FILTERS if args.filter == "both" else (args.filter,)
    ours = {kernel: "ours" if len(filters) == 1 else f"ours-{kernel}" for kernel in filters}  # name -> ours-T[-F]
    commands = {}
    for size in (160, 224, 288):
        for kernel in filters:
            out = work / f"out-{size}-{kernel}"
            commands[f"{ours[kernel]}-{size}"] = (
                ib + ["--resize-filter", kernel, "--output-dir", str(out), "--resize", f"shorter:{size}"], out)
        commands[f"i2d-{size}"] = ([sys.executable, "-c", I2D_DRIVER, size, list_file, work / f"i2d-{size}.bin"],
                                   work / f"i2d-{size}.bin")
    commands["ours-3"] = (ib + ["--resize-filter", filters[0], "--output-dir", str(work / "out-3"), "--resize",
                                "shorter:160,224,288"], work / "out-3")
    subprocess.run(["sh", "-c", f'xargs -0 cat < "{list_file}" > /dev/null'], check=True)  # warm the page cache
    runs = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, (cmd, out) in commands.items():
            runs[name].append(measure(cmd, [out]))
    med = {name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs), max(r[2] for r in rs))
           for name, rs in runs.items()}
    n = len(files)
    print(f"{n} images, {total / 1e6:.0f} MB, {os.cpu_count()} cores, {args.repeats} runs each (median), JPEG quality "
          f"{QUALITY}, one worker process each; " + "; ".join(resize.codec(kernel) for kernel in filters))
    for name, (wall, cpu, rss) in med.items():
        print(f"  {name:22s} {wall:7.2f} s wall {n / wall:7.0f} images/s  {n / cpu:7.0f} images/CPU-s  "
              f"peak RSS {rss:5.0f} MB   runs: {', '.join(f'{r[0]:.2f}' for r in runs[name])}")
    for kernel in filters:
        for size in (160, 224, 288):
            ratio = med[f"i2d-{size}"][1] / med[f"{ours[kernel]}-{size}"][1]
            print(f"  shorter:{size}: {ours[kernel]} / img2dataset, images per CPU-second: {ratio:.2f}x")
    three = sum(med[f"{ours[filters[0]]}-{s}"][0] for s in (160, 224, 288))
    three_cpu = sum(med[f"{ours[filters[0]]}-{s}"][1] for s in (160, 224, 288))
    i2d_three = sum(med[f"i2d-{s}"][1] for s in (160, 224, 288))
    print(f"  one pass to 160,224,288 vs three runs: {three / med['ours-3'][0]:.2f}x wall, "
          f"{three_cpu / med['ours-3'][1]:.2f}x CPU; "
          f"vs img2dataset three runs: {i2d_three / med['ours-3'][1]:.2f}x CPU")
    for kernel in filters:
        for size in (160, 224, 288):
            figures = quality(files, size, args.quality_images or n, kernel)
            print(f"  {kernel} quality shorter:{size} vs full decode + float Lanczos: " + "; ".join(
                f"{m} PSNR {p:.2f} dB SSIM {s:.4f} ({k} images)" for m, (p, s, k) in figures.items())
                + f"; fast - plain: {figures['fast'][0] - figures['plain'][0]:+.2f} dB")


if __name__ == "__main__":
    main()
