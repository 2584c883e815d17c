"""A build opened to be read: the one way verify, every reader, trainer-check and report open one.

`BuildFolder.open(folder, index_dir=None)`: the folder is there (a local folder, or an object store's
prefix), its manifest, where it has one, is sound (format/manifest.py's reader), and its DALI indexes are
where the option says, else where the manifest records them, else in dali_idx/. A split opened from it
(`split`) is checked before a record is read: its shards form a whole set (format/naming.py's rule: one
-of-N, 00000 to N-1 each there; a reader given a split with a shard missing would read less than the build
without a word) and each index covers its shard exactly (format/dali_index.py's rule: DALI checks nothing,
and reads a short index as a short shard). Each problem is one BuildError line naming the file.

verify and report judge a build rather than read it: verify keeps an unsound manifest as its finding
(`judging`), report shows each shard whose index does not cover it (`indexed`) and reads the others.
"""

from __future__ import annotations

import os
from typing import List, NamedTuple, Optional, Tuple

from imagenet_build.format.dali_index import index_entries
from imagenet_build.format.destination import Destination
from imagenet_build.format.folder_contents import folder_entries
from imagenet_build.format.manifest import Manifest, read_manifest
from imagenet_build.format.naming import index_path, no_shards_message, shard_set_problems, split_shards
from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import BuildError, PathLike

IndexEntries = List[Tuple[int, int]]  # a shard's records, (offset, size), as its index lists them


class OpenedSplit(NamedTuple):
    """A split of a build, its shard set whole and each index covering its shard."""

    folder: str
    split: str
    manifest: Optional[Manifest]
    paths: List[str]  # the shards, in name order
    indexes: List[str]  # each shard's DALI index
    entries: List[IndexEntries]  # each shard's records, as its index lists them


class IndexedShard(NamedTuple):
    """One shard of a split and its index: the records it lists, or why it does not cover the shard."""

    path: str
    index_file: str
    entries: Optional[IndexEntries]  # None where the index does not cover its shard
    problem: str  # the one line saying why ("" where it covers it)


def refuse_what_is_no_file(folder: str, index_dir: str) -> None:
    """Each of a build's files (its shards, their indexes, manifest.json, labels.txt, the TFDS files, what the
    checking verbs leave) a regular file: the first that is not (a FIFO, a device, a link to one or to nothing:
    read, each would block, never end, or fail) is one BuildError line, before anything is read. An object store
    holds files alone."""
    if storage.is_url(folder):
        return
    for entry in folder_entries(folder, index_dir):
        if entry.kind in ("shard", "index", "record", "report"):
            try:
                read_door.check_regular(entry.path)
            except OSError as e:
                why = "a link to nothing" if isinstance(e, FileNotFoundError) else e.strerror or str(e)
                raise BuildError(f"{entry.path}: {why}: a build's files are regular files; run imagenet-build verify "
                                 f"{folder}") from None


class BuildFolder(NamedTuple):
    """A build folder, opened: where it is, its manifest (None where it has none) and its index folder."""

    path: str
    manifest: Optional[Manifest]
    index_dir: str
    manifest_problem: str = ""  # opened `judging`: why its manifest cannot be read ("" where it can)

    @classmethod
    def open(cls, folder: PathLike, index_dir: str | None = None, judging: bool = False,
             files: bool = True) -> BuildFolder:
        """The build in `folder`; BuildError for a folder that is not there, or (unless `judging`: verify names
        it as the build's problem) a manifest that is not sound, or (with `files`, unless `judging`) a file of the
        build that is not a regular file (refuse_what_is_no_file; report shows those). `index_dir` overrides the
        manifest's."""
        path = os.fspath(folder)  # a URL stays one (pathlib folds s3:// into s3:/)
        path = path.rstrip("/") if storage.is_url(path) else path
        if not storage.is_url(path) and not os.path.isdir(path):
            raise BuildError(f"{path}: not a folder")
        try:
            manifest = read_manifest(path)
        except ValueError as e:
            if not judging:
                raise BuildError(str(e)) from None
            return cls(path, None, Destination.recorded(path, None, index_dir).index, str(e))
        opened = cls(path, manifest, Destination.recorded(path, manifest, index_dir).index)
        if files and not judging:
            refuse_what_is_no_file(opened.path, opened.index_dir)
        return opened

    def split_paths(self, split: str) -> list[str]:
        """The split's shards, in name order, checked to be a whole set (their indexes not read)."""
        paths = split_shards(self.path, split)
        if not paths:
            raise BuildError(no_shards_message(self.path, f"{split} shards ({split}-NNNNN-of-NNNNN)"))
        gaps = shard_set_problems(split, paths)
        if gaps:
            name, message = gaps[0]
            more = f" (and {len(gaps) - 1} more)" if len(gaps) > 1 else ""
            raise BuildError(f"{storage.join(self.path, name)}: {message}{more}: the {split} split is not whole; "
                             f"run imagenet-build verify {self.path}")
        return paths

    def split(self, split: str) -> OpenedSplit:
        """The split opened to be read by index: its shard set whole, each index covering its shard."""
        paths = self.split_paths(split)
        indexes = [index_path(path, self.index_dir) for path in paths]
        entries = [index_entries(path, index) for path, index in zip(paths, indexes)]
        return OpenedSplit(self.path, split, self.manifest, paths, indexes, entries)

    def indexed(self, split: str) -> list[IndexedShard]:
        """Each shard of the split, in name order, with the records its index lists, or why its index does not
        cover it: for a reader that shows what is wrong rather than stopping (report)."""
        shards = []
        for path in split_shards(self.path, split):
            index = index_path(path, self.index_dir)
            try:
                shards.append(IndexedShard(path, index, index_entries(path, index), ""))
            except BuildError as e:
                shards.append(IndexedShard(path, index, None, str(e)))
        return shards
