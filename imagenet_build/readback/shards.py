"""A split's shards and their DALI indexes, opened as every reader that reads by index opens them.

Before a record is read: the folder is there, its manifest (where it has one) is sound, the split's
shards form a whole set (format/naming.py's rule: one -of-N, 00000 to N-1 each there; a reader given a
split with a shard missing would read less than the build without a word) and each index covers its
shard exactly (format/dali_index.py's rule: DALI checks nothing, and reads a short index as a short
shard). Each problem is one BuildError line naming the file. The DALI readers and the PyTorch reader
open a split here; tf.data reads the shards' own framing and needs no index.
"""

from __future__ import annotations

import os
from typing import List, NamedTuple, Optional, Tuple

from imagenet_build.format.dali_index import index_entries
from imagenet_build.format.manifest import Manifest, read_manifest
from imagenet_build.format.naming import index_dir_of, index_path, no_shards_message, shard_set_problems, split_shards
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError, PathLike


class SplitShards(NamedTuple):
    folder: str
    split: str
    manifest: Optional[Manifest]
    paths: List[str]  # the shards, in name order
    indexes: List[str]  # each shard's DALI index
    entries: List[List[Tuple[int, int]]]  # each shard's records, (offset, size), as its index lists them


def open_split(folder: PathLike, split: str = "train", index_dir: str | None = None) -> SplitShards:
    """The split's shards and indexes, each checked as the module says; index_dir overrides the manifest's."""
    folder = os.fspath(folder)  # a URL stays one (pathlib folds s3:// into s3:/)
    if not storage.is_url(folder) and not os.path.isdir(folder):
        raise BuildError(f"{folder}: not a folder")
    try:
        manifest = read_manifest(folder)
    except ValueError as e:
        raise BuildError(str(e)) from None
    paths = split_shards(folder, split)
    if not paths:
        raise BuildError(no_shards_message(folder, f"{split} shards ({split}-NNNNN-of-NNNNN)"))
    gaps = shard_set_problems(split, paths)
    if gaps:
        name, message = gaps[0]
        more = f" (and {len(gaps) - 1} more)" if len(gaps) > 1 else ""
        raise BuildError(f"{storage.join(folder, name)}: {message}{more}: the {split} split is not whole; "
                         f"run imagenet-build verify {folder}")
    index_dir = index_dir_of(folder, manifest, index_dir)
    indexes = [index_path(path, index_dir) for path in paths]
    entries = [index_entries(path, index) for path, index in zip(paths, indexes)]
    return SplitShards(folder, split, manifest, paths, indexes, entries)
