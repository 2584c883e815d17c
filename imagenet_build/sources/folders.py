"""Images in folders: `<split>/<synset>/*.JPEG`, or the validation images flat beside their labels file.

This is ImageNet as extracted from the ILSVRC2012 tarballs (and any tree of class
folders, with --classes-from-folders). A flat validation folder is labelled from
the validation labels file by image number, so no file needs moving.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from imagenet_build.infra import read_door
from imagenet_build.infra.errors import PathLike, input_error
from imagenet_build.model import SplitInput
from imagenet_build.sources.copy_rules import (
    VALIDATION_NAME,
    MemberReader,
    add_class,
    flat_validation,
    match_classes,
    read_whole,
    require_images,
    scan_folder,
    will_need,
)

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.model import ImageEntry, ShardSpec


def scan_class_folders(
    split: str, root: PathLike, catalog: Catalog, on_error: str, any_image: bool = False
) -> SplitInput:
    """`<root>/<synset>/*.JPEG` for the synsets of the catalog (any_image: *.jpg/jpeg/png, any case)."""
    root = Path(root)
    folders, files = scan_folder(root)
    result = SplitInput(split, str(root), "folders", FolderReader, ignored=list(files))
    match_classes(result, root, folders, catalog, on_error, "class folder")
    present = set(folders)
    for label, synset in enumerate(catalog.synsets, start=1):
        if synset in present:
            subfolders, names = scan_folder(root / synset)
            result.ignored.extend(f"{synset}/{n}/" for n in subfolders)
            add_class(result, synset, label, [(n, None) for n in names], on_error, "class folder", any_image)
    require_images(result, root, catalog)
    return result


def scan_validation(
    root: PathLike,
    catalog: Catalog,
    validation_labels_loader: Callable[[], list[str]],
    validation_labels_file: PathLike,
    on_error: str,
) -> SplitInput:
    """A validation folder, flat (labelled from the validation labels file) or in synset folders."""
    root = Path(root)
    folders, files = scan_folder(root)
    if any(VALIDATION_NAME.match(n) for n in files):
        result = SplitInput("validation", str(root), "flat", FolderReader)
        if folders:
            result.notes.append(
                f"{len(folders)} sub-folder(s) of {root} ignored: the flat ILSVRC2012_val_*.JPEG files are used"
            )
        return flat_validation(result, [(n, None) for n in files], catalog, validation_labels_loader(),
                               validation_labels_file, on_error)
    if folders:
        return scan_class_folders("validation", root, catalog, on_error)
    from imagenet_build.infra.errors import InputError

    raise InputError(root, "holds neither ILSVRC2012_val_*.JPEG files nor synset folders")


_AN_IMAGE = ("an image", "file vanished since the folder was listed")  # what input_error says of an image file


def stat_identity(st: os.stat_result) -> str:
    """A file's identity for resume: size and modification time in nanoseconds."""
    return f"{st.st_size}:{st.st_mtime_ns}"


class FolderReader(MemberReader):
    """A shard's images from their files.

    Reads ahead: the next READ_AHEAD images are opened and announced to the kernel
    (POSIX_FADV_WILLNEED), so that with a cold cache the disk always has several
    reads in flight instead of one at a time.
    """

    def __init__(self, spec: ShardSpec) -> None:
        super().__init__(spec)
        self._opened: dict[int, tuple[int, os.stat_result, str]] = {}  # entry number -> (fd, its fstat, its path)

    def close(self) -> None:
        for fd, *_ in self._opened.values():
            os.close(fd)
        self._opened.clear()

    def announce(self, number: int, entry: ImageEntry) -> None:
        path = self.spec.path_of(entry)
        try:
            fd, info = read_door.opened(path)
        except OSError:
            return  # read() reports it, in order
        self._opened[number] = fd, info, path
        will_need(fd, 0, 0)

    def read(self, number: int) -> tuple[bytes, str]:
        self.read_ahead(number)
        opened = self._opened.pop(number, None)
        if opened is None:
            path = self.spec.path_of(self.spec.entries[number])
            try:
                fd, info = read_door.opened(path)  # a FIFO, a device or a link to one refused unread
            except OSError as e:
                self.identities.append(self.identity(self.spec, self.spec.entries[number]))
                raise input_error(path, e, *_AN_IMAGE) from None
        else:
            fd, info, path = opened
        try:
            self.identities.append(stat_identity(info))
            return read_whole(fd, info.st_size), path
        except OSError as e:
            raise input_error(path, e, *_AN_IMAGE) from None
        finally:
            os.close(fd)

    @staticmethod
    def identity(spec: ShardSpec, entry: ImageEntry) -> str:
        try:
            return stat_identity(os.stat(spec.path_of(entry)))
        except FileNotFoundError:
            return "absent"
        except OSError as e:
            return f"unreadable: {e.strerror}"

