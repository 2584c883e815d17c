"""The pixel work of a resized image: decode (at a DCT scale), resize, turn upright, encode as JPEG.

Two ways through the same steps. Where simplejpeg (libjpeg-turbo's TurboJPEG API) and cykooz.resizer
(fast_image_resize) are both installed, a JPEG stored as is (or re-encoded only for its header) is
decoded by libjpeg-turbo straight into a 4-bytes-a-pixel buffer kept from image to image (no page
faults of fresh blocks), without fancy upsampling, resized by fast_image_resize (Catmull-Rom, or
Lanczos3 with --resize-filter lanczos3) reading and writing such buffers without a copy, and
encoded by libjpeg-turbo (4:2:0). Everything else (CMYK, PNG and the other inputs the full-size
build re-encodes, which Pillow decodes; platforms without those wheels) goes through Pillow, with
cykooz.resizer's filter where installed. Either way an image's bytes are a function of its bytes,
the output size, the filter and the versions named by `pipeline()` and `resampler()`: the SIMD level
(libjpeg-turbo's and fast_image_resize's) does not change them, nor does what a buffer held before.
"""

from __future__ import annotations

import functools
import io
import threading
from typing import Any, NamedTuple

from imagenet_build.encode import jpeg_encode
from imagenet_build.infra.errors import InputError

# Decoded buffers larger than this are not kept for the next image (a 2,900 x 2,900 image): the
# process's memory stays at what ImageNet's common sizes need.
KEEP_BUFFER_BYTES = 32 << 20
_buffers = threading.local()  # per thread: {slot: bytearray}, slot = a decode scale, or "out"
# --resize-filter -> (fast_image_resize's FilterType, Pillow's Image.Resampling, the names the codec records).
# Pillow's BICUBIC is Catmull-Rom (a = -0.5), fast_image_resize's catmull_rom the same kernel with SIMD.
FILTERS = {
    "catmull-rom": ("catmull_rom", "BICUBIC", "CatmullRom", "Pillow bicubic (Catmull-Rom)"),
    "lanczos3": ("lanczos3", "LANCZOS", "Lanczos3", "Pillow Lanczos"),
}
# Catmull-Rom by default: on ImageNet-like JPEGs it resizes in 0.5 ms where Lanczos3 takes 0.85 (500x375
# -> 299x224, one core); a whole convert --resize is 1.52-1.83x img2dataset per CPU-second against Lanczos3's
# 1.36-1.63x, at 0.2-0.4 dB less PSNR, still above img2dataset's (docs/resize.md, docs/benchmarks.md).
DEFAULT_FILTER = "catmull-rom"
# What a manifest without options.resize.filter means: builds made before --resize-filter (and its default
# then) resized with Lanczos3, so Lanczos3 is the filter left unrecorded and every other one is written down.
UNRECORDED_FILTER = "lanczos3"


class Pixels(NamedTuple):
    """An RGB image between steps: `image` for Pillow and the resizer, `array` (rows of RGBX, the fast
    way only, else None) for libjpeg-turbo's encoder; `factor` = decoded size / stored size (M/8)."""

    image: Any
    array: Any
    factor: float = 1.0


@functools.lru_cache(maxsize=None)
def _fast_resize_module() -> Any:
    """fast_image_resize's Python package where installed, else None: `cykooz_resizer` from 4.0, and
    `cykooz.resizer` before (3.1, the last with wheels for Python 3.9), with the same classes."""
    import importlib

    for name in ("cykooz_resizer", "cykooz.resizer"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


@functools.lru_cache(maxsize=None)
def _fast_resizer() -> Any:
    """fast_image_resize's resizer (package cykooz.resizer) where installed, else None (Pillow's filters)."""
    module = _fast_resize_module()
    return None if module is None else module.Resizer()


@functools.lru_cache(maxsize=None)
def _turbo() -> Any:
    """simplejpeg (libjpeg-turbo's TurboJPEG API) where installed, else None: the JPEG half of the fast way."""
    import importlib

    try:
        return importlib.import_module("simplejpeg")
    except ImportError:
        return None


def fast() -> bool:
    """True when JPEGs stored as is go the fast way: simplejpeg and cykooz.resizer both installed."""
    return _turbo() is not None and _fast_resizer() is not None


def resampler(filter: str = DEFAULT_FILTER) -> str:
    """Which resizer and filter resize images here, with its version: part of what resized bytes depend on."""
    _, _, fast_name, pillow_name = FILTERS[filter]
    if _fast_resizer() is None:
        return pillow_name
    from importlib.metadata import version

    return f"cykooz.resizer {version('cykooz.resizer')} {fast_name}"


def pipeline() -> str:
    """The fast way's codec with its version and settings, or "" (Pillow's, named by the caller)."""
    if not fast():
        return ""
    return f"simplejpeg {_turbo().__version__} RGBX fastupsample, encode 4:2:0"


def _buffer(slot: object, size: int) -> Any:
    """A writable buffer of at least `size` bytes for `slot`, kept for the next image of this thread
    (every byte of it that is read is written first: its old content never shows)."""
    kept = getattr(_buffers, "by_slot", None)
    if kept is None:
        kept = _buffers.by_slot = {}
    buffer = kept.get(slot)
    if buffer is None or len(buffer) < size:
        buffer = bytearray(size)
        if size <= KEEP_BUFFER_BYTES:
            kept[slot] = buffer
    return memoryview(buffer)[:size]


def _rgbx_image(array: Any, mode: str = "RGB") -> Any:
    """A Pillow image over `array` (h x w x 4, RGBX), without a copy, that cykooz.resizer reads or writes as
    RGB (Pillow keeps RGB as 4 bytes a pixel too); mode "RGBX" for Pillow's own use."""
    from PIL import Image

    height, width = array.shape[:2]
    image = Image.frombuffer("RGBX", (width, height), array, "raw", "RGBX", 0, 1)
    if mode != "RGBX":  # what cykooz.resizer itself does to an image's mode (alpha.set_image_mode)
        setattr(image, "_mode" if hasattr(image, "_mode") else "mode", mode)  # "mode" before Pillow 10.1
    return image


def decode_turbo(data: bytes, path: str, size: tuple[int, int], scale: int) -> Pixels:
    """A JPEG stored as is, decoded by libjpeg-turbo at `scale`/8 (1, 2, 4 or 8) into this thread's buffer."""
    width, height = size
    out_w, out_h = -(-width * scale // 8), -(-height * scale // 8)  # libjpeg rounds the scaled size up
    buffer = _buffer(scale, out_w * out_h * 4)
    try:
        array = _turbo().decode_jpeg(data, "RGBX", fastupsample=True, min_width=out_w, min_height=out_h,
                                     buffer=buffer, strict=False)  # warnings pass, as with Pillow's decoder
    except (ValueError, RuntimeError) as e:
        raise InputError(path, f"cannot decode JPEG: {e}") from None
    if array.shape != (out_h, out_w, 4):  # the scale rule keeps sizes where another scale gives the same size
        raise InputError(path, f"decoded to {array.shape[1]}x{array.shape[0]}, not {scale}/8 of {width}x{height}")
    return Pixels(_rgbx_image(array), array, scale / 8)


def decode_pillow(data: bytes, path: str, kind: str | None, size: tuple[int, int], scale: int) -> Pixels:
    """Any image Pillow reads, as RGB (`kind`: what it is, for the message; None: a JPEG); a JPEG at `scale`/8
    (Pillow's draft), anything else at 8."""
    from PIL import Image

    width, height = size
    try:
        with Image.open(io.BytesIO(data)) as opened:
            if scale != 8:  # Pillow picks 1/d with d <= width // requested: ask for exactly 1/d
                opened.draft("RGB", (width // (8 // scale), height // (8 // scale)))
            opened.load()
            image = jpeg_encode.to_rgb(opened)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise InputError(path, f"cannot decode {kind or 'image'}: {e}") from None
    if image.size != (-(-width * scale // 8), -(-height * scale // 8)):
        raise InputError(path, f"decoded to {image.size[0]}x{image.size[1]}, not {scale}/8 of {width}x{height}")
    return Pixels(image, None, scale / 8)


def resize(pixels: Pixels, size: tuple[int, int], box: tuple[float, float, float, float],
           filter: str = DEFAULT_FILTER) -> Pixels:
    """`pixels` resized to `size` from the region `box` (left, top, right, bottom; fractions allowed) with
    `filter` (a key of FILTERS).

    fast_image_resize's Lanczos3 is Pillow's LANCZOS (support 3, the same normalised weights), its
    Catmull-Rom Pillow's BICUBIC (support 2), with SIMD: 500x375 -> 384x288 in 0.38 ms (Lanczos3)
    against Pillow's 2.52 ms on one core here (AVX2; SSE4.1 0.50 ms, none 1.10 ms, the same bytes with
    each); its output is within rounding of Pillow's (PSNR > 45 dB against it; a few edge pixels of a
    fractional box differ more), and it runs on one thread. What each filter costs and gives is in
    docs/resize.md. Without it (no wheel: Linux on ARM), Pillow's. The fast way writes into this thread's
    output buffer, which the next call reuses: encode the result first.
    """
    from PIL import Image

    fast_filter, pillow_filter, _, _ = FILTERS[filter]
    resizer = _fast_resizer()
    if resizer is None:
        return Pixels(pixels.image.resize(size, getattr(Image.Resampling, pillow_filter), box=box), None)
    module = _fast_resize_module()
    left, top, right, bottom = box
    kernel = getattr(module.FilterType, fast_filter)
    options = module.ResizeOptions(resize_alg=module.ResizeAlg.convolution(kernel),
                                   crop_box=module.CropBox(left, top, right - left, bottom - top))
    if pixels.array is None:
        out = Image.new("RGB", size, None)  # not filled: the resize writes every pixel
        resizer.resize_pil(pixels.image, out, options)
        return Pixels(out, None)
    import numpy as np

    array = np.frombuffer(_buffer("out", size[0] * size[1] * 4), np.uint8).reshape(size[1], size[0], 4)
    out = _rgbx_image(array)
    resizer.resize_pil(pixels.image, out, options)  # every pixel written, the 4th byte too
    return Pixels(out, array)


def transpose(pixels: Pixels, method: int) -> Pixels:
    """`pixels` turned by Pillow's Image.Transpose `method` (a copy, out of any reused buffer)."""
    if pixels.array is None:
        return Pixels(pixels.image.transpose(method), None)
    import numpy as np

    turned = _rgbx_image(pixels.array, "RGBX").transpose(method)
    return Pixels(turned, np.asarray(turned))


def encode(pixels: Pixels, quality: int, path: str) -> bytes:
    """Baseline RGB JPEG, 4:2:0, no EXIF, no ICC, no optimisation pass: the same bytes for the same pixels."""
    if pixels.array is None:
        return jpeg_encode.encode_jpeg(pixels.image, path, quality=quality, subsampling=2, optimize=False,
                                       progressive=False)
    height, width = pixels.array.shape[:2]
    jpeg_encode.check_jpeg_size(width, height, path)
    try:
        return _turbo().encode_jpeg(pixels.array, quality, "RGBX", "420")
    except (ValueError, RuntimeError) as e:
        raise InputError(path, f"cannot encode as JPEG: {e}") from None


def jpeg_header(data: bytes) -> tuple[int, int, str] | None:
    """(height, width, colour space as libjpeg-turbo names it) of a JPEG, by simplejpeg; None where it does not
    read as one, or without simplejpeg."""
    turbo = _turbo()
    if turbo is None:
        return None
    try:
        height, width, colour, _ = turbo.decode_jpeg_header(data)
    except (ValueError, RuntimeError):
        return None
    return height, width, colour


def resize_into(pixels: Pixels, out: Any, box: tuple[float, float, float, float], kernel: str = "bilinear") -> None:
    """The region `box` (left, top, right, bottom; fractions allowed) of the fast way's `pixels` resized into
    `out`, an RGBX array of the output's size, by fast_image_resize's convolution with `kernel` (a FilterType
    name: bilinear for a reader's random crops, as torchvision's RandomResizedCrop resizes)."""
    module = _fast_resize_module()
    left, top, right, bottom = box
    options = module.ResizeOptions(resize_alg=module.ResizeAlg.convolution(getattr(module.FilterType, kernel)),
                                   crop_box=module.CropBox(left, top, right - left, bottom - top))
    _fast_resizer().resize_pil(pixels.image, _rgbx_image(out), options)
