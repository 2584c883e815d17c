"""A build's split as a Grain random-access data source (Grain: JAX's data loader), importable as
imagenet_build.grain.

`RecordSource(folder, split)` lists every record of the split by the DALI indexes, the split opened as every
reader opens a build (format/build_folder.py: the manifest sound, the shard set whole, each index covering its
shard exactly, before anything is read), and reads record k with one positioned read at its index offset (a
pread of a local shard, one ranged GET of an object in a store), its framing and CRCs checked and slim's Example
parsed (record_parse.py), into a dict: "image" (the stored JPEG or PNG bytes), "label" (0-based), "filename",
"shard" and "offset" (where the record lies). It keeps Grain's RandomAccessDataSource protocol (`__len__`,
`__getitem__`), so Grain's own sharding and shuffling apply: `grain.MapDataset.source(source).shuffle(seed=...)`
sliced per host, or `grain.DataLoader(data_source=source, sampler=grain.IndexSampler(len(source),
shard_options, shuffle=True, num_epochs=1, seed=...), worker_count=...)`: every record once an epoch across
shards x workers. Nothing here imports Grain (the `grain` extra installs it for the loader); no second copy of
the data is made.
"""

from __future__ import annotations

import os
from array import array
from typing import Any

from imagenet_build.format.build_folder import BuildFolder
from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import BuildError, PathLike
from imagenet_build.readers.record_parse import parse_record
from imagenet_build.readers.registry import BuildReader, register


def open_shard(path: str) -> Any:
    """A shard opened for positioned reads: a local file's descriptor, or an object's file with no read-ahead."""
    try:
        return read_door.open_read(path, random_access=True) if storage.is_url(path) else read_door.open_fd(path)
    except OSError as e:
        raise BuildError(f"{path}: cannot be opened: {e.strerror or e}") from None


def read_at(path: str, offset: int, size: int, files: dict[str, Any]) -> bytes:
    """`size` bytes at `offset` of shard `path`: one pread of a local file, one ranged read of an object (each
    shard opened once, kept in `files`, this process's)."""
    f = files.get(path)
    if f is None:
        f = files[path] = open_shard(path)
    if isinstance(f, int):
        return os.pread(f, size, offset)
    f.seek(offset)
    return f.read(size)


class RecordSource:
    """Every record of a split, by the DALI indexes, for Grain: record k read by one positioned read at its offset.

    `index_dir` overrides where the manifest says the indexes are; check_crc=False skips the CRCs (the framing's
    lengths are still checked). A folder is a local path or an fsspec URL (s3://, gs://: the `s3`, `gcs` extras).
    """

    def __init__(self, folder: PathLike, split: str = "train", *, index_dir: str | None = None,
                 check_crc: bool = True) -> None:
        opened = BuildFolder.open(folder, index_dir).split(split)
        self.folder, self.split, self.check_crc = opened.folder, split, check_crc
        self.paths = opened.paths
        self.shard, self.offset, self.size = array("i"), array("q"), array("q")  # 20 bytes a record
        for number, entries in enumerate(opened.entries):
            for offset, size in entries:
                self.shard.append(number)
                self.offset.append(offset)
                self.size.append(size)
        self._files: dict[str, Any] = {}
        self._pid = os.getpid()

    def __len__(self) -> int:
        return len(self.offset)

    def __getitem__(self, record_key: int) -> dict:
        if not -len(self) <= record_key < len(self):
            raise IndexError(f"record {record_key} of {len(self)}")
        if self._pid != os.getpid():  # a forked worker opens its own files
            self._files, self._pid = {}, os.getpid()
        shard, offset, size = self.shard[record_key], self.offset[record_key], self.size[record_key]
        path = self.paths[shard]
        record = parse_record(path, offset, size, read_at(path, offset, size, self._files), self.check_crc)
        return {"image": record.encoded, "label": record.label, "filename": record.filename, "shard": path,
                "offset": offset}

    def __getstate__(self) -> dict:  # a worker started by pickling opens its own files
        return {**self.__dict__, "_files": {}, "_pid": -1}

    def __del__(self) -> None:
        if getattr(self, "_pid", -1) == os.getpid():
            for f in self._files.values():
                try:
                    os.close(f) if isinstance(f, int) else f.close()
                except OSError:
                    pass
            self._files = {}

    def __repr__(self) -> str:  # Grain names a source by its repr (its checkpoints, its errors)
        return f"RecordSource({self.folder!r}, {self.split!r}, {len(self)} records)"


READER = register(BuildReader(name="grain", title="Grain data source (imagenet_build.grain)", needs=("grain",)))

__all__ = ["RecordSource"]
