"""Bounding boxes: ImageNet's XML annotations -> slim's CSV -> boxes per image.

The CSV has one line a box, `<image>.JPEG,<xmin>,<ymin>,<xmax>,<ymax>`, sorted.
Boxes of an image go into its record in CSV line order. Lookup is by the
image's base name, for either split, as slim's build does. convert --bbox-tar
goes through the same CSV lines, so it gives what `bboxes` + --bounding-box-file give.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from imagenet_build.infra import read_door
from imagenet_build.infra.errors import InputError, PathLike, input_errors

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

Box = tuple[float, ...]  # (xmin, ymin, xmax, ymax), normalised

BOX_BYTES = 4 * 8  # one packed box: four float64
TAR_BLOCK = 512  # a tar's block: its end-of-archive marker is two of zeros


def unpack_boxes(packed: bytes) -> tuple[Box, ...]:
    """((xmin, ymin, xmax, ymax), ...) from the packed form read_box_csv keeps."""
    values = array("d", packed)
    return tuple(tuple(values[i : i + 4]) for i in range(0, len(values), 4))


def read_box_csv(path: PathLike) -> dict[str, bytes]:
    """{filename: packed boxes} from slim's CSV file (see parse_box_lines)."""
    with input_errors(path, expected="a CSV file", missing="bounding-box file not found"):
        with read_door.open_text(path, encoding="utf-8-sig") as f:
            return parse_box_lines(f, path)


def parse_box_lines(lines: Iterable[str], path: PathLike) -> dict[str, bytes]:
    """{filename: packed boxes} in line order (see unpack_boxes); floats as Python parses them.

    Packed as float64 bytes rather than tuples: ImageNet has 544,546 boxed images,
    and tuples of floats would cost the build ~100 MB more memory.
    """
    boxes: dict[str, Any] = {}  # an array of each image's boxes while parsing, its bytes in the end
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line:
            continue
        parts = line.split(",")
        if len(parts) != 5 or not parts[0]:
            raise InputError(
                path, f"line {number}: expected '<image>.JPEG,<xmin>,<ymin>,<xmax>,<ymax>', got {line!r}"
            )
        try:
            box = tuple(float(p) for p in parts[1:])
        except ValueError:
            raise InputError(path, f"line {number}: not a number in {line!r}") from None
        if not all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in box):
            raise InputError(path, f"line {number}: box values must be normalised to [0, 1], got {line!r}")
        if box[0] > box[2] or box[1] > box[3]:
            raise InputError(path, f"line {number}: xmin > xmax or ymin > ymax in {line!r} "
                                   "(columns: <image>,xmin,ymin,xmax,ymax)")
        boxes.setdefault(parts[0], array("d")).extend(box)
    for name in boxes:  # in place, so the arrays go one by one
        boxes[name] = boxes[name].tobytes()
    return boxes


# ------------------------------------------------------------------ XML -> CSV (slim's process_bounding_boxes)


def _item(root: Element, name: str, index: int = 0) -> str | None:
    """Text of the index-th <name> anywhere in the tree, or None (slim's GetItem)."""
    for count, item in enumerate(root.iter(name)):
        if count == index:
            return item.text
    return None


def _number(root: Element, name: str, index: int = 0) -> int:
    """slim's GetInt: int(float(text)), truncating; -1 when absent."""
    text = _item(root, name, index)
    return -1 if text is None else int(float(text))


def xml_boxes(data: bytes) -> list[tuple[str | None, float, float, float, float]]:
    """[(label, xmin, ymin, xmax, ymax)] scaled and clamped as slim does; ValueError for a bad file.

    Faithful to slim, quirks included: coordinates are truncated to int, every
    box carries the label of the first <name> in the file, and counting boxes
    stops at the first xmin of -1.
    """
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise ValueError(f"malformed XML ({e})") from None
    try:
        count = 0
        while _item(root, "xmin", count) is not None and _number(root, "xmin", count) != -1:
            count += 1
        width, height = _number(root, "width"), _number(root, "height")
        corners = [[_number(root, k, i) for k in ("xmin", "ymin", "xmax", "ymax")] for i in range(count)]
    except ValueError as e:
        raise ValueError(f"a coordinate or size is not a number ({e})") from None
    if not count:
        return []
    if _item(root, "width") is None or _item(root, "height") is None:
        raise ValueError("no <size> with <width> and <height>")
    if width == 0 or height == 0:
        raise ValueError(f"image size {width}x{height} has a zero side")
    label = _item(root, "name")
    boxes: list[tuple[str | None, float, float, float, float]] = []
    for x0, y0, x1, y1 in corners:
        xmin, xmax, ymin, ymax = x0 / width, x1 / width, y0 / height, y1 / height
        boxes.append((
            label,
            min(max(min(xmin, xmax), 0.0), 1.0),
            min(max(min(ymin, ymax), 0.0), 1.0),
            min(max(max(xmin, xmax), 0.0), 1.0),
            min(max(max(ymin, ymax), 0.0), 1.0),
        ))
    return boxes


BBOX_ARCHIVE = "ILSVRC2012_bbox_train_v2.tar.gz"  # image-net.org's train boxes


def box_source(source: PathLike) -> str:
    """What to read the XML from: `source` itself (an archive, or a folder of `<synset>/*.xml`), or the
    ILSVRC2012 box archive in the folder `source` when the folder holds no XML folders of its own."""
    from pathlib import Path

    from imagenet_build.infra import storage

    if storage.is_url(source):
        return storage.join(source, BBOX_ARCHIVE) if BBOX_ARCHIVE in storage.listdir(source) else str(source)
    folder = Path(source)
    if folder.is_dir() and (folder / BBOX_ARCHIVE).is_file() and next(folder.glob("*/*.xml"), None) is None:
        return str(folder / BBOX_ARCHIVE)
    return str(source)


def iter_xml_files(source: PathLike) -> Iterator[tuple[str, str, bytes]]:
    """Yield (synset folder, xml stem, bytes) from `<synset>/<stem>.xml` in a folder or a .tar.gz (file or URL)."""
    import tarfile
    from pathlib import Path

    from imagenet_build.infra import storage
    from imagenet_build.infra.deflate import maybe_gunzip

    if not storage.is_url(source):
        if Path(source).is_dir():
            for path in sorted(Path(source).glob("*/*.xml")):
                yield path.parent.name, path.stem, read_door.read_bytes(path)
            return
        if not Path(source).is_file():
            raise InputError(source, "neither a folder nor a file")
    elif _is_folder(source):  # an object store's prefix without the archive (box_source looked for it)
        raise InputError(source, f"a folder on an object store holding no {BBOX_ARCHIVE}: XML folders are read from "
                                 "local folders; give the archive, or copy the folders here")
    try:  # read as a stream: one pass, no seeks, from disk or from an object store alike
        with read_door.open_read(source) as raw:
            stream = maybe_gunzip(raw, str(source))  # a gzip stream checked whole: CRC-32, length, its end
            with tarfile.open(fileobj=stream, mode="r|*") as tar:  # type: ignore[call-overload]
                for member in tar:
                    parts = member.name.split("/")
                    if not (member.isreg() or member.isdir()):
                        raise InputError(f"{source}:{member.name}", "a link, FIFO or device, not a file: the "
                                                                    "archive is read as one stream, where a link "
                                                                    "cannot be followed; extract it and give the "
                                                                    "folder")
                    if member.isfile() and len(parts) >= 2 and parts[-1].endswith(".xml"):
                        member_file = tar.extractfile(member)
                        assert member_file is not None  # a regular file has a file object
                        yield parts[-2], parts[-1][: -len(".xml")], member_file.read()
                _check_tar_end(tar, source)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise InputError(source, f"not a readable .tar.gz of XML files ({e})") from None


def _check_tar_end(tar: Any, source: PathLike) -> None:
    """The stream read to its end after the tar's end-of-archive block (a gzip stream's checks made there): a
    tar whose headers stop early (tarfile's stream mode takes that for the end) is truncated."""
    tail = b""
    while len(tail) < TAR_BLOCK:
        more = tar.fileobj.read(1 << 16)
        if not more:
            break
        tail += more
    while tar.fileobj.read(1 << 16):
        pass
    if len(tail) < TAR_BLOCK or tail.strip(b"\0"):
        raise InputError(source, "truncated: the tar has no end-of-archive marker after its last member (an "
                                 "interrupted download?)")


def _is_folder(source: PathLike) -> bool:
    import os

    from imagenet_build.infra import storage

    return bool(storage.listdir(source)) if storage.is_url(source) else os.path.isdir(source)


def boxes_to_csv_lines(
    source: PathLike,
    synsets: Iterable[str] | None,
    strict: bool = False,
    files: Iterable[tuple[str, str, bytes]] | None = None,
) -> tuple[list[str], dict[str, int], list[dict[str, str]]]:
    """slim's CSV lines (sorted) from the XML annotations, and the counts and problems on the way.

    files: (synset folder, xml stem, bytes) read elsewhere (e.g. from a zip), `source` then only names them.
    """
    keep = set(synsets) if synsets is not None else None
    if files is None:
        source = box_source(source)
    lines: list[str] = []
    problems: list[dict[str, str]] = []
    counts = {"xml_files": 0, "saved_files": 0, "skipped_files": 0, "saved_boxes": 0,
              "skipped_boxes": 0, "bad_files": 0}
    for synset, stem, data in iter_xml_files(source) if files is None else files:
        counts["xml_files"] += 1
        if keep is not None and synset not in keep:
            counts["skipped_files"] += 1
            continue
        try:
            boxes = xml_boxes(data)
        except ValueError as e:
            if strict:
                raise InputError(f"{source}:{synset}/{stem}.xml", str(e)) from None
            problems.append({"file": f"{synset}/{stem}.xml", "problem": str(e)})
            counts["bad_files"] += 1
            counts["skipped_files"] += 1
            continue
        found = False
        for label, xmin, ymin, xmax, ymax in boxes:
            if keep is not None and label != synset and label in keep:
                counts["skipped_boxes"] += 1  # a box of another challenge class
                continue
            if xmin >= xmax or ymin >= ymax:
                counts["skipped_boxes"] += 1
                continue
            lines.append(f"{stem}.JPEG,{xmin:.4f},{ymin:.4f},{xmax:.4f},{ymax:.4f}")
            counts["saved_boxes"] += 1
            found = True
        counts["saved_files" if found else "skipped_files"] += 1
    if files is None and not counts["xml_files"]:  # boxes were asked for: finding none is no build without them
        looked = f"<synset>/*.xml files and {BBOX_ARCHIVE}" if _is_folder(source) else "<synset>/*.xml members"
        raise InputError(source, f"no bounding-box XML found: looked for {looked} in it")
    lines.sort()
    return lines, counts, problems
