"""PNGs as real files have them, each made here, sound or damaged, and the decoders a build serves.

SOUND maps a name to a PNG every decoder reads; DAMAGED maps a name to (bytes, the start of the rule's
words, whether TensorFlow's and DALI's decoders read it all the same). test_png holds the rule
(encode/images.py: judge_png) and the PyTorch reader to what the decoders do with each.
Test modules import these from here, never from each other.
"""

import io
import struct
import subprocess
import sys
import zlib

import numpy as np
from PIL import Image

from jpeg_cases import DECODERS as JPEG_DECODERS

RNG = np.random.default_rng(7)
RGB = RNG.integers(0, 256, (21, 30, 3), dtype=np.uint8)  # odd sizes: Adam7's passes are uneven
ALPHA = RNG.integers(0, 256, (21, 30), dtype=np.uint8)


def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def raw_png(pixels, depth, colour, interlaced=False, chunks_before=b"", split=1):
    """A PNG written here, any bit depth and colour type (Pillow writes few), filter type 0 on every row;
    `chunks_before` go before the image data, which is cut into `split` IDAT chunks."""
    height, width = pixels.shape[:2]
    dtype = ">u2" if depth == 16 else np.uint8
    if depth < 8:  # 1, 2 or 4 bits a sample: packed, rows padded to a byte
        rows = [np.packbits(np.unpackbits(row.astype(np.uint8)[:, None], axis=1)[:, 8 - depth:].reshape(-1))
                for row in pixels.reshape(height, -1)]
        data = b"".join(b"\x00" + row.tobytes() for row in rows)
    elif interlaced:
        data = b""
        for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
                               (0, 1, 1, 2)):
            part = pixels[y0::dy, x0::dx]
            if part.size:
                data += b"".join(b"\x00" + row.astype(dtype).tobytes() for row in part)
    else:
        data = b"".join(b"\x00" + row.astype(dtype).tobytes() for row in pixels)
    packed = zlib.compress(data)
    step = -(-len(packed) // split)
    idats = b"".join(chunk(b"IDAT", packed[k:k + step]) for k in range(0, len(packed), step))
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, int(interlaced))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunks_before + idats + chunk(b"IEND", b"")


def pillow_png(image, **save):
    out = io.BytesIO()
    image.save(out, "PNG", **save)
    return out.getvalue()


def _sound():
    palette = Image.fromarray(RGB).convert("P")
    wide = RGB.astype(np.uint16) * 257 + 3  # 16 bits whose low byte is not the high one
    return {
        "RGB 8-bit (write_arrays)": pillow_png(Image.fromarray(RGB)),
        "RGBA 8-bit": pillow_png(Image.fromarray(np.dstack([RGB, ALPHA]))),
        "greyscale 8-bit": pillow_png(Image.fromarray(RGB[..., 0])),
        "greyscale and alpha": pillow_png(Image.fromarray(np.dstack([RGB[..., 0], ALPHA]), "LA")),
        "palette": pillow_png(palette),
        "palette with transparency": pillow_png(palette, transparency=0),
        "1-bit": raw_png(RGB[..., 0] > 127, 1, 0),
        "4-bit greyscale": raw_png(RGB[..., 0] >> 4, 4, 0),
        "greyscale 16-bit": raw_png(wide[..., 0], 16, 0),
        "RGB 16-bit": raw_png(wide, 16, 2),
        "RGBA 16-bit": raw_png(np.dstack([wide, wide[..., :1]]), 16, 6),
        "greyscale and alpha 16-bit": raw_png(np.dstack([wide[..., 0], wide[..., 1]]), 16, 4),
        "interlaced (Adam7)": raw_png(RGB, 8, 2, interlaced=True),
        "image data in 5 IDAT chunks": raw_png(RGB, 8, 2, split=5),
        "text and gamma chunks": raw_png(RGB, 8, 2, chunks_before=chunk(b"tEXt", b"Comment\x00made here")
                                         + chunk(b"gAMA", struct.pack(">I", 45455))),
        "bytes after IEND": pillow_png(Image.fromarray(RGB)) + b"trailing bytes",
    }


SOUND = _sound()
GOOD = SOUND["RGB 8-bit (write_arrays)"]


def chunks_of(data):
    """[(type, offset, length)] of a PNG's chunks."""
    found, at = [], 8
    while at < len(data) and data[at + 4:at + 8].isalpha():
        length = struct.unpack(">I", data[at:at + 4])[0]
        found.append((data[at + 4:at + 8], at, length))
        at += 12 + length
    return found


def _with_idat(data, change):
    """data with its (one) IDAT chunk's inflated image data changed, and its CRC made right again."""
    (kind, at, length), = [c for c in chunks_of(data) if c[0] == b"IDAT"]
    raw = bytearray(zlib.decompress(data[at + 8:at + 8 + length]))
    change(raw)
    return data[:at] + chunk(b"IDAT", zlib.compress(bytes(raw))) + data[at + 12 + length:]


def _damaged():
    idat = [c for c in chunks_of(GOOD) if c[0] == b"IDAT"][0]
    iend = [c for c in chunks_of(GOOD) if c[0] == b"IEND"][0]
    header = GOOD[:33]  # signature and IHDR
    flipped_crc = bytearray(GOOD)
    flipped_crc[idat[1] + 8 + idat[2]] ^= 1
    corrupt = bytearray(GOOD[idat[1] + 8:idat[1] + 8 + idat[2]])
    corrupt[5] ^= 0x55
    text = chunk(b"tEXt", b"Comment\x00hello")
    taller = struct.pack(">IIBBBBB", 30, 40, 8, 2, 0, 0, 0)
    return {
        # name: (bytes, the rule's words start, TensorFlow's and DALI's decoders read it)
        "no IEND": (GOOD[:iend[1]], "PNG: no IEND chunk", False),
        "cut short in the image data": (GOOD[:idat[1] + 8 + idat[2] // 2], "PNG: chunk IDAT at byte 33 runs past",
                                        False),
        "IDAT CRC wrong": (bytes(flipped_crc), "PNG: chunk IDAT at byte 33: CRC mismatch", False),
        "image data that does not inflate": (header + chunk(b"IDAT", bytes(corrupt)) + GOOD[iend[1]:],
                                             "PNG: the image data does not inflate after 0 of its rows", False),
        "image data of fewer rows than the header": (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", taller) + GOOD[33:],
                                                     "PNG: the image data ends after 1,911 of its 3,640 bytes",
                                                     False),
        "a row of filter type 7": (_with_idat(GOOD, lambda raw: raw.__setitem__(91 * 3, 7)),
                                   "PNG: row 4 of the image data has filter type 7", False),
        "an unknown critical chunk": (header + chunk(b"ABCD", b"xx") + GOOD[33:],
                                      "PNG: chunk ABCD at byte 33: a critical chunk no decoder knows", False),
        "a palette image without PLTE": (raw_png(RGB[..., 0] >> 4, 8, 3),
                                         "PNG: chunk IDAT at byte 33 before the PLTE chunk", False),
        "a second IHDR": (header + GOOD[8:33] + GOOD[33:], "PNG: chunk IHDR at byte 33: a second one", False),
        "bit depth 3": (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 30, 21, 3, 0, 0, 0, 0))
                        + GOOD[33:], "PNG: IHDR: colour type 0 of bit depth 3", False),
        "no image data": (header + GOOD[iend[1]:], "PNG: no IDAT chunk", False),
        "a text chunk whose CRC is wrong": (header + text[:-1] + bytes([text[-1] ^ 1]) + GOOD[33:],
                                            "PNG: chunk tEXt at byte 33: CRC mismatch", True),
    }


def _apart():
    """Two IDAT chunks with a text chunk between them, and where the second starts."""
    two = raw_png(RGB, 8, 2, split=2)
    cut = [at for kind, at, _ in chunks_of(two) if kind == b"IDAT"][1]
    apart = two[:cut] + chunk(b"tEXt", b"Comment\x00between") + two[cut:]
    return apart, [at for kind, at, _ in chunks_of(apart) if kind == b"IDAT"][1]


DAMAGED = _damaged()
_APART, _SECOND = _apart()
DAMAGED["IDAT chunks apart"] = (
    _APART, f"PNG: chunk IDAT at byte {_SECOND}: the image data is not in consecutive IDAT chunks", False)


# TensorFlow's and DALI's decoders (what tf.data and trainer-check's DALI path decode with), each in a process of
# its own: the PNG files named on the command line, one line each, "ok HEIGHT WIDTH SHA256" (of the RGB pixels,
# rows of R G B bytes) or "error MESSAGE". TensorFlow's reads them as tf.data does (decode_image).
DECODERS = {
    "tensorflow": r"""
import hashlib, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
for path in sys.argv[1:]:
    try:
        image = tf.io.decode_image(open(path, "rb").read(), channels=3, expand_animations=False).numpy()
        print("ok", image.shape[0], image.shape[1], hashlib.sha256(image.tobytes()).hexdigest())
    except Exception as e:
        print("error", str(e).split("}} ")[-1].splitlines()[0][:200])
""",
    "dali-cpu": JPEG_DECODERS["dali-cpu"],  # fn.decoders.image reads any format: the JPEG cases' script
}


def decode_all(paths, decoder):
    """[(ok, height, width, sha256 of the pixels or the error)] for the PNG files through one decoder."""
    result = subprocess.run([sys.executable, "-c", DECODERS[decoder], *map(str, paths)], capture_output=True,
                            text=True)
    lines = [line for line in result.stdout.splitlines() if line.startswith(("ok ", "error "))]
    assert result.returncode == 0 and len(lines) == len(paths), (decoder, result.stdout, result.stderr[-3000:])
    out = []
    for line in lines:
        kind, rest = line.split(" ", 1)
        if kind == "ok":
            height, width, digest = rest.split()
            out.append((True, int(height), int(width), digest))
        else:
            out.append((False, 0, 0, rest))
    return out
