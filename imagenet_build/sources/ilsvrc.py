"""ImageNet as image-net.org ships it, for --from: the three ILSVRC2012 archives, or the folders extracted from them.

Pieces: `ILSVRC2012_img_train.tar`, `ILSVRC2012_img_val.tar`,
`ILSVRC2012_bbox_train_v2.tar.gz` (by name), a folder holding them, a train folder
of `<synset>/` class folders, a flat validation folder, or a root holding `train/`
and `val/` (or `validation/`) folders. The scans are those of --train-tar,
--train-dir and so on, so the shards are the same bytes either way.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from imagenet_build.infra import storage
from imagenet_build.infra.errors import PathLike, UsageError
from imagenet_build.sources.base import VALIDATION_NAME
from imagenet_build.sources.copies import Copy, Layout, Piece, listing, register
from imagenet_build.sources.folders import scan_class_folders, scan_validation
from imagenet_build.sources.tars import scan_train_tar, scan_validation_tar

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog

NAME = "ILSVRC2012 (image-net.org)"
ARCHIVES = {
    "ILSVRC2012_img_train.tar": "train-tar",
    "ILSVRC2012_img_val.tar": "validation-tar",
    "ILSVRC2012_bbox_train_v2.tar.gz": "bbox-tar",
}
SYNSET = re.compile(r"^n\d{8}$")
UNREAD = "unread"  # the role prefix of an extracted folder beside the archives, which are read instead


def _folder_role(path: str, names: dict) -> str | None:
    """"train-dir" for a folder of synset folders, "validation-dir" for flat validation images."""
    if any(SYNSET.match(name) and is_dir for name, is_dir in names.items()):
        return "train-dir"
    if any(VALIDATION_NAME.match(name) for name in names):
        return "validation-dir"
    return None


def identify(path: str) -> list:
    """A folder holding both the archives and folders extracted from them is read from the archives (as the
    real download unpacks beside them): its folders become "unread" pieces, which the build names in a note."""
    base = storage.basename(path)
    if base in ARCHIVES:
        return [Piece(NAME, ARCHIVES[base], path)]
    names = listing(path)
    if not names:
        return []
    archives = [Piece(NAME, ARCHIVES[n], storage.join(path, n)) for n in sorted(names) if n in ARCHIVES]
    pieces = []
    for sub, role in (("train", "train-dir"), ("val", "validation-dir"), ("validation", "validation-dir")):
        if names.get(sub):
            sub_path = storage.join(path, sub)
            if _folder_role(sub_path, listing(sub_path)) in (role, "train-dir"):
                pieces.append(Piece(NAME, role, sub_path))
    if archives:
        return archives + [Piece(NAME, f"{UNREAD} {piece.role}", piece.path) for piece in pieces]
    if pieces:
        return pieces
    found = _folder_role(path, names)
    return [Piece(NAME, found, path)] if found else []


def assemble(pieces: list) -> Copy:
    roles = {piece.role: piece.path for piece in pieces}
    copy = Copy(NAME, "")
    train_tar, train_dir = roles.get("train-tar"), roles.get("train-dir")
    val_tar, val_dir = roles.get("validation-tar"), roles.get("validation-dir")
    for split, tar, folder in (("train", train_tar, train_dir), ("validation", val_tar, val_dir)):
        if tar and folder:  # which one to convert, only the user knows
            raise UsageError(f"--from was given the {split} split twice: {tar} and {folder}; give one of them")
    if train_tar:
        copy.scan_train = lambda catalog, on_error, pool: scan_train_tar(train_tar, catalog, on_error, pool)
    elif train_dir:
        copy.scan_train = lambda catalog, on_error, pool: scan_class_folders("train", train_dir, catalog, on_error)
    if val_tar:
        copy.scan_validation = lambda catalog, on_error, pool, labels, labels_file: scan_validation_tar(
            val_tar, catalog, labels, labels_file, on_error)
    elif val_dir:
        copy.scan_validation = lambda catalog, on_error, pool, labels, labels_file: scan_validation(
            val_dir, catalog, labels, labels_file, on_error)
    if "bbox-tar" in roles:
        from imagenet_build.catalog.boxes import boxes_to_csv_lines, parse_box_lines

        def boxes(catalog: Catalog, bbox_tar: str = roles["bbox-tar"]) -> dict[str, bytes]:
            lines, _, _ = boxes_to_csv_lines(bbox_tar, catalog.synsets)
            return parse_box_lines(lines, bbox_tar)

        copy.boxes = boxes
    copy.description = f"{NAME} {'tarballs' if train_tar or val_tar else 'folders'}"
    unread = [piece.path for piece in pieces if piece.role.startswith(UNREAD)]
    if unread:
        copy.notes.append(f"{', '.join(unread)} not read: the ILSVRC2012 archives beside them are; "
                          "give --from the folders themselves to convert them instead")
    return copy


def write_sample(ilsvrc_sample: PathLike, out: PathLike) -> None:
    """The ILSVRC sample is this layout already: its tree and its three archives, as they are."""
    import shutil

    shutil.copytree(ilsvrc_sample, out, dirs_exist_ok=True)


register(Layout(NAME, identify, assemble, short="ilsvrc", write_sample=write_sample))
