"""`convert --from PATH...`: tell which copy of ImageNet the paths are, and how to read each split of it.

Each layout module registers a Layout: `identify(path)` says what one path is
(a train archive of that copy, its validation archive, its extracted root, ...) as
Pieces, and `assemble(pieces)` turns the pieces of one copy into a Copy: a scan
per split, the boxes the copy carries, and a line saying what was found. Paths
of two different copies, a copy with a piece missing, and a path no layout
recognises are each refused with one line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from imagenet_build.infra import storage
from imagenet_build.infra.errors import InputError, UsageError

# prepare(pool): work for every split at once, before the scans (the .tar.gz copies decompress all archives)
# scan_train(catalog, on_error, pool) -> SplitInput
# scan_validation(catalog, on_error, pool, validation_labels_loader, validation_labels_file) -> SplitInput
# boxes(catalog) -> {image file name: packed boxes}, as boxes.parse_box_lines gives them


@dataclass(frozen=True)
class Piece:
    """What one path is: a `role` (e.g. "train-tar") of a copy of kind `layout`."""

    layout: str
    role: str
    path: str


@dataclass
class Copy:
    """One copy of ImageNet, as found: how to list each split, and the boxes it carries."""

    layout: str
    description: str  # what it is, e.g. "ILSVRC2012 (image-net.org) tarballs"
    prepare: Callable | None = None
    scan_train: Callable | None = None
    scan_validation: Callable | None = None
    boxes: Callable | None = None
    notes: list[str] = field(default_factory=list)
    work_dir: str = ""  # a local folder the scans may write into (the output folder), set by convert
    cleanups: list = field(default_factory=list)  # run by close(), when the build ends
    spooled: dict = field(default_factory=dict)  # split -> what prepare decompressed for its scan (spool.py)
    deferred: dict = field(default_factory=dict)  # split -> its archives, planned from kept listings (spool.py)
    listings: dict = field(default_factory=dict)  # path in the output -> an archive's listing to keep (spool.py)

    def close(self) -> None:
        """Remove what the scans left for the readers (a decompressed .tar.gz), whatever the outcome."""
        while self.cleanups:
            self.cleanups.pop()()


@dataclass(frozen=True)
class Layout:
    """A copy of ImageNet that --from knows."""

    name: str  # as --from reports it, e.g. "ILSVRC2012 tarballs"
    identify: Callable[[str], list]  # path -> [Piece] (empty: not this layout)
    assemble: Callable[[list], Copy]  # the pieces of one copy -> Copy (InputError when partial)
    short: str = ""  # its name for `sample --layout`
    # write_sample(ilsvrc_sample, out): the sample (an ILSVRC-shaped tree with its three archives,
    # see sample.py) rewritten in this layout under `out`, shaped as the real copy is
    write_sample: Callable | None = None
    totals: dict | None = None  # images per split of the full copy where it differs from ILSVRC2012's
    # the copy is the folder its files lie in (Hugging Face's data/, a folder of WebDataset shards): an output
    # inside that folder is refused however the files are given (the folder, or each file)
    folder: bool = False


LAYOUTS: list[Layout] = []  # filled by each layout module, tried in order


def register(layout: Layout) -> Layout:
    LAYOUTS.append(layout)
    return layout


def listing(path: str) -> dict:
    """{name: is a folder} below a local folder or URL prefix ({} for a file)."""
    return storage.listdir(path)


def find_copy(paths: Sequence[Any]) -> Copy:
    """The one copy of ImageNet the paths make up; InputError/UsageError with one line otherwise."""
    if not paths:
        raise UsageError("--from needs at least one path")
    pieces: list[Piece] = []
    for path in map(str, paths):
        if not storage.is_url(path) and not os.path.exists(path):
            raise InputError(path, "not found")
        found = []
        for layout in LAYOUTS:
            found = layout.identify(path)
            if found:
                break
        if not found:
            known = ", ".join(layout.name for layout in LAYOUTS)
            raise InputError(path, f"is none of the copies of ImageNet that --from knows ({known})")
        pieces.extend(found)
    kinds = sorted({piece.layout for piece in pieces})
    if len(kinds) > 1:
        first = {kind: next(p.path for p in pieces if p.layout == kind) for kind in kinds}
        raise UsageError("--from was given two different copies of ImageNet: "
                         + " and ".join(f"{first[k]} ({_layout(k).name})" for k in kinds)
                         + "; give the paths of one copy")
    roles: dict[str, str] = {}
    for piece in pieces:
        if piece.role in roles and roles[piece.role] != piece.path:
            raise UsageError(f"--from was given two paths for one piece of the copy ({piece.role}): "
                             f"{roles[piece.role]} and {piece.path}; give each piece once")
        roles[piece.role] = piece.path
    return _layout(kinds[0]).assemble(pieces)


def copy_folders(paths: Sequence[Any]) -> list[tuple[str, str]]:
    """[(path given, its folder)] for each local file given to --from that is a piece of a copy which is a
    folder (Layout.folder): that folder is an input as much as when it is given itself."""
    found = []
    for path in map(str, paths):
        if storage.is_url(path) or not os.path.isfile(path):
            continue
        if any(layout.folder and layout.identify(path) for layout in LAYOUTS):
            found.append((path, os.path.dirname(os.path.abspath(path))))
    return found


def _layout(name: str) -> Layout:
    return next(layout for layout in LAYOUTS if layout.name == name)


def sample_layouts() -> dict:
    """{short name: Layout} of the layouts `sample --layout` can write."""
    return {layout.short: layout for layout in LAYOUTS if layout.short}
