"""One WebDataset shard file: its samples listed (list_shard, a worker task of the scan) and its images read by
byte range (ShardReader, in a worker).

Each sample is a run of members sharing a key: `<key>.jpg` (the image), `<key>.cls` (its
label, 0-based, as ASCII digits, indexing the 1000 ILSVRC2012 synsets sorted) and optionally
`<key>.json`. Listing reads the tar headers and each sample's `.cls` (tiny preads, read with
its header where it can be), its `.json` only where the key is not an ImageNet name.
"""

from __future__ import annotations

import os
import re
from array import array
from collections import OrderedDict
from functools import partial
from typing import IO, TYPE_CHECKING, Any, Callable, Dict, List, Tuple, Union

from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import InputError, input_errors
from imagenet_build.infra.jsonfile import parse_json
from imagenet_build.model import file_name
from imagenet_build.sources.copy_rules import VALIDATION_NAME, MemberReader, labelled_synset, no_label, will_need
from imagenet_build.sources.tars import BLOCK, Member, list_members, plain_members, read_member, read_range

if TYPE_CHECKING:
    from imagenet_build.model import ImageEntry, ShardSpec

TRAIN_NAME = re.compile(r"^(n\d{8})_\d+\.JPEG$")
IMAGENET_KEY = re.compile(r"^(n\d{8}_\d+|ILSVRC2012_val_\d{8})$")
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png")

SampleMember = Tuple[int, int, int, int]  # (data offset, data size, member number in the shard, header CRC)
Sample = Dict[str, SampleMember]  # a sample's members by extension
# list_shard's result: relpaths, offsets, sizes, header CRCs, synset numbers in cls_synsets() (or -1), names
# derived from keys, ignored members, left out [(relpath, reason)]
ShardColumns = Tuple[List[str], "array[int]", "array[int]", "array[int]", "array[int]", int, List[str],
                     List[Tuple[str, str]]]


def _sorted_synsets() -> tuple[str, ...]:
    """What `.cls` indexes: the 1000 ILSVRC2012 synsets, sorted (TFDS's imagenet2012 labels, timm's order)."""
    from imagenet_build.catalog.classes import DEFAULT_LABELS_FILE, read_labels_file

    synsets = tuple(read_labels_file(DEFAULT_LABELS_FILE))
    assert list(synsets) == sorted(synsets)
    return synsets


_SYNSETS: tuple[str, ...] = ()
_VALIDATION_LABELS: dict[str, list[str]] = {}


def cls_synsets() -> tuple[str, ...]:
    global _SYNSETS
    if not _SYNSETS:
        _SYNSETS = _sorted_synsets()
    return _SYNSETS


def _validation_labels(path: str) -> list[str]:
    if path not in _VALIDATION_LABELS:
        from imagenet_build.catalog.classes import read_validation_labels

        _VALIDATION_LABELS[path] = read_validation_labels(path)
    return _VALIDATION_LABELS[path]


def _split_member(name: str) -> tuple[str, str] | None:
    """(key, extension) as WebDataset splits a member name: at the first dot of its last part; None without one."""
    folder, _, base = name.rpartition("/")
    if "." not in base:
        return None
    stem, _, ext = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), ext


def _original_name(key: str, read_json: Callable[[], Any]) -> tuple[str, bool]:
    """(the sample's original file name, whether it was only derived from the key)."""
    stem = file_name(key)
    if IMAGENET_KEY.match(stem):
        return stem + ".JPEG", False
    meta = read_json()
    if isinstance(meta, dict):
        name = meta.get("filename") or meta.get("file_name")
        if isinstance(name, str) and name.strip("/"):
            return file_name(name), False
    return stem + ".JPEG", True


class _Unusable(Exception):
    """A sample that cannot be built; its message says why (list_shard fails or leaves it out)."""


def list_shard(
    path: str, shardrel: str, split: str, on_error: str, validation_labels_file: str | None
) -> ShardColumns:
    """A worker task: one shard file's samples as compact columns.

    Returns (relpaths, offsets, sizes, header CRCs, synset numbers in cls_synsets() or -1, names
    derived from keys, ignored members, left out [(relpath, reason)]). Reads the tar headers and
    each sample's `.cls` (and its `.json` only when the key is not an ImageNet name).
    """
    synsets = cls_synsets()
    number_of = {s: i for i, s in enumerate(synsets)}
    relpaths: list[str] = []
    offsets, sizes, crcs, found = array("Q"), array("Q"), array("Q"), array("h")
    ignored: list[str] = []
    left_out: list[tuple[str, str]] = []
    derived = 0
    with input_errors(path, expected="a .tar shard", missing="shard not found"):
        size = storage.size(path)
        with read_door.open_read(path, random_access=True) as f:
            source: Union[int, IO[bytes]] = f if storage.is_url(path) else f.fileno()
            listed = None
            if isinstance(source, int):
                if hasattr(os, "posix_fadvise"):  # only the header pages: no read-ahead of the images between them
                    os.posix_fadvise(source, 0, 0, os.POSIX_FADV_RANDOM)
                # with the bytes of the small members (.cls, .json), read with their headers
                listed = plain_members(source, size, path, small_data=True)
            if listed is None:  # anything but plain ustar headers: tarfile's listing
                listed = list_members(f, size, path), {}
            samples = _samples(listed[0], shardrel, path, ignored)
            small = listed[1]

            def data(member: SampleMember) -> bytes:
                """A small member's bytes: read with its header when it was listed, else by offset."""
                held = small.get(member[2])
                return held if held is not None else read_range(source, member[0], member[1])

            for key, members in samples.items():
                try:
                    image, cls = _image_and_cls(members, data, len(synsets))
                    name, was_derived = _original_name(key, partial(_read_json, members, data))
                    derived += was_derived
                    synset = _synset_of_name(name, validation_labels_file)
                    if synset is not None and synset != synsets[cls]:
                        raise _Unusable(f".cls {cls} is {synsets[cls]}, but its name {name} is of {synset}")
                except _Unusable as e:
                    if on_error == "fail":
                        raise InputError(path, f"sample {key}: {e}; --on-error skip builds without it") from None
                    left_out.append((f"{shardrel}/{key}", str(e)))
                    continue
                relpaths.append(f"{shardrel}/{name}")
                offsets.append(image[0])
                sizes.append(image[1])
                crcs.append(image[3])
                found.append(number_of.get(synset or synsets[cls], -1))
    return relpaths, offsets, sizes, crcs, found, derived, ignored, left_out


def _samples(members: list[Member], shardrel: str, path: str, ignored: list[str]) -> dict[str, Sample]:
    """The shard's files grouped by key, in shard order; names without a key (or hidden ones) go to `ignored`."""
    samples: dict[str, Sample] = {}
    for number, (name, offset, length, is_file, crc) in enumerate(members):
        if not is_file:
            continue
        split = _split_member(name)
        if split is None or file_name(name).startswith("."):  # a hidden file has an empty key
            ignored.append(f"{shardrel}:{name}")
            continue
        key, ext = split
        sample = samples.setdefault(key, {})
        if ext in sample:
            raise InputError(path, f"sample {key}: two .{ext} members (a key may appear once)")
        sample[ext] = (offset, length, number, crc)
    return samples


def _image_and_cls(members: Sample, data: Callable[[SampleMember], bytes], classes: int) -> tuple[SampleMember, int]:
    """A sample's image member and its `.cls` label, which must be in 0..classes-1."""
    image = next((members[e] for e in members if e.rsplit(".", 1)[-1].lower() in IMAGE_EXTENSIONS), None)
    if image is None:
        raise _Unusable(f"no image member (.jpg), only {', '.join('.' + e for e in sorted(members))}")
    if "cls" not in members:
        raise _Unusable("no .cls member: its label is unknown")
    text = data(members["cls"])
    try:
        cls = int(text.strip())
    except ValueError:
        raise _Unusable(f".cls is not a number: {text[:20]!r}") from None
    if not 0 <= cls < classes:
        raise _Unusable(f".cls {cls} is outside 0..{classes - 1} (the ILSVRC2012 classes)")
    return image, cls


def _read_json(members: Sample, data: Callable[[SampleMember], bytes]) -> Any:
    """A sample's `.json`, or None when it has none or it does not parse."""
    if "json" not in members:
        return None
    try:
        return parse_json(data(members["json"]), "json")
    except ValueError:
        return None


def _synset_of_name(name: str, validation_labels_file: str | None) -> str | None:
    """The synset an ImageNet file name says (a validation name's by the labels file), or None."""
    train_name = TRAIN_NAME.match(name)
    if train_name:
        return train_name.group(1)
    val_name = VALIDATION_NAME.match(name)
    if val_name and validation_labels_file:
        labels = _validation_labels(validation_labels_file)
        n = int(val_name.group(1))
        synset = labelled_synset(n, labels)
        if synset is None:
            raise _Unusable(no_label(n, labels, validation_labels_file))
        return synset
    return None


class ShardReader(MemberReader):
    """A shard's images by byte range from the WebDataset shard files: one pread each.

    An output shard draws from many input shard files (the plan shuffles), so the
    open files are kept in a small LRU; the next READ_AHEAD ranges are announced
    to the kernel, as the other readers do.
    """

    OPEN_FILES = 64

    def __init__(self, spec: ShardSpec) -> None:
        super().__init__(spec)
        # shard file -> fd (or file object for a URL)
        self._open: OrderedDict[str, Union[int, IO[bytes]]] = OrderedDict()
        self._stamps: dict[str, str] = {}

    def close(self) -> None:
        for source in self._open.values():
            os.close(source) if isinstance(source, int) else source.close()
        self._open.clear()

    def _source(self, shardrel: str) -> Union[int, IO[bytes]]:
        source = self._open.get(shardrel)
        if source is not None:
            self._open.move_to_end(shardrel)
            return source
        path = storage.join(self.spec.source_root, shardrel)
        with input_errors(path, expected="a .tar shard", missing="shard file vanished since it was listed"):
            source = read_door.open_read(path, random_access=True) if storage.is_url(path) else read_door.open_fd(path)
        self._open[shardrel] = source
        if len(self._open) > self.OPEN_FILES:
            _, old = self._open.popitem(last=False)
            os.close(old) if isinstance(old, int) else old.close()
        return source

    def announce(self, number: int, entry: ImageEntry) -> None:
        try:
            source = self._source(entry.relpath.rsplit("/", 1)[0])
        except InputError:
            return  # read() reports it, in order
        if isinstance(source, int):
            will_need(source, entry.offset - BLOCK, BLOCK + entry.size)

    def read(self, number: int) -> tuple[bytes, str]:
        self.read_ahead(number)
        entry = self.spec.entries[number]
        shardrel, name = entry.relpath.rsplit("/", 1)
        shard = storage.join(self.spec.source_root, shardrel)
        if shardrel not in self._stamps:
            self._stamps[shardrel] = self.identity(self.spec, entry).split("|", 1)[1]
        self.identities.append(f"{shardrel}@{entry.offset}:{entry.size}|{self._stamps[shardrel]}")
        data, member = read_member(self._source(shardrel), entry.offset, entry.size, entry.member_info,
                                   f"{shard}:{name}")
        return data, f"{shard}:{member}"

    @staticmethod
    def identity(spec: ShardSpec, entry: ImageEntry) -> str:
        """Its place in its shard file, and that file's size and modification time."""
        shardrel = entry.relpath.rsplit("/", 1)[0]
        try:
            stamp = storage.stamp(storage.join(spec.source_root, shardrel))
        except FileNotFoundError:
            stamp = "absent"
        except OSError as e:
            stamp = f"unreadable: {e.strerror}"
        return f"{shardrel}@{entry.offset}:{entry.size}|{stamp}"
