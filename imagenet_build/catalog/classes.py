"""Synsets, their texts and the validation labels: the three ImageNet list files.

The shipped copies in `data/` are the defaults. Labels are 1-based positions in
the labels file (slim's convention; 0 is "background" and never used), so a
labels file holding a subset of the 1000 synsets gives a smaller, consistent build.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

from imagenet_build.infra import read_door
from imagenet_build.infra.errors import InputError, PathLike, UsageError, input_errors

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
DEFAULT_LABELS_FILE = DATA_DIR / "imagenet_lsvrc_2015_synsets.txt"
DEFAULT_METADATA_FILE = DATA_DIR / "imagenet_metadata.txt"
DEFAULT_VALIDATION_LABELS_FILE = DATA_DIR / "imagenet_2012_validation_synset_labels.txt"
# SimCLR's semi-supervised subsets of the train split (original file names, one a line)
SUBSETS = {
    "imagenet-1pct": DATA_DIR / "subsets" / "imagenet_1percent.txt",
    "imagenet-10pct": DATA_DIR / "subsets" / "imagenet_10percent.txt",
}
IMAGENET_TOTALS = {"train": 1281167, "validation": 50000}  # ILSVRC2012's images per split
IMAGENET_CLASSES = 1000
SUBSET_TRAIN_IMAGES = {"imagenet-1pct": 12811, "imagenet-10pct": 128116}


def _read_lines(path: PathLike) -> list[str]:
    """Lines of a UTF-8 text file without their line ends; trailing blank lines dropped."""
    path = Path(path)
    with input_errors(path, expected="a text file", missing="file not found"):
        text = read_door.read_text(path, encoding="utf-8-sig")  # a BOM some editors write is not part of line 1
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def read_synset_list(path: PathLike, what: str) -> list[str]:
    """One synset per line, no blanks, no spaces inside; returns a list."""
    synsets = []
    for number, line in enumerate(_read_lines(path), start=1):
        synset = line.strip()
        if not synset or len(synset.split()) != 1:
            raise InputError(path, f"line {number}: expected one {what} per line, got {line!r}")
        synsets.append(synset)
    if not synsets:
        raise InputError(path, f"is empty; expected one {what} per line")
    return synsets


def read_labels_file(path: PathLike) -> list[str]:
    """The synsets in label order (label = position + 1)."""
    synsets = read_synset_list(path, "synset")
    seen: dict[str, int] = {}
    for number, synset in enumerate(synsets, start=1):
        if synset in seen:
            raise InputError(path, f"line {number}: synset {synset} repeats line {seen[synset]}")
        seen[synset] = number
    return synsets


def read_metadata_file(path: PathLike) -> dict[str, str]:
    """`<synset>\\t<text>` lines -> {synset: text} (slim's synset_to_human)."""
    texts = {}
    for number, line in enumerate(_read_lines(path), start=1):
        parts = line.rstrip("\r\n").split("\t")
        if len(parts) != 2 or not parts[0].strip():
            raise InputError(path, f"line {number}: expected '<synset><TAB><text>', got {line!r}")
        texts[parts[0].strip()] = parts[1].strip()
    if not texts:
        raise InputError(path, "is empty; expected '<synset><TAB><text>' lines")
    return texts


@dataclass(frozen=True)
class Catalog:
    """What a label means: synset and text for labels 1..K."""

    synsets: tuple[str, ...]
    texts: dict[str, str]  # synset -> text
    label_of: dict[str, int] = field(repr=False)
    labels_file: str
    metadata_file: str

    @property
    def num_classes(self) -> int:
        return len(self.synsets)

    @property
    def is_imagenet(self) -> bool:
        """ILSVRC2012's 1000 classes in their order (the shipped labels file, or a copy of it): where slim's
        lists of ImageNet's files to re-encode mean something."""
        return self.synsets == _shipped_synsets()

    def synset(self, label: int) -> str:
        return self.synsets[label - 1]

    def text(self, label: int) -> str:
        return self.texts[self.synsets[label - 1]]


@functools.lru_cache(maxsize=1)
def _shipped_synsets() -> tuple[str, ...]:
    return tuple(read_labels_file(DEFAULT_LABELS_FILE))


def imagenet_synsets() -> tuple[str, ...]:
    """ILSVRC2012's 1000 synsets sorted: what ImageNet's 0-based class indices (TFDS's, ReaL's) count. The shipped
    labels file lists them in this order, so there index i is label i + 1."""
    return tuple(sorted(_shipped_synsets()))


def load_catalog(labels_file: PathLike | None = None, metadata_file: PathLike | None = None) -> Catalog:
    labels_file = Path(labels_file or DEFAULT_LABELS_FILE)
    metadata_file = Path(metadata_file or DEFAULT_METADATA_FILE)
    synsets = read_labels_file(labels_file)
    all_texts = read_metadata_file(metadata_file)
    unknown = [s for s in synsets if s not in all_texts]
    if unknown:
        shown = ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        raise InputError(
            labels_file,
            f"{len(unknown)} synset(s) have no text in {metadata_file}: {shown}; "
            "fix the labels file or pass the matching --metadata-file",
        )
    return Catalog(
        synsets=tuple(synsets),
        texts={s: all_texts[s] for s in synsets},
        label_of={s: i for i, s in enumerate(synsets, start=1)},
        labels_file=str(labels_file),
        metadata_file=str(metadata_file),
    )


def catalog_from_folders(root: PathLike, metadata_file: PathLike | None = None) -> Catalog:
    """Classes of any folder-per-class dataset: label = position in sorted folder order (1-based).

    The text of a class is the folder name, unless the metadata file names it.
    """
    root = Path(root)
    with input_errors(root, expected="a folder of class folders", missing="folder not found"):
        names = sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))
    if not names:
        raise InputError(root, "holds no class folders")
    known = read_metadata_file(metadata_file) if metadata_file else {}
    return Catalog(
        synsets=tuple(names),
        texts={name: known.get(name, name) for name in names},
        label_of={name: i for i, name in enumerate(names, start=1)},
        labels_file=f"{root} (class folders)",
        metadata_file=str(metadata_file) if metadata_file else "",
    )


def read_subset(name_or_path: PathLike) -> tuple[str, frozenset[str]]:
    """(what to call it, the image file names it lists) for --subset: a shipped list's name, or a file."""
    path = SUBSETS.get(str(name_or_path), name_or_path)
    if not os.path.exists(path) and os.sep not in str(path) and "." not in str(path):  # a list's name, misspelt
        raise UsageError(f"--subset {name_or_path}: no such file, and not a shipped list "
                         f"({', '.join(sorted(SUBSETS))})")
    names = []
    for number, line in enumerate(_read_lines(path), start=1):
        name = line.strip()
        if not name:
            continue
        if "/" in name or len(name.split()) != 1:
            raise InputError(path, f"line {number}: expected one image file name per line, got {line!r}")
        names.append(name)
    if not names:
        raise InputError(path, "lists no image names")
    label = str(name_or_path) if str(name_or_path) in SUBSETS else str(path)
    return label, frozenset(names)


def read_validation_labels(path: PathLike | None = None) -> list[str]:
    """Synset of validation image i (1-based) at position i - 1."""
    return read_synset_list(Path(path or DEFAULT_VALIDATION_LABELS_FILE), "synset")
