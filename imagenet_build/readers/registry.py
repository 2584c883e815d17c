"""The reader library's readers in one registry, as the copies, verify's checks and the engines have theirs.

Each reader is one module of this package that registers a `BuildReader` when imported (readers/__init__.py
imports them): its name, how reports and errors name it, what it needs installed, and whether it finds
records by the DALI indexes (each must then cover its shard exactly). Importing `imagenet_build.readers`
registers every reader of the library; the tests that hold every reader to the same rules are parametrised
over this registry. trainer-check's trainers, which read through these readers, have their own registry
(trainercheck/trainers.py).
"""

from __future__ import annotations

from typing import NamedTuple, Tuple

from imagenet_build.infra.unique_names import add_once


class BuildReader(NamedTuple):
    name: str  # the registry's key
    title: str  # how reports, errors and docs name it
    needs: Tuple[str, ...]  # the modules it imports (optional.require names their extras)
    by_index: bool = True  # finds records by the DALI indexes (each must cover its shard); else by the framing


READERS: dict[str, BuildReader] = {}


def register(reader: BuildReader) -> BuildReader:
    return add_once(READERS, reader.name, reader, "reader")
