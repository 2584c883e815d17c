"""One record as the record checks see it, and the base of a check that looks at every record.

The shard's task reads each record once and makes a Record of it: its place, whether its payload's
CRC holds and, where it does, its fields parsed once against slim's schema (format/record_schema.py's
SCHEMA, the one statement of the 15 keys, their types and which hold one value). Record checks read
what they need from it; what several need (the JPEG's decision, the PNG's verdict) is worked out once.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable

from imagenet_build.encode.images import Decision, PngVerdict, decide, judge_png
from imagenet_build.encode.jpeg_header import is_jpeg
from imagenet_build.encode.png import is_png
from imagenet_build.format.record_schema import LIST_FIELD, ONE_VALUE, SCHEMA, example_message_class
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
        self.lists: dict[str, list[Any]] = {}
        self.kinds: dict[str, str | None] = {}  # each key's list field (bytes_list, ...), None where it holds none
        if crc_ok:
            self._parse(payload)

    def _parse(self, payload: bytes) -> None:
        try:
            example = example_message_class()()
            example.ParseFromString(payload)
        except Exception as e:  # protobuf raises its own DecodeError types
            self.unreadable = [f"not a tf.train.Example: {e}"]
            return
        kinds: dict[str, str | None] = {}
        lists: dict[str, list[Any]] = {}
        for key, feature in example.features.feature.items():
            kind = kinds[key] = feature.WhichOneof("kind")
            lists[key] = list(getattr(feature, kind).value) if kind else []
        self.unreadable = schema_problems(kinds, lists)
        if not self.unreadable:
            self.readable, self.lists, self.kinds = True, lists, kinds
            self.one = {key: lists[key][0] for key in ONE_VALUE}

    def label_pair(self) -> tuple[int, str]:
        """(label, synset): what the labels check counts over the folder."""
        return self.one["image/class/label"], self.one["image/class/synset"].decode("utf-8", "replace")

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


def schema_problems(kinds: dict[str, str | None], lists: dict[str, list[Any]]) -> list[str]:
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
