"""What a copy of ImageNet is (Copy), the one registry of the kinds of copy `convert --from` knows (COPY_KINDS), and
telling which copy some paths are (find_copy).

A kind of copy is one module of this package that registers a CopyKind: `identify(path)` says what one
path is (a train archive of that copy, its validation archive, its extracted root, ...) as
Pieces, `assemble(pieces)` turns the pieces of one copy into a Copy, and `write_sample` writes
the ILSVRC sample in the copy's shape (`sample --layout`). Every module of the package is
imported with it (sources/__init__.py), so registering is all a new copy does. Paths of two
different copies, a copy with a piece missing, and a path no copy kind recognises are each refused
with one line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Protocol

from imagenet_build.infra import storage
from imagenet_build.infra.errors import InputError, PathLike, UsageError

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.infra.workers import Workers
    from imagenet_build.model import SplitInput


@dataclass(frozen=True)
class Piece:
    """What one path is: a `role` (e.g. "train-tar") of a copy of kind `kind`."""

    kind: str
    role: str
    path: str


class Copy(Protocol):
    """One copy of ImageNet, as found: a listing of each split it holds and the boxes it carries. A copy's class
    names Copy as its base, taking the defaults below. A copy read from a spool of decompressed archives also has
    that spool's lifecycle (sources/spool.py's SpooledCopy), which the build asks for by type."""

    kind: str  # the name of the CopyKind that found it (the manifest's inputs.source.layout)
    description: str  # what it is, as convert's "found:" line says it: "Kaggle zip"
    notes: list[str]  # what its listing noticed, for the summary

    @property
    def splits(self) -> tuple[str, ...]:
        """The splits it holds, of format/naming.py's SPLITS and in that order: scan_train and scan_validation
        list them."""
        ...

    @property
    def carries_boxes(self) -> bool:
        """Whether it has box annotations of its own (boxes() reads them), known without reading them."""
        return False

    def scan_train(self, catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
        """The train split's images in slim's order (class by class in labels-file order, then by name)."""
        ...

    def scan_validation(self, catalog: Catalog, on_error: str, pool: Workers,
                        labels_loader: Callable[[], list[str]], labels_file: PathLike) -> SplitInput:
        """The validation split's images in slim's order, labelled from the validation labels file
        (`labels_loader()` reads it, `labels_file` names it)."""
        ...

    def boxes(self, catalog: Catalog) -> dict[str, bytes]:
        """{image file name: packed boxes}, as catalog.boxes.parse_box_lines gives them, of the annotations it
        carries (none: {})."""
        return {}

    def recorded(self, catalog: Catalog) -> dict[str, Any]:
        """What the manifest's inputs.source records of it beside its kind and description (an evaluation set
        of a fixed subset of the classes: their labels)."""
        return {}


@dataclass(frozen=True)
class CopyKind:
    """A kind of copy of ImageNet that --from knows."""

    name: str  # as --from reports it, e.g. "ILSVRC2012 tarballs"
    identify: Callable[[str], list[Piece]]  # path -> the pieces it is (empty: not this kind)
    assemble: Callable[[list[Piece]], Copy]  # the pieces of one copy -> the copy (InputError when partial)
    rank: int  # where --from tries it among the copies and names it (lower first)
    short: str  # its name for `sample --layout`
    # write_sample(ilsvrc_sample, out): the sample (an ILSVRC-shaped tree with its three archives,
    # see tools/sample_dataset.py) rewritten in this kind's shape under `out`, shaped as the real copy is:
    # every copy has one, so that the tests over the registry (tests/sources/) hold it to the ILSVRC build and the
    # damage table
    write_sample: Callable[[Path, Path], None]
    totals: Optional[Dict[str, int]] = None  # images per split of the full copy where they differ from ILSVRC2012's
    classes: Optional[int] = None  # classes of the full copy where not ILSVRC2012's 1000 (ImageNet-A's 200)
    # an evaluation set: one validation split of images of its own (not ILSVRC2012's), labelled by the labels file
    evaluation: bool = False
    # the copy is the folder its files lie in (Hugging Face's data/, a folder of WebDataset shards): an output
    # inside that folder is refused however the files are given (the folder, or each file)
    folder: bool = False


COPY_KINDS: list[CopyKind] = []  # filled by each copy's module as it is imported, in rank order


def register(kind: CopyKind) -> CopyKind:
    """Add a copy to the ones --from and `sample --layout` know."""
    if any(known.name == kind.name or known.short == kind.short for known in COPY_KINDS):
        raise ValueError(f"a copy named {kind.name!r} ({kind.short!r}) is registered already")
    COPY_KINDS.append(kind)
    COPY_KINDS.sort(key=lambda known: known.rank)
    return kind


def listing(path: str) -> dict[str, bool]:
    """{name: is a folder} below a local folder or URL prefix ({} for a file)."""
    return storage.listdir(path)


def find_copy(paths: Sequence[Any]) -> Copy:
    """The one copy of ImageNet the paths make up; InputError/UsageError with one line otherwise."""
    if not paths:
        raise UsageError("--from needs at least one path")
    pieces: list[Piece] = []
    claimed: dict[str, CopyKind] = {}  # the kinds of copy that claimed a path, by name
    for path in map(str, paths):
        if not storage.is_url(path) and not os.path.exists(path):
            raise InputError(path, "not found")
        found: list[Piece] = []
        for kind in COPY_KINDS:
            found = kind.identify(path)
            if found:
                claimed[kind.name] = kind
                break
        if not found:
            if not storage.is_url(path) and os.path.isdir(path) and not os.listdir(path):
                raise InputError(path, "an empty folder: --from takes a copy of ImageNet (its archives, or the "
                                       "folders extracted from them); is the download or extraction unfinished?")
            known = ", ".join(kind.name for kind in COPY_KINDS)
            raise InputError(path, f"is none of the copies of ImageNet that --from knows ({known})")
        pieces.extend(found)
    kinds = sorted({piece.kind for piece in pieces})
    if len(kinds) > 1:
        first = {kind: next(p.path for p in pieces if p.kind == kind) for kind in kinds}
        raise UsageError("--from was given two different copies of ImageNet: "
                         + " and ".join(f"{first[k]} ({k})" for k in kinds)
                         + "; give the paths of one copy")
    roles: dict[str, str] = {}
    for piece in pieces:
        if piece.role in roles and roles[piece.role] != piece.path:
            raise UsageError(f"--from was given two paths for one piece of the copy ({piece.role}): "
                             f"{roles[piece.role]} and {piece.path}; give each piece once")
        roles[piece.role] = piece.path
    return claimed[kinds[0]].assemble(pieces)


def copy_folders(paths: Sequence[Any]) -> list[tuple[str, str]]:
    """[(path given, its folder)] for each local file given to --from that is a piece of a copy which is a
    folder (CopyKind.folder): that folder is an input as much as when it is given itself."""
    found = []
    for path in map(str, paths):
        if storage.is_url(path) or not os.path.isfile(path):
            continue
        if any(kind.folder and kind.identify(path) for kind in COPY_KINDS):
            found.append((path, os.path.dirname(os.path.abspath(path))))
    return found


def copy_kind_named(name: str | None) -> CopyKind | None:
    """The registered kind of copy of that name (a Copy's `kind`, a manifest's inputs.source.layout), or None."""
    return next((kind for kind in COPY_KINDS if kind.name == name), None)


def sample_kinds() -> dict[str, CopyKind]:
    """{short name: CopyKind} of every kind of copy, as `sample --layout` names them, in rank order."""
    return {kind.short: kind for kind in COPY_KINDS}
