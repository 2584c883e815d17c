"""What a build folder may hold, and the output folder's policy: what may already be there, one writer at a time.

The one rule convert, verify and write_arrays share (folder_entries): a build folder holds its
shards, their DALI indexes (in the index folder, or beside the shards), manifest.json, labels.txt,
and the two files that make it a TFDS folder (features.json, dataset_info.json); besides those, only
what a run keeps or uses there, which is never read as the build: its lock, a temporary file (a write
in progress, or left by a killed run: the next run removes it), the decompressed .tar.gz inputs of a
run (removed when it ends, or by the next run), a run's job folder (its plan and its tasks' receipts:
read and replaced by the next run) and the kept listings of .tar.gz inputs; and what the checking verbs
leave there for `report` (verify.json, trainer-check.json, trainer-check.png or a picture trainer-check
--show wrote under another name, report.html).
Convert resumes a folder holding them, verify passes them, and anything else is a stranger: convert
refuses the folder (never deleting it), verify names it a stray file.
"""

from __future__ import annotations

import contextlib
from typing import Literal, NamedTuple

from imagenet_build.encode.resize import RESIZED_FOLDER
from imagenet_build.format.destination import Destination
from imagenet_build.format.naming import (
    BEAM_RESULTS,
    JOB_FOLDER,
    LABELS_NAME,
    LISTINGS_NAME,
    LOCK_NAME,
    MANIFEST_NAME,
    REPORT_FILES,
    SPOOL_PREFIX,
    TFDS_FILES,
    TRAINER_PICTURE_KEY,
    index_placement,
    is_build_shard,
    is_shard_index,
    is_temp_name,
    parse_shard_name,
    shard_of_index,
)
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.lock import FolderLock

# shard: <split>-NNNNN-of-NNNNN; index: a shard's DALI index; record: manifest.json, labels.txt or a TFDS file;
# temp: a temporary file; run: what a run keeps or uses beside the build (lock, spool, the job folder, listings);
# report: what the checking verbs leave for `report` (verify.json, ...); index-folder: the index folder inside the
# output; stranger: anything else
Kind = Literal["shard", "index", "record", "temp", "run", "report", "index-folder", "stranger"]


class FolderEntry(NamedTuple):
    """One entry of a build's output folder, or of its index folder when that is another folder."""

    name: str  # its name in its folder
    path: str
    kind: Kind
    shard: str  # a shard's name, or the shard an index belongs to; "" for the other kinds
    in_index_folder: bool  # listed in the index folder (not the output)


def run_entry(name: str, is_dir: bool) -> bool:
    """What a run keeps or uses in a build folder besides the build: its lock, its job (the plan and each task's
    receipt; an interrupted run's is read and replaced by the next), .tar.gz inputs decompressed for a run
    (removed when it ends), and their listings, kept for a rerun."""
    return name == LOCK_NAME or (is_dir and (name in (JOB_FOLDER, BEAM_RESULTS, LISTINGS_NAME)
                                             or name.startswith(SPOOL_PREFIX)))


# What a build folder may hold, in words: verify's word for a stray file, and the output guard's (outputs.py)
MAY_HOLD = ("its shards, their DALI indexes (dali_idx/), manifest.json, labels.txt, and what the checking verbs "
            f"leave for report ({', '.join(sorted(REPORT_FILES))}, or a picture trainer-check --show wrote under "
            "another name)")
PICTURE_SUFFIX = ".png"


def report_entry(name: str, is_dir: bool, path: str = "") -> bool:
    """What the checking verbs leave in a build folder (or a resized build's top folder) for `report` to pick
    up: verify --json's and trainer-check --json's output, trainer-check's picture (trainer-check.png, or under
    another name a PNG carrying its layout: `path` is read for that), the report page."""
    if is_dir:
        return False
    return name in REPORT_FILES or (bool(path) and name.endswith(PICTURE_SUFFIX) and is_trainer_picture(path))


def is_trainer_picture(path: str) -> bool:
    """A PNG that trainer-check --show wrote: its layout in the text chunk it alone writes (read without decoding
    the picture)."""
    from PIL import Image

    try:
        with storage.open_read(path, random_access=True) as f, Image.open(f, formats=["PNG"]) as picture:
            return TRAINER_PICTURE_KEY in picture.info
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):  # not a PNG Pillow can open
        return False


def _kind(name: str, is_dir: bool, indexes_here: bool) -> Kind:
    """An entry's kind by the one rule; `indexes_here`: the folder holds the indexes (the index folder, or the
    output when they lie beside the shards)."""
    if run_entry(name, is_dir):
        return "run"
    if is_dir:
        return "stranger"
    if is_temp_name(name):
        return "temp"
    if indexes_here and is_shard_index(name):
        return "index"
    return "stranger"


def _entry(folder: str, name: str, kind: Kind, in_index_folder: bool) -> FolderEntry:
    shard = name if kind == "shard" else (shard_of_index(name) or "") if kind == "index" else ""
    return FolderEntry(name, storage.join(folder, name), kind, shard, in_index_folder)


def folder_entries(output: str, index: str) -> list[FolderEntry]:
    """Every entry of a build's output folder, and of its index folder when that is another one, by kind (sorted
    by name, the output's first): the one rule of what a build folder may hold."""
    placement = index_placement(output, index)
    entries = []
    for name, is_dir in sorted(storage.listdir(output).items()):
        if placement == "inside" and is_dir and name == storage.basename(index):
            kind: Kind = "index-folder"
        elif not is_dir and (name in (MANIFEST_NAME, LABELS_NAME) or name in TFDS_FILES):
            kind = "record"
        elif not is_dir and parse_shard_name(name):
            kind = "shard"
        elif report_entry(name, is_dir, storage.join(output, name)):
            kind = "report"
        else:
            kind = _kind(name, is_dir, placement == "beside")
        entries.append(_entry(output, name, kind, False))
    if placement != "beside":
        entries += [_entry(index, name, _kind(name, is_dir, True), True)
                    for name, is_dir in sorted(storage.listdir(index).items())]
    return entries


def _sort_output(dest: Destination) -> tuple[list[str], list[str], list[str]]:
    """(paths of our own files, strangers in the output, strangers in a separate index folder): a shard of a
    split convert does not write (a write_arrays build's test-*) is no file of a convert build."""
    inside = index_placement(dest.output, dest.index) == "inside"
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
            storage.remove(path)


def locked(dest: Destination) -> contextlib.ExitStack:
    """The output folder's lock, and the index folder's when it is another folder: one writer at a time."""
    stack = contextlib.ExitStack()
    stack.enter_context(FolderLock(dest.output))
    if index_placement(dest.output, dest.index) != "beside":
        stack.enter_context(FolderLock(dest.index))
    return stack


def check_resize_root(dest: Destination, index_given: bool) -> None:
    """A resized build's OUTPUT (and --index-dir) holds resized builds only, one folder per size, besides what a
    run keeps there (a full-size build's folder would take the builds for strangers)."""
    for folder in [dest.output] + ([dest.index] if index_given else []):
        for entry, is_dir in sorted(storage.listdir(folder).items()):
            if run_entry(entry, is_dir) or report_entry(entry, is_dir, storage.join(folder, entry)):
                continue
            if not (is_dir and RESIZED_FOLDER.match(entry)):
                raise BuildError(f"{folder}: holds {entry}, which is not a resized build (folders like shorter-256); "
                                 "choose an empty or new folder for --resize builds")
