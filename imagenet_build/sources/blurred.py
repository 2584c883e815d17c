"""The face-blurred ILSVRC2012 (image-net.org; Yang et al., ICML 2022): `train_blurred.tar.gz`, `val_blurred.tar.gz`.

Pieces: the two archives (by name), or the folder holding them. Both splits are
in class folders, with lowercase `.jpg`: `train_blurred/<wnid>/<wnid>_<n>.jpg`,
`val_blurred/<wnid>/ILSVRC2012_val_<8 digits>.jpg` (the top folder is skipped,
whatever it is called). Every image was re-encoded by the blurring (Pillow), so
no record equals the original build's byte for byte; the names do: each image
keeps its original ILSVRC2012 name (`.jpg` back to `.JPEG`) in `image/filename`,
and the same slim order and labels, so records line up by name with a build
from the originals. Train labels come from the class folder (the name's own
synset must agree); validation images are labelled from the validation labels
file, as for every copy, and their class folder must agree with it. A
disagreement is an error under --on-error fail, and leaves the image out,
listed, under skip.

The release lacks a few images of the original (one user count: 101 train, 3
validation, all very large ones; no official list): a missing validation image
is named in a note (the validation labels file says which exist); for train,
with no list of the originals to compare with, a note gives how many fewer than
ILSVRC2012's 1,281,167 there are. Neither is an error. `verify --expect-imagenet`
expects this release's own totals.

The archives are decompressed once into a spool (see spool.py for why and what it costs).
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from imagenet_build.infra import read_door, storage, write_door
from imagenet_build.infra.errors import PathLike
from imagenet_build.model import SplitInput
from imagenet_build.sources.copies import CopyKind, Piece, listing, register
from imagenet_build.sources.copy_rules import (
    SHOWN,
    add_class,
    flat_validation,
    labelled_synset,
    leave_out_disagreeing,
    lies_in,
    match_classes,
    refuse_empty_pieces,
    require_images,
)
from imagenet_build.sources.samples import enough_for, tar_gz, validation_images
from imagenet_build.sources.spool import Spool, SpooledCopy, SpoolReader, stamp

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.infra.workers import Workers

NAME = "face-blurred ILSVRC2012 (image-net.org)"
ARCHIVES = {"train_blurred.tar.gz": "train", "val_blurred.tar.gz": "validation"}
TRAIN_MEMBER = re.compile(r"(?:^|/)(n\d{8})/((n\d{8})_\d+)\.jpg$")
VALIDATION_MEMBER = re.compile(r"(?:^|/)(n\d{8})/(ILSVRC2012_val_(\d{8}))\.jpg$")
CLASS_FOLDER = re.compile(r"(?:^|/)(n\d{8})/?$")
ILSVRC_TRAIN = 1281167
# As counted by a user of the release (princetonvisualai/imagenet-face-obfuscation issue #4): 101 train
# and 3 validation images of ILSVRC2012 are not in it.
TOTALS = {"train": ILSVRC_TRAIN - 101, "validation": 50000 - 3}


def identify(path: str) -> list[Piece]:
    base = storage.basename(path)
    if base in ARCHIVES:
        return [Piece(NAME, ARCHIVES[base], path)]
    names = listing(path)
    return [Piece(NAME, ARCHIVES[n], storage.join(path, n)) for n in sorted(names) if n in ARCHIVES and not names[n]]


class BlurredCopy(SpooledCopy):
    """The two archives, read from their spool: class folders, `.jpg` names given back as `.JPEG`."""

    def scan_train(self, catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
        return scan_train(self.spool, catalog, on_error, pool)

    def scan_validation(self, catalog: Catalog, on_error: str, pool: Workers,
                        labels_loader: Callable[[], list[str]], labels_file: PathLike) -> SplitInput:
        return scan_validation(self.spool, catalog, on_error, pool, labels_loader, str(labels_file))


def scan_train(spool: Spool, catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
    (archive,) = spool.archives["train"]
    folder, (listed,) = spool.take("train", pool)
    members, offsets, sizes, files, crcs, _ = listed
    result = SplitInput("train", folder, "flat-tar", reader=SpoolReader, stamp=stamp([archive]))
    by_synset: dict = {}
    folder_of: dict[str, str] = {}  # synset -> its class folder, as the archive names it
    disagree = []
    for i, member in enumerate(members):
        if not files[i]:
            folder_match = CLASS_FOLDER.search(member)
            if folder_match:  # a class folder as such: present, with or without images (an empty one is said so)
                by_synset.setdefault(folder_match.group(1), [])
                folder_of[folder_match.group(1)] = member.rstrip("/")
            continue
        match = TRAIN_MEMBER.search(member)
        if not match:
            result.ignored.append(member)
        elif match.group(1) != match.group(3):
            disagree.append((member, f"in class folder {match.group(1)} but named for synset {match.group(3)}"))
        else:
            by_synset.setdefault(match.group(1), []).append((match.group(2) + ".JPEG",
                                                             (offsets[i], sizes[i], crcs[i])))
            folder_of.setdefault(match.group(1), member.rsplit("/", 1)[0])
    refuse_empty_pieces([(archive, len(disagree) + sum(map(len, by_synset.values())))], "train")
    leave_out_disagreeing(result, disagree, "train images", on_error, lambda name: f"{archive}:{name}")
    match_classes(result, archive, sorted(by_synset), catalog, on_error, "class folder")
    for label, synset in enumerate(catalog.synsets, start=1):
        if synset in by_synset:
            add_class(result, synset, label, by_synset.pop(synset), on_error, "class folder",
                      place=lies_in(archive), folder=f"{archive}:{folder_of[synset]}")
    require_images(result, archive, catalog)
    if catalog.num_classes == 1000 and len(result) < ILSVRC_TRAIN:
        result.notes.append(f"train: {ILSVRC_TRAIN - len(result):,} image(s) fewer than ILSVRC2012's "
                            f"{ILSVRC_TRAIN:,}: this release lacks some (a user counted 101)")
    return result


def scan_validation(spool: Spool, catalog: Catalog, on_error: str, pool: Workers,
                    labels_loader: Callable[[], list[str]], labels_file: str) -> SplitInput:
    (archive,) = spool.archives["validation"]
    folder, (listed,) = spool.take("validation", pool)
    members, offsets, sizes, files, crcs, _ = listed
    validation_labels = labels_loader()
    result = SplitInput("validation", folder, "flat-tar", reader=SpoolReader, stamp=stamp([archive]))
    items, disagree, numbers = [], [], set()
    for i, member in enumerate(members):
        if not files[i]:
            continue
        match = VALIDATION_MEMBER.search(member)
        if not match:
            result.ignored.append(member)
            continue
        number = int(match.group(3))
        expected = labelled_synset(number, validation_labels)
        if expected is not None and expected != match.group(1):
            disagree.append((member, f"in class folder {match.group(1)}, but {labels_file} gives {expected} "
                                     f"for image {number}"))
            continue
        numbers.add(number)
        items.append((match.group(2) + ".JPEG", (offsets[i], sizes[i], crcs[i])))
    refuse_empty_pieces([(archive, len(items) + len(disagree))], "validation")
    leave_out_disagreeing(result, disagree, "validation images", on_error, lambda name: f"{archive}:{name}",
                          noted=f"their class folder disagrees with {labels_file}")
    flat_validation(result, items, catalog, validation_labels, labels_file, on_error, place=lies_in(archive))
    wanted = set(catalog.synsets)
    disagreeing = {int(found.group(3)) for m, _ in disagree if (found := VALIDATION_MEMBER.search(m))}
    missing = [f"ILSVRC2012_val_{n:08d}.JPEG" for n, synset in enumerate(validation_labels, start=1)
               if synset in wanted and n not in numbers and n not in disagreeing]
    if missing:
        result.notes.append(f"validation: {len(missing)} image(s) of ILSVRC2012 are not in this release: "
                            + ", ".join(missing[:SHOWN]) + (" ..." if len(missing) > SHOWN else ""))
    return result


def assemble(pieces: list[Piece]) -> BlurredCopy:
    roles = {piece.role: piece.path for piece in pieces}
    return BlurredCopy(NAME, f"{NAME} archives", {split: [path] for split, path in roles.items()})


def write_sample(ilsvrc_sample: Path, out: Path) -> None:
    """`train_blurred.tar.gz`, `val_blurred.tar.gz`: the sample's images in class folders as `.jpg`, every
    third RGB one re-encoded by Pillow (as the blurring did), the last train and validation image left out."""
    out = Path(out)
    write_door.make_folder(out)
    train = [(p, p.parent.name) for p in sorted(Path(ilsvrc_sample).glob("train/*/*.JPEG"))]
    validation = validation_images(ilsvrc_sample)
    for split, images in (("train", train), ("validation", validation)):
        enough_for(len(images), 2, split, "blurred")  # the last of each is left out, as the release lacks some
    for name, top, images in (("train_blurred.tar.gz", "train_blurred", train),
                              ("val_blurred.tar.gz", "val_blurred", validation)):
        tar_gz(out / name, ((f"{top}/{synset}/{path.stem}.jpg", _blurred(path, n))
                            for n, (path, synset) in enumerate(images[:-1])))


def _blurred(path: Path, n: int) -> bytes:
    """The image's bytes, every third RGB JPEG (by `n`) re-encoded by Pillow, as the blurring re-encoded all."""
    from PIL import Image

    data = read_door.read_bytes(path)
    with Image.open(io.BytesIO(data)) as image:
        if n % 3 or image.format != "JPEG" or image.mode != "RGB":
            return data
        again = io.BytesIO()
        image.save(again, "JPEG", quality=75)
        return again.getvalue()


register(CopyKind(NAME, identify, assemble, rank=60, short="blurred", write_sample=write_sample, totals=TOTALS))
