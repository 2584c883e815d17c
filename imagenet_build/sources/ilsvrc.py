"""ImageNet as image-net.org ships it, for --from: the three ILSVRC2012 archives, or the folders extracted from them.

Pieces: `ILSVRC2012_img_train.tar`, `ILSVRC2012_img_val.tar`,
`ILSVRC2012_bbox_train_v2.tar.gz` (by name), a folder holding them, a train folder
of `<synset>/` class folders, a flat validation folder, or a root holding `train/`
and `val/` (or `validation/`) folders. The per-split options (--train-tar,
--train-dir and so on) name the same copy, so the shards are the same bytes either way.

The archives are read where they lie: the train archive is a tar of 1000
`<synset>.tar` (each a tar of JPEGs), the validation archive a flat tar of JPEGs;
both are uncompressed, so every image is a contiguous byte range of the outer file.
Listing reads only tar headers, one inner tar per task, so nothing is extracted and
no class tar is ever held in memory; workers then read each image with one pread()
(tars.py).
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NamedTuple

from imagenet_build.catalog.boxes import boxes_to_csv_lines, parse_box_lines
from imagenet_build.infra import read_door, storage, write_door
from imagenet_build.infra.errors import InputError, PathLike, UsageError
from imagenet_build.model import SplitInput, file_name
from imagenet_build.sources import folders
from imagenet_build.sources.copies import Copy, CopyKind, Piece, listing, register
from imagenet_build.sources.copy_rules import (
    VALIDATION_NAME,
    add_class,
    flat_validation,
    lies_in,
    match_classes,
    require_images,
)
from imagenet_build.sources.tars import ArchiveReader, RangeFile, list_members, outer_members

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.infra.workers import Workers

NAME = "ILSVRC2012 (image-net.org)"
ARCHIVES = {
    "ILSVRC2012_img_train.tar": "train-tar",
    "ILSVRC2012_img_val.tar": "validation-tar",
    "ILSVRC2012_bbox_train_v2.tar.gz": "bbox-tar",
}
SYNSET = re.compile(r"^n\d{8}$")
UNREAD = "unread"  # the role prefix of an extracted folder beside the archives, which are read instead
UNREADABLE = "unreadable"  # the role prefix of a root's train/ or val/ that is neither split's folder
LEFT_OUT = "left-out"  # the role prefix of what image-net.org ships beside the copy that is no part of it
# what a root may hold beside the copy, never converted, and why (a note says so)
NOT_CONVERTED = {"ILSVRC2012_img_test.tar": "the test images have no labels",
                 "ILSVRC2012_img_test_v10102019.tar": "the test images have no labels",
                 "test": "the test images have no labels"}
DEVKIT = re.compile(r"^ILSVRC2012_devkit_t\d+\.tar\.gz$")
DEVKIT_WHY = "the development kit: the synsets and validation labels it holds are shipped with imagenet-build"


def _folder_role(path: str, names: dict[str, bool]) -> str | None:
    """"train-dir" for a folder of synset folders, "validation-dir" for flat validation images."""
    if any(SYNSET.match(name) and is_dir for name, is_dir in names.items()):
        return "train-dir"
    if any(VALIDATION_NAME.match(name) for name in names):
        return "validation-dir"
    return None


def identify(path: str) -> list[Piece]:
    """A folder holding both the archives and folders extracted from them is read from the archives (as the
    real download unpacks beside them): its folders become "unread" pieces, which the build names in a note."""
    base = storage.basename(path)
    if base in ARCHIVES:
        return [Piece(NAME, ARCHIVES[base], path)]
    names = listing(path)
    if not names:
        return []
    archives = [Piece(NAME, ARCHIVES[n], storage.join(path, n)) for n in sorted(names) if n in ARCHIVES]
    pieces, unreadable = [], []
    for sub, role in (("train", "train-dir"), ("val", "validation-dir"), ("validation", "validation-dir")):
        if names.get(sub):
            sub_path = storage.join(path, sub)
            if _folder_role(sub_path, listing(sub_path)) in (role, "train-dir"):
                pieces.append(Piece(NAME, role, sub_path))
            else:
                unreadable.append(Piece(NAME, f"{UNREADABLE} {role} {sub}", sub_path))
    left_out = [Piece(NAME, f"{LEFT_OUT} {n}", storage.join(path, n)) for n in sorted(names)
                if (n in NOT_CONVERTED and names[n] == (n == "test")) or (DEVKIT.match(n) and not names[n])]
    if archives:
        return archives + [Piece(NAME, f"{UNREAD} {piece.role}", piece.path) for piece in pieces] + left_out
    if pieces:
        return pieces + unreadable + left_out
    found = _folder_role(path, names)
    return [Piece(NAME, found, path)] if found else []


@dataclass
class IlsvrcCopy(Copy):
    """The ILSVRC2012 archives or folders, one of them a split (any mix), and the bbox archive; what the
    per-split options (--train-tar, --train-dir, ...) name too, under their own `kind` and `description`.

    any_image: any dataset of class folders (--classes-from-folders): both splits are class folders
    of *.jpg, *.jpeg, *.png in any case.
    """

    train_tar: str | None = None
    train_dir: str | None = None
    validation_tar: str | None = None
    validation_dir: str | None = None
    bbox_tar: str | None = None
    kind: str = NAME
    description: str = ""  # default: "ILSVRC2012 (image-net.org) tarballs" (or folders)
    any_image: bool = False
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for split, tar, folder in (("train", self.train_tar, self.train_dir),
                                   ("validation", self.validation_tar, self.validation_dir)):
            if tar and folder:  # which one to convert, only the user knows
                raise UsageError(f"--from was given the {split} split twice: {tar} and {folder}; give one of them")
        if not self.description:
            self.description = f"{NAME} {'tarballs' if self.train_tar or self.validation_tar else 'folders'}"

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(split for split, given in (("train", self.train_tar or self.train_dir),
                                                ("validation", self.validation_tar or self.validation_dir)) if given)

    @property
    def carries_boxes(self) -> bool:
        return self.bbox_tar is not None

    def scan_train(self, catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
        if self.train_tar:
            return scan_train_tar(self.train_tar, catalog, on_error, pool)
        assert self.train_dir is not None  # "train" is in splits
        return folders.scan_class_folders("train", self.train_dir, catalog, on_error, self.any_image)

    def scan_validation(self, catalog: Catalog, on_error: str, pool: Workers,
                        labels_loader: Callable[[], list[str]], labels_file: PathLike) -> SplitInput:
        if self.validation_tar:
            return scan_validation_tar(self.validation_tar, catalog, labels_loader, labels_file, on_error)
        assert self.validation_dir is not None  # "validation" is in splits
        if self.any_image:
            return folders.scan_class_folders("validation", self.validation_dir, catalog, on_error, any_image=True)
        return folders.scan_validation(self.validation_dir, catalog, labels_loader, labels_file, on_error)

    def boxes(self, catalog: Catalog) -> dict[str, bytes]:
        if self.bbox_tar is None:
            return {}
        lines, _, _ = boxes_to_csv_lines(self.bbox_tar, catalog.synsets)
        return parse_box_lines(lines, self.bbox_tar)


def assemble(pieces: list[Piece]) -> IlsvrcCopy:
    roles = {piece.role: piece.path for piece in pieces}
    copy = IlsvrcCopy(roles.get("train-tar"), roles.get("train-dir"), roles.get("validation-tar"),
                      roles.get("validation-dir"), roles.get("bbox-tar"))
    unread = [piece.path for piece in pieces if piece.role.startswith(UNREAD + " ")]
    if unread:
        copy.notes.append(f"{', '.join(unread)} not read: the ILSVRC2012 archives beside them are; "
                          "give --from the folders themselves to convert them instead")
    copy.notes.extend(_unreadable(piece, roles) for piece in pieces if piece.role.startswith(UNREADABLE))
    left_out = [piece for piece in pieces if piece.role.startswith(LEFT_OUT)]
    if left_out:
        copy.notes.append("left out: " + "; ".join(
            f"{piece.path} ({NOT_CONVERTED.get(storage.basename(piece.path), DEVKIT_WHY)})" for piece in left_out))
    return copy


def _unreadable(piece: Piece, roles: dict[str, str]) -> str:
    """A root's train/ or val/ (validation/) that is not that split's folder: converting the rest silently would
    build without the split, so it is refused in one line; where another piece gives the split, a note."""
    split = piece.role.split(" ")[1].split("-")[0]
    names = sorted(listing(piece.path))
    what = ("holds neither ILSVRC2012_val_*.JPEG images nor <synset>/ class folders" if split == "validation"
            else "holds no <synset>/ class folders")
    found = f" (it holds {len(names):,} other entries, such as {names[0]})" if names else " (it is empty)"
    given = next((roles[f"{split}-{kind}"] for kind in ("dir", "tar") if roles.get(f"{split}-{kind}")), None)
    if given is None:
        raise InputError(piece.path, f"{what}{found}: not the {split} split, which the build would be without; "
                                     "give --from the other split's folder alone to build only that")
    return f"{piece.path} not read: it {what}{found}; the {split} split is {given}"


class ClassTar(NamedTuple):
    """One worker task of the train tar's scan: list the class tar at [offset, offset + size)."""

    archive: str
    offset: int
    size: int
    inner_name: str


def inner_members(
    archive: str, offset: int, size: int, inner_name: str
) -> tuple[list[str], array[int], array[int], array[int]]:
    """A worker task: the files of the inner tar at [offset, offset + size) of the archive.

    As compact columns (base names, offsets and sizes in the outer archive, header CRCs):
    1000 class tars of ImageNet hold 1.28 M members, and a tuple of Python ints per member
    would cost the driver ~100 MB more while the class tars are listed.
    """
    names: list[str] = []
    offsets, sizes, crcs = array("Q"), array("Q"), array("Q")
    with read_door.open_read(archive, random_access=True) as f:
        for name, data_offset, data_size, is_file, crc in list_members(RangeFile(f, offset, size), size,
                                                                       f"{archive}:{inner_name}"):
            if is_file:
                names.append(file_name(name))
                offsets.append(offset + data_offset)
                sizes.append(data_size)
                crcs.append(crc)
    return names, offsets, sizes, crcs


def scan_train_tar(archive: PathLike, catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
    """ILSVRC2012_img_train.tar: a tar of `<synset>.tar`, each a tar of that class's JPEGs."""
    members = outer_members(archive)
    inner: dict[str, tuple[str, int, int]] = {}
    strangers: list[str] = []
    for name, offset, size, is_file, _ in members:
        base = file_name(name)
        if is_file and base.endswith(".tar"):
            inner[base[: -len(".tar")]] = (name, offset, size)
        elif is_file:
            strangers.append(base)
    if not inner:
        if any(VALIDATION_NAME.match(n) for n in strangers):
            raise InputError(archive, "holds validation images, not <synset>.tar class archives: "
                                      "is it the validation archive? (swap --train-tar and --validation-tar)")
        raise InputError(archive, "holds no <synset>.tar class archives: not the ILSVRC2012 train archive")
    if not any(synset in catalog.label_of for synset in inner):  # another tar holding tars: not classes missing
        shown = ", ".join(sorted(name for name, _, _ in inner.values())[:3]) + (", ..." if len(inner) > 3 else "")
        raise InputError(archive, f"holds no <synset>.tar class archive of a class in {catalog.labels_file} (its "
                                  f"tars: {shown}): not the ILSVRC2012 train archive, or the wrong --labels-file")
    result = SplitInput("train", str(archive), "tar", reader=ArchiveReader, ignored=strangers,
                        stamp=storage.stamp(archive))
    match_classes(result, archive, sorted(inner), catalog, on_error, "class archive")
    order = [synset for synset in catalog.synsets if synset in inner]
    tasks = [ClassTar(str(archive), inner[s][1], inner[s][2], inner[s][0]) for s in order]
    found: dict[str, tuple[list[str], array[int], array[int], array[int]]] = {}
    added = [0]

    def listed(task: ClassTar, columns: tuple[list[str], array[int], array[int], array[int]]) -> None:
        # classes join the listing in labels-file order as soon as they can, so only the few
        # listed out of turn wait here, not the names of all 1.28 M members at once
        found[task.inner_name] = columns
        while added[0] < len(order) and inner[order[added[0]]][0] in found:
            synset = order[added[0]]
            names, offsets, sizes, crcs = found.pop(inner[synset][0])
            add_class(result, synset, catalog.label_of[synset], list(zip(names, zip(offsets, sizes, crcs))),
                      on_error, "class archive", place=lies_in(f"{archive}:{inner[synset][0]}"))
            added[0] += 1

    pool.run(inner_members, tasks, listed)
    require_images(result, archive, catalog)
    return result


def scan_validation_tar(
    archive: PathLike,
    catalog: Catalog,
    validation_labels_loader: Callable[[], list[str]],
    validation_labels_file: PathLike,
    on_error: str,
) -> SplitInput:
    """ILSVRC2012_img_val.tar: a flat tar of the 50,000 validation JPEGs."""
    members = [(file_name(n), (o, s, crc)) for n, o, s, is_file, crc in outer_members(archive) if is_file]
    if not any(VALIDATION_NAME.match(n) for n, _ in members):
        if any(n.endswith(".tar") for n, _ in members):
            raise InputError(archive, "holds <synset>.tar class archives, not validation images: "
                                      "is it the train archive? (swap --train-tar and --validation-tar)")
        raise InputError(archive, "holds no ILSVRC2012_val_*.JPEG images: not the ILSVRC2012 validation archive")
    result = SplitInput("validation", str(archive), "flat-tar", reader=ArchiveReader, stamp=storage.stamp(archive))
    return flat_validation(result, members, catalog, validation_labels_loader(), validation_labels_file, on_error)


def write_sample(ilsvrc_sample: Path, out: Path) -> None:
    """The ILSVRC sample is in this shape already: its tree and its three archives, as they are."""
    write_door.copy_tree(ilsvrc_sample, out)


register(CopyKind(NAME, identify, assemble, rank=10, short="ilsvrc", write_sample=write_sample))
