"""What every copy's sample writer shares (`sample --layout`): archives with fixed metadata (the same sample,
the same bytes), the sample's validation images with their synsets, image counts that leave no file of
a copy empty, and the note beside a sample that names its own metadata files for `convert --from`."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TypedDict

from imagenet_build.infra import read_door, write_door
from imagenet_build.infra.errors import BuildError, InputError
from imagenet_build.sources.copy_rules import VALIDATION_NAME


def tar_add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    """Add bytes with fixed metadata, so the same sample gives the same archive bytes."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, mode
    tar.addfile(info, io.BytesIO(data))


def tar_gz(path: Path, members: Iterable[tuple[str, bytes]]) -> None:
    """A .tar.gz (GNU tar) of [(member name, bytes)], its gzip header's time 0 and each member's fixed."""
    import gzip  # here: a convert does not need it

    with write_door.new_file(path) as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members:
            tar_add(tar, name, data)


def validation_images(sample: Path) -> list[tuple[Path, str]]:
    """The ILSVRC sample's validation images, sorted, each with its synset: the line of validation_labels.txt
    its number names."""
    synsets = read_door.read_text(Path(sample) / "validation_labels.txt").split()
    images = []
    for path in sorted((Path(sample) / "validation").glob("*.JPEG")):
        match = VALIDATION_NAME.match(path.name)
        if match is None:
            raise InputError(path, "not an ILSVRC2012_val_<8 digits>.JPEG name: not the ILSVRC sample")
        images.append((path, synsets[int(match.group(1)) - 1]))
    return images


def enough_for(images: int, needed: int, split: str, kind: str) -> None:
    """A copy kind's sample writer, spreading a split's `images` over its files, needs at least `needed`: an
    empty file of a copy is refused as a missing one, so the sample would not convert."""
    if images < needed:
        raise BuildError(f"--layout {kind}: {images} {split} image(s) are too few, it needs at least {needed} (no "
                         "file of a copy may be empty); raise --per-class or --validation-per-class")


SAMPLE_NOTE = "imagenet-build-sample.json"  # what `sample` writes beside a sample: which of its files are metadata


class SampleFiles(TypedDict):
    """The sample's note: its own metadata files, by name, in its folder."""

    labels_file: str  # labels.txt: its classes, a few of the 1000
    validation_labels_file: str  # validation_labels.txt: its validation images' synsets, by number
    bounding_box_file: str  # bboxes.csv: its boxes, for a copy that carries none of its own


def write_sample_note(out: Path) -> None:
    """The note that lets `convert --from OUT` take the sample as it is: without it, a copy holding 4 of the 1000
    classes and validation images of its own would need three options a real copy never does."""
    files = SampleFiles(labels_file="labels.txt", validation_labels_file="validation_labels.txt",
                        bounding_box_file="bboxes.csv")
    write_door.write_bytes(Path(out) / SAMPLE_NOTE, (json.dumps(files, indent=1, sort_keys=True) + "\n").encode(),
                           sync=False)


def sample_files(from_paths: Sequence[str]) -> dict[str, str]:
    """The metadata files of the sample that --from names (one local folder holding SAMPLE_NOTE), each a path in
    it; {} for any other copy. Only `sample` writes the note, so no copy of ImageNet is read differently."""
    from imagenet_build.infra.jsonfile import JsonError, read_json
    from imagenet_build.infra.storage import is_url

    if len(from_paths) != 1 or is_url(from_paths[0]) or not os.path.lexists(Path(from_paths[0]) / SAMPLE_NOTE):
        return {}
    folder = Path(from_paths[0])
    try:
        files = read_json(folder / SAMPLE_NOTE, SampleFiles, limit=1 << 16)
    except JsonError as e:
        raise InputError(e.where, e.problem) from None
    for key, name in files.items():
        if not name or Path(name).name != name or name in (".", ".."):
            raise InputError(folder / SAMPLE_NOTE, f"{key}: {name!r} is no file name in the sample's folder")
    return {key: str(folder / name) for key, name in files.items()}
