"""The copies of ImageNet a build reads: each one module that registers itself (copies.py), with its listing,
its MemberReader and its sample writer; and the formats and rules they share (copy_rules, folders, tars, zips, spool).

Every module of this package is imported with it, so a copy's module registers its CopyKind by
being there: adding a copy edits nothing else. CopyKind.rank orders them for `--from`.
"""

import importlib
import pkgutil

from imagenet_build.sources.copies import Copy, find_copy
from imagenet_build.sources.copy_rules import (
    IMAGE_SUFFIX,
    SHOWN,
    VALIDATION_NAME,
    MemberReader,
    input_identities,
    reader_for,
)
from imagenet_build.sources.folders import (
    FolderReader,
    scan_class_folders,
    scan_validation,
    stat_identity,
)
from imagenet_build.sources.ilsvrc import IlsvrcCopy, scan_train_tar, scan_validation_tar
from imagenet_build.sources.tars import ArchiveReader

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "IMAGE_SUFFIX", "SHOWN", "VALIDATION_NAME", "ArchiveReader", "Copy", "FolderReader", "IlsvrcCopy", "MemberReader",
    "find_copy", "input_identities", "reader_for", "scan_class_folders", "scan_train_tar",
    "scan_validation", "scan_validation_tar", "stat_identity",
]
