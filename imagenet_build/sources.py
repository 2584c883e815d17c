"""Enumerate a split's images, in slim's order, from the folders they sit in.

Order is slim's: class by class in labels-file order, then by file name (slim
used directory order, which differs between filesystems; sorting makes a build
reproducible anywhere). Slim globs `<synset>/*.JPEG`; other files are left out
as slim leaves them out, but counted so the user hears of them.
"""

import os
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from imagenet_build.errors import InputError

IMAGE_SUFFIX = ".JPEG"
VALIDATION_NAME = re.compile(r"^ILSVRC2012_val_(\d{8})\.JPEG$")
SHOWN = 20  # how many ignored / left-out names a report lists


@dataclass
class SplitInput:
    """A split's images in slim's order, as two parallel arrays (compact: ImageNet has 1.28 M)."""

    split: str
    root: str
    layout: str  # "folders" or "flat"
    relpaths: list = field(default_factory=list)
    labels: array = field(default_factory=lambda: array("I"))
    ignored: list = field(default_factory=list)  # files present but not images slim would take
    left_out: list = field(default_factory=list)  # (relpath, reason) left out under --on-error skip
    empty_classes: list = field(default_factory=list)  # synsets with no images
    notes: list = field(default_factory=list)

    def __len__(self):
        return len(self.relpaths)

    def add(self, relpath, label):
        self.relpaths.append(relpath)
        self.labels.append(label)


def _scan(root):
    """(folders, files) directly under root, each sorted by name."""
    folders, files = [], []
    try:
        with os.scandir(root) as it:
            for entry in it:
                (folders if entry.is_dir() else files).append(entry.name)
    except FileNotFoundError:
        raise InputError(root, "folder not found") from None
    except NotADirectoryError:
        raise InputError(root, "is a file, expected a folder") from None
    except PermissionError:
        raise InputError(root, "permission denied") from None
    return sorted(folders), sorted(files)


def _is_image_name(name):
    return name.endswith(IMAGE_SUFFIX) and not name.startswith(".")


def scan_class_folders(split, root, catalog, on_error):
    """`<root>/<synset>/*.JPEG` for the synsets of the catalog."""
    root = Path(root)
    folders, files = _scan(root)
    result = SplitInput(split, str(root), "folders", ignored=list(files))
    unknown = [name for name in folders if name not in catalog.label_of]
    if unknown:
        if on_error == "fail":
            raise InputError(
                root / unknown[0],
                f"class folder not in the labels file {catalog.labels_file} "
                f"({len(unknown)} such folder(s)); pass the right --labels-file, "
                "or --on-error skip to leave them out",
            )
        result.left_out.extend((name + "/", "class folder not in the labels file") for name in unknown)
    present = set(folders)
    for label, synset in enumerate(catalog.synsets, start=1):
        if synset not in present:
            result.empty_classes.append(synset)
            continue
        subfolders, names = _scan(root / synset)
        result.ignored.extend(f"{synset}/{n}" for n in subfolders)
        for name in names:
            if _is_image_name(name):
                result.add(f"{synset}/{name}", label)
            else:
                result.ignored.append(f"{synset}/{name}")
        if not any(_is_image_name(n) for n in names):
            result.empty_classes.append(synset)
    if not result.relpaths:
        raise InputError(
            root,
            f"holds no <synset>/*{IMAGE_SUFFIX} images for the {catalog.num_classes} synsets "
            f"of {catalog.labels_file}",
        )
    return result


def scan_flat_validation(root, catalog, validation_labels, validation_labels_file, on_error):
    """`ILSVRC2012_val_%08d.JPEG` labelled by line number in the validation labels file.

    Ordered as slim would see them after moving them into synset folders, so a
    flat folder and a prepared one give the same shards.
    """
    root = Path(root)
    folders, files = _scan(root)
    result = SplitInput("validation", str(root), "flat")
    if folders:
        result.notes.append(
            f"{len(folders)} sub-folder(s) of {root} ignored: the flat ILSVRC2012_val_*.JPEG files are used"
        )
    by_label = {}
    outside = 0
    for name in files:
        match = VALIDATION_NAME.match(name)
        if not match:
            result.ignored.append(name)
            continue
        number = int(match.group(1))
        if not 1 <= number <= len(validation_labels):
            problem = (
                f"no label: {validation_labels_file} has {len(validation_labels)} lines, "
                f"this is image {number}"
            )
            if on_error == "fail":
                raise InputError(root / name, problem + "; pass the right --validation-labels-file")
            result.left_out.append((name, problem))
            continue
        label = catalog.label_of.get(validation_labels[number - 1])
        if label is None:
            outside += 1
            continue
        by_label.setdefault(label, []).append(name)
    if outside:
        result.notes.append(
            f"{outside} validation image(s) left out: their synsets are not in {catalog.labels_file}"
        )
    for label, synset in enumerate(catalog.synsets, start=1):
        names = by_label.get(label)
        if not names:
            result.empty_classes.append(synset)
            continue
        for name in names:  # sorted, as files were
            result.add(name, label)
    if not result.relpaths:
        raise InputError(
            root,
            "holds no ILSVRC2012_val_*.JPEG images of the synsets in the labels file",
        )
    return result


def scan_validation(root, catalog, validation_labels_loader, validation_labels_file, on_error):
    """Flat (labelled from the validation labels file) or synset folders: whichever root holds."""
    root = Path(root)
    folders, files = _scan(root)
    if any(VALIDATION_NAME.match(n) for n in files):
        return scan_flat_validation(root, catalog, validation_labels_loader(), validation_labels_file, on_error)
    if folders:
        return scan_class_folders("validation", root, catalog, on_error)
    raise InputError(root, "holds neither ILSVRC2012_val_*.JPEG files nor synset folders")
