"""Bounding boxes: slim's CSV (`<image>.JPEG,<xmin>,<ymin>,<xmax>,<ymax>`, one line a box).

Boxes of an image go into its record in CSV line order. Lookup is by the
image's base name, for either split, as slim's build does.
"""

import math
from array import array

from imagenet_build.errors import InputError


def unpack_boxes(packed):
    """((xmin, ymin, xmax, ymax), ...) from the packed form read_box_csv keeps."""
    values = array("d", packed)
    return tuple(tuple(values[i : i + 4]) for i in range(0, len(values), 4))


def read_box_csv(path):
    """{filename: packed boxes} in file order (see unpack_boxes); floats as Python parses them.

    Packed as float64 bytes rather than tuples: ImageNet has 544,546 boxed images,
    and tuples of floats would cost the build ~100 MB more memory.
    """
    boxes = {}
    try:
        f = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, "bounding-box file not found") from None
    except OSError as e:
        raise InputError(path, e.strerror or str(e)) from None
    with f:
        try:
            for number, line in enumerate(f, start=1):
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
                boxes.setdefault(parts[0], array("d")).extend(box)
        except UnicodeDecodeError:
            raise InputError(path, "not UTF-8 text") from None
    for name in boxes:  # in place, so the arrays go one by one
        boxes[name] = boxes[name].tobytes()
    return boxes
