"""Resized builds: --resize parsed into targets, and each image's bytes for each target.

An image already within a target's size is stored as the full-size build stores it
(untouched, or the RGB re-encode of a CMYK/PNG input), unless --resize-all. Any other
image is decoded, resized with Catmull-Rom (Lanczos3 with --resize-filter lanczos3) and
encoded as a baseline RGB JPEG at --quality, without EXIF or ICC data, so that every decoder
sees the same pixels.

Fast: libjpeg-turbo decodes a JPEG at 1/2, 1/4 or 1/8 scale straight from its DCT
coefficients (its SIMD reduced IDCTs), used where the image stays at least DCT_GAP times the
target on both sides; the filter then resizes that smaller image, with the source box set to the
exact scaled extent (the decoder rounds the scaled size up, and resizing the rounded image would
shift the grid by up to half a pixel: 2 to 5 dB of PSNR). How the pixels are decoded, resized
and encoded (libjpeg-turbo through simplejpeg and fast_image_resize on reused buffers, or
Pillow) is resample.py's. Each target's bytes are a function of the image and that target only,
so one pass to several targets writes the same bytes as one run per target; an image is read
once, and decoded once per distinct scale among the targets (targets whose rule picks the same
scale share it).

Where the time goes (one core, ImageNet-like 500x375 photo of ~110 KB, shorter:224): decode
1.0-1.6 ms (Pillow's: 0.2-0.3 ms more), Catmull-Rom 0.5 ms (Lanczos3 0.85), encode 0.3 ms; see
docs/benchmarks.md for the figures and what else was tried.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from imagenet_build.encode import images, jpeg_encode, resample
from imagenet_build.encode.jpeg_header import exif_orientation, is_jpeg
from imagenet_build.format.naming import resized_folder
from imagenet_build.infra.errors import InputError, UsageError

# Decode at 1/8, 1/4 or 1/2 (the smallest) where that leaves at least DCT_GAP times the target on both sides.
# Measured over 300 photo-like images x {160, 224, 288} (Lanczos3, quality 90): mean PSNR against a full
# decode + float Lanczos, minus that of a full decode + the same Lanczos, by the ratio (decoded shorter side
# / target): at 4/8, -1.0, -0.67, -0.33, -0.19, -0.17 dB in steps of 0.1 from 1.0 to 1.6 (worst image -1.7 dB
# at 1.25-1.3), -0.06 at [1.6, 2); 2/8 and 1/8 alike. The other scales libjpeg-turbo offers (3/8, 5/8-7/8)
# use scalar IDCTs that cost more than a full decode (0.9-1.3 ms against 0.5-0.7 ms for a 500x375 image)
# and, with a SIMD Lanczos, save less than that (docs/benchmarks.md).
DCT_GAP = 1.6
DCT_SCALES = (1, 2, 4)  # of 8: the reduced IDCTs (SIMD in libjpeg-turbo) Pillow's draft asks libjpeg for
# Scaled decodes only from 8 pixels a side: below, libjpeg's 3/8 gives the size of its 4/8 (4x4 -> 2x2), and
# TurboJPEG, which picks the smallest scale that gives a size, would decode at 3/8 what the rule asks at 4/8.
DCT_MIN_SIDE = 8
DEFAULT_QUALITY = 90
_SPEC = re.compile(r"^(shorter|longer):([0-9]+(?:,[0-9]+)*)$")  # ASCII digits only: int() takes '٢٢٤' too
# Pillow's default decompression-bomb limit (2 x Image.MAX_IMAGE_PIXELS): the cap when a program has lifted it
DEFAULT_PIXEL_CAP = 2 * images.PILLOW_MAX_IMAGE_PIXELS
# EXIF orientation -> the transposition that shows the image upright (Pillow's Image.Transpose values)
_TRANSPOSE = {2: 0, 3: 3, 4: 1, 5: 5, 6: 4, 7: 6, 8: 2}


class Target(NamedTuple):
    """One size to build: the shorter (or longer) side becomes `size`, the aspect kept."""

    side: str  # "shorter" or "longer"
    size: int

    @property
    def label(self) -> str:
        return f"{self.side}:{self.size}"

    @property
    def folder(self) -> str:
        """The build's folder under --output-dir: shorter-256, longer-500."""
        return resized_folder(self.side, self.size)

    def fits(self, width: int, height: int) -> bool:
        """True when the image is already within the size (the side is not larger)."""
        side = min(width, height) if self.side == "shorter" else max(width, height)
        return side <= self.size

    def size_for(self, width: int, height: int) -> tuple[int, int]:
        """The stored size: the chosen side = size, the other rounded half up (integers only: no float drift)."""
        side = min(width, height) if self.side == "shorter" else max(width, height)

        def scaled(v: int) -> int:
            return max(1, (2 * v * self.size + side) // (2 * side))

        return (self.size, scaled(height)) if side == width else (scaled(width), self.size)


def pixel_cap() -> int:
    """The most pixels a resized image may have: Pillow's decompression-bomb limit, what inputs are held to
    (images.bomb_pixels), so no output is one a reader refuses, and no worker allocates gigabytes for one image."""
    return images.bomb_pixels() or DEFAULT_PIXEL_CAP


def max_size() -> int:
    """The largest N of shorter:N or longer:N: an N x N image must stay within pixel_cap()."""
    return min(math.isqrt(pixel_cap()), jpeg_encode.JPEG_MAX_SIDE)


def parse_targets(text: str) -> tuple[Target, ...]:
    """`shorter:256`, `longer:500`, `shorter:160,224,288` -> Targets (UsageError otherwise).

    Sizes are bounded before any work: shorter:N makes every resized image at least N x N (and
    --resize-all resizes every image), longer:N at most that; an N x N beyond Pillow's limit is refused.
    """
    match = _SPEC.match(text.replace(" ", ""))
    if not match:
        raise UsageError(f"--resize {text!r}: expected shorter:N or longer:N, or several sizes as shorter:160,224,288")
    sizes = [int(v) for v in match.group(2).split(",")]
    largest = max_size()
    if any(not 1 <= s <= largest for s in sizes):
        raise UsageError(f"--resize {text!r}: sizes must be between 1 and {largest:,} (an image of "
                         f"{largest + 1:,}x{largest + 1:,} pixels would pass Pillow's decompression-bomb limit of "
                         f"{pixel_cap():,} pixels)")
    if len(set(sizes)) != len(sizes):
        raise UsageError(f"--resize {text!r}: a size is repeated")
    return tuple(Target(match.group(1), s) for s in sizes)


def output_problem(width: int, height: int) -> str:
    """Why a resized image of width x height cannot be made, or "": checked before any pixel is decoded."""
    problem = jpeg_encode.jpeg_size_problem(width, height)
    if problem:
        return problem
    if width * height > pixel_cap():
        return f"{width * height:,} pixels, beyond Pillow's decompression-bomb limit of {pixel_cap():,}"
    return ""


@dataclass(frozen=True)
class ResizeOptions:
    """What a resized build's bytes depend on besides the images; `targets` are built in one pass."""

    targets: tuple
    quality: int = DEFAULT_QUALITY
    larger_only: bool = True
    exif_transpose: bool = False
    filter: str = resample.DEFAULT_FILTER  # a key of resample.FILTERS: --resize-filter

    def only(self, targets: Iterable[Target]) -> ResizeOptions:
        return ResizeOptions(tuple(targets), self.quality, self.larger_only, self.exif_transpose, self.filter)

    def recorded(self, target: Target) -> dict:
        """The manifest's options.resize of one target's build (a layout option: a rerun must repeat it). The
        filter is recorded unless Lanczos3, the filter of builds made before --resize-filter, which resume as
        Lanczos3 builds."""
        recorded = {"target": target.label, "quality": self.quality, "larger_only": self.larger_only,
                    "exif_transpose": self.exif_transpose}
        if self.filter != resample.UNRECORDED_FILTER:
            recorded["filter"] = self.filter
        return recorded


def codec(filter: str = resample.DEFAULT_FILTER) -> str:
    """What resized bytes depend on besides the pixels and options: Pillow, libjpeg, the fast way's codec
    (simplejpeg), the resampler and its filter, the scale rule."""
    fast = resample.pipeline()
    return ", ".join([images.encoder_version(), *([fast] if fast else []), resample.resampler(filter),
                      f"scales {DCT_SCALES} from {DCT_GAP}x, sides from {DCT_MIN_SIDE}"])


def decode_scale(size: tuple[int, int], out: tuple[int, int]) -> int:
    """The smallest M in DCT_SCALES whose M/8 decode of an image of `size` is at least DCT_GAP times `out`
    on both sides (8: a full decode); an image under DCT_MIN_SIDE a side is decoded in full."""
    width, height = size
    gap = round(DCT_GAP * 100)  # in integers: no float rounding in the choice
    if min(width, height) < DCT_MIN_SIDE:
        return 8
    for m in DCT_SCALES:
        if -(-width * m // 8) * 100 >= out[0] * gap and -(-height * m // 8) * 100 >= out[1] * gap:
            return m
    return 8


class _Source:
    """One input image, decoded on demand at the scales its targets need (each scale once)."""

    def __init__(self, data: bytes, path: str, orientation: int, kind: str, size: tuple[int, int]) -> None:
        self.data, self.path = data, path
        self.kind = kind  # why the full-size build re-encodes it, "" when it stores it as is
        self.plain = images.plain_image_data(kind)  # a JPEG libjpeg decodes scaled, the fast way where installed
        self.orientation = orientation
        self.size = size  # (width, height) as stored, before any EXIF transposition
        self._decoded: dict[int, resample.Pixels] = {}

    def decoded(self, out: tuple[int, int]) -> resample.Pixels:
        """RGB pixels at the scale DCT_GAP picks for an output of `out` (w, h), with the factor M/8 from
        stored to decoded size (1 for a full decode): they cover width*factor x height*factor stored
        pixels' worth, rounded up."""
        scale = self._scale(out)
        if scale not in self._decoded:
            self._decoded[scale] = self._decode(scale)
        return self._decoded[scale]

    def _scale(self, out: tuple[int, int]) -> int:
        """The decode scale M (of M/8) for an output of `out`: a function of the stored size and `out` only."""
        return decode_scale(self.size, out) if self.plain else 8

    def _decode(self, scale: int) -> resample.Pixels:
        if self.plain and resample.fast():
            return resample.decode_turbo(self.data, self.path, self.size, scale)
        return resample.decode_pillow(self.data, self.path, self.kind or None, self.size, scale)


def _resized(source: _Source, target: Target, options: ResizeOptions) -> images.StoredImage:
    width, height = source.size
    swap = options.exif_transpose and source.orientation in (5, 6, 7, 8)
    shown = (height, width) if swap else (width, height)
    keep = options.larger_only and target.fits(*shown)  # only here to be turned upright: no upscaling
    out_w, out_h = shown if keep else target.size_for(*shown)
    problem = output_problem(out_w, out_h)
    if problem:  # shorter:N of a 1 x 10,000 image: 100 x 1,000,000 for shorter:100; said before decoding
        raise InputError(source.path, f"resized to {target.label} it would be {out_w:,}x{out_h:,}: {problem}")
    stored_out = (out_h, out_w) if swap else (out_w, out_h)  # the output size before transposing
    pixels = source.decoded(stored_out)
    box = (0.0, 0.0, width * pixels.factor, height * pixels.factor)  # the exact scaled extent, not the rounded-up size
    if pixels.image.size != stored_out or pixels.factor != 1:
        pixels = resample.resize(pixels, stored_out, box, options.filter)
    if options.exif_transpose and source.orientation in _TRANSPOSE:
        pixels = resample.transpose(pixels, _TRANSPOSE[source.orientation])
    data = resample.encode(pixels, options.quality, source.path)
    return images.StoredImage(data, pixels.image.height, pixels.image.width, source.kind, resized=True)


def stored_resized(data: bytes, path: str, options: ResizeOptions) -> list[images.StoredImage | InputError]:
    """For each target, the StoredImage to write, or the InputError that keeps it out.

    A problem every target meets (an empty or broken file) is raised; one that only decoding
    meets is given for the targets that decode, so each target's result depends on it alone.
    """
    full = images.stored_image(data, path)  # the checks, and the full-size build's bytes
    # the orientation matters only to --exif-transpose (everything else ignores it, as TensorFlow does)
    orientation = exif_orientation(data) if options.exif_transpose and is_jpeg(data) else 1
    decodable = images.readable(data) if full.reencoded else data  # a JPEG's header as libjpeg reads it
    source = _Source(decodable, path, orientation, full.reencoded, (full.width, full.height))
    upright = not (options.exif_transpose and orientation in _TRANSPOSE)
    results: list[images.StoredImage | InputError] = []
    for target in options.targets:
        width, height = source.size
        if options.larger_only and upright and target.fits(width, height):
            results.append(full)
            continue
        try:
            results.append(_resized(source, target, options))
        except InputError as e:
            results.append(e)
        except (OSError, ValueError) as e:  # the resampler's own: still this image's failure, named and skippable
            results.append(InputError(path, f"cannot resize to {target.label}: {e}"))
    return results
