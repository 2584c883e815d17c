"""Pixels to a JPEG with Pillow, as a build stores them: RGB as TensorFlow's decoders give it, and a
size a JPEG can hold or a per-image error naming the file (re-encoding and resizing both write here)."""

from __future__ import annotations

import io
from typing import Any

from imagenet_build.infra.errors import InputError

JPEG_MAX_SIDE = 65500  # libjpeg's JPEG_MAX_DIMENSION: the largest side it writes


def to_rgb(image: Any) -> Any:
    """RGB pixels as TensorFlow's decode_*(channels=3) gives them: alpha dropped, 16 bits cut to 8."""
    if image.mode.startswith("I;16"):
        image = image.convert("I")
    if image.mode == "I":
        image = image.point(lambda v: v * (1 / 256)).convert("L")
    return image if image.mode == "RGB" else image.convert("RGB")  # convert() would copy an RGB image


def jpeg_size_problem(width: int, height: int) -> str:
    """Why a JPEG cannot hold an image of this size, or ""."""
    return f"a JPEG holds at most {JPEG_MAX_SIDE:,} pixels a side" if max(width, height) > JPEG_MAX_SIDE else ""


def check_jpeg_size(width: int, height: int, path: str) -> None:
    """An InputError naming `path` when a JPEG cannot hold an image of this size (whichever encoder writes it)."""
    problem = jpeg_size_problem(width, height)
    if problem:  # libjpeg would fail with "broken data stream", after a line of its own on stderr
        raise InputError(path, f"{width:,}x{height:,} pixels: {problem}, so it cannot be stored as slim's JPEG")


def encode_jpeg(image: Any, path: str, **options: Any) -> bytes:
    """`image` saved as JPEG with Pillow's `options`; an image JPEG cannot hold, or any failure of the
    encoder, is an InputError naming `path` (the per-image error path: named, skippable)."""
    check_jpeg_size(image.width, image.height, path)
    out = io.BytesIO()
    try:
        image.save(out, format="JPEG", **options)
    except (OSError, ValueError) as e:
        raise InputError(path, f"cannot encode as JPEG: {e}") from None
    return out.getvalue()
