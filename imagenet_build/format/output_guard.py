"""Where a verb may write a file (or fill a folder) the user names: never onto a build or into an input.

The one guard every option naming something to write goes through (`report -o`, `trainer-check --show`,
`bboxes -o`, `prepare-val`'s and `sample`'s folders), before any work: a path that is a build's file (a
shard, an index, manifest.json, labels.txt, verify.json, trainer-check.json), a new file among them (verify
would fail the build for it: folder_contents.py's rule), anything below a build folder (its index folder, a resized
build's size folders), an input or anything inside an input folder, is refused in one line naming it. A
build folder takes only the one file a verb leaves there for `report` (the page, report.html; trainer-check's
picture). Paths are compared as real paths, so `b/dali_idx/../manifest.json`, a link into a build or a
folder reached through a link are what they lead to; a link under a build's name is the build's file still.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from imagenet_build.format.destination import Destination
from imagenet_build.format.folder_contents import MAY_HOLD, PICTURE_SUFFIX, is_trainer_picture
from imagenet_build.format.manifest import read_manifest
from imagenet_build.format.naming import (
    INDEX_SUFFIX,
    LABELS_NAME,
    LOCK_NAME,
    MANIFEST_NAME,
    REPORT_FILES,
    RESIZED_FOLDER,
    TRAINER_CHECK_PNG,
    is_shard_index,
    is_temp_name,
    parse_shard_name,
)
from imagenet_build.infra import storage, write_door
from imagenet_build.infra.errors import BuildError, InputError, PathLike

PICTURE = "picture"  # may_write: trainer-check's picture, trainer-check.png or any new *.png name


def check_output_file(path: PathLike, option: str, may_write: Sequence[str] = (),
                      inputs: Iterable[PathLike] = ()) -> None:
    """Refuse, in one InputError naming `path` and `option`, a file to write that would land on a build or in an
    input (see the module's doc); `may_write`: the names this verb may write in a build folder (PICTURE for
    trainer-check's). A file that cannot be written (its folder missing, the name a folder) is refused too."""
    text = str(path)
    if not text:
        raise InputError(repr(text), f"{option} names no file (an empty path): give a file name")
    if storage.is_url(text):
        _check_url(text, option, may_write)
        return
    for where in dict.fromkeys((os.path.join(os.path.realpath(os.path.dirname(text) or "."), os.path.basename(text)),
                                os.path.realpath(text))):
        _check_place(text, where, option, may_write)
        _check_inputs(text, where, option, inputs)
    write_door.check_writable(text)  # last: it tries the folder by writing a temporary file there


def check_output_folder(folder: PathLike, option: str) -> None:
    """Refuse a folder to write into that is a build folder, its index folder, or below one: what a verb writes
    there would be strangers to the build (and verify would fail it). An object store's URL is no folder these
    verbs write into."""
    if storage.is_url(folder):
        raise InputError(folder, f"{option}: an object store's URL; name a local folder")
    write_door.check_folder(folder)  # a device, a FIFO, a file: no folder to fill
    real = os.path.realpath(folder)
    build = _build_holding(real) or (real if _folder_kind(real) else None)
    if build is not None:
        raise InputError(folder, f"{option}: {'is' if build == real else 'is inside'} the build folder {build}, "
                                 f"which holds only {MAY_HOLD}; name a folder outside any build")


def _check_place(given: str, where: str, option: str, may_write: Sequence[str]) -> None:
    folder = os.path.dirname(where)
    above = _build_holding(folder)
    if above is not None:
        raise InputError(given, f"{option} would write inside the build folder {above} ({_what(where)}); name a file "
                                "outside the build")
    kind = _folder_kind(folder)
    if kind is None:
        return
    what = _what(where)
    if kind == "build" and _may_write(where, what, may_write):
        return
    allowed = [TRAINER_CHECK_PNG if n == PICTURE else n for n in may_write]
    here = f"; here it writes only {' or '.join(allowed)}" if allowed else ""
    whose = "the build in" if kind == "build" else "the index folder"
    raise InputError(given, f"{option} would write over {what} of {whose} {folder}, which holds only "
                            f"{MAY_HOLD}{here}; name a file outside the build")


def _may_write(where: str, what: str, may_write: Sequence[str]) -> bool:
    """The verb's own file in a build folder: its name (the page), or with PICTURE a picture of trainer-check, or
    a new .png name for one."""
    name = os.path.basename(where)
    if what in ("a folder", "a file"):
        return False
    if name in may_write:
        return True
    picture = what in ("a picture of trainer-check", TRAINER_CHECK_PNG) or (
        what == "a new file" and name.endswith(PICTURE_SUFFIX))
    return PICTURE in may_write and picture


def _what(path: str) -> str:
    """What the file `path` of a build folder is, in words."""
    name = os.path.basename(path)
    if parse_shard_name(name):
        return "a shard"
    if is_shard_index(name):
        return "a DALI index"
    if name in (MANIFEST_NAME, LABELS_NAME) or name in REPORT_FILES:
        return name
    if os.path.isdir(path):
        return "a folder"
    if name.endswith(PICTURE_SUFFIX) and os.path.isfile(path) and is_trainer_picture(path):
        return "a picture of trainer-check"
    return "a file" if os.path.lexists(path) else "a new file"


def _folder_kind(folder: str) -> str | None:
    """"build" for a folder holding a build (its manifest or a shard, or a resized build's size folders),
    "index" for a build's index folder (shards' indexes, no shard), else None."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    kind = None
    for entry in entries:
        if entry.name == MANIFEST_NAME or parse_shard_name(entry.name):
            return "build"
        if RESIZED_FOLDER.match(entry.name) and os.path.isfile(os.path.join(entry.path, MANIFEST_NAME)):
            return "build"
        if is_shard_index(entry.name):
            kind = "index"
    return kind


def _build_holding(folder: str) -> str | None:
    """The build folder `folder` lies below (not `folder` itself), or None: the nearest folder above holding a
    build or indexes; a resized build's top folder holds its size folders' builds, and nothing else."""
    below, above = folder, os.path.dirname(folder)
    while above and above != below:
        size_folder = RESIZED_FOLDER.match(os.path.basename(below)) and not os.path.isfile(
            os.path.join(above, MANIFEST_NAME))  # a size folder of a resized build: judged on its own
        if _folder_kind(above) is not None and not size_folder:
            return above
        below, above = above, os.path.dirname(above)
    return None


def _check_inputs(given: str, where: str, option: str, inputs: Iterable[PathLike]) -> None:
    for source in inputs:
        if storage.is_url(source):
            continue
        real = os.path.realpath(source)
        if where == real:
            raise InputError(given, f"{option} would write over the input {source}; name another file")
        if where.startswith(real.rstrip(os.sep) + os.sep):
            raise InputError(given, f"{option} would write inside the input {source}; name a file outside it")


def _check_url(url: str, option: str, may_write: Sequence[str]) -> None:
    """An object store's prefix by names alone: a build's file name, a new name beside a manifest, or any name below
    a prefix holding one (its index folder, a folder of its own)."""
    name, parent = storage.basename(url), storage.parent(url)
    if name in may_write and name in REPORT_FILES:
        return
    if parse_shard_name(name) or is_shard_index(name) or name in (MANIFEST_NAME, LABELS_NAME) or \
            name in REPORT_FILES or storage.exists(storage.join(parent, MANIFEST_NAME)):
        raise InputError(url, f"{option} would write over {_what(url)} of the build in {parent}, which holds only "
                              f"{MAY_HOLD}; name a file outside the build")
    above = _build_at(parent, itself=False)
    if above is not None:
        raise InputError(url, f"{option} would write inside the build folder {above} ({_what(url)}); name a file "
                              "outside the build")


def _build_at(folder: str, itself: bool) -> str | None:
    """The nearest folder holding a build's manifest: `folder` itself (with `itself`), else one above it, up to the
    root (real paths; an object store's prefixes by name, one HEAD a level, up to the bucket), or None."""
    current: str | None = folder.rstrip("/") if storage.is_url(folder) else os.path.realpath(folder)
    if not itself:
        current = _up(str(current))
    try:
        while current is not None:
            if storage.exists(storage.join(current, MANIFEST_NAME)):
                return current
            current = _up(current)
    except BuildError as e:  # the store's own error (no credentials) on a prefix above: said of the folder given
        raise BuildError(f"{folder}: {str(e).split(': ', 1)[-1]}") from None
    return None


def _up(folder: str) -> str | None:
    """The folder above (None above the root, or a bucket)."""
    above = storage.parent(folder)
    if storage.is_url(folder):
        return above if storage.is_url(above) else None
    return above if above != folder else None


def check_build_folders(output: str, index: str, index_given: bool) -> None:
    """convert's --output-dir and --index-dir: a build is never written inside another build's folder (one holding a
    manifest, its index folder included), nor its indexes into another build's folder or below it. Its own folder,
    and what lies inside it, are its own (a rerun writes there)."""
    above = _build_at(output, itself=False)
    if above is not None:
        raise InputError(output, f"--output-dir: is inside the build folder {above}, which holds only {MAY_HOLD}; "
                                 "name a folder outside any build")
    if index_given and not _is_below(index, output):
        build = _build_at(index, itself=True)
        if build is not None:
            where = "is" if build == (index.rstrip("/") if storage.is_url(index) else os.path.realpath(index)) \
                else "is inside"
            raise InputError(index, f"--index-dir: {where} the build folder {build}, which holds only {MAY_HOLD}; "
                                    "name a folder outside any build")


def _is_below(folder: str, root: str) -> bool:
    """`folder` is `root` or lies below it (real paths; an object store's prefixes by name)."""
    if storage.is_url(folder):
        return folder.rstrip("/") == root.rstrip("/") or folder.startswith(root.rstrip("/") + "/")
    real, top = os.path.realpath(folder), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def check_index_folder(folder: str, shards: Sequence[str]) -> None:
    """`index`'s target: a folder of DALI indexes. The indexes of a build's own shards may go into its own index
    folder (its manifest's, else dali_idx/ beside them); any other index never goes into a build's folder or below
    it (its index folder), nor into a folder holding anything but DALI indexes (an input's images, shards)."""
    own = {home for home in set(map(_home, shards)) if _own_index_folder(folder, home)}  # a manifest read once
    strangers = [shard for shard in shards if _home(shard) not in own]
    if not strangers:
        return
    build = _build_at(folder, itself=True)
    if build is not None:
        raise InputError(folder, f"--index-dir would write the index of {strangers[0]} into the build folder {build}"
                                 f", which holds only {MAY_HOLD}; name a folder outside any build")
    others = sorted(name for name in storage.listdir(folder)
                    if not (name.endswith(INDEX_SUFFIX) or name == LOCK_NAME or is_temp_name(name)))
    if others:
        raise InputError(folder, f"--index-dir holds files that are not DALI indexes ({', '.join(others[:3])}"
                                 f"{' ...' if len(others) > 3 else ''}); choose an empty or new --index-dir")


def _home(shard: str) -> str:
    """The folder a shard lies in."""
    return storage.parent(shard) if storage.is_url(shard) else os.path.dirname(os.path.abspath(shard))


def _own_index_folder(folder: str, home: str) -> bool:
    """`folder` is where the build in `home` keeps its indexes: its manifest's index folder, else dali_idx/ (a
    folder of shards with no manifest has that one too)."""
    try:
        manifest = read_manifest(home)
    except ValueError:  # a manifest that cannot be read: verify says why; its indexes go where they go by default
        manifest = None
    own = Destination.recorded(home, manifest).index
    if storage.is_url(folder):
        return folder.rstrip("/") == own.rstrip("/")
    return os.path.realpath(folder) == os.path.realpath(own)
