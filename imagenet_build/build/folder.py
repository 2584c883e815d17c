"""The output folder's policy: where shards and indexes go, what may already be there, one writer at a time.

The folder must be empty, new, or a previous build of ours: anything else in it
is refused, never deleted, and so is an output (or index folder) inside an input
folder, which the next run would read back as input.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from imagenet_build.format.naming import (
    BEAM_RESULTS,
    DEFAULT_INDEX_DIR,
    LABELS_NAME,
    LISTINGS_NAME,
    LOCK_NAME,
    MANIFEST_NAME,
    SPOOL_PREFIX,
    index_placement,
    is_build_shard,
    is_temp_name,
    shard_of_index,
)
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError, PathLike, UsageError
from imagenet_build.infra.lock import FolderLock

if TYPE_CHECKING:
    from imagenet_build.build.run import ConvertOptions


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
    output_dir = str(output_dir).rstrip("/") if storage.is_url(output_dir) else os.path.normpath(output_dir)
    if not index_dir:
        index_dir = storage.join(output_dir, DEFAULT_INDEX_DIR)
    index_dir = str(index_dir).rstrip("/") if storage.is_url(index_dir) else os.path.normpath(index_dir)
    if storage.is_url(output_dir) != storage.is_url(index_dir):
        raise UsageError("--output-dir and --index-dir must both be local or both be URLs")
    return Destination(output_dir, index_dir)


def _sort_output(dest: Destination) -> tuple[list[str], list[str], list[str]]:
    """(paths of our own files, strangers in the output, strangers in a separate index folder)."""
    output = dest.output
    index_name = storage.basename(dest.index)
    placement = index_placement(output, dest.index)
    ours: list[str] = []
    strangers: list[str] = []
    index_strangers: list[str] = []
    for entry, is_dir in sorted(storage.listdir(output).items()):
        if ignored_entry(entry, is_dir) or (placement == "inside" and entry == index_name and is_dir):
            continue
        shard = entry if placement != "beside" else shard_of_index(entry) or entry
        if entry in (MANIFEST_NAME, LABELS_NAME) or is_temp_name(entry) or (is_build_shard(shard) and not is_dir):
            ours.append(storage.join(output, entry))
        else:
            strangers.append(entry)
    if placement == "beside":  # listed above
        return ours, strangers, index_strangers
    for entry in sorted(storage.listdir(dest.index)):
        if entry == LOCK_NAME:
            continue
        if is_temp_name(entry) or is_build_shard(shard_of_index(entry) or ""):
            ours.append(storage.join(dest.index, entry))
        elif placement == "inside":
            strangers.append(f"{index_name}/{entry}")
        else:
            index_strangers.append(entry)
    return ours, strangers, index_strangers


def ignored_entry(entry: str, is_dir: bool) -> bool:
    """What a build folder may hold besides its files: this run's lock, an interrupted Beam run's figures
    (the next run replaces them), .tar.gz inputs decompressed for a run (removed when it ends), and their
    listings, kept for a rerun."""
    return entry == LOCK_NAME or (is_dir and (entry in (BEAM_RESULTS, LISTINGS_NAME) or entry.startswith(SPOOL_PREFIX)))


def check_output_dir(dest: Destination, planned_names: set[str], overwrite: bool) -> None:
    """Refuse a folder (or prefix) holding anything but our own files; with --overwrite clear ours."""
    ours, strangers, index_strangers = _sort_output(dest)
    for folder, found, option in ((dest.output, strangers, "--output-dir"),
                                  (dest.index, index_strangers, "--index-dir")):
        if found:
            raise BuildError(
                f"{folder}: holds files that are not from imagenet-build "
                f"({', '.join(found[:3])}{' ...' if len(found) > 3 else ''}); "
                f"choose an empty or new {option}"
            )
    foreign_shards = sorted(
        storage.basename(p) for p in ours if is_build_shard(storage.basename(p))
        and storage.basename(p) not in planned_names
    )
    if overwrite:
        for path in ours:
            storage.remove(path)
    elif foreign_shards:
        raise BuildError(
            f"{dest.output}: holds shards of another layout ({foreign_shards[0]} ...); "
            "use --overwrite to replace that build, or another --output-dir"
        )
    else:
        for path in ours:
            if is_temp_name(storage.basename(path)):
                storage.remove(path)  # left by an interrupted run


def remove_unrecorded(dest: Destination, recorded: set[str]) -> None:
    """After a run stopped early, once its workers have ended: remove each shard and index under its final
    name whose shard is not in `recorded` (what the manifest written last lists), and every temporary
    file. The folder then holds what its manifest says, and nothing a rerun would trust by mistake."""
    ours, _, _ = _sort_output(dest)
    for path in ours:
        name = storage.basename(path)
        shard = shard_of_index(name) or name
        if is_temp_name(name) or (is_build_shard(shard) and shard not in recorded):
            storage.remove(path)


def locked(dest: Destination) -> contextlib.ExitStack:
    """The output folder's lock, and the index folder's when it is another folder: one writer at a time."""
    stack = contextlib.ExitStack()
    stack.enter_context(FolderLock(dest.output))
    if index_placement(dest.output, dest.index) != "beside":
        stack.enter_context(FolderLock(dest.index))
    return stack


def refuse_output_among_inputs(opts: ConvertOptions, dest: Destination) -> None:
    """An output inside an input folder would be read back as input by the next run: refuse it now. The folder
    of a copy that is a folder (Hugging Face's data/) is an input folder however its files are given."""
    from imagenet_build.sources.copies import copy_folders  # the sources package registers every copy

    if dest.remote:
        return
    for option, folder in (("--output-dir", dest.output), ("--index-dir", dest.index)):
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise BuildError(f"{folder}: exists and is not a folder; choose another {option}")
    inputs = [(f"--{name.replace('_', '-')}", getattr(opts, name))
              for name in ("train_dir", "validation_dir") if getattr(opts, name)]
    inputs += [("--from", path) for path in opts.from_paths if not storage.is_url(path) and os.path.isdir(path)]
    inputs += [(f"--from {given}'s folder", folder) for given, folder in copy_folders(opts.from_paths)]
    for option, folder in (("--output-dir", dest.output), ("--index-dir", dest.index)):
        if option == "--index-dir" and not opts.index_dir:
            continue
        where = Path(folder).resolve()
        for input_option, input_folder in inputs:
            root = Path(input_folder).resolve()
            if where == root or root in where.parents:
                raise UsageError(f"{option} {folder} is inside {input_option} {input_folder}: "
                                 f"the next run would read the output as input; choose a {option} outside it")
