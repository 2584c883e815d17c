"""What every copy's sample writer shares (`sample --layout`): archives with fixed metadata (the same sample,
the same bytes), the sample's validation images with their synsets, and image counts that leave no file of
a copy empty."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable
from pathlib import Path

from imagenet_build.infra import read_door, write_door
from imagenet_build.infra.errors import BuildError, InputError
from imagenet_build.sources.base import VALIDATION_NAME


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
