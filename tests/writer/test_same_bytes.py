"""A build's bytes held to sha256s recorded in this file: every shard, index and manifest (and the other files a
build holds) of the generated sample, with the awkward inputs convert meets (CMYK, a PNG, grayscale, progressive,
EXIF, junk in a header, a truncated and an empty file left out, boxes, ReaL labels, a resized build of two
sizes). Any change to the write path that changes one byte fails here.

The sample is made with Pillow (tools/sample_dataset.py), so its inputs are part of the record: another Pillow
(constraints.txt pins it) makes other inputs, and the test says so before comparing the builds. Run this
file as a script to print the digests of the build the code makes now (to record them again only when a
change of bytes is intended, and said why).
"""

import hashlib
import json
import os
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]  # run as a script too

from conftest import run_cli, sample_args, tree_digest  # noqa: E402
from imagenet_build._version import __version__  # noqa: E402
from imagenet_build.sources.samples import SAMPLE_NOTE  # noqa: E402
from imagenet_build.tools.sample_dataset import make_sample  # noqa: E402
from jpeg_cases import insert_before  # noqa: E402

MTIME_NS = 1_700_000_000 * 10**9  # every input's mtime, so that the manifest's record of the inputs is the same
RECORDED_VERSION = "0.1.0"  # the version the manifests below were written by; a newer one is read as this


def inputs(root):
    """The sample, two images damaged, one emptied, one with junk in its header, a real.json; every mtime fixed."""
    make_sample(root, classes=4, per_class=12, validation_per_class=4)
    (root / SAMPLE_NOTE).unlink()  # the inputs as they were recorded: the note only names three of them
    train = sorted((root / "train").rglob("*.JPEG"))
    train[4].write_bytes(train[4].read_bytes()[:3000])  # truncated: left out (--on-error skip)
    train[9].write_bytes(b"")  # empty: left out
    train[13].write_bytes(insert_before(train[13].read_bytes(), 0xDB, b"\x00\x01"))  # re-encoded
    real = [[] for _ in range(50000)]
    real[0], real[1], real[3], real[15] = [0, 2], [1], [3, 999], [3, 2, 1, 0]
    (root / "real.json").write_text(json.dumps(real))
    for path in root.rglob("*"):
        os.utime(path, ns=(MTIME_NS, MTIME_NS))


def build_digests(root, out):
    """{file of the builds: sha256} (a manifest's version read as RECORDED_VERSION) of the full-size build and
    a resized one."""
    more = ["--on-error", "skip", "--real-labels", root / "real.json", "--workers", 1]
    for args in ([], ["--resize", "shorter:24,40"]):
        result = run_cli(*sample_args(root, out / ("resized" if args else "full"), *more, *args))
        assert result.exit_code == 0, result.output
    digests = tree_digest(out)
    for name in digests:
        if name.endswith("manifest.json"):
            text = (out / name).read_text().replace(f'"imagenet_build_version": "{__version__}"',
                                                    f'"imagenet_build_version": "{RECORDED_VERSION}"')
            digests[name] = hashlib.sha256(text.encode()).hexdigest()
    return digests


def input_digest(root):
    return hashlib.sha256(json.dumps(tree_digest(root), sort_keys=True).encode()).hexdigest()


def test_a_build_has_the_bytes_recorded(tmp_path):
    root = tmp_path / "sample"
    inputs(root)
    assert input_digest(root) == INPUTS, ("the generated sample is not the one the builds below were recorded "
                                          "from (another Pillow?): record them again from the same code")
    assert build_digests(root, tmp_path / "out") == BUILD


INPUTS = '9a33867ff6ba9d27173ca75126fa4fda4fee7da717d73cb3c2a25590c2af2860'
BUILD = {
    'full/dali_idx/train-00000-of-00004.idx': 'f667308c0cd9a0df2aed2d6c22d04f9b6896bdf0e26bd374d8cb2ae5b5d1696e',
    'full/dali_idx/train-00001-of-00004.idx': '58f411d0d30df8be5be82a078cc4ced7287aa4ab1c80e14225e4e1853f9cb45f',
    'full/dali_idx/train-00002-of-00004.idx': '9d860b4c8f2c046fc33ffbf9a30c9b8d1b22deace3bdd6ca1b45d00880320d62',
    'full/dali_idx/train-00003-of-00004.idx': 'cea859045270b21f578d9aada24d0da6140b6126ae927cd405af967683b11fe3',
    'full/dali_idx/validation-00000-of-00002.idx': '743bf36f86f054367b12b5c9807d800514986d32965c43913f32775d955745e9',
    'full/dali_idx/validation-00001-of-00002.idx': '6c65519d69fa257289fc5a2ee919af9e572b630707bd8f377586b621ad8f3c43',
    'full/dataset_info.json': '7be88af8c7cb1f07c32cf6dfe24826934394be33a878524c1e0af46d55436ecb',
    'full/features.json': 'ab0669444623a03be104d185206a4bad71515bea904c310203c66e3880e05df1',
    'full/manifest.json': '204efbf8b2ad7f9c2ab9a0f63fbdb3f53be3d19fc7d95c707a9232bc647158b6',
    'full/train-00000-of-00004': '2589ad92fa318d1c122488b1f0761d2b325e76ce8d4d3b92edfb3087450153eb',
    'full/train-00001-of-00004': '8ee22811663133e227893a72543094984bacb7ba04acba6ef8eebcacc232cb29',
    'full/train-00002-of-00004': '3b1021019a84cf81bece1c686cb18ac3324a539c3a631286060e21672eefe467',
    'full/train-00003-of-00004': '80f63cb06392127f3ddb5a029645ba350ff1d83a5ddc1baf8f172c3e116d1bc5',
    'full/validation-00000-of-00002': 'ce2d8e72b3f2dcabaf6e8146045635c0d9d4e29868b261918b63efd7a6b2c307',
    'full/validation-00001-of-00002': 'e08fda8e7be78e2a849263c3c7ddf23184a6d298513d54ec1e695bbb294eb86a',
    'resized/shorter-24/dali_idx/train-00000-of-00004.idx':
        '8f49c5b1c0136f924e8e3f44391229499583ecad61043ce70c840264ba3d7cb2',
    'resized/shorter-24/dali_idx/train-00001-of-00004.idx':
        '3e8ad861fe7bb333335cdb419fd20acfb64a8d60066340577b865097d07556f9',
    'resized/shorter-24/dali_idx/train-00002-of-00004.idx':
        '19e49010a297868e582b414f682846a63115023ef78f7e79d2a20520602bfdb1',
    'resized/shorter-24/dali_idx/train-00003-of-00004.idx':
        '32c57245f4178d627056bf4033324bfc7b860eb3a7cf05737473fbbdd46c6ee7',
    'resized/shorter-24/dali_idx/validation-00000-of-00002.idx':
        'afc8aebed89b1ca400ed504cf9c865b7ac7a2fb318bffdc35fc62d6fa680232c',
    'resized/shorter-24/dali_idx/validation-00001-of-00002.idx':
        '0a4ac042b310151814c97a7a22158d878985b1d2b39427c4e586c4b231210c16',
    'resized/shorter-24/dataset_info.json': '71745e462645d6eb994dc9145c4d1a46eb6ce046e87f7532a8599d73094b4eeb',
    'resized/shorter-24/features.json': 'ab0669444623a03be104d185206a4bad71515bea904c310203c66e3880e05df1',
    'resized/shorter-24/manifest.json': 'aed6edf420d1ae3b3d480254dec7ddd736ef7135209841626eb68192109ab240',
    'resized/shorter-24/train-00000-of-00004': 'f6a5b0eee52c3f7219a23806d27cea1f4b260d196c6890b39fa22697c90860e1',
    'resized/shorter-24/train-00001-of-00004': '020b2fbef2266e16cb30f5d691e541d38e4facec1bb4970f8a021b9e4813ab19',
    'resized/shorter-24/train-00002-of-00004': 'd295a9dc1f684d1b279c3d3631c02a5bfe5a10a0580db3d5540c4287d53d96e3',
    'resized/shorter-24/train-00003-of-00004': '36bda4a467215e135bcb0258d0bfc195620544d3bae2d0c39819b71c61cc8986',
    'resized/shorter-24/validation-00000-of-00002': 'd76b3dda164d278e733a7afed095c0f2aad6a554f0b995aee2f83fb50277180b',
    'resized/shorter-24/validation-00001-of-00002': '8ffd4420ca360fd121c38d5c528f87b6210b1ab807259980ab9bc581ea63c203',
    'resized/shorter-40/dali_idx/train-00000-of-00004.idx':
        '15f4eafe6db5858635229b18068542a91c4aee5e91dd239dc3edd5ac603cf573',
    'resized/shorter-40/dali_idx/train-00001-of-00004.idx':
        'd88f69cdb523beffcefb777ea983230fa950f0115ec7a5a5ef84007ef3133596',
    'resized/shorter-40/dali_idx/train-00002-of-00004.idx':
        '029c71cff37321838f3cbdc47403146696f60743340d4946d720b59f4d1ee617',
    'resized/shorter-40/dali_idx/train-00003-of-00004.idx':
        '780979ad853cdc4cf3cd5def30c3a50b8b5dcce0857bafc9bcafe500261ebe36',
    'resized/shorter-40/dali_idx/validation-00000-of-00002.idx':
        '1491c045caf68c8ed050192d75d963c933f9d434d62c91e36273a22ada5daa70',
    'resized/shorter-40/dali_idx/validation-00001-of-00002.idx':
        '6daab9c34c447ff2360345e823635d696e1bfdfc58f05405a95d6f7863539537',
    'resized/shorter-40/dataset_info.json': '14d8bf38ed9a9cb5f9f23130a847a87b0d8878a4bac93f57dbf52fd29bada132',
    'resized/shorter-40/features.json': 'ab0669444623a03be104d185206a4bad71515bea904c310203c66e3880e05df1',
    'resized/shorter-40/manifest.json': '38106990a457ae1ebda92c28c658a906e5d58707426c28c36f9b2ad41d46c770',
    'resized/shorter-40/train-00000-of-00004': '3b9936ff6ebab6f79100d1d37158a078e0d9260c9c1e3b487d0e066fd93b7563',
    'resized/shorter-40/train-00001-of-00004': '3d03e5bd02072f481b171f7c9ac361ec5a9bc6b7e6b4a031ef145b5d86cfed61',
    'resized/shorter-40/train-00002-of-00004': '3c5d74d603db5290081fa4bde658416f2d03ef0ecf4674b2d561199df705bfa8',
    'resized/shorter-40/train-00003-of-00004': 'edd1675ab51e329a253320946c0df7e6a2baf5fc85af824e8adf3d966e219664',
    'resized/shorter-40/validation-00000-of-00002': '3bb2ea9ac3e2d55b3faa6fa7b5743a80af67be460d84ae4dabe3d6bec640fa2f',
    'resized/shorter-40/validation-00001-of-00002': '9325229a361cc9d9fea29ddae6defa2d7215726b7fbf8dc4455caad1ae2bef9b',
}


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp, "sample")
        inputs(sample)
        print(f"INPUTS = {input_digest(sample)!r}")
        print("BUILD = {")
        for name, digest in build_digests(sample, Path(tmp, "out")).items():
            entry = f"    {name!r}: {digest!r},"
            print(entry if len(entry) <= 120 else f"    {name!r}:\n        {digest!r},")
        print("}")
