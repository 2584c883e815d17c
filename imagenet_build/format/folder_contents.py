"""What a build folder may hold: the one rule convert, verify and write_arrays share (folder_entries).

A build folder holds its shards, their DALI indexes (in the index folder, or beside the shards),
manifest.json, labels.txt, and the two files that make it a TFDS folder (features.json,
dataset_info.json); besides those, only what a run keeps or uses there, which is never read as the
build: its lock, a temporary file (a write in progress, or left by a killed run: the next run removes
it), the decompressed .tar.gz inputs of a run (removed when it ends, or by the next run), a run's job
folder (its plan and its tasks' receipts: read and replaced by the next run) and the kept listings of
.tar.gz inputs; and what the checking verbs leave there for `report` (verify.json, trainer-check.json,
trainer-check.png or a picture trainer-check --show wrote under another name, report.html).
Convert resumes a folder holding them, verify passes them, and anything else is a stranger: convert
refuses the folder (never deleting it: writer/output_folder.py), verify names it a stray file.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from imagenet_build.format.destination import Destination
from imagenet_build.format.naming import (
    JOB_FOLDER,
    LABELS_NAME,
    LISTINGS_NAME,
    LOCK_NAME,
    MANIFEST_NAME,
    REPORT_FILES,
    SPOOL_PREFIX,
    TFDS_FILES,
    TRAINER_PICTURE_KEY,
    is_shard_index,
    is_temp_name,
    parse_shard_name,
    shard_of_index,
)
from imagenet_build.infra import read_door, storage

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
    return name == LOCK_NAME or (is_dir and (name in (JOB_FOLDER, LISTINGS_NAME)
                                             or name.startswith(SPOOL_PREFIX)))


# What a build folder may hold, in words: verify's word for a stray file, and the output guard's (output_guard.py)
MAY_HOLD = ("its shards, their DALI indexes (dali_idx/), manifest.json, labels.txt, and what the checking verbs "
            f"leave for report ({', '.join(sorted(REPORT_FILES))}, or a picture trainer-check --show wrote under "
            "another name)")
PICTURE_SUFFIX = ".png"


def report_entry(name: str, is_dir: bool, path: str = "") -> bool:
    """What the checking verbs leave in a build folder (or a resized build's top folder) for `report` to pick
    up: verify --json's and trainer-check --json's output, trainer-check's picture (trainer-check.png, or under
    another name a PNG carrying its legend: `path` is read for that), the report page."""
    if is_dir:
        return False
    return name in REPORT_FILES or (bool(path) and name.endswith(PICTURE_SUFFIX) and is_trainer_picture(path))


def is_trainer_picture(path: str) -> bool:
    """A PNG that trainer-check --show wrote: its legend in the text chunk it alone writes (read without decoding
    the picture)."""
    from PIL import Image

    try:
        with read_door.open_read(path, random_access=True) as f, Image.open(f, formats=["PNG"]) as picture:
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
    placement = Destination(output, index).placement
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
