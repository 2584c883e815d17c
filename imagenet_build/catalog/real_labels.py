"""ReaL's labels of the ILSVRC2012 validation images (Beyer et al., "Are we done with ImageNet?", 2020): `real.json`.

The file (google-research/reassessed-imagenet) is a JSON list of 50,000 lists, entry i holding the
labels of `ILSVRC2012_val_<i + 1, 8 digits>.JPEG` as 0-based indices into the 1000 ILSVRC2012
synsets in sorted order; an empty list means the raters gave the image no label. The shipped
labels file is those synsets sorted, so with it index i is label i + 1; with another labels file
an index goes to its synset's label, and an index whose synset the labels file lacks is left out
(counted: the build's classes cannot express it).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple, Optional

from imagenet_build.catalog.classes import IMAGENET_CLASSES, IMAGENET_TOTALS, Catalog, imagenet_synsets
from imagenet_build.infra.errors import InputError, PathLike, input_errors
from imagenet_build.infra.jsonfile import JsonError, read_json

REAL_IMAGES = IMAGENET_TOTALS["validation"]  # one entry per ILSVRC2012 validation image
REAL_JSON_LIMIT = 64 << 20  # bytes: real.json is about 0.4 MB


def entry_name(number: int) -> str:
    """The validation image entry `number` (1-based) of real.json labels."""
    return f"ILSVRC2012_val_{number:08d}.JPEG"


def read_real_json(path: PathLike) -> list[tuple[int, ...]]:
    """real.json's entries, checked: 50,000 lists of distinct class indices in 0..999, else one InputError."""
    with input_errors(path, missing="file not found"):
        try:
            entries = read_json(path, limit=REAL_JSON_LIMIT)
        except JsonError as e:
            raise InputError(path, f"{e.problem}: expected real.json, a list of {REAL_IMAGES:,} lists") from None
    if not isinstance(entries, list):
        raise InputError(path, f"holds a JSON {type(entries).__name__}, expected a list of {REAL_IMAGES:,} lists "
                               "(real.json)")
    if len(entries) != REAL_IMAGES:
        raise InputError(path, f"holds {len(entries):,} entries, expected {REAL_IMAGES:,}: one per ILSVRC2012 "
                               "validation image (real.json)")
    return [_entry(path, number, value) for number, value in enumerate(entries, start=1)]


def _entry(path: PathLike, number: int, value: Any) -> tuple[int, ...]:
    where = f"entry {number} ({entry_name(number)})"
    if not isinstance(value, list):
        raise InputError(path, f"{where} is {json.dumps(value)[:40]}, expected a list of class indices")
    for index in value:
        if isinstance(index, bool) or not isinstance(index, int):
            raise InputError(path, f"{where}: {json.dumps(index)[:40]} is not a class index (a whole number)")
        if not 0 <= index < IMAGENET_CLASSES:
            raise InputError(path, f"{where}: class index {index} out of range 0..{IMAGENET_CLASSES - 1} "
                                   "(the sorted ILSVRC2012 synsets)")
    if len(set(value)) != len(value):
        twice = next(index for index in value if value.count(index) > 1)
        raise InputError(path, f"{where}: class index {twice} listed twice")
    return tuple(value)


class RealLabelTable(NamedTuple):
    """real.json, checked, and the build's label of each class index's synset."""

    entries: list[tuple[int, ...]]  # entry number - 1 -> the image's class indices (0-based, sorted synsets)
    label_of: list[Optional[int]]  # class index -> the build's label (1-based), None where it lacks the synset

    def labels(self, number: int) -> tuple[tuple[int, ...], int]:
        """(the labels of validation image `number` in the build's label space, how many it lacks the class of)."""
        indices = self.entries[number - 1]
        labels = tuple(label for label in (self.label_of[i] for i in indices) if label is not None)
        return labels, len(indices) - len(labels)


def read_real_labels(path: PathLike, catalog: Catalog) -> RealLabelTable:
    """real.json read and checked, with the build's label of each synset it labels with."""
    entries = read_real_json(path)
    label_of = [catalog.label_of.get(synset) for synset in imagenet_synsets()]
    if not any(label_of):
        raise InputError(path, f"none of the 1000 ILSVRC2012 synsets it labels with is a class of this build "
                               f"({catalog.labels_file}): ReaL labels need ImageNet's classes")
    return RealLabelTable(entries, label_of)
