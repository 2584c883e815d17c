"""The `index` command: a DALI index written for each TFRecord file named (files, or the shards in folders), by a
pool of worker processes, each index folder locked while it is written and checked first by format/output_guard.py.

The index itself (its bytes, tfrecord2idx's, and the rule every reader holds it to) is format/dali_index.py's;
this module only finds the files, plans one task per index and runs them.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from typing import Any, List, NamedTuple, Optional, TypedDict

from imagenet_build.format.dali_index import write_index
from imagenet_build.format.destination import default_index_dir
from imagenet_build.format.naming import index_path, is_tfrecord_name
from imagenet_build.format.output_guard import check_index_folder
from imagenet_build.format.tfrecord import FramingError
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError, UsageError, check_count
from imagenet_build.infra.lock import FolderLock
from imagenet_build.infra.processes import pool_size
from imagenet_build.infra.workers import Workers, progress_bar


class IndexTask(NamedTuple):
    """One worker task of `index`: this file, its index there."""

    shard_path: str
    index_path: str


def _index_one(shard_path: str, index_path: str) -> tuple[str, int | None, tuple[int | None, str] | None]:
    """A worker task: (shard, records or None, problem or None)."""
    try:
        return shard_path, write_index(shard_path, index_path), None
    except FramingError as e:
        return shard_path, None, (e.offset, e.message)
    except OSError as e:
        return shard_path, None, (None, e.strerror or str(e))


def find_tfrecords(inputs: Iterable[Any]) -> list[str]:
    """Files named on the command line, and in folders the files named like shards or *.tfrecord."""
    found: list[str] = []
    for item in map(str, inputs):
        listed = storage.listdir(item)
        if listed:
            names = sorted(name for name, is_dir in listed.items() if is_tfrecord_name(name) and not is_dir)
            if not names:
                raise BuildError(f"{item}: holds no TFRecord files (<name>-NNNNN-of-NNNNN or *.tfrecord)")
            found.extend(storage.join(item, n) for n in names)
        elif storage.exists(item) and not os.path.isdir(item):
            found.append(item)
        elif os.path.isdir(item):
            raise BuildError(f"{item}: holds no TFRecord files (<name>-NNNNN-of-NNNNN or *.tfrecord)")
        else:
            raise BuildError(f"{item}: no such file or folder")
    return found


def _tasks(shards: list[str], index_dir: str | None) -> list[IndexTask]:
    """One task per file (a file named twice, once); two files whose indexes would share one path are
    refused: one index would silently be the other file's."""
    def key(path: str) -> str:
        return path if storage.is_url(path) else os.path.realpath(path)

    tasks: dict[str, IndexTask] = {}
    for shard in shards:
        task = IndexTask(shard, index_path(shard, index_dir or default_index_dir(storage.parent(shard))))
        other = tasks.setdefault(key(task.index_path), task)
        if key(other.shard_path) != key(shard):
            raise UsageError(f"{other.shard_path} and {shard} would both be indexed as {task.index_path}; "
                             "index them into separate --index-dir folders")
    return list(tasks.values())


def _by_folder(tasks: list[IndexTask]) -> dict[str, list[str]]:
    """{index folder: the shards indexed there}."""
    folders: dict[str, list[str]] = {}
    for task in tasks:
        folders.setdefault(storage.parent(task.index_path), []).append(task.shard_path)
    return folders


class IndexedFile(TypedDict):
    file: str
    index: str  # the index written
    records: int


class RefusedFile(TypedDict):
    file: str
    offset: Optional[int]  # the byte where its framing breaks, where one does
    message: str


class IndexResult(TypedDict):
    """`index`'s result and its --json document: `ok` when no file was refused."""

    ok: bool
    indexed: List[IndexedFile]
    refused: List[RefusedFile]  # files whose framing is broken: no index written for them
    records: int
    seconds: float


def index_shards(inputs: Iterable[Any], index_dir: str | None = None, workers: int = 0) -> IndexResult:
    """Write a DALI index for every TFRecord in `inputs`; the files indexed, and those refused (no index)."""
    started = time.monotonic()
    check_count(workers, "--workers", 0)
    tasks = _tasks(find_tfrecords(inputs), index_dir)
    for folder, shards in _by_folder(tasks).items():
        check_index_folder(folder, shards)  # never into another build, its index folder, or among other files
    indexed: list[IndexedFile] = []
    refused: list[RefusedFile] = []
    bar = progress_bar(len(tasks), 0, "index", "file")

    def done(task: IndexTask, result: tuple[str, int | None, tuple[int | None, str] | None]) -> None:
        shard, records, problem = result
        if problem is None:
            assert records is not None  # _index_one gives the count where it gives no problem
            indexed.append({"file": shard, "index": task.index_path, "records": records})
        else:
            refused.append({"file": shard, "offset": problem[0], "message": problem[1]})
        bar.update(1)

    try:
        with contextlib.ExitStack() as locks:
            for folder in sorted({storage.parent(index_path) for _, index_path in tasks}):
                locks.enter_context(FolderLock(folder))
            with Workers(min(pool_size(workers), len(tasks))) as pool:
                pool.run(_index_one, tasks, done)
    finally:
        bar.close()
    indexed.sort(key=lambda r: r["file"])
    refused.sort(key=lambda r: r["file"])
    return IndexResult(ok=not refused, indexed=indexed, refused=refused, records=sum(r["records"] for r in indexed),
                       seconds=round(time.monotonic() - started, 3))
