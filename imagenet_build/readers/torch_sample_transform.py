"""Decoding and augmenting one image where it is read (a DataLoader worker), decoding no more than the output needs.

`SampleTransform` is the PyTorch reader's per-sample path on the CPU: given a record's stored image, it draws the
crop first (training: slim's random crop, drawn by torch_transform.draw_crop as `BatchTransform` draws it;
evaluation: the centre crop of the image resized to `resize` on its shorter side, as `BatchTransform` takes it),
decodes the JPEG with libjpeg-turbo at the smallest DCT scale (1/8, 1/4, 1/2 or 1) at which the crop still
covers the output size, without fancy upsampling, into a buffer kept from image to image
(encode/resample.py's decode), resizes only the crop to size x size with fast_image_resize's SIMD convolution
(bilinear with antialiasing, as torchvision's RandomResizedCrop), mirrors half the crops and normalises: a
float32 3 x size x size tensor. `crops` does a batch's images into their places in the batch (RecordDataset's
batch read in one call, torch_batch.py; Grain's CropBatch), each crop's RGBX rows turned into RGB planes by
32-bit words. libjpeg-turbo's partial decode (jpeg_crop_scanline, jpeg_skip_scanlines) is
not reachable from Python through a maintained package (simplejpeg and PyTurboJPEG expose whole-image decodes
only), so the whole image is decoded, at the reduced scale.

Everything the fast way does not take (a PNG of write_arrays(..., lossless=True), a CMYK or YCCK JPEG, a
platform without simplejpeg's and cykooz.resizer's wheels) goes through `decode_images` (the rule a PNG is
held to included) and torchvision's resize: the same crop, a slower way.

Random draws come from a CPU generator per process, seeded by `seed` and, in a DataLoader worker, by the
worker's seed (which PyTorch draws per epoch from the main process's generator: torch.manual_seed makes a run
repeatable), taken from it a block at a time (torch_transform.Uniforms: the same numbers).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Sequence

import numpy as np

from imagenet_build.encode import resample
from imagenet_build.encode.png import is_png
from imagenet_build.infra.errors import BuildError, InputError
from imagenet_build.infra.optional import require
from imagenet_build.readers.normalisation import DLE_MEAN, DLE_STD
from imagenet_build.readers.torch_transform import AREA, ASPECT, Uniforms, decode_images, draw_crop

torch = require("torch", "imagenet_build.torch (the PyTorch reader)")

Box = tuple[float, float, float, float]  # top, left, height, width in the stored image's pixels (fractions allowed)
# Images normalised at a time on the CPU: three passes over 4 images' floats (2.4 MB at 224) stay in the caches,
# over a whole batch they go to memory and back (75 against 100 us an image here)
NORMALISE_STEP = 4
# The colour spaces libjpeg-turbo turns into RGB itself; a CMYK or YCCK JPEG goes the slower way
_TURBO_COLOURS = {"YCbCr", "Gray", "RGB"}


def centre_box(height: int, width: int, size: int, resize: int) -> Box:
    """Evaluation's crop as BatchTransform takes it (the shorter side resized to `resize`, the centre size x size),
    in the stored image's pixels."""
    scale = resize / min(height, width)
    rows, columns = max(size, round(height * scale)), max(size, round(width * scale))
    by_row, by_column = rows / height, columns / width
    top, left = int(round((rows - size) / 2.0)), int(round((columns - size) / 2.0))
    return top / by_row, left / by_column, size / by_row, size / by_column


def dct_scale(box: Box, size: int) -> int:
    """The smallest M of libjpeg-turbo's SIMD scales M/8 (1, 2, 4, 8) at which the crop covers size x size."""
    _, _, height, width = box
    for eighths in (1, 2, 4):
        if min(height, width) * eighths / 8 >= size:
            return eighths
    return 8


class SampleTransform:
    """One stored image (bytes or a uint8 tensor) to float32 3 x size x size, normalised; for a dataset's
    `transform=` with decode=False: `RecordDataset(folder, decode=False, transform=SampleTransform())`.

    Training: slim's random crop (area 0.05-1, aspect 0.75-1.33, the draws of BatchTransform), resized to
    size x size, mirrored half the time. Evaluation (training=False): the shorter side to `resize`, the centre
    size x size. Then (x - mean) / std per channel, in 0-255 units; with normalise=False the uint8 crop, for
    `normalise` to do on the batch where it is used (a quarter of the bytes through the DataLoader's shared
    memory, and on a GPU there).
    """

    def __init__(self, training: bool = True, size: int = 224, resize: int = 256,
                 mean: Sequence[float] = DLE_MEAN, std: Sequence[float] = DLE_STD,
                 area: tuple[float, float] = AREA, aspect: tuple[float, float] = ASPECT, attempts: int = 100,
                 seed: int = 0, normalise: bool = True) -> None:
        self.training, self.size, self.resize = training, size, resize
        self.area, self.aspect, self.attempts, self.seed = area, aspect, attempts, seed
        self.normalise = normalise
        self.mean, self.std = tuple(mean), tuple(std)
        self.scale = torch.tensor([1 / s for s in std], dtype=torch.float32).view(3, 1, 1)
        self.shift = torch.tensor([m / s for m, s in zip(mean, std)], dtype=torch.float32).view(3, 1, 1)
        self._generator: Any = None
        self._pid = -1
        self._buffers: dict[tuple[str, int], Any] = {}  # per thread: the crop's RGBX rows, its words

    def __getstate__(self) -> dict:  # a spawned worker seeds its own generator
        return {**self.__dict__, "_generator": None, "_pid": -1, "_buffers": {}}

    @property
    def generator(self) -> Uniforms:
        """This process's draws: of a generator seeded by `seed` in the main process, by (seed, the worker's seed)
        in a DataLoader worker."""
        if self._pid != os.getpid():
            info = torch.utils.data.get_worker_info()
            seed = self.seed if info is None else (self.seed * 1_000_003 + info.seed) % (1 << 63)
            self._generator, self._pid = Uniforms(torch.Generator().manual_seed(seed)), os.getpid()
        return self._generator

    def box(self, height: int, width: int) -> Box:
        """The crop of an image of this size: drawn (training) or the centre one."""
        if self.training:
            return draw_crop(self.generator, height, width, self.area, self.aspect, self.attempts)
        return centre_box(height, width, self.size, self.resize)

    def __call__(self, encoded: bytes | Any, where: str = "an image") -> Any:
        if isinstance(encoded, torch.Tensor) and encoded.ndim == 3:  # decoded already (a dataset's decode=True)
            return self.crop_decoded(encoded)
        pixels = np.empty((3, self.size, self.size), np.uint8)
        self.crop_into(encoded, pixels, self._mirror(), where)
        return self._normalised(torch.from_numpy(pixels))

    def crops(self, encoded: Sequence[bytes | Any], pixels: Any, where: Sequence[str]) -> None:
        """A batch's crops, each mirrored as drawn, into `pixels` (a uint8 array [B, 3, size, size]): where a batch
        is made in one call (RecordDataset's __getitems__), every crop goes straight to its place in the batch."""
        for k, one in enumerate(encoded):
            self.crop_into(one, pixels[k], self._mirror(), where[k])

    def crop_into(self, encoded: bytes | Any, pixels: Any, mirror: bool, where: str = "an image") -> None:
        """One stored image's crop (or a decoded uint8 CHW image's), mirrored if `mirror`, into `pixels` (uint8,
        3 x size x size)."""
        decoded = isinstance(encoded, torch.Tensor) and encoded.ndim == 3
        data: bytes = b"" if decoded else encoded.numpy().tobytes() if isinstance(encoded, torch.Tensor) else encoded
        header = None if decoded else _turbo_header(data)
        if header is not None:
            height, width = header
            rgbx = self._kept("rgbx", (self.size, self.size, 4))
            self.turbo_crop(data, height, width, self.box(height, width), where, rgbx)
            self._planes(rgbx, pixels, mirror)
        else:  # the slower way: decode_images (its PNG rule included), torchvision's resize
            image: Any = encoded if decoded else decode_images([data], where=[where])[0]
            crop = self.tensor_crop(image, self.box(*image.shape[-2:]))
            pixels[...] = (crop.flip(-1) if mirror else crop).numpy()

    def _planes(self, rgbx: Any, pixels: Any, mirror: bool) -> None:
        """RGBX rows to the R, G and B planes of `pixels`, mirrored by the view: each pixel a little-endian 32-bit
        word, its low byte R, cast, then shifted for G and B (25 us at 224, numpy's byte-strided copy 43)."""
        words = self._kept("words", (self.size, self.size), np.uint32)
        np.copyto(words, rgbx.view("<u4").reshape(words.shape)[:, ::-1 if mirror else 1])
        for plane in pixels:
            np.copyto(plane, words, casting="unsafe")  # the low byte
            words >>= 8

    def _kept(self, name: str, shape: tuple[int, ...], dtype: Any = np.uint8) -> Any:
        """This thread's buffer `name`, kept from image to image."""
        key = (name, threading.get_ident())
        buffer = self._buffers.get(key)
        if buffer is None or buffer.shape != shape:
            buffer = self._buffers[key] = np.empty(shape, dtype)
        return buffer

    def crop_decoded(self, image: Any) -> Any:
        """A decoded uint8 CHW image: its crop resized, mirrored half the time, normalised."""
        pixels = self.tensor_crop(image, self.box(*image.shape[-2:]))
        return self._normalised(pixels.flip(-1) if self._mirror() else pixels)

    def _mirror(self) -> bool:
        return self.training and self.generator.take(1)[0] < 0.5

    def _normalised(self, pixels: Any) -> Any:
        """uint8 CHW -> float32, (x - mean) / std per channel; as it is with normalise=False."""
        return pixels.float().mul_(self.scale).sub_(self.shift) if self.normalise else pixels

    def turbo_crop(self, data: bytes, height: int, width: int, box: Box, where: str = "an image",
                   out: Any = None) -> Any:
        """A JPEG's crop `box` as an RGBX array, size x size (into `out` where given): decoded at the DCT scale the
        crop needs, resized by fast_image_resize (bilinear, antialiased)."""
        eighths = dct_scale(box, self.size)
        try:
            pixels = resample.decode_turbo(data, where, (width, height), eighths)
        except InputError as e:
            raise BuildError(f"{where}: does not decode as JPEG ({e.problem})") from None
        factor = eighths / 8
        top, left, h, w = (v * factor for v in box)
        if out is None:
            out = np.empty((self.size, self.size, 4), np.uint8)
        resample.resize_into(pixels, out, (left, top, left + w, top + h))
        return out

    def tensor_crop(self, image: Any, box: Box) -> Any:
        """A decoded uint8 CHW image's crop `box` resized to size x size by torchvision (bilinear, antialiased)."""
        functional = require("torchvision.transforms.v2.functional", "augmenting images in imagenet_build.torch")
        top, left, h, w = (int(round(v)) for v in box)
        h, w = max(1, min(h, image.shape[-2] - top)), max(1, min(w, image.shape[-1] - left))
        return functional.resized_crop(image, top, left, h, w, [self.size, self.size], antialias=True)


def normalise(images: Any, mean: Sequence[float] = DLE_MEAN, std: Sequence[float] = DLE_STD,
              out: Any = None) -> Any:
    """uint8 images [B, 3, H, W] (SampleTransform(normalise=False)'s, collated) to float32, (x - mean) / std per
    channel, in `out` where given (a buffer kept from batch to batch: no fresh memory a batch; one of more images
    than the batch gives its first B, for an epoch's last batch)."""
    shape = (1, 3, 1, 1)
    scale = torch.tensor([1 / s for s in std], dtype=torch.float32, device=images.device).view(shape)
    shift = torch.tensor([m / s for m, s in zip(mean, std)], dtype=torch.float32, device=images.device).view(shape)
    if out is None:
        out = torch.empty(images.shape, dtype=torch.float32, device=images.device)
    out = out[:len(images)]
    step = NORMALISE_STEP if images.device.type == "cpu" else max(1, len(images))
    for start in range(0, len(images), step):  # on the CPU a few images at a time, while they are in the caches
        out[start:start + step].copy_(images[start:start + step]).mul_(scale).sub_(shift)
    return out


def _turbo_header(data: bytes) -> tuple[int, int] | None:
    """(height, width) of a JPEG the fast way decodes (libjpeg-turbo turning its colours into RGB itself), else
    None: a PNG, a CMYK or YCCK JPEG, what does not read as a JPEG (decode_images names the problem), or no fast
    way on this platform."""
    if is_png(data[:8]) or not resample.fast():
        return None
    header = resample.jpeg_header(data)
    if header is None or header[2] not in _TURBO_COLOURS:
        return None
    return header[0], header[1]


__all__ = ["SampleTransform", "centre_box", "dct_scale", "normalise"]
