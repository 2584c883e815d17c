"""Thumbnails of records' images, and files inlined as data: URIs: the page loads nothing from elsewhere.

A thumbnail is the stored image decoded as the readers decode it (no EXIF rotation), in RGB, resized
to fit THUMB pixels (never enlarged) and stored losslessly (PNG), so what the page shows is the record's
image resized and nothing more; boxes are drawn over it by the page, not into its pixels.
"""

from __future__ import annotations

import base64
import io
import warnings
from typing import NamedTuple

THUMB = 128  # a thumbnail's longer side at most, in pixels


class Thumbnail(NamedTuple):
    uri: str  # data:image/png;base64,...
    width: int
    height: int


def data_uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def fit(width: int, height: int, box: int = THUMB) -> tuple[int, int]:
    """The thumbnail size of a width x height image: its longer side `box`, never enlarged, no side 0."""
    scale = min(1.0, box / max(width, height, 1))
    return max(1, round(width * scale)), max(1, round(height * scale))


def thumbnail(image: bytes) -> Thumbnail:
    """The image's thumbnail; ValueError (why) for bytes Pillow cannot decode."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(image)) as opened:
                pixels = opened.convert("RGB")
    except UnidentifiedImageError:  # its words name the in-memory file object, which says nothing
        raise ValueError("the image does not decode (not an image format Pillow knows)") from None
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise ValueError(f"the image does not decode ({e})") from None
    size = fit(*pixels.size)
    small = pixels.resize(size, Image.Resampling.BICUBIC) if size != pixels.size else pixels
    out = io.BytesIO()
    small.save(out, "PNG", optimize=False, compress_level=6)
    return Thumbnail(data_uri("image/png", out.getvalue()), *size)
