"""The spool of a copy read from decompressed archives, for one convert: the one place the writer asks a copy
for that capability (sources/spool.py's SpooledCopy), by type; every later step takes the spool from here.

It goes into the output folder (a temporary folder where the output is in an object store), after the
output's locks are held and a killed run's spool is removed, and is removed at the end, whatever the outcome,
before the locks are let go.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Optional

from imagenet_build.request import ConvertRequest
from imagenet_build.sources.spool import Spool, SpooledCopy, remove_stale


@contextlib.contextmanager
def copy_spool(request: ConvertRequest) -> Iterator[Optional[Spool]]:
    """The copy's spool, placed (None for a copy read in place), removed on the way out."""
    folder = "" if request.dest.remote else request.dest.output
    if folder:
        remove_stale(folder)  # a killed run's, whatever this run reads
    if not isinstance(request.copy, SpooledCopy):
        yield None
        return
    with request.copy.spool.placed_in(folder) as spool:
        yield spool
