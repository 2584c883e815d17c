"""DALI index files (docs/dali-index.md): one `<offset> <size>` line per record, size = 16 + payload.

Written byte-identical to what DALI's `tfrecord2idx` writes for a sound file,
and checked by every rule DALI does not check itself: DALI 2.4 accepts an empty,
short, duplicated or half-parsed index without a word and trains on fewer (or
repeated) records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Optional, Tuple

from imagenet_build.format.tfrecord import OVERHEAD, FramingError, scan_lengths
from imagenet_build.infra import read_door, storage, write_door
from imagenet_build.infra.errors import BuildError

_LINE = re.compile(r"^(\d+) (\d+)$")
_NUMBER = re.compile(r"^[+-]?\d+$")
Problem = Tuple[Optional[int], Optional[int], str]  # (line number, byte offset, message); None where none applies


def index_line(offset: int, size: int) -> str:
    return f"{offset} {size}\n"


def index_text(entries: Iterable[tuple[int, int]]) -> str:
    """Index file contents for [(offset, size)] records."""
    return "".join(index_line(offset, size) for offset, size in entries)


def record_entries(shard_path: str) -> list[tuple[int, int]]:
    """[(offset, size)] of a TFRecord file (or object) from its headers alone; FramingError where it breaks."""
    size = storage.size(shard_path)
    if size == 0:
        raise FramingError(0, "empty file (0 bytes): not a TFRecord file")
    with read_door.open_read(shard_path, random_access=True) as f:
        return [(offset, OVERHEAD + length) for offset, length in scan_lengths(f, size)]


def write_index(shard_path: str, index_path: str) -> int:
    """Index one TFRecord file, atomically. Returns the record count; FramingError leaves no file."""
    entries = record_entries(shard_path)
    write_door.make_folder(storage.parent(index_path))
    write_door.write_bytes(index_path, index_text(entries).encode())
    return len(entries)


def check_index(raw: bytes | None, entries: Sequence[tuple[int, int]] | None, file_size: int) -> list[Problem]:
    """Problems [(line, offset, message)] of an index's bytes (None: no index) against its shard.

    The rule every reader of indexes holds an index to (verify, the PyTorch reader, trainer-check's
    DALI and PyTorch paths): its entries follow each other from byte 0 and the last ends at the
    shard's size. `entries` are the shard's [(offset, size)] as read from its own framing (verify),
    or None where only the file's size is known (a reader at open: each record's own length is then
    checked when the record is read).
    """
    if raw is None:
        return [(None, None, "index file missing: DALI refuses to start without it")]
    if not raw and file_size:
        held = f"{len(entries)} records" if entries else f"{file_size} bytes"
        return [(None, None, f"index file is empty but the shard has {held}: DALI silently reads none of them")]
    parsed, problems = parse_index(raw)
    if problems or not parsed:
        return problems
    return _coverage(parsed, entries, file_size)


def _coverage(parsed: list[tuple[int, int, int]], entries: Sequence[tuple[int, int]] | None,
              file_size: int) -> list[Problem]:
    """check_index's rule on parsed lines: contiguous from 0, one per record (where the records are
    known), the last ending at the file's size."""
    position, problem = _follow_entries(parsed, None if entries is None else dict(entries))
    if problem:
        return [problem]
    if entries is not None and len(parsed) != len(entries):
        return [(None, position, f"{len(parsed)} lines for {len(entries)} records: DALI silently reads only "
                                 f"{len(parsed)} of them")]
    if position != file_size:
        last = parsed[-1][0]
        why = ("the records after it are missing from the index" if position < file_size
               else "it runs past the end of the shard")
        return [(last, position, f"the last entry ends at byte {position}, the shard has {file_size} bytes: {why}")]
    return []


def index_entries(shard_path: str, index_path: str) -> list[tuple[int, int]]:
    """The [(offset, size)] of a shard's records from its DALI index, refused unless the index covers
    the shard exactly (check_index: contiguous from 0, the last entry ending at the file's size).

    Every reader calls this when it opens a shard: one read of the index, one stat of the shard, no
    read of the shard (0.7-0.8 ms for 1,251 records). A problem is one BuildError line naming
    the index, its line and the shard. A last line without its newline is read as DALI reads it.
    """
    try:
        raw = read_door.read_bytes(index_path)
    except FileNotFoundError:
        raise BuildError(f"{index_path}: DALI index missing (the index of {shard_path}); "
                         "run imagenet-build index") from None
    except OSError as e:  # not a regular file (a FIFO, a device): refused unread
        raise BuildError(f"{index_path}: {e.strerror or e} (the index of {shard_path}); "
                         "run imagenet-build verify") from None
    if raw and not raw.endswith(b"\n"):
        raw += b"\n"  # DALI reads a last line without its newline; verify reports it
    size = storage.size(shard_path)
    parsed, problems = parse_index(raw)
    if not problems:
        problems = _coverage(parsed, None, size) if parsed else check_index(raw, None, size)
    if problems:
        line, _, message = problems[0]
        where = f"line {line}: " if line is not None else ""
        raise BuildError(f"{index_path}: {where}{message} (the index of {shard_path}); run imagenet-build verify")
    return [(offset, size) for _, offset, size in parsed]


_WELL_FORMED = re.compile(rb"(?:\d+ \d+\n)*")  # every line tfrecord2idx's: the fast path of parse_index


def parse_index(raw: bytes) -> tuple[list[tuple[int, int, int]], list[Problem]]:
    """[(line number, offset, size)] of an index's lines, and the problems of lines DALI cannot parse
    (every reader of indexes parses them here: verify, the PyTorch reader, trainer-check)."""
    if _WELL_FORMED.fullmatch(raw):  # the usual case, in one pass (0.5 ms for 1,251 lines, 1.4 ms line by line)
        numbers = list(map(int, raw.split()))
        return list(zip(range(1, len(numbers) // 2 + 1), numbers[0::2], numbers[1::2])), []
    problems: list[Problem] = []
    lines = raw.decode("ascii", errors="replace").split("\n")
    if lines[-1] == "":
        lines.pop()
    else:
        problems.append((len(lines), None, "last line has no newline"))
    parsed = []
    for number, line in enumerate(lines, start=1):
        match = _LINE.match(line)
        if match:
            parsed.append((number, int(match.group(1)), int(match.group(2))))
        else:
            problems.append((number, None, _line_problem(number, line)))
    return parsed, problems


def _line_problem(number: int, line: str) -> str:
    """Why a line is not tfrecord2idx's, and what DALI makes of it."""
    tokens = line.split()
    if all(_NUMBER.match(token) for token in tokens):
        # DALI reads the index as numbers in pairs, whatever the whitespace and lines between them
        dali = ("DALI reads its numbers; stricter readers, such as the PyTorch reader, refuse it"
                if len(tokens) % 2 == 0 else "DALI, which reads numbers in pairs, pairs the wrong ones from here")
        return f"not tfrecord2idx's '<offset> <size>' line: {line[:60]!r} ({dali})"
    kind = "a header line" if number == 1 and not line[:1].isdigit() else "not '<offset> <size>'"
    return f"{kind}: {line[:60]!r}; DALI stops parsing this file here"


def _follow_entries(
    parsed: list[tuple[int, int, int]], expected: dict[int, int] | None
) -> tuple[int, Problem | None]:
    """Walk the entries from byte 0: where they end, or the first entry that is not the next record
    (`expected`: {offset: size} of the shard's records, where they are known)."""
    position = 0  # where the next entry must start
    for number, offset, size in parsed:
        if offset != position:
            return position, (number, offset, _out_of_place(number, offset, size, parsed, position, expected or {}))
        if expected is None:
            if size < OVERHEAD:
                return position, (number, offset, f"size {size} is less than a record's {OVERHEAD} bytes of framing")
            position = offset + size
            continue
        if offset not in expected:
            return position, (number, offset, "no record starts at this offset")
        if size != expected[offset]:
            merged = _covers_several(offset, size, expected)
            why = (
                f"size {size} spans {merged} records (merged entries): DALI reads them as one"
                if merged
                else f"size {size} but the record at this offset is {expected[offset]} bytes (16 + its length)"
            )
            return position, (number, offset, why)
        position = offset + size
    return position, None


def _out_of_place(
    number: int, offset: int, size: int, parsed: list[tuple[int, int, int]], position: int, expected: dict[int, int]
) -> str:
    """Why an entry that does not start where the previous one ended is wrong (`expected` empty: the
    shard's records are not known, only where the entries must start)."""
    if parsed and number > 1 and (offset, size) == (parsed[number - 2][1], parsed[number - 2][2]):
        return "repeats the line before it: DALI reads that record twice an epoch"
    if not expected:
        if number == 1:
            return f"the first entry starts at byte {offset}, not 0"
        return f"starts at byte {offset}, but line {number - 1} ends at byte {position}: entries must follow each other"
    if offset < position:
        return f"goes back to byte {offset} (entries must follow each other)"
    if offset in expected:
        return f"skips the record(s) between byte {position} and {offset}"
    return f"offset {offset} is not where a record starts (expected {position})"


def _covers_several(offset: int, size: int, expected: dict[int, int]) -> int:
    """How many consecutive records [offset, offset + size) spans exactly, or 0."""
    count, position = 0, offset
    while position < offset + size and position in expected:
        position += expected[position]
        count += 1
    return count if position == offset + size and count > 1 else 0
