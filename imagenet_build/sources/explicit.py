"""The copy the per-split options name (--train-dir or --train-tar, --validation-dir or --validation-tar).

A copy like one `--from` finds, so a build has one input path: the ILSVRC2012 copy's folders and
archives (the same scans, the same bytes), under a kind of its own that nothing records. With
--classes-from-folders, any dataset of class folders: both splits are class folders of any image
(*.jpg, *.jpeg, *.png in any case), their classes the sub-folders of one of them.
"""

from __future__ import annotations

from imagenet_build.sources.ilsvrc import IlsvrcCopy

KIND = "per-split options"  # not a kind of copy --from knows: nothing records it


def explicit_copy(train_dir: str | None, validation_dir: str | None, train_tar: str | None,
                  validation_tar: str | None, classes_from_folders: bool = False) -> IlsvrcCopy:
    """The copy of the per-split options: a scan for each split given (a folder or an archive, not both)."""
    return IlsvrcCopy(train_tar=train_tar, train_dir=train_dir, validation_tar=validation_tar,
                      validation_dir=validation_dir, kind=KIND, any_image=classes_from_folders,
                      description="the folders and archives given by --train-dir, --train-tar, --validation-dir, "
                                  "--validation-tar")
