"""Enumerate a split's images, in slim's order, from folders or straight from the ILSVRC2012 tarballs.

Order is slim's: class by class in labels-file order, then by file name (slim
used directory order, which differs between filesystems; sorting makes a build
reproducible anywhere). Slim globs `<synset>/*.JPEG`; other files are left out
as slim leaves them out, but counted so the user hears of them. A tarball gives
exactly the list its extracted folder gives, so the shards are the same bytes.
"""

import os
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from imagenet_build import archives, storage
from imagenet_build.errors import InputError

IMAGE_SUFFIX = ".JPEG"
VALIDATION_NAME = re.compile(r"^ILSVRC2012_val_(\d{8})\.JPEG$")
SHOWN = 20  # how many ignored / left-out names a report lists


@dataclass
class SplitInput:
    """A split's images in slim's order, as parallel arrays (compact: ImageNet has 1.28 M).

    From a folder, relpath is the path under `root`; from a tarball (`archive`
    true, `root` the archive), each image is also a byte range of it.
    """

    split: str
    root: str
    layout: str  # "folders", "flat", "tar" (train tar-of-tars) or "flat-tar"
    archive: bool = False
    relpaths: list = field(default_factory=list)
    labels: array = field(default_factory=lambda: array("I"))
    offsets: array = field(default_factory=lambda: array("Q"))
    sizes: array = field(default_factory=lambda: array("Q"))
    ignored: list = field(default_factory=list)  # files present but not images slim would take
    left_out: list = field(default_factory=list)  # (relpath, reason) left out under --on-error skip
    empty_classes: list = field(default_factory=list)  # synsets with no images
    notes: list = field(default_factory=list)
    stamp: str = ""  # an archive's size and modification time: a rerun redoes its shards when it changes

    def __len__(self):
        return len(self.relpaths)

    def add(self, relpath, label, where=None):
        self.relpaths.append(relpath)
        self.labels.append(label)
        if where is not None:
            self.offsets.append(where[0])
            self.sizes.append(where[1])


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


ANY_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")  # --classes-from-folders: any case


def _is_image_name(name, any_image=False):
    if name.startswith("."):
        return False
    return name.lower().endswith(ANY_IMAGE_SUFFIXES) if any_image else name.endswith(IMAGE_SUFFIX)


def _basename(name):
    return name.rstrip("/").rsplit("/", 1)[-1]


def _match_classes(result, root, present, catalog, on_error, kind):
    """Check the classes found against the labels file: unknown ones and missing ones."""
    unknown = [name for name in present if name not in catalog.label_of]
    if unknown:
        if on_error == "fail":
            raise InputError(
                f"{root}/{unknown[0]}",
                f"{kind} not in the labels file {catalog.labels_file} ({len(unknown)} such); "
                "pass the right --labels-file, or --on-error skip to leave them out",
            )
        result.left_out.extend((name + "/", f"{kind} not in the labels file") for name in unknown)
    missing = [synset for synset in catalog.synsets if synset not in present]
    if missing and len(missing) < len(catalog.synsets) and on_error == "fail":  # none at all: said later
        raise InputError(
            root,
            f"no {kind} for {len(missing)} synset(s) of the labels file ({', '.join(missing[:3])}"
            f"{' ...' if len(missing) > 3 else ''}); pass a --labels-file with only the classes you have, "
            "or --on-error skip to build without them",
        )
    result.empty_classes.extend(missing)


def _add_class(result, synset, label, names, on_error, kind, any_image=False):
    """Add one class's images (names sorted, with an optional byte range); others are ignored.

    A class with no images at all would silently train without that class: an error under
    --on-error fail, left out and listed under skip.
    """
    found = False
    for name, where in sorted(names, key=lambda item: item[0]):
        if _is_image_name(name, any_image):
            result.add(f"{synset}/{name}", label, where)
            found = True
        else:
            result.ignored.append(f"{synset}/{name}")
    if not found:
        wanted = "images (*.jpg, *.jpeg, *.png)" if any_image else f"*{IMAGE_SUFFIX} images"
        problem = f"{kind} holds no {wanted}: that class would have no {result.split} records"
        if on_error == "fail":
            raise InputError(f"{result.root}/{synset}{'.tar' if kind == 'class archive' else ''}",
                             problem + "; add its images, or --on-error skip to build without it")
        result.left_out.append((f"{synset}/", problem))


def _require_images(result, root, catalog):
    if not result.relpaths:
        raise InputError(
            root, f"holds no <synset>/*{IMAGE_SUFFIX} images for the {catalog.num_classes} synsets of "
                  f"{catalog.labels_file}"
        )


def scan_class_folders(split, root, catalog, on_error, any_image=False):
    """`<root>/<synset>/*.JPEG` for the synsets of the catalog (any_image: *.jpg/jpeg/png, any case)."""
    root = Path(root)
    folders, files = _scan(root)
    result = SplitInput(split, str(root), "folders", ignored=list(files))
    _match_classes(result, root, folders, catalog, on_error, "class folder")
    present = set(folders)
    for label, synset in enumerate(catalog.synsets, start=1):
        if synset in present:
            subfolders, names = _scan(root / synset)
            result.ignored.extend(f"{synset}/{n}/" for n in subfolders)
            _add_class(result, synset, label, [(n, None) for n in names], on_error, "class folder", any_image)
    _require_images(result, root, catalog)
    return result


def scan_train_tar(archive, catalog, on_error, pool):
    """ILSVRC2012_img_train.tar: a tar of `<synset>.tar`, each a tar of that class's JPEGs."""
    members = archives.outer_members(archive)
    inner, strangers = {}, []
    for name, offset, size, is_file in members:
        base = _basename(name)
        if is_file and base.endswith(".tar"):
            inner[base[: -len(".tar")]] = (name, offset, size)
        elif is_file:
            strangers.append(base)
    if not inner:
        if any(VALIDATION_NAME.match(n) for n in strangers):
            raise InputError(archive, "holds validation images, not <synset>.tar class archives: "
                                      "is it the validation archive? (swap --train-tar and --validation-tar)")
        raise InputError(archive, "holds no <synset>.tar class archives: not the ILSVRC2012 train archive")
    result = SplitInput("train", str(archive), "tar", archive=True, ignored=strangers, stamp=storage.stamp(archive))
    _match_classes(result, archive, sorted(inner), catalog, on_error, "class archive")
    found = {}
    tasks = [
        (str(archive), inner[s][1], inner[s][2], inner[s][0]) for s in catalog.synsets if s in inner
    ]
    pool.run(archives.inner_members, tasks, lambda task, listed: found.__setitem__(task[3], listed))
    for label, synset in enumerate(catalog.synsets, start=1):
        if synset in inner:
            listed = found[inner[synset][0]]
            _add_class(result, synset, label,
                       [(_basename(n), (o, s)) for n, o, s, is_file in listed if is_file], on_error, "class archive")
    _require_images(result, archive, catalog)
    return result


def _flat_validation(result, names, catalog, validation_labels, validation_labels_file, on_error):
    """Label flat `ILSVRC2012_val_%08d.JPEG` names [(name, byte range or None)] by line number.

    Ordered as slim sees them after moving them into synset folders, so a flat
    folder, a prepared one and the tarball give the same shards.
    """
    by_label = {}
    outside = 0
    for name, where in names:
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
                raise InputError(f"{result.root}/{name}", problem + "; pass the right --validation-labels-file")
            result.left_out.append((name, problem))
            continue
        label = catalog.label_of.get(validation_labels[number - 1])
        if label is None:
            outside += 1
            continue
        by_label.setdefault(label, []).append((name, where))
    if outside:
        result.notes.append(
            f"{outside} validation image(s) left out: their synsets are not in {catalog.labels_file}"
        )
    for label, synset in enumerate(catalog.synsets, start=1):
        items = sorted(by_label.get(label, []), key=lambda item: item[0])
        if not items:
            result.empty_classes.append(synset)
        for name, where in items:
            result.add(name, label, where)
    if not result.relpaths:
        raise InputError(result.root, "holds no ILSVRC2012_val_*.JPEG images of the synsets in the labels file")
    return result


def scan_validation(root, catalog, validation_labels_loader, validation_labels_file, on_error):
    """A validation folder, flat (labelled from the validation labels file) or in synset folders."""
    root = Path(root)
    folders, files = _scan(root)
    if any(VALIDATION_NAME.match(n) for n in files):
        result = SplitInput("validation", str(root), "flat")
        if folders:
            result.notes.append(
                f"{len(folders)} sub-folder(s) of {root} ignored: the flat ILSVRC2012_val_*.JPEG files are used"
            )
        return _flat_validation(result, [(n, None) for n in files], catalog, validation_labels_loader(),
                                validation_labels_file, on_error)
    if folders:
        return scan_class_folders("validation", root, catalog, on_error)
    raise InputError(root, "holds neither ILSVRC2012_val_*.JPEG files nor synset folders")


def scan_validation_tar(archive, catalog, validation_labels_loader, validation_labels_file, on_error):
    """ILSVRC2012_img_val.tar: a flat tar of the 50,000 validation JPEGs."""
    members = [(_basename(n), (o, s)) for n, o, s, is_file in archives.outer_members(archive) if is_file]
    if not any(VALIDATION_NAME.match(n) for n, _ in members):
        if any(n.endswith(".tar") for n, _ in members):
            raise InputError(archive, "holds <synset>.tar class archives, not validation images: "
                                      "is it the train archive? (swap --train-tar and --validation-tar)")
        raise InputError(archive, "holds no ILSVRC2012_val_*.JPEG images: not the ILSVRC2012 validation archive")
    result = SplitInput("validation", str(archive), "flat-tar", archive=True, stamp=storage.stamp(archive))
    return _flat_validation(result, members, catalog, validation_labels_loader(), validation_labels_file, on_error)
