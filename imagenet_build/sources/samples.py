"""What every copy's sample writer shares (`sample --layout`): tar members with fixed metadata, and
image counts that leave no file of a copy empty."""

from __future__ import annotations

import io
import tarfile

from imagenet_build.infra.errors import BuildError


def tar_add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    """Add bytes with fixed metadata, so the same sample gives the same archive bytes."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, mode
    tar.addfile(info, io.BytesIO(data))


def enough_for(images: int, needed: int, split: str, layout: str) -> None:
    """A layout's writer, spreading a split's `images` over its files, needs at least `needed`: an empty file of
    a copy is refused as a missing one, so the sample would not convert."""
    if images < needed:
        raise BuildError(f"--layout {layout}: {images} {split} image(s) are too few, it needs at least {needed} (no "
                         "file of a copy may be empty); raise --per-class or --validation-per-class")
