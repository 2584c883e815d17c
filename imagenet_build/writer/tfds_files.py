"""`imagenet-build tfds FOLDER`: an existing build becomes a TensorFlow Datasets folder.

Convert and write_arrays write features.json and dataset_info.json with every complete manifest; a
build written before they did (or one whose files were removed) gains them here, from its manifest,
with nothing else in the folder touched, once its manifest holds against its shards (writer/commit.py: each
shard's records, bytes and index, the shard set, the figures). The folder is held as a writer holds it, so a
convert writing there now is never raced; verify then checks the files against the shards themselves.
"""

from __future__ import annotations

import os
from typing import Dict, List, TypedDict

from imagenet_build.format.build_folder import refuse_what_is_no_file
from imagenet_build.format.destination import Destination
from imagenet_build.format.manifest import read_manifest
from imagenet_build.format.naming import MANIFEST_NAME, no_shards_message
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError, PathLike
from imagenet_build.infra.lock import FolderLock
from imagenet_build.writer.commit import commit_tfds


class TfdsResult(TypedDict):
    """What `tfds` did, as --json prints it."""

    ok: bool
    folder: str
    written: List[str]  # the files written, in the order written
    splits: Dict[str, Dict[str, int]]  # {split: {"shards", "records"}} as dataset_info.json gives them


def add_tfds_files(folder: PathLike) -> TfdsResult:
    """Write `folder`'s features.json and dataset_info.json from its manifest; BuildError (one line) for a
    folder that holds no complete build, whose manifest lists a shard the folder does not hold, or disagrees
    with its shards."""
    root = str(folder).rstrip("/") if storage.is_url(folder) else str(folder)
    if not storage.is_url(root) and not os.path.isdir(root):
        raise BuildError(f"{root}: not a folder")
    with FolderLock(root):
        try:
            manifest = read_manifest(root)
        except ValueError as e:
            raise BuildError(str(e)) from None
        if manifest is None:
            raise BuildError(no_shards_message(root, MANIFEST_NAME))
        if not manifest["complete"]:
            raise BuildError(f"{storage.join(root, MANIFEST_NAME)}: the build is not complete; run its convert "
                             "again to finish it (a complete build gets both files)")
        refuse_what_is_no_file(root, Destination.recorded(root, manifest).index)  # a FIFO, a device: never described
        held = set(storage.listdir(root))
        missing = [entry["name"] for entry in manifest["shards"] if entry["name"] not in held]
        if missing:
            raise BuildError(f"{storage.join(root, missing[0])}: listed in {MANIFEST_NAME} but missing"
                             f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}; "
                             "imagenet-build verify says what else is wrong")
        written = commit_tfds(root, manifest)  # refused where the manifest disagrees with its shards
    splits = {split: {"shards": figures["shards"], "records": figures["records"]}
              for split, figures in sorted(manifest["splits"].items())}
    return TfdsResult(ok=True, folder=root, written=written, splits=splits)
