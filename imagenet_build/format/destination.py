"""Where a build's files are: its output folder (or URL prefix of an object store) and its index folder, one value.

The one home of the index folder's rule: OUTPUT/dali_idx unless --index-dir (`index_dir=`) names another
(`destination`, for the verbs that write a build); what the manifest records of it (`label_for_manifest`:
relative to the output when inside it, "." when it is the output folder itself, else whole); where a
written build's indexes are, from that record (`Destination.recorded`, for every reader, verify, resume
and the commit check); where it lies against the output (`placement`: what the output folder may hold and
which folders a run locks follow from it); and a resized build's, in its sub-folder (`below`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from imagenet_build.format.naming import DEFAULT_INDEX_DIR
from imagenet_build.infra import storage
from imagenet_build.infra.errors import PathLike, UsageError

# Where the index folder is: a folder of the output (dali_idx/ by default), the output folder itself (each index
# next to its shard), or another folder
Placement = Literal["inside", "beside", "elsewhere"]


@dataclass(frozen=True)
class Destination:
    """Where a build's shards and indexes go (or are): a local folder, or a URL prefix of an object store.

    Local output is written in place (temp name, fsync, rename). For a URL each
    shard is written to a local temporary folder of the process writing it and
    uploaded whole when complete (an object appears only when its upload finishes),
    which also holds on a remote worker of a Beam runner.
    """

    output: str
    index: str
    index_given: bool = False  # the user named the index folder (--index-dir), rather than taking OUTPUT/dali_idx

    @property
    def remote(self) -> bool:
        return storage.is_url(self.output)

    @property
    def placement(self) -> Placement:
        """Where the index folder is against the output, compared as real paths (o/dali_idx, o/dali_idx/ and
        ./o/dali_idx are one folder)."""
        if storage.is_url(self.output):
            output, index = self.output.rstrip("/"), self.index.rstrip("/")
        else:
            output, index = os.path.realpath(self.output), os.path.realpath(self.index)
        if index == output:
            return "beside"
        return "inside" if storage.parent(index) == output else "elsewhere"

    def label_for_manifest(self) -> str:
        """The index folder as the manifest records it (its options.index_dir): relative to the output when
        inside it, "." when it is the output, else whole; `recorded` reads it back."""
        if self.remote:
            prefix = self.output + "/"
            return self.index[len(prefix):] if self.index.startswith(prefix) else self.index
        try:
            return str(Path(self.index).resolve().relative_to(Path(self.output).resolve()))
        except ValueError:
            return str(Path(self.index).resolve())

    def below(self, folder: str) -> Destination:
        """The destination of a build in a sub-folder of this output (a --resize target's, OUTPUT/shorter-256):
        its indexes in the same sub-folder of a given index folder, else in its own OUTPUT/shorter-256/dali_idx."""
        return destination(storage.join(self.output, folder),
                           storage.join(self.index, folder) if self.index_given else None)

    @classmethod
    def recorded(cls, output_dir: str, manifest: Mapping[str, Any] | None, index_dir: str | None = None
                 ) -> Destination:
        """A written build's folders: its indexes where `index_dir` says (a reader's or verify's --index-dir),
        else where its manifest records them, else in OUTPUT/dali_idx."""
        if index_dir:
            return cls(output_dir, str(index_dir), index_given=True)
        label = (manifest or {}).get("options", {}).get("index_dir")
        if label and (storage.is_url(label) or label.startswith("/")):
            return cls(output_dir, label)
        if label == ".":  # the output folder itself
            return cls(output_dir, output_dir)
        return cls(output_dir, storage.join(output_dir, label or DEFAULT_INDEX_DIR))


def default_index_dir(output_dir: str) -> str:
    """OUTPUT/dali_idx: a build's index folder where none is named (and `index`'s, beside the shards it indexes)."""
    return storage.join(output_dir, DEFAULT_INDEX_DIR)


def destination(output_dir: PathLike, index_dir: PathLike | None) -> Destination:
    """The output and index folders a verb that writes a build is given, normalised (the indexes in
    OUTPUT/dali_idx unless given)."""
    output_dir = str(output_dir).rstrip("/") if storage.is_url(output_dir) else os.path.normpath(output_dir)
    given = bool(index_dir)
    if not index_dir:
        index_dir = default_index_dir(output_dir)
    index_dir = str(index_dir).rstrip("/") if storage.is_url(index_dir) else os.path.normpath(index_dir)
    if storage.is_url(output_dir) != storage.is_url(index_dir):
        raise UsageError("--output-dir and --index-dir must both be local or both be URLs")
    return Destination(output_dir, index_dir, given)
