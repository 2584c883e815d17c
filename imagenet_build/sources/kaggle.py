"""Kaggle's `imagenet-object-localization-challenge` for --from: the downloaded zip read in place, or its tree.

The download's shape is kaggle_listing.py's. Train labels come from the synset folder,
validation labels from the validation labels file (as for the flat ILSVRC validation
folder); LOC_val_solution.csv and LOC_synset_mapping.txt are checked against them and
differences are reported as notes, the same checks for the zip and the tree (KaggleCopy).
Boxes come from the train XML, through the same rules as `bboxes` (slim's).

The zip is read where it lies (zips.py: its directory listed once, each member's bytes
checked as they are read). The older download (a zip around
`imagenet_object_localization_patched2019.tar.gz`) is refused: a gzip stream has no random
access, so it must be unpacked once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Callable

from imagenet_build.catalog.boxes import boxes_to_csv_lines, parse_box_lines
from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import InputError, PathLike, UsageError, input_errors
from imagenet_build.model import SplitInput
from imagenet_build.sources.copies import Copy, CopyKind, Piece, listing, register
from imagenet_build.sources.copy_rules import (
    add_class,
    flat_validation,
    labelled_synset,
    lies_in,
    match_classes,
    require_images,
)
from imagenet_build.sources.folders import scan_class_folders, scan_validation
from imagenet_build.sources.kaggle_listing import (
    ANNOTATIONS,
    DATA,
    MAPPING,
    OLD_TARBALL,
    SOLUTION,
    TEST,
    TRAIN,
    VAL,
    ZIP_NAME,
    Members,
    ZipListing,
    list_zip,
    looks_like_kaggle,
    open_zip,
)
from imagenet_build.sources.kaggle_sample import write_sample
from imagenet_build.sources.zips import ZipReader, member_bytes

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.infra.workers import Workers

NAME = "Kaggle imagenet-object-localization-challenge"
SYNSET = re.compile(r"^n\d{8}$")
SOLUTION_ID = re.compile(r"^ILSVRC2012_val_(\d{8})$")
UNPACK_OLD = (f"is Kaggle's older download, the images inside {OLD_TARBALL}, which has no random access: "
              f"unpack it once (tar -xzf {OLD_TARBALL}) and give --from the extracted folder (ILSVRC/ and LOC_*)")


# ------------------------------------------------------------------ the LOC_* files against the labels files


def solution_notes(lines: Iterable[str], where: str, validation_labels: list[str], labels_file: PathLike) -> list[str]:
    """LOC_val_solution.csv's first synset of each row against the validation labels file.

    Differences are notes (the labels file decides, as for every other copy); an unreadable
    CSV is an error.
    """
    it = iter(lines)
    header = next(it, "").lstrip("\ufeff").strip()
    if header.replace(" ", "") != "ImageId,PredictionString":
        raise InputError(where, f"not Kaggle's {SOLUTION}: its first line is {header[:60]!r}, "
                                "not 'ImageId,PredictionString'")
    differ, outside, rows = [], 0, 0
    for number, line in enumerate(it, start=2):
        line = line.strip()
        if not line:
            continue
        image_id, _, prediction = line.partition(",")
        match = SOLUTION_ID.match(image_id.strip())
        synset = prediction.split(None, 1)[0] if prediction.strip() else ""
        if not match or not SYNSET.match(synset):
            raise InputError(where, f"line {number}: expected 'ILSVRC2012_val_<8 digits>,<synset> <box>...', "
                                    f"got {line[:80]!r}")
        rows += 1
        image = int(match.group(1))
        labelled = labelled_synset(image, validation_labels)
        if labelled is None:
            outside += 1
        elif labelled != synset:
            differ.append((image, synset))
    notes = []
    if differ:
        differ.sort()
        shown = ", ".join(f"ILSVRC2012_val_{i:08d} ({s} there, {validation_labels[i - 1]} here)"
                          for i, s in differ[:3])
        notes.append(f"{where} disagrees with {labels_file} on {len(differ):,} validation image(s): {shown}"
                     f"{' ...' if len(differ) > 3 else ''}; the labels file's synsets are used")
    if outside:
        notes.append(f"{where} has {outside:,} row(s) for images beyond the {len(validation_labels):,} lines of "
                     f"{labels_file}")
    if rows < len(validation_labels) and not outside:
        notes.append(f"{where} has {rows:,} rows for the {len(validation_labels):,} images of {labels_file}: "
                     "the others were not checked")
    return notes


def mapping_notes(lines: Iterable[str], where: str, catalog: Catalog) -> list[str]:
    """LOC_synset_mapping.txt (line i: class i) against the labels file's order where both list a synset."""
    synsets = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        synset = line.split(None, 1)[0].lstrip("\ufeff")
        if not SYNSET.match(synset):
            raise InputError(where, f"line {number}: expected '<synset> <names>', got {line.strip()[:80]!r}")
        synsets.append(synset)
    both = set(synsets) & set(catalog.synsets)
    theirs = [s for s in synsets if s in both]
    ours = [s for s in catalog.synsets if s in both]
    if theirs == ours:
        return []
    first = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), None)
    if first is None:  # one is the other with more at its end: only a synset listed twice there does that
        twice = sorted({s for s in theirs if theirs.count(s) > 1})
        return [f"{where} lists {', '.join(twice[:3])} more than once: labels follow {catalog.labels_file}"]
    return [f"{where} orders the synsets otherwise than {catalog.labels_file} (from the {first + 1}th shared one: "
            f"{theirs[first]} there, {ours[first]} here): labels follow the labels file"]


class KaggleCopy(Copy):
    """What the zip and its extracted tree share: both splits, the boxes of the train XML, and the LOC_* files
    checked against the labels files (the one home of those checks for both)."""

    kind = NAME
    splits = ("train", "validation")
    carries_boxes = True

    def __init__(self, description: str) -> None:
        self.description, self.notes = description, []
        self._mapping_checked = False

    def _text(self, name: str) -> list[str] | None:
        """A LOC_* file's lines, or None when the copy lacks it."""
        raise NotImplementedError

    def _where(self, name: str) -> str:
        """A LOC_* file as the messages name it."""
        raise NotImplementedError

    def _absent(self, name: str) -> str:
        """What a note says when the LOC_* file `name` is missing."""
        raise NotImplementedError

    def check_mapping(self, catalog: Catalog) -> None:
        """LOC_synset_mapping.txt against the labels file's order, once: notes."""
        if self._mapping_checked:
            return
        self._mapping_checked = True
        lines = self._text(MAPPING)
        if lines is None:
            self.notes.append(f"{self._absent(MAPPING)}: its synset order not checked")
        else:
            self.notes.extend(mapping_notes(lines, self._where(MAPPING), catalog))

    def solution_notes(self, validation_labels: list[str], labels_file: PathLike) -> list[str]:
        """LOC_val_solution.csv against the validation labels: notes for the validation split."""
        lines = self._text(SOLUTION)
        if lines is None:
            return [f"{self._absent(SOLUTION)}: validation labels not cross-checked"]
        return solution_notes(lines, self._where(SOLUTION), validation_labels, labels_file)


# ------------------------------------------------------------------ the zip as a copy


class KaggleZip(KaggleCopy):
    """The scans and boxes of one Kaggle zip, from one listing of its central directory."""

    def __init__(self, path: str) -> None:
        super().__init__("Kaggle zip")
        self.path = path
        self._listing: ZipListing | None = None

    @property
    def listing(self) -> ZipListing:
        if self._listing is None:
            listed = self._listing = list_zip(self.path)
            if listed.old_tarball and not listed.train and not listed.validation.names:
                raise InputError(self.path, UNPACK_OLD)
            if not listed.train:
                raise InputError(self.path, f"holds no {listed.prefix}{TRAIN}<synset>/*.JPEG images: not the whole "
                                            "Kaggle download (a partial or broken zip)")
            if not listed.validation.names:
                raise InputError(self.path, f"holds no {listed.prefix}{VAL}ILSVRC2012_val_*.JPEG images: not the "
                                            "whole Kaggle download (a partial or broken zip)")
            if listed.tests:
                self.notes.append(f"{listed.tests:,} test images ignored: no labels")
        return self._listing

    def _where(self, name: str) -> str:
        return f"{self.path}:{self.listing.prefix}{name}"

    def _absent(self, name: str) -> str:
        return f"{self.path} has no {name}"

    def _text(self, name: str) -> list[str] | None:
        listed = self.listing
        if name not in listed.files:
            return None
        offset, csize, member_info = listed.files[name]
        where = self._where(name)
        with open_zip(self.path) as f:
            data = member_bytes(f, offset, csize, member_info, listed.prefix + name, where)
        try:
            return data.decode("utf-8-sig").splitlines()
        except UnicodeDecodeError as e:
            raise InputError(where, f"not UTF-8 text ({e})") from None

    def scan_train(self, catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
        listed = self.listing
        self.check_mapping(catalog)
        root = self.path
        result = SplitInput("train", root, "zip", reader=ZipReader, ignored=list(listed.train_strangers),
                            stamp=listed.stamp, member_prefix=listed.prefix + TRAIN)
        match_classes(result, f"{root}:{listed.prefix}{TRAIN.rstrip('/')}", sorted(listed.train), catalog,
                      on_error, "class folder")
        for label, synset in enumerate(catalog.synsets, start=1):
            members = listed.train.pop(synset, None)
            if members is not None:
                add_class(result, synset, label, members.items(), on_error, "class folder",
                          place=lies_in(f"{root}:{listed.prefix}{TRAIN}{synset}"))
        listed.train.clear()
        require_images(result, root, catalog)
        return result

    def scan_validation(self, catalog: Catalog, on_error: str, pool: Workers,
                        labels_loader: Callable[[], list[str]], labels_file: PathLike) -> SplitInput:
        listed = self.listing
        self.check_mapping(catalog)
        labels = labels_loader()
        result = SplitInput("validation", self.path, "flat-zip", reader=ZipReader, stamp=listed.stamp,
                            member_prefix=listed.prefix + VAL)
        flat_validation(result, listed.validation.items(), catalog, labels, labels_file, on_error,
                        place=lies_in(f"{self.path}:{listed.prefix}{VAL.rstrip('/')}"))
        listed.validation = Members()
        result.notes.extend(self.solution_notes(labels, labels_file))
        return result

    def boxes(self, catalog: Catalog) -> dict[str, bytes]:
        listed = self.listing
        source = f"{self.path}:{listed.prefix}{ANNOTATIONS.rstrip('/')}"
        if not listed.xml:
            self.notes.append(f"{self.path} holds no {ANNOTATIONS}*.xml: no boxes")
            return {}

        def files(fd: IO[bytes]) -> Iterator[tuple[str, str, bytes]]:
            for synset in sorted(listed.xml):
                for stem, offset, csize, member_info in listed.xml[synset].rows():
                    name = f"{listed.prefix}{ANNOTATIONS}{synset}/{stem}.xml"
                    yield synset, stem, member_bytes(fd, offset, csize, member_info, name, f"{self.path}:{name}")

        with open_zip(self.path) as f:
            lines, _, _ = boxes_to_csv_lines(source, catalog.synsets, files=files(f))
        listed.xml.clear()
        return parse_box_lines(lines, source)


# ------------------------------------------------------------------ the extracted tree as a copy


class KaggleTree(KaggleCopy):
    """The scans and boxes of the folder the zip unpacks to (the folder scans, the LOC_* checks)."""

    def __init__(self, root: str) -> None:
        super().__init__("Kaggle folders")
        self.root = root
        for split in (TRAIN, VAL):
            if not os.path.isdir(os.path.join(root, split)):
                raise InputError(os.path.join(root, split.rstrip("/")),
                                 "not found: not the whole Kaggle download (a partial copy)")
        test = os.path.join(root, TEST)
        if os.path.isdir(test):
            tests = sum(1 for entry in os.scandir(test) if entry.name.endswith(".JPEG"))
            if tests:
                self.notes.append(f"{tests:,} test images ignored: no labels")

    def _where(self, name: str) -> str:
        return os.path.join(self.root, name)

    def _absent(self, name: str) -> str:
        return f"no {self._where(name)}"

    def _text(self, name: str) -> list[str] | None:
        path = self._where(name)
        if not os.path.isfile(path):
            return None
        with input_errors(path, expected="a text file", missing="not found"):
            return read_door.read_text(path, encoding="utf-8-sig").splitlines()

    def scan_train(self, catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
        self.check_mapping(catalog)
        return scan_class_folders("train", os.path.join(self.root, TRAIN), catalog, on_error)

    def scan_validation(self, catalog: Catalog, on_error: str, pool: Workers,
                        labels_loader: Callable[[], list[str]], labels_file: PathLike) -> SplitInput:
        self.check_mapping(catalog)
        labels = labels_loader()
        result = scan_validation(os.path.join(self.root, VAL), catalog, lambda: labels, labels_file, on_error)
        result.notes.extend(self.solution_notes(labels, labels_file))
        return result

    def boxes(self, catalog: Catalog) -> dict[str, bytes]:
        folder = os.path.join(self.root, ANNOTATIONS)
        if not os.path.isdir(folder):
            self.notes.append(f"no {folder}: no boxes")
            return {}
        lines, _, _ = boxes_to_csv_lines(folder, catalog.synsets)
        return parse_box_lines(lines, folder)


# ------------------------------------------------------------------ --from


def identify(path: str) -> list[Piece]:
    base = storage.basename(path)
    if base == OLD_TARBALL:
        return [Piece(NAME, "old", path)]
    if base.lower().endswith(".zip") and (storage.is_url(path) or os.path.isfile(path)):
        kind = looks_like_kaggle(path)
        return [Piece(NAME, "zip" if kind == "zip" else "old", path)] if kind else []
    if storage.is_url(path) or not os.path.isdir(path):
        return []
    names = listing(path)
    if base == "ILSVRC" and os.path.isdir(os.path.join(path, DATA)):
        return [Piece(NAME, "tree", os.path.dirname(os.path.abspath(path)))]
    if names.get("ILSVRC") and os.path.isdir(os.path.join(path, DATA)):
        return [Piece(NAME, "tree", path)]
    if ZIP_NAME in names and not names[ZIP_NAME]:
        return [Piece(NAME, "zip", os.path.join(path, ZIP_NAME))]
    if OLD_TARBALL in names:
        return [Piece(NAME, "old", os.path.join(path, OLD_TARBALL))]
    return []


def assemble(pieces: list[Piece]) -> KaggleCopy:
    roles = {piece.role: piece.path for piece in pieces}
    if "old" in roles:
        raise InputError(roles["old"], UNPACK_OLD)
    if len(roles) > 1:
        raise UsageError(f"--from was given both the Kaggle zip {roles['zip']} and an extracted tree "
                         f"{roles['tree']}; give one of them")
    return KaggleZip(roles["zip"]) if "zip" in roles else KaggleTree(roles["tree"])


register(CopyKind(NAME, identify, assemble, rank=20, short="kaggle", write_sample=write_sample))
