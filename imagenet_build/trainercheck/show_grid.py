"""trainer-check --show: a picture of the batches as the reader fed them to the model, for every reader.

Each reader's training loop hands every batch it is about to train on to a `BatchCapture` (one call, in
the loop; none without --show), which keeps host copies of the first STEPS steps' first TILES images and
labels, and of the fixed subset the overfit check trains on. `write_grid` draws them with Pillow: one row
per step and a last row for the subset, each image un-normalised with the mean and std the reader
normalised with (x * std + mean, rounded, clipped to 0-255) in the channel order the model got, shown as
R G B, and captioned with its label as trained (0-based), the class's synset and text. So a repeated
image, a caption that does not match its image, swapped channels (blue faces) or pixels never normalised
(white) or normalised twice (grey) are seen at once. The PNG is written atomically and carries its
legend (each row's title, each tile's box and caption) as a text chunk named "imagenet-build", so a
reader of the picture finds a tile without guessing where it is drawn.
numpy is imported inside the functions (the `tf` and `torch` extras both bring it).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Callable, NamedTuple, Tuple

from imagenet_build.format.naming import TRAINER_PICTURE_KEY
from imagenet_build.infra import read_door, write_door
from imagenet_build.infra.errors import PathLike
from imagenet_build.infra.jsonfile import parse_json

STEPS = 4  # training steps shown, one row each
TILES = 8  # images shown of each batch (a batch of 256 would be a picture 57,000 pixels wide)
PNG_KEY = TRAINER_PICTURE_KEY  # the PNG text chunk holding the legend
_PAD, _FONT_SIZE = 8, 12
_INK, _PAPER, _GREY = (0, 0, 0), (255, 255, 255), (110, 110, 110)

# images and labels as the loop holds them (numpy, TensorFlow or torch, on any device) -> host arrays
ToHost = Callable[[Any, Any], Tuple[Any, Any]]


class Row(NamedTuple):
    """One row of the picture: a batch's first images as fed (NHWC float, normalised) and their labels."""

    title: str
    images: Any
    labels: list
    batch: int  # images in the whole batch


def _numpy(images: Any, labels: Any) -> tuple[Any, Any]:
    """NHWC numpy or TensorFlow tensors (on any device: numpy copies them to the host) as numpy arrays."""
    import numpy as np

    return np.asarray(images, dtype=np.float32), np.asarray(labels)


class BatchCapture:
    """The first `steps` batches a training loop feeds its model, and the fixed subset, copied to the host.

    `step` and `subset` are called with every batch as the loop is about to train on it; once the rows
    are full they return at once, so the capture costs `steps` + 1 small copies per run.
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float], to_host: ToHost = _numpy,
                 steps: int = STEPS, tiles: int = TILES) -> None:
        self.mean, self.std = [float(v) for v in mean], [float(v) for v in std]
        self.to_host, self.max_steps, self.tiles = to_host, steps, tiles
        self.steps: list[Row] = []
        self.fixed: Row | None = None

    def _row(self, title: str, images: Any, labels: Any) -> Row:
        host_images, host_labels = self.to_host(images[: self.tiles], labels[: self.tiles])
        return Row(title, host_images, [int(v) for v in host_labels.reshape(-1)], len(images))

    def step(self, images: Any, labels: Any) -> None:
        """A training step's batch (NHWC images as the model takes them after to_host, 0-based labels)."""
        if len(self.steps) < self.max_steps:
            self.steps.append(self._row(f"training step {len(self.steps) + 1}", images, labels))

    def subset(self, images: Any, labels: Any) -> None:
        """The overfit check's fixed batch (the first call: the loop feeds the same one every step)."""
        if self.fixed is None:
            self.fixed = self._row("the overfit check's fixed subset (evaluation crop)", images, labels)

    @property
    def rows(self) -> list[Row]:
        return self.steps + ([self.fixed] if self.fixed is not None else [])


def unnormalise(images: Any, mean: Sequence[float], std: Sequence[float]) -> Any:
    """NHWC normalised float images back to uint8: x * std + mean per channel, rounded and clipped."""
    import numpy as np

    pixels = np.nan_to_num(np.asarray(images, dtype=np.float64)) * np.asarray(std) + np.asarray(mean)
    return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)


def class_names(manifest: Mapping[str, Any] | None) -> list[tuple[str, str]] | None:
    """(synset, text) of each 0-based label: the build's synsets (manifest.json), their texts from the
    shipped metadata (a class with none there, a class folder's name say, is its own text)."""
    from imagenet_build.catalog.classes import DEFAULT_METADATA_FILE, read_metadata_file

    synsets = (manifest or {}).get("synsets")
    if not synsets:
        return None
    texts = read_metadata_file(DEFAULT_METADATA_FILE)
    return [(synset, texts.get(synset, synset)) for synset in synsets]


def caption(label: int, classes: Sequence[tuple[str, str]] | None) -> str:
    """A tile's caption: the label as trained (0-based) and its synset, then the class text (two lines)."""
    if classes is None:
        return f"{label}"
    if not 0 <= label < len(classes):
        return f"{label}\nno such class (0..{len(classes) - 1})"
    synset, text = classes[label]
    return f"{label} {synset}" + (f"\n{text}" if text != synset else "")


def _font(size: int = _FONT_SIZE) -> Any:
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)  # Pillow >= 10.1: a scalable font
    except TypeError:
        return ImageFont.load_default()


def _fit(draw: Any, text: str, font: Any, width: int) -> str:
    """`text` cut to `width` pixels, ending in '...' where it was cut."""
    if draw.textlength(text, font=font) <= width:
        return text
    while text and draw.textlength(text + "...", font=font) > width:
        text = text[:-1]
    return text + "..."


def _size(rows: Sequence[Row], line: int, header_lines: int) -> tuple[int, int]:
    width = max([_PAD + len(r.labels) * (r.images.shape[2] + _PAD) for r in rows] + [640])
    height = _PAD + header_lines * line + sum(line + r.images.shape[1] + 2 * line + _PAD for r in rows) + _PAD
    return width, height


def heading(capture: BatchCapture, what: str) -> list[str]:
    """The picture's first lines: what was read, and how the pixels and captions are to be read."""
    mean, std = (" ".join(f"{v:g}" for v in values) for values in (capture.mean, capture.std))
    return [f"trainer-check: {what}: the batches as the training loop fed them to the model",
            f"un-normalised: x * std + mean, mean {mean}, std {std}, channels in the order fed, shown as R G B; "
            "caption: label as trained (0-based), synset, text"]


def draw_grid(capture: BatchCapture, classes: Sequence[tuple[str, str]] | None, what: str) -> tuple[Any, dict]:
    """The picture (a PIL image) and its legend: {"rows": [{"title", "tiles": [{"box": [x, y, w, h],
    "caption"}]}], "mean", "std"}. `what`: the reader, split and device, for the heading."""
    from PIL import Image, ImageDraw

    font = _font()
    line = _FONT_SIZE + 4
    rows = capture.rows
    header = heading(capture, what) + ([] if rows else ["no training step ran: nothing was fed to the model"])
    picture = Image.new("RGB", _size(rows, line, len(header)), _PAPER)
    draw = ImageDraw.Draw(picture)
    y = _PAD
    for text in header:
        draw.text((_PAD, y), _fit(draw, text, font, picture.width - 2 * _PAD), fill=_INK, font=font)
        y += line
    legend: dict[str, Any] = {"rows": [], "mean": capture.mean, "std": capture.std}
    for row in rows:
        shown = f"{len(row.labels)} of {row.batch}" if len(row.labels) < row.batch else f"{row.batch}"
        shown += " image" if row.batch == 1 else " images"
        title = f"{row.title}: {shown}"
        draw.text((_PAD, y), title, fill=_GREY, font=font)
        y += line
        tiles = []
        height, width = row.images.shape[1:3]
        for k, (image, label) in enumerate(zip(unnormalise(row.images, capture.mean, capture.std), row.labels)):
            x = _PAD + k * (width + _PAD)
            picture.paste(Image.fromarray(image, "RGB"), (x, y))
            text = caption(label, classes)
            for n, part in enumerate(text.split("\n")[:2]):
                draw.text((x, y + height + 2 + n * line), _fit(draw, part, font, width), fill=_INK, font=font)
            tiles.append({"box": [x, y, int(width), int(height)], "caption": text})
        legend["rows"].append({"title": title, "tiles": tiles})
        y += height + 2 * line + _PAD
    return picture, legend


def write_grid(path: PathLike, capture: BatchCapture, manifest: Mapping[str, Any] | None, what: str) -> str:
    """Draw the picture and write it to `path` as PNG, atomically; returns the path written, absolute."""
    from PIL.PngImagePlugin import PngInfo

    picture, legend = draw_grid(capture, class_names(manifest), what)
    info = PngInfo()
    info.add_text(PNG_KEY, json.dumps(legend))
    data = io.BytesIO()
    picture.save(data, format="PNG", pnginfo=info)
    write_door.write_bytes(path, data.getvalue())
    return os.path.abspath(path)


def read_legend(path: PathLike) -> dict:
    """The legend a picture written by write_grid carries (its rows, tiles and captions)."""
    from PIL import Image

    with read_door.open_read(path) as f, Image.open(f) as picture:
        return parse_json(picture.text[PNG_KEY], str(path))  # type: ignore[attr-defined]  # PNG images have .text
