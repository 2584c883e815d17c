"""Which records a page reads: a sample for the charts, and per class the first few records met in one
seeded shuffle of the build, found by their heads alone; only those shown as thumbnails are read whole.

The shuffle is the same for every run (seed 0), so the same build gives the same page.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import IO, Any, Callable, NamedTuple, TypeVar

from imagenet_build.infra.errors import UsageError
from imagenet_build.report.records import Fields, Place, RecordError, Shards, open_shard, read_fields, read_label

STATS_SAMPLE = 2000  # records whose sizes, bytes and boxes the charts show (every record of a smaller build)
HEAD_BUDGET = 200_000  # heads read at most while looking for each shown class's records
CHUNK = 1024  # records read in one pass, in file order
SMALL_BUILD_CLASSES = 50  # up to this many classes, every class gets its row by default
SAMPLED_CLASSES = 24  # else this many, spread over the labels
ALL_CLASSES = -1  # --classes all

T = TypeVar("T")


class Sampled(NamedTuple):
    """What was read: the charts' sample, each shown class's records (images read), what could not be read."""

    stats: list[Fields]
    sheets: dict[int, list[tuple[Place, Fields]]]  # label -> its records, images read
    unreadable: list[tuple[Place, str]]
    heads_read: int


def classes_given(value: object) -> int | None:
    """--classes as given: K (1 or more), "all" (ALL_CLASSES), or None (the default); else a UsageError."""
    if value is None or value == "all":
        return None if value is None else ALL_CLASSES
    if isinstance(value, str) and value.isascii() and value.isdigit():  # isdigit() alone takes '²', which int() not
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise UsageError(f"--classes takes a number of classes (1 or more) or 'all', not {value!r}")


def chosen_labels(num_classes: int, classes: int | None) -> list[int]:
    """The labels whose contact sheets the page shows: `classes` of them spread evenly over 1..num_classes,
    every class with ALL_CLASSES, by default (None) all of a small build and SAMPLED_CLASSES of a larger one."""
    if classes == ALL_CLASSES:
        classes = num_classes
    elif classes is None:
        classes = num_classes if num_classes <= SMALL_BUILD_CLASSES else SAMPLED_CLASSES
    count = min(classes, num_classes)
    if count <= 1:
        return [1][:count]
    return sorted({1 + round(i * (num_classes - 1) / (count - 1)) for i in range(count)})


def read_many(places: Iterable[Place],
              read: Callable[[IO[bytes], Place], T]) -> Iterator[tuple[Place, T | RecordError]]:
    """What `read` reads of each place (or why not), in file order, each shard opened once."""
    by_shard: dict[str, list[Place]] = {}
    for place in places:
        by_shard.setdefault(place.path, []).append(place)
    for path, listed in sorted(by_shard.items()):
        try:
            f = open_shard(path)
        except OSError as e:
            for place in listed:
                yield place, RecordError(f"cannot be opened ({e.strerror or e})")
            continue
        with f:
            for place in sorted(listed, key=lambda p: p.offset):
                try:
                    yield place, read(f, place)
                except RecordError as e:
                    yield place, e
                except OSError as e:
                    yield place, RecordError(f"cannot be read ({e.strerror or e})")


def with_image(f: IO[bytes], place: Place) -> Fields:
    return read_fields(f, place, with_image=True)


def _read_chunk(places: list[Place], stats_wanted: int) -> Iterator[tuple[Place, Fields | int | None | RecordError]]:
    """The first `stats_wanted` places' fields (heads and tails), the others' labels alone (heads), in order."""
    fields = dict(read_many(places[:stats_wanted], read_fields))
    labels = dict(read_many(places[stats_wanted:], read_label))
    for n, place in enumerate(places):
        yield place, fields[place] if n < stats_wanted else labels[place]


def sample(shards: Shards, labels: list[int], per_class: int, bar: Any,
           stats_size: int = STATS_SAMPLE, budget: int = HEAD_BUDGET) -> Sampled:
    """Read heads in the seeded shuffle until the charts' sample is full (its heads and tails) and each of
    `labels` has `per_class` records (or `budget` heads were read), then the images of those records."""
    order = random.Random(0).sample(range(shards.total), min(shards.total, budget))
    wanted = {label: [] for label in labels}  # type: dict[int, list[Place]]
    stats: list[Fields] = []
    unreadable: list[tuple[Place, str]] = []
    read = 0

    def done() -> bool:
        return len(stats) >= min(stats_size, shards.total) and all(len(p) >= per_class for p in wanted.values())

    for start in range(0, len(order), CHUNK):
        if done():
            break
        places = [shards.place(k) for k in order[start:start + CHUNK]]
        read += len(places)
        bar.update(len(places))
        for place, got in _read_chunk(places, max(0, stats_size - len(stats))):
            if isinstance(got, RecordError):
                unreadable.append((place, str(got)))
                continue
            if isinstance(got, Fields):
                stats.append(got)
                got = got.label
            found = wanted.get(got) if got is not None else None
            if found is not None and len(found) < per_class:
                found.append(place)
    sheets: dict[int, list[tuple[Place, Fields]]] = {label: [] for label in labels}
    rank = {place: n for places in wanted.values() for n, place in enumerate(places)}
    for place, fields in read_many(rank, with_image):
        if isinstance(fields, RecordError):
            unreadable.append((place, str(fields)))
        elif fields.label in sheets:
            sheets[fields.label].append((place, fields))
    for rows in sheets.values():
        rows.sort(key=lambda row: rank[row[0]])
    return Sampled(stats, sheets, unreadable, read)
