"""Where a build's files go: its output folder (or URL prefix of an object store) and its index folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from imagenet_build.format.naming import DEFAULT_INDEX_DIR
from imagenet_build.infra import storage
from imagenet_build.infra.errors import PathLike, UsageError


@dataclass(frozen=True)
class Destination:
    """Where shards go: a local folder, or a URL prefix of an object store.

    Local output is written in place (temp name, fsync, rename). For a URL each
    shard is written to a local temporary folder of the process writing it and
    uploaded whole when complete (an object appears only when its upload finishes),
    which also holds on a remote worker of a Beam runner.
    """

    output: str
    index: str

    @property
    def remote(self) -> bool:
        return storage.is_url(self.output)

    def label_for_manifest(self) -> str:
        """The index folder as the manifest records it: relative to the output when inside it."""
        if self.remote:
            prefix = self.output + "/"
            return self.index[len(prefix):] if self.index.startswith(prefix) else self.index
        try:
            return str(Path(self.index).resolve().relative_to(Path(self.output).resolve()))
        except ValueError:
            return str(Path(self.index).resolve())


def destination(output_dir: PathLike, index_dir: PathLike | None) -> Destination:
    """The output and index folders, normalised (the indexes in OUTPUT/dali_idx unless given)."""
    output_dir = str(output_dir).rstrip("/") if storage.is_url(output_dir) else os.path.normpath(output_dir)
    if not index_dir:
        index_dir = storage.join(output_dir, DEFAULT_INDEX_DIR)
    index_dir = str(index_dir).rstrip("/") if storage.is_url(index_dir) else os.path.normpath(index_dir)
    if storage.is_url(output_dir) != storage.is_url(index_dir):
        raise UsageError("--output-dir and --index-dir must both be local or both be URLs")
    return Destination(output_dir, index_dir)
