"""What verify finds, and how much of it a report keeps: each problem with its check, file, record and
byte offset; the first SHOWN_PER_CHECK of each check kept, all counted."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple, Optional, Tuple, TypedDict

SHOWN_PER_CHECK = 20
Place = Tuple[str, int, int]  # (shard name, record number, byte offset) of one record


class Problem(TypedDict):
    """One problem (or warning) as the report and `--json` give it."""

    check: str
    file: Optional[str]
    record: Optional[int]  # the record's number in its shard, or the index's line for `index`
    offset: Optional[int]  # the byte of the file it is about
    message: str


class Finding(NamedTuple):
    """What a check found, where: the check it belongs to is the one that found it."""

    file: str | None
    record: int | None
    offset: int | None
    message: str


class Problems:
    """Problems by check: the first SHOWN_PER_CHECK of each kept, all counted."""

    def __init__(self) -> None:
        self.shown: list[Problem] = []
        self.counts: Counter[str] = Counter()
        self._shown_counts: Counter[str] = Counter()

    def add(
        self,
        check: str,
        file: str | None = None,
        record: int | None = None,
        offset: int | None = None,
        message: str = "",
    ) -> None:
        self._keep({"check": check, "file": file, "record": record, "offset": offset, "message": message})
        self.counts[check] += 1

    def merge(self, other: Problems) -> None:
        """Add a task's problems: those it kept, and the count of all it found."""
        for problem in other.shown:
            self._keep(problem)
        self.counts.update(other.counts)

    def _keep(self, problem: Problem) -> None:
        if self._shown_counts[problem["check"]] < SHOWN_PER_CHECK:
            self._shown_counts[problem["check"]] += 1
            self.shown.append(problem)
