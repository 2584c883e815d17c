"""What the folder holds: its shards by split, found before any is read, and what it must not hold.

Listing is where verify meets the folder's names, so the listing reports what it meets that is wrong
under the checks whose rows they are: `shard-set` (strays, gaps, a total that disagrees, a shard
name, labels.txt or a file left for report that is no regular file, strays in the index folder) and
`index` (an index with no shard).
"""

from __future__ import annotations

import os

from imagenet_build.format.destination import Destination
from imagenet_build.format.folder_contents import MAY_HOLD, folder_entries
from imagenet_build.format.naming import (
    LABELS_NAME,
    no_shards_message,
    parse_shard_name,
    shard_set_problems,
)
from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import BuildError
from imagenet_build.verify.problems import Problems


def list_shards(root: str, index_dir: str, problems: Problems) -> dict[str, list[tuple[int, str]]]:
    """{split: [(number, path)]} of the shards in root; what the folder and the index folder must not hold is
    reported. A folder with no shard at all is no build: BuildError."""
    by_split = _shard_set(root, index_dir, problems)
    paths = [path for shards in by_split.values() for _, path in shards]
    if not paths:
        raise BuildError(no_shards_message(root, "shards named <split>-NNNNN-of-NNNNN"))
    _orphan_indexes(root, index_dir, {storage.basename(p) for p in paths}, problems)
    return by_split


def _shard_set(root: str, index_dir: str, problems: Problems) -> dict[str, list[tuple[int, str]]]:
    """{split: [(index, path)]} of the shards in root; stray files and name gaps reported."""
    shards: dict[str, list[tuple[int, int, str]]] = {}
    for entry in folder_entries(root, index_dir):  # the rule of what a build folder may hold
        parsed = parse_shard_name(entry.name)
        if entry.in_index_folder:  # the index folder's files: _orphan_indexes
            continue
        if parsed and entry.kind == "shard" and not storage.is_url(root) and not os.path.isfile(entry.path):
            problems.add("shard-set", entry.name, None, None,  # reading would block
                         f"not a regular file ({file_kind(entry.path)})")
        elif _kept_for_report(entry.kind, entry.name) and not storage.is_url(root) and \
                not os.path.isfile(entry.path):
            problems.add("shard-set", entry.name, None, None, f"not a regular file ({file_kind(entry.path)}): a build "
                                                              "folder's files are regular files")
        elif parsed and entry.kind == "shard":
            shards.setdefault(parsed.split, []).append((parsed.number, parsed.total, entry.path))
        elif entry.kind == "stranger":
            problems.add("shard-set", entry.name, None, None, f"stray file: a build folder holds only {MAY_HOLD}")
    for split, items in shards.items():
        for name, message in shard_set_problems(split, [path for _, _, path in items]):
            problems.add("shard-set", name, None, None, message)
    return {split: sorted((index, path) for index, _, path in items) for split, items in shards.items()}


def _kept_for_report(kind: str, name: str) -> bool:
    """labels.txt and what the checking verbs leave for report: files whose own readers do not judge their kind (the
    manifest's reader and the tfds check do)."""
    return kind == "report" or name == LABELS_NAME


def _orphan_indexes(root: str, index_dir: str, shard_names: set[str], problems: Problems) -> None:
    prefix = "" if Destination(root, index_dir).placement == "beside" else storage.basename(index_dir) + "/"
    for entry in folder_entries(root, index_dir):
        if entry.in_index_folder and entry.kind == "stranger":
            problems.add("shard-set", f"{prefix}{entry.name}", None, None, "stray file in the index folder")
        elif entry.kind == "index" and entry.shard not in shard_names:
            problems.add("index", f"{prefix}{entry.name}", None, None, "index file with no shard")


def file_kind(path: str) -> str:
    """What a path that is no regular file is, in words."""
    if not os.path.exists(path):
        return "a link to nothing"
    return read_door.kind_of(os.stat(path).st_mode)
