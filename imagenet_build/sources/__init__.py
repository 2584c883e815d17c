"""The copies of ImageNet a build reads, each one module with a scan and a Reader (see base).

`find_copy` (copies.py) tells them apart for `convert --from`; each layout module
registers itself on import, below.
"""

# the layouts --from knows register themselves on import, and are tried in this order
# isort: off
from imagenet_build.sources import (  # noqa: F401
    ilsvrc,
    kaggle,
    webdataset,
    huggingface,
    hf_parquet,
    blurred,
)
# isort: on
from imagenet_build.sources.base import (
    IMAGE_SUFFIX,
    SHOWN,
    VALIDATION_NAME,
    Reader,
    input_identities,
    reader_for,
)
from imagenet_build.sources.copies import Copy, find_copy
from imagenet_build.sources.folders import (
    FolderReader,
    scan_class_folders,
    scan_validation,
    stat_identity,
)
from imagenet_build.sources.tars import (
    ArchiveReader,
    scan_train_tar,
    scan_validation_tar,
)

__all__ = [
    "IMAGE_SUFFIX", "SHOWN", "VALIDATION_NAME", "ArchiveReader", "Copy", "FolderReader", "Reader",
    "find_copy", "input_identities", "reader_for", "scan_class_folders", "scan_train_tar",
    "scan_validation", "scan_validation_tar", "stat_identity",
]
