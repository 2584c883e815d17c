"""The output folder's policy, the writer's: what may already be there, and one writer at a time.

What a build folder may hold is format/folder_contents.py's rule; here a writer acts on it. Convert
refuses a folder holding a stranger (never deleting it), clears its own files with --overwrite, removes
what a stopped run left under a final name that its manifest does not list, and holds the output folder
(and a separate index folder) locked while it writes.
"""

from __future__ import annotations

import contextlib

from imagenet_build.format.destination import Destination
from imagenet_build.format.folder_contents import folder_entries, report_entry, run_entry
from imagenet_build.format.naming import RESIZED_FOLDER, is_build_shard, is_temp_name, shard_of_index
from imagenet_build.infra import storage, write_door
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.lock import FolderLock


def _sort_output(dest: Destination) -> tuple[list[str], list[str], list[str]]:
    """(paths of our own files, strangers in the output, strangers in a separate index folder): a shard of a
    split convert does not write (a write_arrays build's test-*) is no file of a convert build."""
    inside = dest.placement == "inside"
    ours: list[str] = []
    strangers: list[str] = []
    index_strangers: list[str] = []
    for entry in folder_entries(dest.output, dest.index):
        if entry.kind in ("run", "report", "index-folder"):
            continue
        if entry.kind == "stranger" or (entry.kind in ("shard", "index") and not is_build_shard(entry.shard)):
            if not entry.in_index_folder:
                strangers.append(entry.name)
            elif inside:
                strangers.append(f"{storage.basename(dest.index)}/{entry.name}")
            else:
                index_strangers.append(entry.name)
        else:
            ours.append(entry.path)
    return ours, strangers, index_strangers


def check_output_dir(dest: Destination, planned_names: set[str], overwrite: bool) -> None:
    """Refuse a folder (or prefix) holding anything but our own files; with --overwrite clear ours."""
    ours, strangers, index_strangers = _sort_output(dest)
    sizes = _resized_builds(dest.output, strangers)
    if strangers and sizes == strangers:
        raise BuildError(f"{dest.output}: holds the builds of a --resize run ({', '.join(f'{n}/' for n in sizes)}); "
                         "a build without --resize needs a folder of its own: choose an empty or new "
                         "--output-dir (or give those builds' --resize to resume them)")
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
            write_door.remove(path)
    elif foreign_shards:
        raise BuildError(
            f"{dest.output}: holds shards of another layout ({foreign_shards[0]} ...); "
            "use --overwrite to replace that build, or another --output-dir"
        )
    else:
        for path in ours:
            if is_temp_name(storage.basename(path)):
                write_door.remove(path)  # left by an interrupted run


def _resized_builds(folder: str, strangers: list[str]) -> list[str]:
    """The strangers of an output folder that are resized builds' folders (shorter-256/, ...): the top folder of a
    --resize run, not a stranger's files."""
    listing = storage.listdir(folder) if strangers else {}
    return [name for name in strangers if listing.get(name) and RESIZED_FOLDER.match(name)]


def remove_unrecorded(dest: Destination, recorded: set[str]) -> None:
    """After a run stopped early, once its workers have ended: remove each shard and index under its final
    name whose shard is not in `recorded` (what the manifest written last lists), and every temporary
    file. The folder then holds what its manifest says, and nothing a rerun would trust by mistake."""
    ours, _, _ = _sort_output(dest)
    for path in ours:
        name = storage.basename(path)
        shard = shard_of_index(name) or name
        if is_temp_name(name) or (is_build_shard(shard) and shard not in recorded):
            with contextlib.suppress(write_door.WriteRefused):  # a FIFO, a link: no run made it, left alone
                write_door.remove(path)


def locked(dest: Destination) -> contextlib.ExitStack:
    """The output folder's lock, and the index folder's when it is another folder: one writer at a time."""
    stack = contextlib.ExitStack()
    stack.enter_context(FolderLock(dest.output))
    if dest.placement != "beside":
        stack.enter_context(FolderLock(dest.index))
    return stack


def check_resize_root(dest: Destination) -> None:
    """A resized build's OUTPUT (and --index-dir) holds resized builds only, one folder per size, besides what a
    run keeps there (a full-size build's folder would take the builds for strangers)."""
    for folder in [dest.output] + ([dest.index] if dest.index_given else []):
        for entry, is_dir in sorted(storage.listdir(folder).items()):
            if run_entry(entry, is_dir) or report_entry(entry, is_dir, storage.join(folder, entry)):
                continue
            if not (is_dir and RESIZED_FOLDER.match(entry)):
                raise BuildError(f"{folder}: holds {entry}, which is not a resized build (folders like shorter-256); "
                                 "choose an empty or new folder for --resize builds")
