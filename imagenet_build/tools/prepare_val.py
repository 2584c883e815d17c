"""prepare-val: put flat ILSVRC2012_val_*.JPEG files into synset folders, the arrangement slim reads.

Only for users who want that arrangement: convert reads the flat folder directly.
Unlike slim's helper it is safe to run twice, works on a partial set, never
overwrites a file, and by default hard-links so the flat originals stay.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from imagenet_build.catalog.classes import (
    DEFAULT_VALIDATION_LABELS_FILE,
    read_validation_labels,
)
from imagenet_build.format.output_guard import check_output_folder
from imagenet_build.infra import read_door, write_door
from imagenet_build.infra.errors import InputError, PathLike, UsageError
from imagenet_build.infra.lock import FolderLock
from imagenet_build.sources import VALIDATION_NAME
from imagenet_build.sources.ilsvrc import SYNSET

METHODS = ("link", "copy", "move")


def prepare_validation(
    val_dir: PathLike, labels_file: PathLike | None = None, method: str = "link", dry_run: bool = False
) -> dict[str, Any]:
    """Place each flat validation image into `<val_dir>/<synset>/`; returns what was (or would be) done."""
    if method not in METHODS:
        raise UsageError(f"method must be one of {', '.join(METHODS)}")
    val_dir = Path(val_dir)
    check_output_folder(val_dir, "prepare-val")
    if not val_dir.is_dir():
        raise InputError(val_dir, "folder not found")
    labels_file = labels_file or DEFAULT_VALIDATION_LABELS_FILE
    labels = read_validation_labels(labels_file)
    _refuse_other_than_synsets(val_dir, labels, labels_file)
    if dry_run:
        _refuse_other_labels(val_dir, labels, labels_file)
        return _place(val_dir, labels, method, dry_run)
    with FolderLock(val_dir):
        _refuse_other_labels(val_dir, labels, labels_file)
        return _place(val_dir, labels, method, dry_run)


def _refuse_other_than_synsets(val_dir: Path, labels: list[str], labels_file: PathLike) -> None:
    """Each label names the folder its images go to: a synset (n01440764), nothing else (`../../etc` would
    climb out of VAL_DIR, `BOGUS` make a folder no reader takes), and its folder VAL_DIR's own (not a link
    leading elsewhere, not a file). Checked before anything is placed."""
    for number, synset in enumerate(labels, start=1):
        if not SYNSET.match(synset):
            raise InputError(labels_file, f"line {number}: {synset!r} is not a synset (n followed by 8 digits): "
                                          "prepare-val makes a folder of each label")
    for synset in sorted(set(labels)):
        folder = val_dir / synset
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise InputError(folder, f"is {'a link' if folder.is_symlink() else 'a file'}, not a folder of "
                                     f"{val_dir}: prepare-val places images only into {val_dir}'s own synset folders")


def _refuse_other_labels(val_dir: Path, labels: list[str], labels_file: PathLike) -> None:
    """Images already in a synset folder that this labels file does not give them: placed by a run with
    another labels file. Going on would leave such an image in two folders (under two labels), so refuse."""
    misplaced = []
    for folder in sorted(entry for entry in os.listdir(val_dir) if (val_dir / entry).is_dir()):
        for name in sorted(os.listdir(val_dir / folder)):
            match = VALIDATION_NAME.match(name)
            if match and int(match.group(1)) <= len(labels) and labels[int(match.group(1)) - 1] != folder:
                misplaced.append((folder, name, labels[int(match.group(1)) - 1]))
    if misplaced:
        folder, name, synset = misplaced[0]
        raise InputError(val_dir / folder / name,
                         f"in folder {folder}, but {labels_file} gives {synset} ({len(misplaced)} such image(s)): "
                         "placed by a run with another labels file; remove the synset folders it made (with --link "
                         "or --copy the flat files are still there) or give that run's labels file")


def _place(val_dir: Path, labels: list[str], method: str, dry_run: bool) -> dict[str, Any]:
    done: dict[str, Any] = {"placed": 0, "already_in_place": 0, "conflicts": [], "no_label": [], "method": method,
            "dry_run": dry_run}
    names = sorted(n for n in os.listdir(val_dir) if VALIDATION_NAME.match(n) and (val_dir / n).is_file())
    if not names:
        raise InputError(val_dir, "holds no flat ILSVRC2012_val_*.JPEG files")
    for name in names:
        match = VALIDATION_NAME.match(name)
        assert match is not None  # names were filtered by this pattern
        number = int(match.group(1))
        if number > len(labels):
            done["no_label"].append(name)
            continue
        source, target = val_dir / name, val_dir / labels[number - 1] / name
        if target.exists():
            if _same(source, target):
                done["already_in_place"] += 1
                if method == "move" and not dry_run:
                    write_door.remove(source, within=val_dir)  # the copy in its folder is the same file or bytes
            else:
                done["conflicts"].append(str(target))  # never overwritten
            continue
        done["placed"] += 1
        if dry_run:
            continue
        write_door.make_folder(target.parent, within=val_dir)
        if method == "link":
            write_door.hard_link(source, target, within=val_dir)
        elif method == "copy":
            write_door.copy_file(source, target, within=val_dir)
        else:
            write_door.move(source, target, within=val_dir)
    return done


def _same(source: Path, target: Path) -> bool:
    """The image in its folder is the flat one: the same file, or the same bytes (a target that cannot be read, a
    FIFO say, is not: a conflict, left alone)."""
    try:
        return os.path.samefile(source, target) or read_door.read_bytes(target) == read_door.read_bytes(source)
    except OSError:
        return False
