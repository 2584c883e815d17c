"""The values the stages exchange: a split's listing (SplitInput), one image of a shard (ImageEntry), one
shard to write (ShardSpec), and the rules on an image's name.

Sources make SplitInputs; the plan turns them into ShardSpecs; the workers execute ShardSpecs.
Here, below all three, so none of them imports another for its values.
"""

from __future__ import annotations

import hashlib
import json
import os
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional, Protocol, Tuple

from imagenet_build.format.naming import shard_name
from imagenet_build.infra.errors import InputError

FORMAT_VERSION = 1  # bump when the bytes written for the same plan change
Where = Optional[Tuple[int, ...]]  # an image's (offset, size[, member info]) in an archive; None in a folder


NOT_UTF8 = "file name is not UTF-8 (slim's image/filename is UTF-8 text): rename it"


def utf8_name(name: str | bytes, folder: str, sep: str = "/") -> str:
    """The one name rule of every copy: a file or member name it lists is UTF-8 text, else InputError.

    `name` as listed: str (a file system's or tar's name, bytes that are not UTF-8 kept as
    surrogates) or raw bytes (a zip's). Checked where names are listed, before any is
    matched against a pattern: a name no pattern matches would otherwise be dropped silently.
    The error names it at `folder` + `sep` + the name, its bad bytes escaped.
    """
    try:
        text = name.decode() if isinstance(name, bytes) else name
        text.encode()
    except UnicodeError:
        shown = (name.decode("utf-8", "backslashreplace") if isinstance(name, bytes)
                 else name.encode("utf-8", "backslashreplace").decode())
        raise InputError(f"{folder}{sep}{shown}" if folder else shown, NOT_UTF8) from None
    return text


class StringColumn:
    """A growing list of short strings held as one UTF-8 buffer and an array of end offsets.

    ~38 bytes a file name instead of ~88 for a list of str (a str object is 49 bytes plus its
    characters, rounded to 8, plus the list's pointer): 1.33 M ImageNet names, ~50 MB instead
    of ~117 MB. Indexing, len() and iteration give str, as the list did.
    """

    def __init__(self, items: Iterable[str] = ()) -> None:
        self._data = bytearray()
        self._ends = array("Q")
        for item in items:
            self.append(item)

    def append(self, item: str) -> None:
        try:
            self._data += item.encode()
        except UnicodeEncodeError:  # listed without the name check: the same error
            utf8_name(item, "")
            raise
        self._ends.append(len(self._data))

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: int) -> str:
        if i < 0:
            i += len(self._ends)
        end = self._ends[i]  # IndexError as a list's
        return self._data[self._ends[i - 1] if i else 0 : end].decode()

    def __iter__(self) -> Iterator[str]:
        start = 0
        for end in self._ends:
            yield self._data[start:end].decode()
            start = end

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Iterable):
            return NotImplemented
        return list(self) == list(other)


def file_name(name: str) -> str:
    """An image's file name: the last part of its path or member name, whatever the folders above it
    (slim's image/filename; what --subset and the box CSV name)."""
    return name.rstrip("/").rsplit("/", 1)[-1]


class ReaderClass(Protocol):
    """The Reader class (sources/copy_rules.py) a split's images are read with, as its listing names it: made for one
    shard in a worker, and naming an input's state without reading it (what a rerun compares)."""

    def __call__(self, spec: ShardSpec) -> Any: ...

    def identity(self, spec: ShardSpec, entry: ImageEntry) -> str: ...


@dataclass
class SplitInput:
    """A split's images in slim's order, as parallel arrays (compact: ImageNet has 1.28 M).

    From a folder, relpath is the path under `root`; from an archive (`root` the
    archive), each image is also a byte range of it (offsets, sizes).
    """

    split: str
    root: str
    arrangement: str  # how the copy holds it: "folders", "flat", "tar" (train tar-of-tars), "flat-tar", ...
    reader: ReaderClass  # what its shards' images are read with
    relpaths: StringColumn = field(default_factory=StringColumn)
    labels: array[int] = field(default_factory=lambda: array("I"))
    offsets: array[int] = field(default_factory=lambda: array("Q"))
    sizes: array[int] = field(default_factory=lambda: array("Q"))
    member_infos: array[int] = field(default_factory=lambda: array("Q"))  # optional: ImageEntry.member_info
    ignored: list[str] = field(default_factory=list)  # files present but not images slim would take
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (relpath, reason) left out: --on-error skip
    empty_classes: list[str] = field(default_factory=list)  # synsets with no images
    notes: list[str] = field(default_factory=list)
    stamp: str = ""  # an archive's size and modification time: a rerun redoes its shards when it changes
    member_prefix: str = ""  # in an archive read by name (a zip), what precedes relpath in a member's name
    # image/filename is relpath, its class folder kept (an evaluation set's names repeat across its classes)
    path_names: bool = False

    def __len__(self) -> int:
        return len(self.relpaths)

    @property
    def archive(self) -> bool:
        return bool(self.offsets)

    def only(self, names: frozenset[str] | set[str]) -> SplitInput:
        """A copy holding only the images whose file name is in `names`, in the same order."""
        kept = SplitInput(self.split, self.root, self.arrangement, reader=self.reader, ignored=self.ignored,
                          left_out=self.left_out, empty_classes=self.empty_classes, notes=list(self.notes),
                          stamp=self.stamp, member_prefix=self.member_prefix, path_names=self.path_names)
        archive = self.archive
        for i, relpath in enumerate(self.relpaths):
            if file_name(relpath) in names:
                where: Where = None  # a folder's image: no byte range
                if archive:
                    where = (self.offsets[i], self.sizes[i]) + ((self.member_infos[i],) if self.member_infos else ())
                kept.add(relpath, self.labels[i], where)
        return kept

    def add(self, relpath: str, label: int, where: Where = None) -> None:
        self.relpaths.append(relpath)
        self.labels.append(label)
        if where is not None:
            self.offsets.append(where[0])
            self.sizes.append(where[1])
            if len(where) > 2:  # (offset, size, member info): e.g. a zip member's CRC-32 and inflated size
                self.member_infos.append(where[2])


class ImageEntry(NamedTuple):
    """One image of a shard: its path under the split's root, its label, its boxes,
    and for an image inside a tarball its byte range there; a validation image of a --real-labels
    build, its ReaL labels (1-based, maybe none; None: the build carries no ReaL labels)."""

    relpath: str
    label: int
    boxes: tuple[tuple[float, ...], ...] = ()  # (xmin, ymin, xmax, ymax) each
    offset: int = -1
    size: int = 0
    member_info: int = 0  # what else its Reader needs to read it (a zip member: method, CRC-32, inflated size)
    real_labels: Optional[Tuple[int, ...]] = None

    @property
    def filename(self) -> str:
        return file_name(self.relpath)


def _fingerprint_line(e: ImageEntry) -> str:
    """An image as its shard's fingerprint counts it (one without ReaL labels as before they were added)."""
    line = f"{e.relpath}\t{e.label}\t{e.boxes!r}"
    return line if e.real_labels is None else f"{line}\t{e.real_labels!r}"


@dataclass(frozen=True)
class ShardSpec:
    """One shard to write: its name, where its images are, and the images in record order."""

    split: str
    index: int
    num_shards: int
    source_root: str  # a folder, or an archive
    reader: ReaderClass  # what reads its entries (the SplitInput's)
    entries: tuple[ImageEntry, ...]  # in record order
    classes: dict[int, tuple[str, str]]  # label -> (synset, text) for the labels in this shard
    source_stamp: str = ""  # an archive's size and modification time ("" for a folder)
    imagenet: bool = True  # ILSVRC2012's classes: a re-encode is compared with slim's name lists
    member_prefix: str = ""  # in an archive read by member name (a zip), what precedes relpath in that name
    path_names: bool = False  # image/filename is an entry's relpath, not its file name (SplitInput.path_names)

    @property
    def name(self) -> str:
        return shard_name(self.split, self.index, self.num_shards)

    def path_of(self, entry: ImageEntry) -> str:
        return os.path.join(self.source_root, entry.relpath)

    def image_name(self, entry: ImageEntry) -> str:
        """The entry's image/filename: its file name, or where the copy's names repeat across its class
        folders, its path in the copy."""
        return entry.relpath if self.path_names else entry.filename

    def fingerprint(self, on_error: str, codec: str = "", variant: str = "") -> str:
        """Hash of everything the shard's bytes depend on but the input bytes (not where they live).

        `codec` is the encoder's version when the shard holds re-encoded images: another
        Pillow or libjpeg, other bytes. `variant` names a resized build's options ("" for
        the full-size build, whose fingerprints stay as they were).
        """
        fixed = [FORMAT_VERSION, self.name, on_error, sorted(self.classes.items()), codec]
        if self.path_names:  # only then: the fingerprints of every other build stay as they were
            fixed.append("path names")
        head = json.dumps(fixed + [variant] if variant else fixed)
        lines = "\n".join(map(_fingerprint_line, self.entries))
        return hashlib.sha256(f"{head}\n{lines}".encode()).hexdigest()

    def input_state(self, identities: Iterable[str]) -> str:
        """Hash of the inputs' state (the identity of each, and an archive's own size and mtime):
        a changed input changes it, and its shard is redone. See sources.MemberReader.identity."""
        lines = "\n".join([self.source_stamp, *identities])
        return hashlib.sha256(lines.encode()).hexdigest()
