"""The names of a build's files — shards, their DALI indexes, the manifest, labels.txt, TFDS's two — in one place.

Every module that writes, finds or judges these files formats, parses and globs
them through here, so a rule such as "a shard is `<split>-NNNNN-of-NNNNN`" has one
home (where the index folder is, from --index-dir or the manifest: format/destination.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from imagenet_build.infra import storage
from imagenet_build.infra.lock import LOCK_NAME  # noqa: F401
from imagenet_build.infra.write_door import is_temp_name, temp_name  # noqa: F401  (a build's file names, all here)

SPLITS = ("train", "validation")  # the splits convert writes, in the order a copy's are scanned
MANIFEST_NAME = "manifest.json"
LABELS_NAME = "labels.txt"  # the class of each label, for builds whose classes are not the labels file's
# What makes a build folder a TensorFlow Datasets folder (format/tfds_metadata.py), written with the manifest
FEATURES_JSON = "features.json"
DATASET_INFO_JSON = "dataset_info.json"
TFDS_FILES = (FEATURES_JSON, DATASET_INFO_JSON)
INDEX_SUFFIX = ".idx"
DEFAULT_INDEX_DIR = "dali_idx"  # the index folder inside a build's folder, where none is named (destination.py)
JOB_FOLDER = ".convert-job"  # a run's job: its plan and each task's receipt (engines/job.py), removed once complete
SPOOL_PREFIX = ".imagenet-build-spool-"  # a .tar.gz input decompressed for one run (sources/spool.py)
LISTINGS_NAME = ".imagenet-build-listings"  # each .tar.gz input's listing, kept for a rerun (sources/spool.py)
# What the checking verbs leave in a build folder for `report` to pick up (docs/report.md): verify --json's
# output, trainer-check --json's output and its --show picture, and the page itself
VERIFY_JSON = "verify.json"
TRAINER_CHECK_JSON = "trainer-check.json"
TRAINER_CHECK_PNG = "trainer-check.png"
REPORT_HTML = "report.html"
REPORT_FILES = frozenset((VERIFY_JSON, TRAINER_CHECK_JSON, TRAINER_CHECK_PNG, REPORT_HTML))
# trainer-check --show's picture carries its legend in a PNG text chunk of this key: what tells it, under any name
TRAINER_PICTURE_KEY = "imagenet-build"

# A --resize run's top folder holds one build per size, each in a folder named by its target: shorter-256, longer-500
RESIZED_FOLDER = re.compile(r"^(shorter|longer)-\d+$")
SPLIT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # a split another dataset may name (test, train_small)
_SHARD = re.compile(r"^(?P<split>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})$")
# What `index` takes from a folder: shard-named files and the usual TFRecord suffixes.
_TFRECORD = re.compile(r"(^.+-\d{5}-of-\d{5}$)|(\.tfrecords?$)|(\.tfrec$)")


class ShardName(NamedTuple):
    split: str
    number: int  # 0-based
    total: int  # the N of -of-N


def shard_name(split: str, index: int, count: int) -> str:
    """`train-00000-of-01024`: slim's names."""
    return f"{split}-{index:05d}-of-{count:05d}"


def parse_shard_name(name: str) -> ShardName | None:
    """(split, index, count) of any `<split>-NNNNN-of-NNNNN` name, else None."""
    match = _SHARD.match(name)
    if not match:
        return None
    return ShardName(match["split"], int(match["index"]), int(match["count"]))


def is_build_shard(name: str) -> bool:
    """A shard name convert itself writes (train or validation)."""
    parsed = parse_shard_name(name)
    return parsed is not None and parsed.split in SPLITS


def is_shard_of(name: str, split: str) -> bool:
    """`name` is a shard of `split`: exactly `<split>-NNNNN-of-NNNNN` (not its index, not another split's
    shard whose name starts alike, such as train-small-00000-of-00001 for train)."""
    parsed = parse_shard_name(name)
    return parsed is not None and parsed.split == split


def is_shard_index(name: str) -> bool:
    """`name` is the DALI index of a shard-named file (`train-00000-of-00004.idx`)."""
    shard = shard_of_index(name)
    return shard is not None and parse_shard_name(shard) is not None


def split_shards(folder: str, split: str) -> list[str]:
    """The paths of a split's shards in a folder or URL prefix, in name order: the one rule by which
    every reader finds them (is_shard_of; folders named like shards are left out)."""
    listed = storage.listdir(folder)
    names = sorted(name for name, is_dir in listed.items() if not is_dir and is_shard_of(name, split))
    return [storage.join(folder, name) for name in names]


def shard_set_problems(split: str, names: Sequence[str]) -> list[tuple[str, str]]:
    """(name, what is wrong) for one split's shard names: the rule of a whole shard set, one -of-N for every
    shard and each number from 00000 to N-1 there once (verify's shard-set check and every reader hold a
    split to it: a reader given a split with a shard missing would read less than the build without a word)."""
    parsed = [p for p in (parse_shard_name(storage.basename(n)) for n in names) if p is not None and p.split == split]
    if not parsed:
        return []
    problems = []
    counts = sorted({p.total for p in parsed})
    if len(counts) > 1:
        problems.append((f"{split}-*", f"shards of {split} disagree on their total: -of-"
                         + ", -of-".join(f"{c:05d}" for c in counts)))
    count = max(counts)
    present = {p.number for p in parsed}
    problems += [(shard_name(split, k, count), "shard missing") for k in range(count) if k not in present]
    problems += [(shard_name(split, p.number, p.total), f"shard number beyond -of-{count:05d}")
                 for p in sorted(parsed) if p.number >= count]
    return problems


def resized_folder(side: str, size: int) -> str:
    """The folder of a resized build under its run's top folder: shorter-256, longer-500."""
    return f"{side}-{size}"


def builds_below(folder: str) -> list[str]:
    """The names of the builds a folder holds in its sub-folders, sorted: the size folders of a --resize run's
    top folder (named as resized_folder names them) that hold a manifest. The one rule of which sub-folders
    are builds: `report` shows each of them, and a verb given the top folder names them."""
    return sorted(name for name, is_dir in storage.listdir(folder).items() if is_dir and RESIZED_FOLDER.match(name)
                  and storage.exists(storage.join(folder, name, MANIFEST_NAME)))


def no_shards_message(folder: str, what: str) -> str:
    """`<folder>: holds no <what>`, naming the builds in its sub-folders (a --resize build's top folder
    holds one per size: shorter-224/, ...), so the user sees which folder to name instead."""
    below = builds_below(folder)
    message = f"{folder}: holds no {what}"
    if below:
        message += f"; its sub-folders {', '.join(n + '/' for n in below)} hold builds: name one of them"
    return message


def is_tfrecord_name(name: str) -> bool:
    return bool(_TFRECORD.search(name))


def index_name(shard: str) -> str:
    """The DALI index file name of a shard (path or name)."""
    return storage.basename(shard) + INDEX_SUFFIX


def shard_of_index(name: str) -> str | None:
    """The shard an index file name belongs to, or None for a name that is no index."""
    return name[: -len(INDEX_SUFFIX)] if name.endswith(INDEX_SUFFIX) else None


def index_path(shard_path: str, index_dir: str) -> str:
    return storage.join(index_dir, index_name(shard_path))
