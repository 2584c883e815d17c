"""The copy the per-split options name (--train-dir or --train-tar, --validation-dir or --validation-tar).

A copy like one `--from` finds, so a build has one input path: the scans are those of the
ILSVRC2012 copy's folders and archives (the same bytes either way). With
--classes-from-folders, any dataset of class folders: both splits are class folders of any
image (*.jpg, *.jpeg, *.png in any case), their classes the sub-folders of one of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from imagenet_build.sources.copies import Copy
from imagenet_build.sources.folders import scan_class_folders, scan_validation
from imagenet_build.sources.tars import scan_train_tar, scan_validation_tar

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.infra.workers import Workers
    from imagenet_build.model import SplitInput

LAYOUT = "per-split options"  # not a layout --from knows: nothing records it


def explicit_copy(train_dir: str | None, validation_dir: str | None, train_tar: str | None,
                  validation_tar: str | None, classes_from_folders: bool = False) -> Copy:
    """The copy of the per-split options: a scan for each split given (a folder or an archive, not both)."""
    copy = Copy(LAYOUT, "the folders and archives given by --train-dir, --train-tar, --validation-dir, "
                        "--validation-tar")
    if classes_from_folders:
        if train_dir:
            copy.scan_train = _any_images("train", train_dir)
        if validation_dir:
            copy.scan_validation = _any_images("validation", validation_dir)
        return copy
    if train_dir:
        copy.scan_train = _train_folders(train_dir)
    elif train_tar:
        copy.scan_train = _train_tar(train_tar)
    if validation_dir:
        copy.scan_validation = _validation_folder(validation_dir)
    elif validation_tar:
        copy.scan_validation = _validation_tar(validation_tar)
    return copy


def _any_images(split: str, root: str) -> Callable[..., SplitInput]:
    def scan(catalog: Catalog, on_error: str, pool: Workers, *labels: object) -> SplitInput:
        return scan_class_folders(split, root, catalog, on_error, any_image=True)

    return scan


def _train_folders(root: str) -> Callable[..., SplitInput]:
    def scan(catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
        return scan_class_folders("train", root, catalog, on_error)

    return scan


def _train_tar(archive: str) -> Callable[..., SplitInput]:
    def scan(catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
        return scan_train_tar(archive, catalog, on_error, pool)

    return scan


def _validation_folder(root: str) -> Callable[..., SplitInput]:
    def scan(catalog: Catalog, on_error: str, pool: Workers, labels: Callable[[], list[str]],
             labels_file: str) -> SplitInput:
        return scan_validation(root, catalog, labels, labels_file, on_error)

    return scan


def _validation_tar(archive: str) -> Callable[..., SplitInput]:
    def scan(catalog: Catalog, on_error: str, pool: Workers, labels: Callable[[], list[str]],
             labels_file: str) -> SplitInput:
        return scan_validation_tar(archive, catalog, labels, labels_file, on_error)

    return scan
