"""One record as the record checks see it, and the base of a check that looks at every record.

The shard's task reads each record once and makes a Record of it: its place, whether its payload's
CRC holds and, where it does, its fields parsed once against slim's schema (format/record_schema.py's
SCHEMA, the one statement of the 15 keys, their types and which hold one value). Record checks read
what they need from it; what several need (the JPEG's decision, the PNG's verdict) is worked out once.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, NamedTuple

from imagenet_build.encode.images import Decision, PngVerdict, decide, judge_png
from imagenet_build.encode.jpeg_header import is_jpeg
from imagenet_build.encode.png import is_png
from imagenet_build.format.record_fields import FILENAME_KEY, Kinds, Lists, example_fields, part_fields, split_record
from imagenet_build.format.record_schema import IMAGE_KEY, LIST_FIELD, ONE_VALUE, SCHEMA
from imagenet_build.verify.check import Check, Mode


class Record:
    """One record: its number and byte offset in the shard, and its fields where they can be read.

    Where `readable`, `one` holds the value of each single-valued key and `lists` every key's values.
    """

    def __init__(self, number: int, offset: int, payload: bytes, crc_ok: bool) -> None:
        self.number, self.offset, self.crc_ok = number, offset, crc_ok
        self.readable = False  # the CRC holds and the fields are slim's schema
        self.unreadable: list[str] = []  # why the fields cannot be read, past the CRC (the `example` check's)
        self.one: dict[str, Any] = {}
        self.lists: Lists = {}
        self.kinds: Kinds = {}  # each key's list field (bytes_list, ...), None where it holds none
        if crc_ok:
            self._parse(payload)

    def _parse(self, payload: bytes) -> None:
        split = split_record(payload)
        before, after = (_part(split[0]), _part(split[3])) if split is not None else (None, None)
        if split is not None and before is not None and after is not None and before.joins(after):
            # as convert writes it, the schema's keys each once, their kinds and counts right: no schema problem
            self.readable = True
            self.kinds = {**before.kinds, IMAGE_KEY: "bytes_list", FILENAME_KEY: "bytes_list", **after.kinds}
            self.lists = {**before.lists, IMAGE_KEY: (split[1],), FILENAME_KEY: (split[2],), **after.lists}
            self.one = {**before.one, IMAGE_KEY: split[1], FILENAME_KEY: split[2], **after.one}
            return
        try:
            kinds, lists = example_fields(payload)
        except Exception as e:  # protobuf raises its own DecodeError types
            self.unreadable = [f"not a tf.train.Example: {e}"]
            return
        self.unreadable = schema_problems(kinds, lists)
        if not self.unreadable:
            self.readable, self.lists, self.kinds = True, lists, kinds
            self.one = {key: lists[key][0] for key in ONE_VALUE}

    def label_pair(self) -> tuple[int, str]:
        """(label, synset): what the labels check counts over the folder."""
        return _label_pair(self.one["image/class/label"], self.one["image/class/synset"])

    @functools.cached_property
    def decision(self) -> Decision | None:
        """convert's rule for the stored JPEG (encode/images.py), or None where image/encoded is no JPEG;
        worked out once, for every check that asks."""
        encoded = self.one["image/encoded"]
        return decide(encoded) if is_jpeg(encoded) else None

    @functools.cached_property
    def png(self) -> PngVerdict | None:
        """The rule for a stored PNG (encode/images.py), or None where image/encoded is no PNG; worked out once."""
        encoded = self.one["image/encoded"]
        return judge_png(encoded) if is_png(encoded) else None


@functools.lru_cache(maxsize=1 << 12)
def _label_pair(label: int, synset: bytes) -> tuple[int, str]:
    return label, synset.decode("utf-8", "replace")


class _Part(NamedTuple):
    """A run of entries split_record cut from a record, as the schema sees it (a class's, a size's: kept)."""

    kinds: Kinds
    lists: Lists
    one: dict[str, Any]  # the values of its single-valued keys
    keys: frozenset[str]
    sound: bool  # each key of the schema it holds of its kind, a single-valued one with one value

    def joins(self, after: _Part) -> bool:
        """Whether a record of this run, an image, a file name and `after`, in that order, has no schema
        problem: both sound, no key in both, and with the image's and the file name's every key of the schema."""
        return (self.sound and after.sound and self.keys.isdisjoint(after.keys)
                and len(self.keys & _REQUIRED) + len(after.keys & _REQUIRED) == len(_REQUIRED))


_REQUIRED = frozenset(SCHEMA) - {IMAGE_KEY, FILENAME_KEY}  # what a record's runs of entries hold between them


@functools.lru_cache(maxsize=1 << 12)
def _part(entries: bytes) -> _Part | None:
    """A run of entries' fields and what the schema says of them (None where it is read with the whole record)."""
    fields = part_fields(entries)
    if fields is None:
        return None
    kinds, lists = fields
    keys = frozenset(kinds)
    held = {key: SCHEMA[key] for key in keys & _REQUIRED}
    sound = all(kinds[key] == LIST_FIELD[kind] and (key not in ONE_VALUE or len(lists[key]) == 1)
                for key, kind in held.items())
    one = {key: lists[key][0] for key in keys & ONE_VALUE} if sound else {}
    return _Part(kinds, lists, one, keys, sound)


def schema_problems(kinds: Kinds, lists: Lists) -> list[str]:
    """Every key of slim's schema present, of its type, and the single-valued ones with one value."""
    found = []
    for key, kind in SCHEMA.items():
        if key not in kinds:
            found.append(f"missing key {key}")
        elif kinds[key] != LIST_FIELD[kind]:
            found.append(f"{key} is {kinds[key]}, expected {LIST_FIELD[kind]}")
        elif key in ONE_VALUE and len(lists[key]) != 1:
            found.append(f"{key} holds {len(lists[key])} values, expected 1")
    return found


class RecordCheck(Check):
    """A check of every record: `run_record` gives its problems as messages (the place is the record's).

    It runs on the workers, in each shard's task, and needs the payloads: not with --quick. One instance
    sees every record of a shard: a check that also looks across the folder gives what its folder scope
    needs of the shard in `shard_tally` (small, picklable), found in `Folder.tallies[name][shard]`.
    """

    @classmethod
    def runs(cls, mode: Mode) -> bool:
        return not mode.quick

    def run_record(self, record: Record) -> Iterable[str]:
        raise NotImplementedError

    def shard_tally(self) -> Any:
        """What the folder scope needs of the shard's records, once they were all run; None: nothing."""
        return None
