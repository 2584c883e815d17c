"""One record as the record checks see it, and the base of a check that looks at every record.

The shard's task reads each record once and makes a Record of it: its place, whether its payload's
CRC holds and, where it does, its fields parsed once against slim's schema (encode/example.py's
SCHEMA, the one statement of the 15 keys, their types and which hold one value). Record checks read
what they need from it; what several need (the JPEG's decision) is worked out once.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, Iterable, List, Optional, Tuple

from imagenet_build.encode.example import LIST_FIELD, ONE_VALUE, SCHEMA, example_message_class
from imagenet_build.encode.images import Decision, decide
from imagenet_build.encode.jpeg_header import is_jpeg
from imagenet_build.verify.check import Check, Mode

Fields = Dict[str, Tuple[Optional[str], List[Any]]]  # key: (the Feature's list kind, or None; its values)
_ONE_VALUE = frozenset(ONE_VALUE)


class Record:
    """One record: its number and byte offset in the shard, and its fields where they can be read."""

    def __init__(self, number: int, offset: int, payload: bytes, crc_ok: bool) -> None:
        self.number, self.offset, self.crc_ok = number, offset, crc_ok
        self.fields: Fields | None = None  # None: the CRC fails, or the fields are not slim's schema
        self.unreadable: list[str] = []  # why the fields cannot be read (the `example` check reports it)
        if crc_ok:
            self._parse(payload)

    def _parse(self, payload: bytes) -> None:
        try:
            example = example_message_class()()
            example.ParseFromString(payload)
        except Exception as e:  # protobuf raises its own DecodeError types
            self.unreadable = [f"not a tf.train.Example: {e}"]
            return
        fields: Fields = {}
        for key, feature in example.features.feature.items():
            kind = feature.WhichOneof("kind")
            fields[key] = (kind, list(getattr(feature, kind).value) if kind else [])
        self.unreadable = schema_problems(fields)
        if not self.unreadable:
            self.fields = fields

    def one(self, key: str) -> Any:
        """The value of a single-valued key (the record's fields are readable)."""
        assert self.fields is not None
        return self.fields[key][1][0]

    def values(self, key: str) -> list[Any]:
        assert self.fields is not None
        return self.fields[key][1]

    def label_pair(self) -> tuple[int, str]:
        """(label, synset): what the labels check counts over the folder."""
        return self.one("image/class/label"), self.one("image/class/synset").decode("utf-8", "replace")

    @functools.cached_property
    def decision(self) -> Decision | None:
        """convert's rule for the stored JPEG (encode/images.py), or None where image/encoded is no JPEG."""
        encoded = self.one("image/encoded")
        return decide(encoded) if is_jpeg(encoded) else None


def schema_problems(fields: Fields) -> list[str]:
    """Every key of slim's schema present, of its type, and the single-valued ones with one value."""
    found = []
    for key, kind in SCHEMA.items():
        if key not in fields:
            found.append(f"missing key {key}")
        elif fields[key][0] != LIST_FIELD[kind]:
            found.append(f"{key} is {fields[key][0]}, expected {LIST_FIELD[kind]}")
        elif key in _ONE_VALUE and len(fields[key][1]) != 1:
            found.append(f"{key} holds {len(fields[key][1])} values, expected 1")
    return found


class RecordCheck(Check):
    """A check of every record: `run_record` gives its problems as messages (the place is the record's).

    It runs on the workers, in each shard's task, and needs the payloads: not with --quick.
    """

    @classmethod
    def runs(cls, mode: Mode) -> bool:
        return not mode.quick

    def run_record(self, record: Record) -> Iterable[str]:
        raise NotImplementedError
