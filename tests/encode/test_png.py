"""PNGs, sound and damaged, through every decoder a build serves: TensorFlow's (tf.data), DALI's (CPU) and the
PyTorch reader's (Pillow, once the rule has passed the PNG).

write_arrays(..., lossless=True) stores PNGs; the PyTorch reader refused every one of them ("does not decode as
JPEG"), and verify called sound PNGs that TensorFlow's and DALI's decoders stop on. The rule (encode/images.py:
judge_png) follows what the decoders read; the PyTorch reader gives the pixels TensorFlow and DALI give, and
refuses, in one line, what the rule refuses.
"""

import hashlib
import sys

import pytest

from imagenet_build.encode.images import judge_png, png_consequence
from imagenet_build.infra.errors import BuildError
from png_cases import DAMAGED, SOUND, decode_all

sys.modules.setdefault("triton", None)  # torch without triton beside TensorFlow (see test_torch.py)
torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")

SERVED = ("tensorflow", "dali-cpu")


@pytest.fixture(scope="module")
def decoded(tmp_path_factory):
    """{decoder: {case: (ok, height, width, sha256 of the RGB pixels or the error)}} for every case."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("nvidia.dali")
    folder = tmp_path_factory.mktemp("pngs")
    cases = {**SOUND, **{name: data for name, (data, _, _) in DAMAGED.items()}}
    paths = []
    for k, data in enumerate(cases.values()):
        paths.append(folder / f"case{k:02d}.png")
        paths[-1].write_bytes(data)
    return {decoder: dict(zip(cases, decode_all(paths, decoder))) for decoder in SERVED}


def torch_reads(data):
    """(height, width, sha256 of the RGB pixels) as the PyTorch reader decodes the PNG."""
    from imagenet_build.torch import decode_images

    (image,) = decode_images([data], where=["the case"])
    assert image.dtype == torch.uint8 and image.shape[0] == 3
    return image.shape[1], image.shape[2], hashlib.sha256(image.permute(1, 2, 0).contiguous().numpy()).hexdigest()


@pytest.mark.parametrize("case", list(SOUND))
def test_every_decoder_reads_a_sound_png_to_the_same_pixels(case, decoded):
    """8 bits, greyscale, palette, alpha (dropped), interlaced, split image data, ancillary chunks, bytes after
    IEND: the same RGB pixels from TensorFlow, DALI and the PyTorch reader. 16 bits: the high bytes, as
    TensorFlow gives them; DALI rounds (v / 257), which differs by 1 at most (not asserted here: write_arrays
    writes 8 bits)."""
    verdict = judge_png(SOUND[case])
    assert verdict.problem == "" and verdict.header is not None
    height, width, digest = torch_reads(SOUND[case])
    assert (height, width) == (verdict.header.height, verdict.header.width) == (21, 30)
    assert decoded["tensorflow"][case] == (True, height, width, digest)
    if verdict.header.bit_depth == 16:
        assert decoded["dali-cpu"][case][:3] == (True, height, width)
    else:
        assert decoded["dali-cpu"][case] == (True, height, width, digest)


@pytest.mark.parametrize("case", list(DAMAGED))
def test_the_png_rule_follows_what_the_decoders_read_and_the_pytorch_reader_refuses_what_it_refuses(case, decoded):
    """Each damaged PNG is refused by the rule with its words; TensorFlow's and DALI's decoders stop on it
    (an ancillary chunk's CRC aside: they skip the chunk, and Pillow, the PyTorch reader's decoder, refuses
    it); the PyTorch reader refuses it in one line naming the record, where torchvision's decoder crashed the
    process on some and Pillow padded an image whose data ends early with black rows."""
    data, words, libpng_reads = DAMAGED[case]
    verdict = judge_png(data)
    assert verdict.problem.startswith(words) and verdict.libpng_reads is libpng_reads, verdict
    assert verdict.header is None
    for decoder in SERVED:
        assert decoded[decoder][case][0] is libpng_reads, (decoder, decoded[decoder][case])
    with pytest.raises(BuildError) as refused:
        torch_reads(data)
    assert str(refused.value) == (f"the case: does not decode as PNG ({verdict.problem}; imagenet-build verify "
                                  "names such records)")
    reader = "Pillow, which the PyTorch reader decodes PNGs with, refuses it" if libpng_reads else \
        "TensorFlow's and DALI's decoders stop on it"
    assert png_consequence(verdict).startswith(reader)


def test_a_png_past_pillows_bomb_limit_is_refused_before_its_data_is_inflated(monkeypatch):
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 300)  # the rule's limit: twice this, 600 pixels
    verdict = judge_png(SOUND["RGB 8-bit (write_arrays)"])
    assert verdict.problem == ("PNG: IHDR claims 30x21 = 630 pixels, beyond Pillow's decompression-bomb limit of "
                               "600") and verdict.libpng_reads
    assert png_consequence(verdict) == ("Pillow, which the PyTorch reader decodes PNGs with, refuses it; "
                                        "TensorFlow's and DALI's decoders read it")


def test_a_batch_of_jpegs_and_pngs_keeps_its_order():
    """decode_images: the JPEGs in one call, the PNGs apart, each image back in its place."""
    import io

    from PIL import Image

    from imagenet_build.torch import decode_images

    jpegs = []
    for colour in ((200, 10, 10), (10, 200, 10)):
        out = io.BytesIO()
        Image.new("RGB", (8, 6), colour).save(out, "JPEG", quality=100)
        jpegs.append(out.getvalue())
    batch = [jpegs[0], SOUND["RGB 8-bit (write_arrays)"], jpegs[1], SOUND["greyscale 8-bit"]]
    images = decode_images([torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in batch])
    assert [tuple(image.shape) for image in images] == [(3, 6, 8), (3, 21, 30), (3, 6, 8), (3, 21, 30)]
    assert images[0][0].float().mean() > 190 and images[2][1].float().mean() > 190
    assert torch.equal(images[3][0], images[3][2])  # greyscale on three channels
