"""Decoding and augmenting batches for the PyTorch reader, on the CPU or the GPU with the same code.

`decode_images` turns stored images into RGB CHW uint8 tensors (JPEGs by torchvision, nvJPEG on "cuda";
PNGs by Pillow); `BatchTransform` decodes a batch and augments it: slim's random crop area and aspect
ranges, resize, mirror, normalise.
"""

from __future__ import annotations

import io as stdio
import math
from typing import Any, Sequence

from imagenet_build.encode.images import judge_png
from imagenet_build.encode.png import is_png
from imagenet_build.infra.errors import BuildError
from imagenet_build.infra.optional import require
from imagenet_build.readers.normalisation import DLE_MEAN, DLE_STD  # every reader's defaults, one home

torch = require("torch", "imagenet_build.torch (the PyTorch reader)")

AREA = (0.05, 1.0)  # slim's random crop: fraction of the image's area
ASPECT = (0.75, 1.33)  # and width / height


def decode_images(encoded: Sequence[bytes | Any], device: str = "cpu", where: Sequence[str] | None = None) -> list:
    """Stored images (bytes or uint8 tensors) to RGB CHW uint8 tensors on `device`: the JPEGs batched
    (nvJPEG on "cuda"), the PNGs (write_arrays(..., lossless=True)) by Pillow, then moved to `device`.

    Grayscale images come out with three channels, 16-bit PNGs as their high bytes (as TensorFlow's
    decoder gives them; DALI's rounds, a level apart at most); the CMYK and PNG inputs of convert were
    re-encoded as RGB JPEG when the shards were written. A PNG the rule refuses (encode/images.py: cut
    short, a CRC that fails, image data that ends early, which Pillow would pad with black) is refused
    here too.
    """
    io = require("torchvision.io", "decoding images in imagenet_build.torch")
    data = [e if isinstance(e, torch.Tensor) else torch.frombuffer(bytearray(e), dtype=torch.uint8) for e in encoded]
    places = list(where) if where else ["an image"] if len(data) == 1 else [f"image {k} of the batch"
                                                                           for k in range(len(data))]
    pngs = {k for k, one in enumerate(data) if is_png(one[:8].numpy().tobytes())}
    decoded: list = [None] * len(data)
    for k in pngs:
        decoded[k] = _decode_png(data[k].numpy().tobytes(), places[k]).to(device)
    jpegs = [k for k in range(len(data)) if k not in pngs]
    if jpegs:
        for k, image in zip(jpegs, _decode_jpegs(io, [data[k] for k in jpegs], device, [places[k] for k in jpegs])):
            decoded[k] = image
    return decoded


def _decode_jpegs(io: Any, data: list, device: str, where: list[str]) -> list:
    """JPEGs in one call (nvJPEG on "cuda"); one that does not decode named by its `where`."""
    try:
        if torch.device(device).type != "cuda":
            return io.decode_jpeg(data, mode=io.ImageReadMode.RGB, device=device)
        return _decode_on_own_stream(io, data, torch.device(device))
    except RuntimeError as e:
        if len(data) > 1:  # find which one, for the message
            for k, one in enumerate(data):
                _decode_jpegs(io, [one], device, [where[k]])
        raise BuildError(f"{where[0]}: does not decode as JPEG ({str(e).splitlines()[0][:200]})") from None


# Pillow's modes of a 16-bit greyscale PNG: (bytes a pixel, the high byte's place), the byte TensorFlow keeps
_SIXTEEN_BIT = {"I;16": (2, 1), "I;16B": (2, 0), "I": (4, 1)}


def _decode_png(data: bytes, where: str) -> Any:
    """One PNG to an RGB CHW uint8 tensor on the CPU, once the rule has passed it (Pillow pads an image whose
    data ends early; torchvision's decoder crashes the process on some broken PNGs)."""
    from PIL import Image

    verdict = judge_png(data)
    if verdict.problem:
        raise BuildError(f"{where}: does not decode as PNG ({verdict.problem}; imagenet-build verify names such "
                         "records)")
    try:
        with Image.open(stdio.BytesIO(data)) as image:
            image.load()
            width, height = image.size
            if image.mode in _SIXTEEN_BIT:
                size, high = _SIXTEEN_BIT[image.mode]
                grey = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8).view(height, width, size)
                return grey[..., high].expand(3, height, width).contiguous()
            pixels = image.convert("RGB").tobytes()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise BuildError(f"{where}: does not decode as PNG ({str(e).splitlines()[0][:200]})") from None
    return torch.frombuffer(bytearray(pixels), dtype=torch.uint8).view(height, width, 3).permute(2, 0, 1).contiguous()


_DECODE_STREAMS: dict[Any, Any] = {}  # one CUDA stream per device, on which the decoder's outputs are allocated


def _decode_on_own_stream(io: Any, data: list, device: Any) -> list:
    """nvJPEG through torchvision with a stream of our own current. torchvision allocates the decoded
    images on the current stream, and nvJPEG's hardware engine writes them without waiting for that
    stream's queued work (pytorch/vision#9606): called on the training loop's stream, it overwrote memory
    that the previous step's kernels were still reading, and trainer-check's ResNet-50 loss was NaN from
    step 5 on an H100 (docs/gpu.md). On a stream that runs nothing, the caching allocator hands the
    decoder only blocks no queued kernel uses; record_stream keeps each image's block from being reused
    before the caller's stream is done with it, and the caller's stream waits for the decode."""
    caller = torch.cuda.current_stream(device)
    key = device.index if device.index is not None else torch.cuda.current_device()
    own = _DECODE_STREAMS.get(key)
    if own is None:
        own = _DECODE_STREAMS[key] = torch.cuda.Stream(device)
    with torch.cuda.stream(own):
        images = io.decode_jpeg(data, mode=io.ImageReadMode.RGB, device=device)
    caller.wait_stream(own)
    for image in images:
        image.record_stream(caller)
    return images


class Uniforms:
    """Uniform draws in [0, 1) of a CPU torch.Generator, taken from it `block` at a time: the numbers one
    torch.rand(n, dtype=float64) per draw gives, in the same order, without a torch call per image (between two
    images' decodes such a call, its code and data out of the caches, cost 30 us: more than the draw)."""

    def __init__(self, generator: Any, block: int = 1024) -> None:
        self.generator, self.block = generator, block
        self._drawn: list[float] = []
        self._next = 0

    def take(self, count: int) -> list[float]:
        if self._next + count > len(self._drawn):
            more = torch.rand(max(self.block, count), generator=self.generator, dtype=torch.float64).tolist()
            self._drawn, self._next = self._drawn[self._next:] + more, 0
        self._next += count
        return self._drawn[self._next - count:self._next]


def draw_crop(generator: Any, height: int, width: int, area: tuple[float, float] = AREA,
              aspect: tuple[float, float] = ASPECT, attempts: int = 100) -> tuple[int, int, int, int]:
    """(top, left, height, width) of slim's random crop of an image of this size, drawn from `generator` (a CPU
    torch.Generator, or its `Uniforms`): area uniform in `area` of the image's, aspect (width / height)
    log-uniform in `aspect`, as DALI draws them; `attempts` tries, else the whole image. Every PyTorch path draws
    its crops here."""
    whole = height * width
    log_lo, log_hi = math.log(aspect[0]), math.log(aspect[1])
    for _ in range(attempts):
        u = generator.take(4) if isinstance(generator, Uniforms) else \
            torch.rand(4, generator=generator, dtype=torch.float64).tolist()
        target = whole * (area[0] + (area[1] - area[0]) * u[0])
        ratio = math.exp(log_lo + (log_hi - log_lo) * u[1])
        w, h = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            return int(u[2] * (height - h + 1)), int(u[3] * (width - w + 1)), h, w
    return 0, 0, height, width


class BatchTransform:
    """Decode a batch of stored images (decode_images) and augment it on `device`: float32 NCHW, normalised.

    Training: slim's random crop (area 0.05-1 of the image, aspect 0.75-1.33,
    area drawn uniformly and aspect log-uniformly as DALI does, 100 attempts,
    else the whole image), resize to size x size (bilinear, antialiased), random
    mirror. Evaluation: resize the shorter side to `resize`, centre size x size.
    Then (x - mean) / std per channel, in 0-255 units. Random draws come from a
    CPU generator seeded with `seed`, so a run is repeatable on either device.
    """

    def __init__(self, device: str = "cpu", training: bool = True, size: int = 224, resize: int = 256,
                 mean: Sequence[float] = DLE_MEAN, std: Sequence[float] = DLE_STD,
                 area: tuple[float, float] = AREA, aspect: tuple[float, float] = ASPECT, attempts: int = 100,
                 seed: int = 0, channels_last: bool = False) -> None:
        self.device = torch.device(device)
        self.training, self.size, self.resize = training, size, resize
        self.area, self.aspect, self.attempts = area, aspect, attempts
        self.channels_last = channels_last
        self.mean = torch.tensor(mean, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32, device=self.device).view(1, 3, 1, 1)
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, encoded: Sequence[bytes | Any]) -> Any:
        images = [self.crop_resize(image) for image in decode_images(encoded, str(self.device))]
        if self.training:
            flips = (torch.rand(len(images), generator=self.generator) < 0.5).tolist()
            images = [image.flip(-1) if flip else image for image, flip in zip(images, flips)]
        out = torch.stack(images).float().sub_(self.mean).div_(self.std)
        return out.contiguous(memory_format=torch.channels_last) if self.channels_last else out

    def crop_box(self, height: int, width: int) -> tuple[int, int, int, int]:
        """(top, left, height, width) of the training crop of an image of this size."""
        return draw_crop(self.generator, height, width, self.area, self.aspect, self.attempts)

    def crop_resize(self, image: Any) -> Any:
        """One CHW uint8 image to 3 x size x size uint8 (torchvision's resize: its uint8 fast path on the CPU)."""
        functional = require("torchvision.transforms.v2.functional", "augmenting images in imagenet_build.torch")
        height, width = image.shape[-2:]
        if self.training:
            top, left, h, w = self.crop_box(height, width)
            return functional.resized_crop(image, top, left, h, w, [self.size, self.size], antialias=True)
        scale = self.resize / min(height, width)
        h, w = max(self.size, round(height * scale)), max(self.size, round(width * scale))
        return functional.center_crop(functional.resize(image, [h, w], antialias=True), [self.size, self.size])
