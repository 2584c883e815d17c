"""What trainer-check's two DALI trainers (dali_tf.py, dali_torch.py) share beyond the pipeline itself: a read
record as the epoch check takes it, and the run that opens the split, asks for the reader's modules and names
DALI's failures in one line."""

from __future__ import annotations

import re
from typing import Callable

from imagenet_build.format.build_folder import BuildFolder, OpenedSplit
from imagenet_build.infra.errors import BuildError, PathLike
from imagenet_build.readers.dali_pipeline import dali_failure
from imagenet_build.trainercheck.checks import Seen, TrainerResult
from imagenet_build.trainercheck.trainers import Trainer, require_trainer

_SOURCE_INFO = re.compile(r"^(?P<file>.*) at index (?P<offset>\d+)$")


def seen(rank: int, source: bytes, name: bytes, label: int) -> Seen:
    """A record as the epoch check takes it, from reading_pipeline's outputs (zero-padded bytes)."""
    match = _SOURCE_INFO.match(source.rstrip(b"\0").decode(errors="replace"))
    place: tuple[str | None, int | None] = (match["file"], int(match["offset"])) if match else (None, None)
    return (rank, *place, name.rstrip(b"\0").decode(errors="replace"), label)


def checked_run(folder: PathLike, split: str, trainer: Trainer, framework: str,
                check: Callable[[OpenedSplit], TrainerResult]) -> TrainerResult:
    """A DALI trainer's check: the split opened first (the data's own problems need no DALI to be named),
    then what the trainer needs, then the check. DALI reports bad data it reaches (an index entry off by a
    byte, a truncated record) as a RuntimeError mid-run: one BuildError line naming the folder and DALI's
    words."""
    opened = BuildFolder.open(folder).split(split)
    require_trainer(trainer, framework)
    try:
        return check(opened)
    except RuntimeError as e:
        raise BuildError(f"{folder}: DALI failed reading the {split} shards: {dali_failure(e)}; "
                         f"run imagenet-build verify {folder}") from None
