"""Kaggle's download, by role: the paths of its tree, and its zip's central directory sorted into them
(list_zip), in compact columns, in one pass.

The download (since 2022) is one Zip64 archive of the ILSVRC CLS-LOC tree and four
`LOC_*` files:
  ILSVRC/Data/CLS-LOC/train/<synset>/<synset>_<n>.JPEG      1,281,167 images
  ILSVRC/Data/CLS-LOC/val/ILSVRC2012_val_<8 digits>.JPEG    50,000, flat
  ILSVRC/Data/CLS-LOC/test/ILSVRC2012_test_<8 digits>.JPEG  100,000, no labels: ignored
  ILSVRC/Annotations/CLS-LOC/train/<synset>/<stem>.xml      544,546 box annotations (Pascal VOC)
  LOC_synset_mapping.txt, LOC_val_solution.csv, LOC_train_solution.csv, LOC_sample_submission.csv
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import InputError, input_errors
from imagenet_build.model import file_name
from imagenet_build.sources.zips import (
    LOCAL_SIZE,
    Places,
    central_members,
    check_member,
    end_record,
    pack_member_info,
)

ZIP_NAME = "imagenet-object-localization-challenge.zip"
OLD_TARBALL = "imagenet_object_localization_patched2019.tar.gz"
DATA = "ILSVRC/Data/CLS-LOC/"
TRAIN, VAL, TEST = DATA + "train/", DATA + "val/", DATA + "test/"
ANNOTATIONS = "ILSVRC/Annotations/CLS-LOC/train/"
MAPPING, SOLUTION = "LOC_synset_mapping.txt", "LOC_val_solution.csv"


class Members:
    """Compact columns of a group of members (1.28 M images would be ~300 MB as tuples)."""

    __slots__ = ("names", "offsets", "sizes", "member_infos")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.offsets, self.sizes, self.member_infos = array("Q"), array("Q"), array("Q")

    def add(self, name: str, offset: int, csize: int, member_info: int) -> None:
        self.names.append(name)
        self.offsets.append(offset)
        self.sizes.append(csize)
        self.member_infos.append(member_info)

    def rows(self) -> Iterator[tuple[str, int, int, int]]:
        """(name, offset, size, member_info) of each member; the columns grow together, so unequal lengths are a bug."""
        if not len(self.names) == len(self.offsets) == len(self.sizes) == len(self.member_infos):
            raise ValueError(f"Members: columns of {len(self.names)}, {len(self.offsets)}, {len(self.sizes)} and "
                             f"{len(self.member_infos)} entries")
        return zip(self.names, self.offsets, self.sizes, self.member_infos)

    def items(self) -> list[tuple[str, tuple[int, int, int]]]:
        """[(name, (offset, size, member_info))], as add_class and flat_validation take them."""
        return [(name, (offset, size, member_info)) for name, offset, size, member_info in self.rows()]


@dataclass
class ZipListing:
    """What the zip holds, by role. Each split's part is dropped once it has been scanned."""

    path: str
    stamp: str
    prefix: str = ""  # folder the tree sits in inside the zip ("" for Kaggle's)
    train: dict[str, Members] = field(default_factory=dict)  # synset -> Members
    train_strangers: list[str] = field(default_factory=list)
    validation: Members = field(default_factory=Members)
    xml: dict[str, Members] = field(default_factory=dict)  # synset -> Members (names: stems)
    files: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # LOC_* name -> (offset, size, member_info)
    tests: int = 0
    old_tarball: bool = False


def _tree_prefix(name: str) -> str | None:
    """The folder above `ILSVRC/` (or above the LOC_* files) in a member name, or None."""
    at = name.find("ILSVRC/")
    if at >= 0 and (at == 0 or name[at - 1] == "/"):
        return name[:at]
    base = file_name(name) if not name.endswith("/") else ""  # a folder entry is no LOC_* file
    if base in (MAPPING, SOLUTION, OLD_TARBALL):
        return name[: len(name) - len(base)]
    return None


def open_zip(path: str) -> IO[bytes]:
    """The zip, to read by offset (a local file, or an object in a store read by ranges)."""
    return read_door.open_read(path, random_access=True)


def looks_like_kaggle(path: str) -> str | None:
    """"zip" or "old" for a Kaggle zip (new or older download), None for another zip; reads members until sure."""
    size = storage.size(path)
    with open_zip(path) as f:
        try:
            cd_offset, cd_size, count = end_record(f, size, path)
        except InputError:
            if storage.basename(path).startswith(ZIP_NAME[:-4]):
                return "zip"  # its own name says it: the scan reports what is wrong with it
            return None
        found = None
        for name, *_ in central_members(f, cd_offset, cd_size, count, path):
            prefix = _tree_prefix(name)
            if prefix is None or prefix.count("/") > 1:
                continue
            if name.endswith(OLD_TARBALL):
                return "old"
            if name[len(prefix):].startswith("ILSVRC/"):
                return "zip"
            found = found or "maybe"
    return "zip" if found else None


def list_zip(path: str) -> ZipListing:
    """One pass over the central directory, sorting members by role; small files kept by place."""
    with input_errors(path, expected="a zip archive", missing="zip not found"):
        size = storage.size(path)
        result = ZipListing(path, storage.stamp(path))
        places, overlap = Places(), None
        with open_zip(path) as f:
            cd_offset, cd_size, count = end_record(f, size, path)
            prefix = None
            for name, offset, csize, usize, crc, method, flags, name_len in central_members(f, cd_offset, cd_size,
                                                                                             count, path):
                overlap = overlap or places.add(offset, offset + LOCAL_SIZE + name_len + csize)
                if name.endswith("/"):
                    continue  # a folder entry
                if prefix is None:
                    prefix = _tree_prefix(name)
                    if prefix is None:
                        continue
                if not name.startswith(prefix):
                    continue
                rest = name[len(prefix):]
                role = _role(rest)
                if role is None:
                    continue
                if role == "old":
                    result.old_tarball = True
                    continue
                if role == "test":
                    result.tests += 1
                    continue
                check_member(path, name, csize, usize, method, flags)
                _add_member(result, role, rest, offset, csize, pack_member_info(method, usize, crc))
            places.check(f, path, (cd_offset, cd_size, count), overlap)
        result.prefix = prefix or ""
    return result


def _add_member(result: ZipListing, role: str, rest: str, offset: int, csize: int, member_info: int) -> None:
    """File a checked member of the tree (`rest`: its name below the prefix) under its role."""
    if role == "train":
        synset, _, base = rest[len(TRAIN):].partition("/")
        if not base:
            result.train_strangers.append(synset)
        elif "/" in base:
            result.train_strangers.append(f"{synset}/{base}")
        else:
            _group(result.train, synset).add(base, offset, csize, member_info)
    elif role == "validation":
        result.validation.add(rest[len(VAL):], offset, csize, member_info)
    elif role == "xml":
        synset, _, base = rest[len(ANNOTATIONS):].partition("/")
        if base.endswith(".xml") and "/" not in base:
            _group(result.xml, synset).add(base[: -len(".xml")], offset, csize, member_info)
    else:
        result.files[rest] = (offset, csize, member_info)


def _group(groups: dict[str, Members], synset: str) -> Members:
    """A synset's Members, made on its first member (not setdefault: no new arrays per member)."""
    members = groups.get(synset)
    if members is None:
        members = groups[synset] = Members()
    return members


def _role(rest: str) -> str | None:
    if rest.startswith(TRAIN):
        return "train"
    if rest.startswith(VAL):
        return "validation" if "/" not in rest[len(VAL):] else None
    if rest.startswith(TEST):
        return "test" if "/" not in rest[len(TEST):] else None
    if rest.startswith(ANNOTATIONS):
        return "xml"
    if rest in (MAPPING, SOLUTION):
        return "file"
    if rest == OLD_TARBALL:
        return "old"
    return None
