"""One shard, checked in one worker task: read once (framing, both CRCs, sha256, every record through the
record checks), then the shard checks on the file and its index; the base of a check of a shard file.

The task's result is picklable and small: the shard's figures for the folder checks, the (label,
synset) pairs its records hold, and the problems it found (the first of each check, all counted).
"""

from __future__ import annotations

import hashlib
import io
import os
from typing import IO, Any, Dict, Iterable, List, NamedTuple, Tuple

from imagenet_build.format.tfrecord import OVERHEAD, FramingError, read_records, scan_lengths
from imagenet_build.infra import read_door, storage
from imagenet_build.infra.workers import exit_if_orphaned
from imagenet_build.verify.check import Check, Mode
from imagenet_build.verify.listing import file_kind
from imagenet_build.verify.problems import Finding, Problems
from imagenet_build.verify.record import Record, RecordCheck

LabelPairs = Dict[Tuple[int, str], List[int]]  # (label, synset): [records, the first's number, its offset]


class Shard:
    """One shard file and its index as the shard checks see them, once its records were read."""

    def __init__(self, path: str, index_path: str) -> None:
        self.path, self.index_path = path, index_path
        self.name, self.index_name = storage.basename(path), storage.basename(index_path)
        self.size = storage.size(path)
        self.entries: list[tuple[int, int]] = []  # (offset, size) of each record, by the shard's own framing
        self.framing_error: FramingError | None = None  # where reading stopped, if it did
        self.index_bytes: bytes | None = None  # None where there is no index
        self.index_unreadable = ""  # why the index cannot be read, or ""

    @property
    def framing_sound(self) -> bool:
        """Read to its end without a framing error, and holding records: its index and sha256 mean something."""
        return self.framing_error is None and bool(self.entries)

    def read_index(self) -> None:
        """The index's bytes, or why it cannot be read (None and "" where there is none)."""
        path = self.index_path
        if not storage.is_url(path) and os.path.lexists(path) and not os.path.isfile(path):
            self.index_unreadable = f"not a regular file ({file_kind(path)}): DALI cannot read it"
            return
        try:
            self.index_bytes = read_door.read_bytes(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            self.index_unreadable = f"cannot be read: {e.strerror or e}"


class ShardCheck(Check):
    """A check of one shard file and its index: `run_shard` gives its findings, on the workers, after the
    shard's records were read."""

    def run_shard(self, shard: Shard) -> Iterable[Finding]:
        raise NotImplementedError


class ShardVerifyFigures(NamedTuple):
    """What the folder checks know of one shard."""

    name: str
    records: int
    bytes: int
    sha256: str | None  # None with --quick, or where the framing is broken
    index_sha256: str | None  # None with --quick, or where there is no index


class ShardVerifyResult(NamedTuple):
    """One task's result."""

    figures: ShardVerifyFigures
    label_pairs: LabelPairs
    problems: Problems
    warnings: Problems
    tallies: Dict[str, Any]  # {check name: its shard_tally} of the record checks that give one


class ShardVerifyTask(NamedTuple):
    """One worker task of verify: every record and shard check of this run on this shard and its index."""

    shard_path: str
    index_path: str
    mode: Mode
    checks: Tuple[type, ...]  # the checks of this run (classes: a spawned worker imports their modules)


def framed_records(path: str) -> int:
    """The records of a shard by its own framing, read from the record headers alone (--quick's count): those
    before the framing breaks, where it does."""
    count = 0
    try:
        with read_door.open_read(path, random_access=True) as f:
            for _ in scan_lengths(f, storage.size(path)):
                count += 1
    except (FramingError, OSError):  # where it breaks, or cannot be read: the shard's own checks say so
        pass
    return count


def _buffered(path: str, opened: IO[bytes]) -> IO[bytes]:
    """An object's file read through a buffer of 1 MB (one request per MB); a local file as it is opened
    (Python's reader reads a large record straight into its bytes, no copy)."""
    if not storage.is_url(path):
        return opened
    # open_read gives raw or buffered binary files, which have the readinto that IO[bytes] does not declare
    return io.BufferedReader(opened, 1 << 20)  # type: ignore[type-var]


def check_shard(shard_path: str, index_path: str, mode: Mode, checks: Tuple[type, ...]) -> ShardVerifyResult:
    """Every record and shard check of this run on one shard (a worker task)."""
    shard = Shard(shard_path, index_path)
    problems, warnings = Problems(), Problems()
    digest = None if mode.quick else hashlib.sha256()
    label_pairs: LabelPairs = {}
    record_checks = [(check_class(), check_class.name, warnings if check_class.warning else problems)
                     for check_class in checks if issubclass(check_class, RecordCheck)]
    with read_door.open_read(shard_path, random_access=mode.quick) as opened, _buffered(shard_path, opened) as f:
        try:
            if mode.quick:
                for offset, length in scan_lengths(f, shard.size):
                    shard.entries.append((offset, OVERHEAD + length))
            else:
                for offset, payload, crc_ok in read_records(f, shard.size, digest):
                    exit_if_orphaned()
                    record = Record(len(shard.entries), offset, payload, crc_ok)
                    shard.entries.append((offset, OVERHEAD + len(payload)))
                    for record_check, name, found in record_checks:
                        for message in record_check.run_record(record):
                            found.add(name, shard.name, record.number, offset, message)
                    if record.readable:
                        label_pairs.setdefault(record.label_pair(), [0, record.number, offset])[0] += 1
        except FramingError as e:
            shard.framing_error = e
    shard.read_index()
    for check in checks:
        if issubclass(check, ShardCheck):
            for finding in check().run_shard(shard):
                (warnings if check.warning else problems).add(check.name, *finding)
    sha256 = digest.hexdigest() if digest is not None and shard.framing_sound else None
    index_sha256 = hashlib.sha256(shard.index_bytes).hexdigest() if shard.index_bytes is not None and not mode.quick \
        else None
    figures = ShardVerifyFigures(shard.name, len(shard.entries), shard.size, sha256, index_sha256)
    tallies = {name: record_check.shard_tally() for record_check, name, _ in record_checks}
    return ShardVerifyResult(figures, label_pairs, problems, warnings,
                       {name: tally for name, tally in tallies.items() if tally is not None})
