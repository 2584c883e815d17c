"""Hugging Face `ILSVRC/imagenet-1k` (the .tar.gz era): `data/train_images_{0..4}.tar.gz`, `data/val_images.tar.gz`.

Pieces: the archives (by name), the `data/` folder holding them, or the
repository's root. `test_images.tar.gz` has no labels and is ignored (a note).
Each archive is a flat tar of JPEGs whose names carry the synset as a suffix:
`n01440764_10026_n01440764.JPEG`, `ILSVRC2012_val_00000001_n01751748.JPEG`.
The suffix is cut to give back the original name (what `image/filename`
holds, so the records equal the build from the ILSVRC2012 tarballs); a train
image's label is its synset, checked against the labels file; a validation
image's label comes from the validation labels file as for every copy, and the
suffix must agree with it. A disagreement (either way) is an error under
--on-error fail — the image's label would be a guess — and leaves the image
out, listed, under skip. How the train images are spread over the five
archives is not documented, so nothing here assumes it; all five must be
given (a partial download is refused, naming what is missing).

The archives are decompressed once into a spool (see spool.py for why and what it costs).
"""

from __future__ import annotations

import re
from array import array
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from imagenet_build.infra import read_door, storage, write_door
from imagenet_build.infra.errors import InputError, PathLike
from imagenet_build.model import SplitInput, file_name
from imagenet_build.sources.copies import CopyKind, Piece, listing, register
from imagenet_build.sources.copy_rules import (
    add_class,
    flat_validation,
    labelled_synset,
    leave_out_disagreeing,
    match_classes,
    refuse_empty_pieces,
    require_images,
)
from imagenet_build.sources.samples import enough_for, tar_gz, validation_images
from imagenet_build.sources.spool import SHIFT, Spool, SpooledCopy, SpoolReader, stamp

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.infra.workers import Workers

NAME = "Hugging Face ILSVRC/imagenet-1k"
TRAIN_ARCHIVES = 5
TRAIN_ARCHIVE = re.compile(r"^train_images_(\d+)\.tar\.gz$")
ARCHIVES = {"val_images.tar.gz": "validation", "test_images.tar.gz": "test"}
TRAIN_MEMBER = re.compile(r"^((n\d{8})_\d{1,18})_(n\d{8})\.JPEG$")
VALIDATION_MEMBER = re.compile(r"^(ILSVRC2012_val_(\d{8}))_(n\d{8})\.JPEG$")


def _role(base: str) -> str | None:
    match = TRAIN_ARCHIVE.match(base)
    return f"train_images_{match.group(1)}" if match else ARCHIVES.get(base)


def identify(path: str) -> list[Piece]:
    base = storage.basename(path)
    role = _role(base)
    if role:
        return [Piece(NAME, role, path)]
    names = listing(path)
    if names.get("data") and not any(_role(n) for n in names):
        path, names = storage.join(path, "data"), listing(storage.join(path, "data"))
    return [Piece(NAME, role, storage.join(path, n)) for n in sorted(names)
            if (role := _role(n)) and not names[n]]


class HfCopy(SpooledCopy):
    """The archives (or parquet files, hf_parquet.py), read from their spool: the names say the synsets."""

    listed_as = "flat-tar"  # the listing's arrangement (SplitInput.arrangement)

    def scan_train(self, catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
        return scan_train(self.spool, catalog, on_error, pool, self.listed_as)

    def scan_validation(self, catalog: Catalog, on_error: str, pool: Workers,
                        labels_loader: Callable[[], list[str]], labels_file: PathLike) -> SplitInput:
        return scan_validation(self.spool, catalog, on_error, pool, labels_loader, str(labels_file), self.listed_as)


def scan_train(spool: Spool, catalog: Catalog, on_error: str, pool: Workers, arrangement: str) -> SplitInput:
    """The train archives (or parquet files): one listing each, merged class by class."""
    archives = spool.archives["train"]
    folder, listings = spool.take("train", pool)
    result = SplitInput("train", folder, arrangement, reader=SpoolReader, stamp=stamp(archives))
    # compact columns over all archives (1.28 M images): the image number of its original name
    # (`<synset>_<number>.JPEG`; a name whose number is not written plainly is kept in `odd`), synset,
    # archive number << SHIFT | offset in its decompressed tar, size, header CRC. No string per image
    # until the listing: that would cost the driver ~90 MB more at full size.
    numbers, offsets, sizes, crcs, codes = array("Q"), array("Q"), array("Q"), array("Q"), array("H")
    disagree: list[tuple[str, str]] = []
    odd: dict[int, str] = {}  # entry -> its name, where the number has leading zeros
    code_of: dict = {}
    found = []  # images in each archive
    listings.reverse()  # each archive's listing popped in turn: not held once it is merged
    for k in range(len(archives)):
        members, member_offsets, member_sizes, files, member_crcs, problems = listings.pop()
        archive = storage.basename(archives[k])
        before = len(numbers) + len(disagree)  # its rows left out count as its images: it is not empty
        disagree.extend((f"{archive}:{name}", why) for name, why in problems)
        for i, member in enumerate(members):
            if not files[i]:
                continue
            base = file_name(member)
            match = TRAIN_MEMBER.match(base)
            if not match:
                result.ignored.append(f"{archive}:{member}")
                continue
            if match.group(2) != match.group(3):
                disagree.append((f"{archive}:{base}",
                                 f"named for synset {match.group(2)} but labelled {match.group(3)}"))
                continue
            number = match.group(1)[len(match.group(2)) + 1:]
            if str(int(number)) != number:
                odd[len(numbers)] = match.group(1) + ".JPEG"
            numbers.append(int(number))
            codes.append(code_of.setdefault(match.group(3), len(code_of)))
            offsets.append(k << SHIFT | member_offsets[i])
            sizes.append(member_sizes[i])
            crcs.append(member_crcs[i])
        found.append(len(numbers) + len(disagree) - before)
    refuse_empty_pieces(zip(archives, found), "train")
    leave_out_disagreeing(result, disagree, "train images", on_error,
                          partial(storage.join, storage.parent(archives[0])))
    match_classes(result, storage.parent(archives[0]), sorted(code_of), catalog, on_error, "synset")
    rows: dict = {}
    for i, code in enumerate(codes):
        rows.setdefault(code, array("I")).append(i)
    place = partial(_archive_of, archives)
    for label, synset in enumerate(catalog.synsets, start=1):
        if synset in code_of:
            items = [(odd.get(i) or f"{synset}_{numbers[i]}.JPEG", (offsets[i], sizes[i], crcs[i]))
                     for i in rows.pop(code_of[synset])]
            add_class(result, synset, label, items, on_error, "synset", place=place)
    require_images(result, storage.parent(archives[0]), catalog)
    return result


def _archive_of(archives: list, where: tuple) -> str:
    """The archive an image's byte range (archive number << SHIFT | offset, ...) lies in."""
    return str(archives[where[0] >> SHIFT])


def scan_validation(spool: Spool, catalog: Catalog, on_error: str, pool: Workers,
                    labels_loader: Callable[[], list[str]], labels_file: str, arrangement: str) -> SplitInput:
    """The validation archive (or parquet files): flat, labelled by the validation labels file."""
    archives = spool.archives["validation"]
    folder, listings = spool.take("validation", pool)
    validation_labels = labels_loader()
    result = SplitInput("validation", folder, arrangement, reader=SpoolReader, stamp=stamp(archives))
    items: list[tuple[str, Any]] = []
    disagree: list[tuple[str, str]] = []
    found = []
    for k, listed in enumerate(listings):
        archive = archives[k]
        before = len(items) + len(disagree)
        disagree.extend((f"{storage.basename(archive)}:{name}", why) for name, why in listed[5])
        _validation_items(archive, k, listed, validation_labels, labels_file, result, items, disagree)
        found.append(len(items) + len(disagree) - before)
    refuse_empty_pieces(zip(archives, found), "validation")
    leave_out_disagreeing(result, disagree, "validation images", on_error,
                          partial(storage.join, storage.parent(archives[0])),
                          noted=f"their name's synset disagrees with {labels_file}")
    return flat_validation(result, items, catalog, validation_labels, labels_file, on_error,
                           place=partial(_archive_of, archives))


def _validation_items(archive: str, k: int, listed: tuple, validation_labels: list, labels_file: str,
                      result: SplitInput, items: list, disagree: list) -> None:
    members, member_offsets, member_sizes, files, crcs, _ = listed
    for i, member in enumerate(members):
        if not files[i]:
            continue
        base = file_name(member)
        match = VALIDATION_MEMBER.match(base)
        if not match:
            result.ignored.append(base)
            continue
        number = int(match.group(2))
        expected = labelled_synset(number, validation_labels)
        if expected is not None and expected != match.group(3):
            problem = f"named for synset {match.group(3)}, but {labels_file} gives {expected} for image {number}"
            disagree.append((f"{storage.basename(archive)}:{base}", problem))
            continue
        items.append((match.group(1) + ".JPEG", (k << SHIFT | member_offsets[i], member_sizes[i], crcs[i])))


def assemble(pieces: list[Piece]) -> HfCopy:
    roles = {piece.role: piece.path for piece in pieces}
    train = {int(role.rsplit("_", 1)[1]): path for role, path in roles.items() if role.startswith("train_images_")}
    splits: dict[str, list[str]] = {}
    if train:
        wanted = [f"train_images_{k}.tar.gz" for k in range(TRAIN_ARCHIVES)]
        missing = [name for k, name in enumerate(wanted) if k not in train]
        surplus = sorted(k for k in train if k >= TRAIN_ARCHIVES)
        if missing or surplus:
            first = next(iter(train.values()))
            problem = (f"{', '.join(missing)} missing: the train split is spread over {', '.join(wanted)}; "
                       "give all five (a partial download would build a train split lacking images)"
                       if missing else f"train_images_{surplus[0]}.tar.gz is not one of {', '.join(wanted)}")
            raise InputError(storage.parent(first), problem)
        splits["train"] = [train[k] for k in range(TRAIN_ARCHIVES)]
    if "validation" in roles:
        splits["validation"] = [roles["validation"]]
    if not splits:
        raise InputError(roles["test"], "only the unlabelled test split was given: give train_images_{0..4}.tar.gz "
                                        "and/or val_images.tar.gz")
    copy = HfCopy(NAME, f"{NAME} .tar.gz archives", splits)  # both splits' archives decompressed in one batch
    if "test" in roles:
        copy.notes.append(f"{roles['test']} ignored: the test split has no labels")
    return copy


def write_sample(ilsvrc_sample: Path, out: Path) -> None:
    """`data/train_images_{0..4}.tar.gz` (train images dealt round-robin in name order: how the real
    archives split them is not documented), `data/val_images.tar.gz`, `data/test_images.tar.gz`."""
    data = Path(out) / "data"
    write_door.make_folder(data)
    train = sorted(Path(ilsvrc_sample).glob("train/*/*.JPEG"), key=lambda p: p.name)
    validation = validation_images(ilsvrc_sample)
    enough_for(len(train), TRAIN_ARCHIVES, "train", "hf")
    enough_for(len(validation), 1, "validation", "hf")
    for k in range(TRAIN_ARCHIVES):
        tar_gz(data / f"train_images_{k}.tar.gz",
               ((f"{p.stem}_{p.parent.name}.JPEG", read_door.read_bytes(p)) for p in train[k::TRAIN_ARCHIVES]))
    tar_gz(data / "val_images.tar.gz",
           ((f"{p.stem}_{synset}.JPEG", read_door.read_bytes(p)) for p, synset in validation))
    tar_gz(data / "test_images.tar.gz",
           ((f"ILSVRC2012_test_{n:08d}.JPEG", read_door.read_bytes(p))
            for n, (p, _) in enumerate(validation[:2], start=1)))


register(CopyKind(NAME, identify, assemble, rank=40, short="hf", write_sample=write_sample, folder=True))
