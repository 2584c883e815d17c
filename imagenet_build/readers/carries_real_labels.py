"""Whether shards carry ReaL labels (image/class/real_labels), for every reader asked to return them.

A reader asked for them (`real_labels=True`) checks this first, so that a build without them is one
clear error rather than empty lists (TensorFlow's parser gives a missing feature as empty, and a
ReaL accuracy over no labels means nothing). The word of the build's manifest where the shards have
one (convert --real-labels puts them in every validation record, and only there); without one, each
shard's first record (verify holds a split to all or none).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from imagenet_build.format.build_folder import BuildFolder
from imagenet_build.format.manifest import Manifest, carries_real_labels
from imagenet_build.format.naming import parse_shard_name
from imagenet_build.format.record_schema import REAL_LABELS, decode_example
from imagenet_build.format.tfrecord import FramingError, read_records
from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import BuildError

ADDED_BY = "convert --real-labels real.json adds them to the validation records"


def require_real_labels(paths: Sequence[str]) -> None:
    """BuildError naming the first shard (or its manifest) whose records carry no ReaL labels."""
    manifests: dict[str, Manifest | None] = {}
    for path in paths:
        folder = os.path.dirname(path) if not storage.is_url(path) else path.rsplit("/", 1)[0]
        if folder not in manifests:
            manifests[folder] = BuildFolder.open(folder or ".").manifest
        manifest = manifests[folder]
        if manifest is None:
            _first_record_carries(path)
            continue
        if not carries_real_labels(manifest):
            raise BuildError(f"{storage.join(folder, 'manifest.json')}: the build carries no ReaL labels ({ADDED_BY})")
        shard = parse_shard_name(storage.basename(path))
        if shard is not None and shard.split != "validation":
            raise BuildError(f"{path}: a {shard.split} shard: ReaL labels are in the validation records only")


def _first_record_carries(path: str) -> None:
    """A shard with no manifest beside it: its first record must hold the feature."""
    size = storage.size(path)
    with read_door.open_read(path) as f:
        try:
            first = next(iter(read_records(f, size)), None)
        except FramingError as e:
            raise BuildError(f"{path}: byte {e.offset}: {e.message}; run imagenet-build verify") from None
    if first is None:
        raise BuildError(f"{path}: holds no records")
    try:
        carried = REAL_LABELS in decode_example(first[1])
    except Exception as e:  # not slim's Example: a message, not a traceback
        raise BuildError(f"{path}: byte {first[0]}: not slim's Example ({type(e).__name__}: {e})") from None
    if not carried:
        raise BuildError(f"{path}: its records carry no {REAL_LABELS} ({ADDED_BY})")
