"""The one rule of the package's registries (engines, readers, trainers): an entry is added under its name once; a
second entry of the same name is a programming error, refused at import rather than silently replacing the first."""

from __future__ import annotations

from typing import TypeVar

Entry = TypeVar("Entry")


def add_once(table: dict[str, Entry], name: str, entry: Entry, kind: str) -> Entry:
    """`entry` added to `table` under `name`; ValueError where the name is taken. Returns `entry` (for a decorator)."""
    if name in table:
        raise ValueError(f"{kind} {name!r} registered twice")
    table[name] = entry
    return entry
