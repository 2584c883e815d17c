"""A small ImageNet-shaped dataset to try everything on, made with Pillow.

The tree, as the ILSVRC2012 archives unpack:
  OUT/train/<synset>/<synset>_<n>.JPEG      train images, one folder per class
  OUT/validation/ILSVRC2012_val_%08d.JPEG   flat validation images
  OUT/validation_labels.txt                 synset of validation image i on line i
  OUT/labels.txt                            the synsets used (a labels file)
  OUT/bbox/<synset>/<image>.xml            box annotations, as the bbox archive unpacks
  OUT/bboxes.csv                            the same boxes in slim's CSV format
and with tarballs=True the three ILSVRC2012 archives made from them:
  OUT/ILSVRC2012_img_train.tar (a tar of <synset>.tar), OUT/ILSVRC2012_img_val.tar,
  OUT/ILSVRC2012_bbox_train_v2.tar.gz
It holds the awkward cases of the real thing: CMYK JPEGs, a PNG (with alpha)
behind a .JPEG name, grayscale, progressive, and an EXIF-rotated JPEG. Each
class has its own colour and stripe direction, so a small network can learn it.
Same options -> same bytes.
"""

from __future__ import annotations

import colorsys
import io
import random
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagenet_build.catalog.boxes import boxes_to_csv_lines
from imagenet_build.catalog.classes import DEFAULT_LABELS_FILE, read_labels_file
from imagenet_build.format.output_guard import check_output_folder
from imagenet_build.infra import read_door, write_door
from imagenet_build.infra.errors import BuildError, PathLike, UsageError
from imagenet_build.sources.samples import tar_add, tar_gz, write_sample_note

if TYPE_CHECKING:
    from PIL.Image import Image


def _picture(rng: random.Random, label_index: int, num_classes: int, width: int, height: int) -> Image:
    from PIL import Image, ImageDraw

    hue = label_index / max(num_classes, 1)
    base = tuple(int(255 * c) for c in colorsys.hsv_to_rgb(hue, 0.7, 0.5 + 0.4 * rng.random()))
    image = Image.new("RGB", (width, height), base)
    draw = ImageDraw.Draw(image)
    period = 8 + (label_index % 4) * 6
    stripe = tuple(255 - c for c in base)
    if label_index % 2:
        for x in range(rng.randrange(period), width, period):
            draw.line([(x, 0), (x, height)], fill=stripe, width=max(1, period // 3))
    else:
        for y in range(rng.randrange(period), height, period):
            draw.line([(0, y), (width, y)], fill=stripe, width=max(1, period // 3))
    noise = Image.frombytes("L", (width, height), rng.randbytes(width * height)).convert("RGB")
    return Image.blend(image, noise, 0.25)


def _encode(image: Image, kind: str, quality: int) -> bytes:
    out = io.BytesIO()
    if kind == "cmyk":
        image.convert("CMYK").save(out, "JPEG", quality=quality)
    elif kind == "png":
        rgba = image.convert("RGBA")
        rgba.putalpha(200)
        rgba.save(out, "PNG")
    elif kind == "gray":
        image.convert("L").save(out, "JPEG", quality=quality)
    elif kind == "progressive":
        image.save(out, "JPEG", quality=quality, progressive=True)
    elif kind == "exif-rotated":
        exif = image.getexif()
        exif[0x0112] = 6  # orientation: rotate 90 degrees when shown
        image.save(out, "JPEG", quality=quality, exif=exif.tobytes())
    else:
        image.save(out, "JPEG", quality=quality)
    return out.getvalue()


def _random_box(rng: random.Random, width: int, height: int) -> tuple[int, int, int, int]:
    """A box in pixels, now and then reaching past the image as some ImageNet boxes do."""
    x0, x1 = sorted(rng.randint(-5, width + 5) for _ in range(2))
    y0, y1 = sorted(rng.randint(-5, height + 5) for _ in range(2))
    return x0, y0, x1, y1


def _annotation(
    name: str, synset: str, width: int, height: int, boxes: list[tuple[int, int, int, int]], floats: bool = False
) -> str:
    """A Pascal-VOC XML annotation as ImageNet's bbox archive has them."""
    def number(v: int) -> str:
        return f"{v}.0" if floats else str(v)

    objects = "".join(
        f"<object><name>{synset}</name><pose>Unspecified</pose><truncated>0</truncated>"
        f"<difficult>0</difficult><bndbox><xmin>{number(x0)}</xmin><ymin>{number(y0)}</ymin>"
        f"<xmax>{number(x1)}</xmax><ymax>{number(y1)}</ymax></bndbox></object>"
        for x0, y0, x1, y1 in boxes
    )
    return (
        f"<annotation><folder>{synset}</folder><filename>{name[: -len('.JPEG')]}</filename>"
        f"<source><database>ILSVRC_2012</database></source><size><width>{width}</width>"
        f"<height>{height}</height><depth>3</depth></size><segmented>0</segmented>{objects}</annotation>\n"
    )


def _sample_as_kind(out: PathLike, kind: str, **options: Any) -> dict[str, Any]:
    """The ILSVRC sample made aside, then rewritten in the shape of that kind of copy under `out`."""
    from imagenet_build.sources.copies import sample_kinds

    kinds = sample_kinds()
    if kind not in kinds:
        raise UsageError(f"--layout: one of {', '.join(sorted(kinds))}, not {kind!r}")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise BuildError(f"{out}: not empty; choose a new folder for the sample")
    with write_door.scratch_folder("imagenet-build-sample-") as staging:
        counts = make_sample(Path(staging) / "ilsvrc", tarballs=True, **options)
        write_door.make_folder(out)
        kinds[kind].write_sample(Path(staging) / "ilsvrc", out)
        for name in ("labels.txt", "validation_labels.txt", "bboxes.csv"):
            if not (out / name).exists():
                write_door.copy_file(Path(staging) / "ilsvrc" / name, out / name)
        write_sample_note(out)
    if kinds[kind].evaluation:  # its validation images alone
        counts = dict(counts, train=0, boxes=0, special={})
    return dict(counts, layout=kind)  # `sample --json`'s key


def convert_command(out: PathLike, kind: str = "ilsvrc") -> str:
    """The convert command `sample` prints for the sample it wrote as copy kind `kind` under `out` (OUTPUT to fill in):
    `convert --from OUT`, which reads the sample where it lies as a user's copy, its own labels files and boxes
    named by the note beside it (sources/samples.py), with shard counts for its few images. Followed as printed
    it gives the build from the ILSVRC2012 tarballs of the same images (an evaluation set: the validation split
    of its images)."""
    import shlex

    from imagenet_build.sources.copies import sample_kinds

    if sample_kinds()[kind].evaluation:  # a validation split of its own, labelled by class folder
        return (f"imagenet-build convert --from {shlex.quote(str(out))} --validation-shards 2 --layout-threads 2 "
                "--output-dir OUTPUT")
    return (f"imagenet-build convert --from {shlex.quote(str(out))} --train-shards 4 --validation-shards 2 "
            "--layout-threads 2 --output-dir OUTPUT")


def write_tarballs(out: PathLike) -> None:
    """The three ILSVRC2012 archives, shaped as the real ones, from the sample's folders."""
    out = Path(out)
    with write_door.new_file(out / "ILSVRC2012_img_train.tar") as f, \
            tarfile.open(fileobj=f, mode="w", format=tarfile.GNU_FORMAT) as outer:
        for folder in sorted((out / "train").iterdir()):
            inner = io.BytesIO()
            with tarfile.open(fileobj=inner, mode="w", format=tarfile.GNU_FORMAT) as tar:
                for image in sorted(folder.iterdir()):
                    tar_add(tar, image.name, read_door.read_bytes(image))
            tar_add(outer, f"{folder.name}.tar", inner.getvalue())
    with write_door.new_file(out / "ILSVRC2012_img_val.tar") as f, \
            tarfile.open(fileobj=f, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for image in sorted((out / "validation").iterdir()):
            tar_add(tar, image.name, read_door.read_bytes(image))
    tar_gz(out / "ILSVRC2012_bbox_train_v2.tar.gz",
           ((f"{xml.parent.name}/{xml.name}", read_door.read_bytes(xml))
            for xml in sorted((out / "bbox").glob("*/*.xml"))))


# Which train images (by position over all of them) get an awkward encoding.
_SPECIAL = {2: "cmyk", 4: "png", 9: "cmyk", 3: "gray", 5: "progressive", 7: "exif-rotated"}


def _kind(position: int) -> str:
    if position in _SPECIAL:
        return _SPECIAL[position]
    if position % 13 == 6:
        return "gray"
    if position % 11 == 8:
        return "progressive"
    return "rgb"


def make_sample(out: PathLike, classes: int = 4, per_class: int = 12, validation_per_class: int = 4,
                min_size: int = 64, max_size: int = 160, quality: int = 90, seed: int = 0,
                labels_file: PathLike | None = None, tarballs: bool = False, kind: str = "ilsvrc") -> dict[str, Any]:
    """Write the sample tree under `out` (which must not hold files yet). Returns counts.

    kind: another kind of copy's shape (`sample --layout`): the same images (for the same seed)
    written as that copy lays them out, with labels.txt, validation_labels.txt and
    bboxes.csv beside them.
    """
    check_output_folder(out, "sample OUT")
    if kind != "ilsvrc":
        return _sample_as_kind(out, kind, classes=classes, per_class=per_class,
                               validation_per_class=validation_per_class, min_size=min_size, max_size=max_size,
                               quality=quality, seed=seed, labels_file=labels_file)
    if classes < 1 or per_class < 1 or validation_per_class < 0:
        raise BuildError("--classes and --per-class must be at least 1")
    if not 8 <= min_size <= max_size:
        raise BuildError("image sizes must satisfy 8 <= --min-size <= --max-size")
    all_synsets = read_labels_file(labels_file or DEFAULT_LABELS_FILE)
    if classes > len(all_synsets):
        raise BuildError(f"--classes: at most {len(all_synsets)} synsets are known")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise BuildError(f"{out}: not empty; choose a new folder for the sample")
    rng = random.Random(seed)
    synsets = all_synsets[:classes]
    sizes = (min_size, max_size)
    counts: dict[str, Any] = {"classes": classes, "train": 0, "validation": 0, "boxes": 0, "special": {}}
    counts["train"] = _write_train(out, rng, synsets, per_class, sizes, quality, counts["special"])
    val_synsets = _write_validation(out, rng, synsets, validation_per_class, sizes, quality)
    counts["validation"] = len(val_synsets)
    write_door.write_bytes(out / "labels.txt", "".join(s + "\n" for s in synsets).encode(), sync=False)
    write_door.write_bytes(out / "validation_labels.txt", "".join(s + "\n" for s in val_synsets).encode(), sync=False)
    lines, _, _ = boxes_to_csv_lines(out / "bbox", synsets)
    write_door.write_bytes(out / "bboxes.csv", "".join(line + "\n" for line in lines).encode(), sync=False)
    counts["boxes"] = len(lines)
    write_sample_note(out)
    if tarballs:
        write_tarballs(out)
    return counts


def _write_train(out: Path, rng: random.Random, synsets: list[str], per_class: int, sizes: tuple[int, int],
                 quality: int, special: dict[str, int]) -> int:
    """out/train/<synset>/*.JPEG and their XML boxes under out/bbox/; the kinds written counted in `special`
    (plain RGB aside). Returns how many images."""
    write_door.make_folder(out / "bbox")
    position = 0
    for label_index, synset in enumerate(synsets):
        folder = out / "train" / synset
        write_door.make_folder(folder)
        for n in range(per_class):
            width, height = rng.randint(*sizes), rng.randint(*sizes)
            kind = _kind(position)
            name = f"{synset}_{n + 1}.JPEG"
            image = _picture(rng, label_index, len(synsets), width, height)
            write_door.write_bytes(folder / name, _encode(image, kind, quality), sync=False)
            special[kind] = special.get(kind, 0) + 1
            boxes = [_random_box(rng, width, height) for _ in range(rng.choice((0, 1, 1, 2)))]
            if boxes:
                xml = out / "bbox" / synset / f"{name[: -len('.JPEG')]}.xml"
                write_door.make_folder(xml.parent)
                annotation = _annotation(name, synset, width, height, boxes, floats=position % 5 == 1)
                write_door.write_bytes(xml, annotation.encode(), sync=False)
            position += 1
    special.pop("rgb", None)
    return position


def _write_validation(out: Path, rng: random.Random, synsets: list[str], per_class: int, sizes: tuple[int, int],
                      quality: int) -> list[str]:
    """out/validation/ILSVRC2012_val_%08d.JPEG, flat, the classes shuffled; returns the synset of each."""
    val_synsets = [s for s in synsets for _ in range(per_class)]
    rng.shuffle(val_synsets)
    val_folder = out / "validation"
    write_door.make_folder(val_folder)
    for number, synset in enumerate(val_synsets, start=1):
        width, height = rng.randint(*sizes), rng.randint(*sizes)
        image = _picture(rng, synsets.index(synset), len(synsets), width, height)
        kind = "gray" if number % 7 == 3 else "rgb"
        write_door.write_bytes(val_folder / f"ILSVRC2012_val_{number:08d}.JPEG", _encode(image, kind, quality),
                               sync=False)
    return val_synsets
