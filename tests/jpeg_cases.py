"""Odd but real-world JPEGs, each made here from a clean one, and the decoders a build serves.

CASES maps a name to (bytes, what convert does with it): STORE (the bytes untouched), a re-encode
reason (the summary's words) or REFUSE (an error naming the file). The expectations follow what
TensorFlow's, DALI's (CPU) and torchvision's decoders accept (test_decoders holds them to it; the table
is in docs/images.md).
Test modules import these from here, never from each other.
"""

import io
import random
import struct
import subprocess
import sys

from PIL import Image

from imagenet_build.encode.images import ARITHMETIC, LOSSLESS, REFUSE, STORE
from imagenet_build.encode.jpeg_header import EXTRANEOUS, NO_LENGTH, SHORT_SEGMENT

SIZE = (64, 48)  # width, height of every case but the hand-built ones


def clean(mode="RGB", size=SIZE, **save):
    """A JPEG of noise (so its scan data is not trivial) as Pillow writes it: SOI, APP0, DQT, SOF, DHT, SOS."""
    rng = random.Random(0)
    bands = len(mode) if mode != "CMYK" else 4
    image = Image.frombytes(mode, size, bytes(rng.randrange(256) for _ in range(size[0] * size[1] * bands)))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90, **save)
    return out.getvalue()


def segments(data):
    """[(marker, offset)] of a well-formed JPEG's header, SOS included."""
    found, pos = [], 2
    while True:
        marker = data[pos + 1]
        found.append((marker, pos))
        if marker == 0xDA:
            return found
        pos += 2 + struct.unpack(">H", data[pos + 2 : pos + 4])[0]


def insert_before(data, marker, inserted, nth=0):
    """data with `inserted` put just before the nth header segment of `marker`."""
    at = [pos for m, pos in segments(data) if m == marker][nth]
    return data[:at] + inserted + data[at:]


def segment(marker, body):
    return bytes([0xFF, marker]) + struct.pack(">H", len(body) + 2) + body


def sixteen_bit_tables(data, sof=None):
    """Every 8-bit quantisation table rewritten with 16-bit entries (DQT Pq=1), same values."""
    out, last = b"", 0
    for marker, pos in segments(data):
        length = struct.unpack(">H", data[pos + 2 : pos + 4])[0]
        if marker == 0xDB:
            body, tables, k = data[pos + 4 : pos + 2 + length], b"", 0
            while k < len(body):
                assert body[k] >> 4 == 0
                tables += bytes([0x10 | body[k]]) + b"".join(struct.pack(">H", v) for v in body[k + 1 : k + 65])
                k += 65
            out += data[last:pos] + segment(0xDB, tables)
            last = pos + 2 + length
        elif marker == 0xC0 and sof is not None:
            out += data[last:pos] + bytes([0xFF, sof])
            last = pos + 2
    return out + data[last:]


def with_frame(data, sof=None, precision=None, height=None):
    """data with its frame header's marker, precision or height changed (scan data left as it is)."""
    ((_, at),) = [(m, p) for m, p in segments(data) if m == 0xC0]
    out = bytearray(data)
    if sof is not None:
        out[at + 1] = sof
    if precision is not None:
        out[at + 4] = precision
    if height is not None:
        out[at + 5 : at + 7] = struct.pack(">H", height)
    return bytes(out)


def with_adobe_transform(data, transform):
    """A CMYK JPEG's Adobe APP14 colour transform byte set (2: YCCK)."""
    ((_, at),) = [(m, p) for m, p in segments(data) if m == 0xEE]
    out = bytearray(data)
    out[at + 15] = transform
    return bytes(out)


def with_exif_orientation(data, orientation):
    image = Image.open(io.BytesIO(data))
    exif = image.getexif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90, exif=exif.tobytes())
    return out.getvalue()


def mpo():
    """A two-frame MPO as Pillow writes it (an APP2 MPF segment, the second JPEG after the first's EOI)."""
    first, second = (Image.open(io.BytesIO(clean(size=s))) for s in (SIZE, (32, 24)))
    out = io.BytesIO()
    first.save(out, "MPO", save_all=True, append_images=[second], quality=90)
    return out.getvalue()


def gain_map():
    """An Ultra HDR-like JPEG: XMP naming a gain map, an APP2 MPF index, and the gain map (a grayscale JPEG)
    after the primary image's EOI."""
    primary, gain = clean(), clean("L", (32, 24))
    xmp = segment(0xE1, b"http://ns.adobe.com/xap/1.0/\x00" + b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
                  b'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description '
                  b'xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" hdrgm:Version="1.0"/></rdf:RDF></x:xmpmeta>')
    # MP header: big-endian TIFF, version, count 2, two MP entries (the offsets are not read by decoders)
    mpf = (b"MPF\x00MM\x00\x2a\x00\x00\x00\x08\x00\x03\xb0\x00\x00\x07\x00\x00\x00\x040100"
           b"\xb0\x01\x00\x04\x00\x00\x00\x01\x00\x00\x00\x02\xb0\x02\x00\x07\x00\x00\x00\x20\x00\x00\x00\x32"
           b"\x00\x00\x00\x00" + bytes(32))
    return primary[:2] + xmp + segment(0xE2, mpf) + primary[2:] + gain


class _QMCoder:
    """The JPEG arithmetic (QM) coder of T.81 Annex D, enough for flat blocks: the states reached when
    one decision always gets the same value (Table D.2, rows 0..13)."""

    QE = [0x5A1D, 0x2586, 0x1114, 0x080B, 0x03D8, 0x01DA, 0x00E5, 0x006F, 0x0036, 0x001A, 0x000D, 0x0006,
          0x0003, 0x0001]
    NEXT_MPS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 13]

    def __init__(self):
        self.c, self.a, self.ct, self.buffer, self.sc, self.zc = 0, 0x10000, 11, -1, 0, 0
        self.out = bytearray()

    def _emit(self, byte):
        self.out.append(byte)
        if byte == 0xFF:
            self.out.append(0)

    def _flush_pending(self, byte):
        for _ in range(self.zc):
            self.out.append(0)
        self.zc = 0
        self._emit(byte)

    def encode(self, stats, context, value):
        state, mps = stats.get(context, (0, 0))
        qe = self.QE[state]
        self.a -= qe
        if value != mps:
            assert state == 0, "only a first LPS, in state 0, is needed for flat blocks"
            if self.a >= qe:
                self.c += self.a
                self.a = qe
            stats[context] = (1, 1 - mps)  # state 0: next LPS index 1, switch MPS
        else:
            if self.a >= 0x8000:
                return
            if self.a < qe:
                self.c += self.a
                self.a = qe
            stats[context] = (self.NEXT_MPS[state], mps)
        while True:
            self.a <<= 1
            self.c <<= 1
            self.ct -= 1
            if self.ct == 0:
                self._byte_out()
            if self.a >= 0x8000:
                break

    def _byte_out(self):
        temp = self.c >> 19
        if temp > 0xFF:
            if self.buffer >= 0:
                self._flush_pending(self.buffer + 1)
            self.zc += self.sc
            self.sc = 0
            self.buffer = temp & 0xFF
        elif temp == 0xFF:
            self.sc += 1
        else:
            self._settle()
            self.buffer = temp
        self.c &= 0x7FFFF
        self.ct += 8

    def _settle(self):
        """Write the buffered byte and the stacked 0xFF bytes: no carry can reach them any more."""
        if self.buffer == 0:
            self.zc += 1
        elif self.buffer >= 0:
            self._flush_pending(self.buffer)
        if self.sc:
            for _ in range(self.zc):
                self.out.append(0)
            self.zc = 0
            for _ in range(self.sc):
                self.out += b"\xff\x00"
            self.sc = 0

    def finish(self):
        temp = (self.a - 1 + self.c) & 0xFFFF0000
        self.c = temp + 0x8000 if temp < self.c else temp
        self.c <<= self.ct
        if self.c & 0xF8000000:
            if self.buffer >= 0:
                self._flush_pending(self.buffer + 1)
            self.zc += self.sc
            self.sc = 0
        else:
            self._settle()
        if self.c & 0x7FFF800:
            self._flush_pending((self.c >> 19) & 0xFF)
            if self.c & 0x7F800:
                self._emit((self.c >> 11) & 0xFF)
        return bytes(self.out)


def flat(components=3, sof=0xC0, size=(16, 16)):
    """A hand-built JPEG of flat mid-grey (every DC difference and AC coefficient 0, or every lossless
    prediction exact): Huffman coding with one-code tables, arithmetic coding (SOF9) or lossless (SOF3).
    For what Pillow cannot write: 2 components, arithmetic coding, lossless."""
    width, height = size
    blocks = -(-width // 8) * -(-height // 8) * components
    head = segment(0xDB, b"\x00" + bytes([1] * 64)) if sof != 0xC3 else b""
    head += segment(sof, bytes([8]) + struct.pack(">HHB", height, width, components)
                    + b"".join(bytes([k + 1, 0x11, 0]) for k in range(components)))
    spectral = b"\x00\x3f\x00"  # Ss, Se, Ah/Al of a sequential scan
    if sof == 0xC9:
        coder, dc, ac = _QMCoder(), {}, {}  # every component uses table 0: one set of statistics
        for _ in range(blocks):
            coder.encode(dc, 0, 0)  # DC difference zero (conditioning context 0 after a zero difference)
            coder.encode(ac, 0, 1)  # end of block at k = 1
        scan = coder.finish()
    else:  # the DC (lossless: difference) table: category 0 is code "0"; AC table: end of block is code "0"
        head += segment(0xC4, b"\x00" + bytes([1] + [0] * 15) + b"\x00")
        if sof == 0xC3:  # predictor 1; the first sample is predicted as 128: one bit a sample
            spectral, bits = b"\x01\x00\x00", width * height * components
        else:
            head += segment(0xC4, b"\x10" + bytes([1] + [0] * 15) + b"\x00")
            bits = blocks * 2
        scan = b"\x00" * (bits // 8) + (bytes([0xFF >> bits % 8]) if bits % 8 else b"")
    sos = segment(0xDA, bytes([components]) + b"".join(bytes([k + 1, 0x00]) for k in range(components)) + spectral)
    return b"\xff\xd8" + head + sos + scan + b"\xff\xd9"


def _cases():
    base = clean()
    at = {marker: pos for marker, pos in reversed(segments(base))}  # each marker's first segment
    scan_at = segments(base)[-1][1] + 14  # Pillow's SOS segment for 3 components is 14 bytes
    half_scan = base[: (scan_at + len(base)) // 2]
    cmyk = clean("CMYK")
    filled = base[:2] + b"".join(b"\xff\xff" + base[pos : end] for (_, pos), end in
                                  zip(segments(base), [p for _, p in segments(base)[1:]] + [len(base)]))
    return {
        # every decoder reads them as they are: stored untouched
        "baseline": (base, STORE),
        "grayscale": (clean("L"), STORE),
        "progressive": (clean(progressive=True), STORE),
        "optimized Huffman tables": (clean(optimize=True), STORE),
        "4:4:4": (clean(subsampling=0), STORE),
        "restart markers (DRI, RSTn)": (clean(restart_marker_blocks=1), STORE),
        "fill bytes before every marker": (filled, STORE),
        "extended sequential (SOF1)": (with_frame(base, sof=0xC1), STORE),
        "16-bit quantisation tables (SOF1)": (sixteen_bit_tables(base, 0xC1), STORE),
        "16-bit quantisation tables (SOF0)": (sixteen_bit_tables(base), STORE),
        "EXIF orientation 6": (with_exif_orientation(base, 6), STORE),
        "MPO (second image after EOI)": (mpo(), STORE),
        "gain map (APP2 MPF, second JPEG after EOI)": (gain_map(), STORE),
        "bytes after EOI": (base + bytes(16), STORE),
        "junk between progressive scans": (insert_before_second_sos(clean(progressive=True)), STORE),
        "junk before EOI": (base[:-2] + bytes(3) + base[-2:], STORE),
        "truncated scan, EOI appended": (half_scan + b"\xff\xd9", STORE),
        # libjpeg reads them, one decoder does not: re-encoded
        "junk before APP0": (insert_before(base, 0xE0, b"junk"), EXTRANEOUS),
        "junk before DQT": (insert_before(base, 0xDB, b"\x00\x01\x02\x03"), EXTRANEOUS),
        "junk before SOF": (insert_before(base, 0xC0, b"\x00\x00"), EXTRANEOUS),
        "junk before DHT": (insert_before(base, 0xC4, b"\x12", 2), EXTRANEOUS),
        "junk before SOS": (insert_before(base, 0xDA, b"\x00\x00\x00"), EXTRANEOUS),
        "FF 00 in the header": (insert_before(base, 0xDB, b"\xff\x00\x00\x00", 1), EXTRANEOUS),
        "RST marker among the header segments": (insert_before(base, 0xC0, b"\xff\xd0"), NO_LENGTH),
        "TEM marker after SOI": (base[:2] + b"\xff\x01" + base[2:], NO_LENGTH),
        "APP segment of length 0": (insert_before(base, 0xC0, b"\xff\xe3\x00\x00"), SHORT_SEGMENT),
        "CMYK": (cmyk, "CMYK JPEG"),
        "YCCK": (with_adobe_transform(cmyk, 2), "YCCK JPEG"),
        "arithmetic coding (SOF9)": (flat(3, 0xC9), ARITHMETIC),
        "lossless (SOF3)": (flat(3, 0xC3), LOSSLESS),
        # no decoder reads them: refused
        "2 components": (flat(2), REFUSE),
        "height 0 in the frame header (DNL)": (with_frame(base, height=0), REFUSE),
        "12-bit (SOF1, precision 12)": (with_frame(base, sof=0xC1, precision=12), REFUSE),
        "truncated scan": (half_scan, REFUSE),
        "junk before SOI": (b"\x00\x00" + base, REFUSE),
        "second SOI in the header": (insert_before(base, 0xC0, b"\xff\xd8"), REFUSE),
        "second frame header": (insert_before(base, 0xDA, base[at[0xC0] : at[0xC0] + 19]), REFUSE),
        "marker libjpeg does not know (0xF0)": (insert_before(base, 0xC0, segment(0xF0, b"abc")), REFUSE),
        "no image (SOI, tables, EOI)": (base[: at[0xDB]] + b"\xff\xd9", REFUSE),
    }


def insert_before_second_sos(data):
    at = data.find(b"\xff\xda", segments(data)[-1][1] + 2)
    return data[:at] + b"\x00\x00\x00\x00" + data[at:]


CASES = _cases()

# Every decoder a build serves, run in a process of its own (TensorFlow, torch and DALI loaded together can
# crash each other): reads the JPEG files named on the command line, prints one line per file,
# "ok HEIGHT WIDTH" (DALI's: and the sha256 of the RGB pixels, for png_cases) or "error MESSAGE".
DECODERS = {
    "pillow": r"""
import sys
from PIL import Image
for path in sys.argv[1:]:
    try:
        with Image.open(path) as image:
            image.load()
            print("ok", image.height, image.width)
    except Exception as e:
        print("error", str(e).replace(chr(10), " "))
""",
    "tensorflow": r"""
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
for path in sys.argv[1:]:
    try:
        image = tf.io.decode_jpeg(open(path, "rb").read(), channels=3)
        print("ok", image.shape[0], image.shape[1])
    except Exception as e:
        print("error", str(e).split("}} ")[-1].splitlines()[0][:200])
""",
    "torchvision": r"""
import sys, warnings
import torch
from torchvision import io
warnings.simplefilter("ignore")
for path in sys.argv[1:]:
    try:
        data = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.uint8)
        image = io.decode_jpeg(data, mode=io.ImageReadMode.RGB)
        print("ok", image.shape[1], image.shape[2])
    except Exception as e:
        print("error", str(e).splitlines()[0].split(".cpp:", 1)[-1].split(", ", 1)[-1][:200])
""",
    "dali-cpu": r"""
import hashlib, sys
import numpy as np
from nvidia.dali import fn, pipeline_def, types
for path in sys.argv[1:]:  # a pipeline each: DALI fails a whole batch for one image it cannot read
    @pipeline_def(batch_size=1, num_threads=1, device_id=None, exec_dynamic=True)
    def pipe():
        encoded = fn.external_source(source=lambda: [np.fromfile(path, np.uint8)], batch=True)  # noqa: B023
        return fn.decoders.image(encoded, device="cpu", output_type=types.RGB)
    try:
        p = pipe()
        p.build()
        (out,) = p.run()
        image = np.array(out.at(0))
        print("ok", image.shape[0], image.shape[1], hashlib.sha256(image.tobytes()).hexdigest())
    except Exception as e:
        print("error", " ".join(str(e).split()).split("encountered: ")[-1].split(" Current pipeline")[0][:200])
    del p
""",
}


def decode_all(paths, decoder):
    """[(ok, height, width, message)] for the JPEG files through one decoder, in a process of its own (one for
    each file where that process dies)."""
    result = subprocess.run([sys.executable, "-c", DECODERS[decoder], *map(str, paths)], capture_output=True,
                            text=True)
    lines = [line for line in result.stdout.splitlines() if line.startswith(("ok ", "error "))]
    if len(paths) > 1 and result.returncode:  # a decoder that dies on one image: each in a process of its own
        return [one for path in paths for one in decode_all([path], decoder)]
    assert result.returncode == 0 and len(lines) == len(paths), (decoder, result.stdout, result.stderr[-3000:])
    out = []
    for line in lines:
        kind, rest = line.split(" ", 1)
        if kind == "ok":
            height, width = map(int, rest.split()[:2])
            out.append((True, height, width, ""))
        else:
            out.append((False, 0, 0, rest))
    return out
