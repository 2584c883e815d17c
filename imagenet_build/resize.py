"""Resized builds: --resize parsed into targets, and each image's bytes for each target.

An image already within a target's size is stored as the full-size build stores it
(untouched, or the RGB re-encode of a CMYK/PNG input), unless --resize-all. Any other
image is decoded, resized with Lanczos and encoded as a baseline RGB JPEG at --quality,
without EXIF or ICC data, so that every decoder sees the same pixels.

Fast: libjpeg-turbo decodes a JPEG at a reduced scale M/8 straight from its DCT
coefficients. The scale chosen for a target is the smallest that leaves the image at
least DCT_GAP[M] times the target on both sides; Lanczos then resizes that smaller image,
with the source box set to the exact scaled extent (the decoder rounds the scaled size
up, and resizing the rounded image would shift the grid by up to half a pixel — 2 to 5
dB of PSNR). The gap depends on the scale because the decoder's scaled IDCTs are not
equally good: 5/8 to 7/8 are as good as a full decode from 1.25x the target up, while 4/8
and below (libjpeg-turbo's reduced IDCTs) lose 0.2-0.3 dB on average, 1.7 dB at worst,
until 1.6x (figures in DCT_GAP's comment). simplejpeg (optional, extra `fast`) offers
every scale M/8; Pillow alone offers 1/2, 1/4 and 1/8. Each target's bytes are a function
of the image and that target only, so one pass to several targets writes the same bytes
as one run per target; an image is read once, and decoded once
per distinct scale among the targets (targets whose rule picks the same scale share it).

Where the time goes (one core, 500x375 photo, shorter:288): Pillow's Lanczos 2.0-2.6 ms,
full decode 0.7-0.8 ms, encode 0.3 ms. The Lanczos cost is proportional to the area it
reads, so the decode scale is the lever; see docs/benchmarks.md for what else was tried.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from imagenet_build import images
from imagenet_build.errors import InputError, UsageError

# Decode at the smallest scale M/8 leaving at least DCT_GAP[M] times the target on both sides, then Lanczos.
# Measured over 300 photo-like images x {160, 224, 288} (simplejpeg's scaled decode, Lanczos, quality 90),
# mean PSNR against full decode + float Lanczos, minus that of full decode + the same Lanczos, by the ratio
# (decoded shorter side / target): 7/8: -0.22 dB at [1.0, 1.1), +0.02 at [1.1, 1.2), >= +0.05 above;
# 6/8: -0.13 / -0.09 at [1.0, 1.2), +0.03 from 1.25; 5/8: -0.35 / -0.11 at [1.0, 1.2), +-0.01 from 1.3;
# 4/8: -1.0, -0.67, -0.33, -0.19, -0.17 up to 1.6, -0.06 at [1.6, 2) (worst image -1.7 dB at 1.25-1.3);
# 3/8 and 2/8 alike. So 1.6 for the reduced IDCTs (4/8 and below; a single 1.25 let 4/8 through
# at 1.25-1.6). 7/8 would pass from 1.1 (a 288 target on 500x375 decoded at 329 px instead of 375),
# but its scalar IDCT costs 1.39 ms against 0.81 ms for a full decode, eating the 0.65 ms the smaller
# Lanczos saves (3.96 vs 4.04 ms per image, noise): it keeps 1.25, and fewer scales means more sharing.
DCT_GAP = {1: 1.6, 2: 1.6, 3: 1.6, 4: 1.6, 5: 1.25, 6: 1.25, 7: 1.25}
DEFAULT_QUALITY = 90
_SPEC = re.compile(r"^(shorter|longer):(\d+(?:,\d+)*)$")
_MAX_SIDE = 65500  # the largest side a JPEG can hold
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
        return f"{self.side}-{self.size}"

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


def parse_targets(text: str) -> tuple[Target, ...]:
    """`shorter:256`, `longer:500`, `shorter:160,224,288` -> Targets (UsageError otherwise)."""
    match = _SPEC.match(text.replace(" ", ""))
    if not match:
        raise UsageError(f"--resize {text!r}: expected shorter:N or longer:N, or several sizes as shorter:160,224,288")
    sizes = [int(v) for v in match.group(2).split(",")]
    if any(not 1 <= s <= _MAX_SIDE for s in sizes):
        raise UsageError(f"--resize {text!r}: sizes must be between 1 and {_MAX_SIDE}")
    if len(set(sizes)) != len(sizes):
        raise UsageError(f"--resize {text!r}: a size is repeated")
    return tuple(Target(match.group(1), s) for s in sizes)


@dataclass(frozen=True)
class ResizeOptions:
    """What a resized build's bytes depend on besides the images; `targets` are built in one pass."""

    targets: tuple
    quality: int = DEFAULT_QUALITY
    larger_only: bool = True
    exif_transpose: bool = False

    def only(self, targets: Iterable[Target]) -> ResizeOptions:
        return ResizeOptions(tuple(targets), self.quality, self.larger_only, self.exif_transpose)

    def recorded(self, target: Target) -> dict:
        """The manifest's options.resize of one target's build (a layout option: a rerun must repeat it)."""
        return {"target": target.label, "quality": self.quality, "larger_only": self.larger_only,
                "exif_transpose": self.exif_transpose}


def fast_decoder() -> Any:
    """simplejpeg when installed (every DCT scale M/8), else None (Pillow: 1/2, 1/4, 1/8)."""
    try:
        import simplejpeg
    except ImportError:
        return None
    return simplejpeg


def codec() -> str:
    """What resized bytes depend on besides the pixels and options: Pillow, libjpeg, and the decoder."""
    decoder = fast_decoder()
    fast = f", simplejpeg {decoder.__version__}" if decoder is not None else ""
    gaps = " ".join(f"{m}/8:{g}" for m, g in sorted(DCT_GAP.items()))
    return f"{images.encoder_version()}{fast}, gaps {gaps}"


def decode_scale(size: tuple[int, int], out: tuple[int, int], every_scale: bool) -> int:
    """The smallest M whose M/8 decode of an image of `size` is at least DCT_GAP[M] times `out` on both
    sides (8: a full decode); `every_scale` when the decoder offers every M/8, else 1/8, 2/8, 4/8 only."""
    width, height = size
    for m in range(1, 8) if every_scale else (1, 2, 4):
        gap = round(DCT_GAP[m] * 100)  # in integers: no float rounding in the choice
        if -(-width * m // 8) * 100 >= out[0] * gap and -(-height * m // 8) * 100 >= out[1] * gap:
            return m
    return 8


class _Source:
    """One input image, decoded on demand at the scales its targets need (each scale once)."""

    def __init__(self, data: bytes, path: str, header: images.JpegHeader | None, orientation: int,
                 kind: str | None, size: tuple[int, int]) -> None:
        self.data, self.path, self.header, self.kind = data, path, header, kind
        self.orientation = orientation
        self.size = size  # (width, height) as stored, before any EXIF transposition
        self._decoded: dict[int, tuple[Any, float]] = {}

    def decoded(self, out: tuple[int, int] | None) -> tuple[Any, float]:
        """RGB pixels at the scale DCT_GAP picks for an output of `out` (w, h), and the factor from stored
        to decoded size.

        Returns (image, factor) where factor is a fraction M/8 (1 for a full decode): the decoded
        image covers width*factor x height*factor stored pixels' worth, rounded up.
        """
        scale = self._scale(out)
        if scale not in self._decoded:
            self._decoded[scale] = self._decode(scale)
        return self._decoded[scale]

    def _scale(self, out: tuple[int, int] | None) -> int:
        """The decode scale M (of M/8) for an output of `out`: a function of the stored size and `out` only."""
        if out is None or self.header is None or not images.is_storable(self.header):
            return 8
        return decode_scale(self.size, out, fast_decoder() is not None)

    def _decode(self, scale: int) -> tuple[Any, float]:
        from PIL import Image

        width, height = self.size
        try:
            decoder = fast_decoder()
            if scale != 8 and decoder is not None:
                pixels = decoder.decode_jpeg(self.data, "RGB", min_width=-(-width * scale // 8),
                                             min_height=-(-height * scale // 8))
                image = Image.fromarray(pixels)
            else:
                with Image.open(io.BytesIO(self.data)) as opened:
                    if scale != 8:  # Pillow picks 1/d with d <= width // requested: ask for exactly 1/d
                        opened.draft("RGB", (width // (8 // scale), height // (8 // scale)))
                    opened.load()
                    image = images.to_rgb(opened)
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
            raise InputError(self.path, f"cannot decode {self.kind or 'image'}: {e}") from None
        for m in range(1, 9):  # the scale the decoder used: libjpeg rounds the scaled size up
            if image.size == (-(-width * m // 8), -(-height * m // 8)):
                return image, m / 8
        raise InputError(self.path, f"decoded to {image.size[0]}x{image.size[1]}, not a scale of {width}x{height}")


def _encode(image: Any, quality: int) -> bytes:
    """Baseline RGB JPEG, 4:2:0, no EXIF, no ICC, no optimisation pass: the same bytes for the same pixels."""
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality, subsampling=2, optimize=False, progressive=False)
    return out.getvalue()


def _resized(source: _Source, target: Target, options: ResizeOptions) -> images.StoredImage:
    from PIL import Image

    width, height = source.size
    swap = options.exif_transpose and source.orientation in (5, 6, 7, 8)
    shown = (height, width) if swap else (width, height)
    keep = options.larger_only and target.fits(*shown)  # only here to be turned upright: no upscaling
    out_w, out_h = shown if keep else target.size_for(*shown)
    stored_out = (out_h, out_w) if swap else (out_w, out_h)  # the output size before transposing
    image, factor = source.decoded(stored_out)
    box = (0.0, 0.0, width * factor, height * factor)  # the exact scaled extent, not the rounded-up size
    if image.size != stored_out or factor != 1:
        image = image.resize(stored_out, Image.Resampling.LANCZOS, box=box)
    if options.exif_transpose and source.orientation in _TRANSPOSE:
        image = image.transpose(_TRANSPOSE[source.orientation])
    kind = source.kind or ""
    return images.StoredImage(_encode(image, options.quality), image.height, image.width, kind, resized=True)


def prepare_resized(data: bytes, path: str, options: ResizeOptions) -> list[images.StoredImage | InputError]:
    """For each target, the StoredImage to write, or the InputError that keeps it out.

    A problem every target meets (an empty or broken file) is raised; one that only decoding
    meets is given for the targets that decode, so each target's result depends on it alone.
    """
    full = images.prepare(data, path)  # the checks, and the full-size build's bytes
    header, orientation = None, 1
    if data[:2] == b"\xff\xd8":
        header, _ = images.jpeg_facts(data)
        orientation = images.exif_orientation(data)
    kind = full.reencoded or None
    source = _Source(data, path, header if not full.reencoded else None, orientation, kind, (full.width, full.height))
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
    return results
