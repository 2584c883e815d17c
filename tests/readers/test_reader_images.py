"""Every reader the project ships x every kind of record the tool writes: each reads the record's image, and
sees the colour it holds (docs/images.md: every record is read by every reader).

The kinds: a JPEG stored as is (baseline, greyscale, progressive, with an EXIF orientation), one re-encoded
(a CMYK JPEG, a PNG input, a JPEG DALI's parser stops on), each resized by `convert --resize`, and what
`write_arrays` stores (JPEG, and PNG with lossless=True: the PyTorch reader and trainer-check --framework torch
refused those). Each image is one flat colour, its own, so that whatever a reader does (crop, resize,
normalise) the colour it gives is the record's: a reader that cannot read a kind, or reads it as another
colour (channels swapped, greyscale on one channel, 16 bits as 8) fails. A reader added to the project is
added to READERS; a kind of record, to KINDS.
"""

import io
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import run_cli, run_process
from helpers import edit_record, records_of
from imagenet_build.format.record_schema import decode_example

sys.modules.setdefault("triton", None)  # torch before TensorFlow in one process, and without triton (test_torch.py)
torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")

SIZE = (64, 48)  # width, height of every image converted: shorter side 48, resized to 24


def flat(colour, mode="RGB"):
    return Image.new(mode, SIZE, colour)


def jpeg(image, **save):
    out = io.BytesIO()
    image.save(out, "JPEG", quality=95, **save)
    return out.getvalue()


def with_orientation(data, orientation):
    """A JPEG with an EXIF APP1 segment holding only an orientation, right after SOI."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    body = b"Exif\x00\x00" + exif.tobytes()
    return data[:2] + b"\xff\xe1" + (len(body) + 2).to_bytes(2, "big") + body + data[2:]


def png_input(image):
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


# class folder: the input file's bytes (convert's kinds; each class one image of its own colour)
INPUTS = {
    "baseline": jpeg(flat((200, 40, 30))),
    "greyscale": jpeg(flat(90, "L")),
    "progressive": jpeg(flat((30, 160, 60)), progressive=True),
    "exif": with_orientation(jpeg(flat((40, 60, 210))), 6),
    "cmyk": jpeg(flat((10, 200, 30, 20), "CMYK")),
    "png": png_input(flat((230, 200, 20))),
    "junk": (lambda d: d[:20] + b"\x00\x00" + d[20:])(jpeg(flat((120, 20, 160)))),  # bytes between APP0 and DQT
}
CLASSES = sorted(INPUTS)
ARRAY_COLOURS = [(250, 120, 0), (0, 90, 250), (128, 128, 128), (20, 220, 200)]

# kind: (build, label as stored) -- the builds are made once, below
KINDS = {
    "JPEG stored as is": ("convert", "baseline"),
    "greyscale JPEG": ("convert", "greyscale"),
    "progressive JPEG": ("convert", "progressive"),
    "JPEG with an EXIF orientation": ("convert", "exif"),
    "CMYK JPEG re-encoded": ("convert", "cmyk"),
    "PNG input re-encoded": ("convert", "png"),
    "JPEG re-encoded for its header": ("convert", "junk"),
    "resized JPEG": ("resized", "baseline"),
    "resized greyscale JPEG": ("resized", "greyscale"),
    "resized CMYK JPEG": ("resized", "cmyk"),
    "resized PNG input": ("resized", "png"),
    "write_arrays JPEG": ("arrays", 1),
    "write_arrays greyscale-coloured JPEG": ("arrays", 3),
    "write_arrays PNG (lossless)": ("lossless", 1),
    "write_arrays PNG of another colour": ("lossless", 4),
}


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """{build: its folder}: a folder dataset of INPUTS converted, the same resized to shorter:24, and
    ARRAY_COLOURS through write_arrays as JPEG and as PNG."""
    from imagenet_build import write_arrays

    root = tmp_path_factory.mktemp("kinds")
    for name, data in INPUTS.items():
        (root / "photos" / name).mkdir(parents=True)
        (root / "photos" / name / f"{name}.jpg").write_bytes(data)
    common = ["--train-dir", root / "photos", "--classes-from-folders", "--train-shards", 2, "--layout-threads", 1,
              "--workers", 1]
    for out, more in (("convert", []), ("resize", ["--resize", "shorter:24"])):
        result = run_process("convert", *common, "--output-dir", root / out, *more)
        assert result.returncode == 0, result.stderr
    arrays = np.stack([np.full((SIZE[1], SIZE[0], 3), colour, dtype=np.uint8) for colour in ARRAY_COLOURS])
    write_arrays(arrays, np.arange(len(arrays)), root / "arrays", num_shards=2)
    write_arrays(arrays, np.arange(len(arrays)), root / "lossless", num_shards=2, lossless=True)
    return {"convert": root / "convert", "resized": root / "resize" / "shorter-24", "arrays": root / "arrays",
            "lossless": root / "lossless"}


def label_of(build, label):
    """A class folder's name to its label (classes sorted by name, 1-based); a write_arrays label as it is."""
    return CLASSES.index(label) + 1 if build in ("convert", "resized") else label


@pytest.fixture(scope="module")
def stored(builds):
    """{(build, stored label): (the record's image/format, the colour Pillow decodes from its bytes)}."""
    found = {}
    for build, folder in builds.items():
        for shard in sorted(folder.glob("train-*-of-*")):
            for payload in records_of(shard):
                record = decode_example(payload)
                with Image.open(io.BytesIO(record["image/encoded"][0])) as image:
                    pixels = np.asarray(image.convert("RGB"), dtype=np.float64)
                found[build, record["image/class/label"][0]] = (record["image/format"][0],
                                                              pixels.reshape(-1, 3).mean(axis=0))
    return found


def shard_paths(folder):
    return sorted(str(p) for p in folder.glob("train-?????-of-?????"))


def torch_dataset(folder):
    """RecordDataset(decode=True): every record decoded on the CPU, CHW uint8."""
    from imagenet_build.torch import RecordDataset

    dataset = RecordDataset(folder, "train", shuffle=False)
    samples = [dataset[k] for k in range(len(dataset))]
    return [(int(s["label"]) + 1, s["image"].permute(1, 2, 0).numpy()) for s in samples]


def torch_batch_transform(folder):
    """trainer-check --framework torch's path: the stored bytes batched through BatchTransform (evaluation crop,
    no normalisation), which on a GPU is this code with the device switched."""
    from imagenet_build.torch import BatchTransform, RecordDataset, collate

    dataset = RecordDataset(folder, "train", shuffle=False, decode=False)
    batch = collate([dataset[k] for k in range(len(dataset))])
    images = BatchTransform("cpu", training=False, size=16, resize=16, mean=(0, 0, 0), std=(1, 1, 1))(batch["image"])
    return [(int(label) + 1, image.permute(1, 2, 0).numpy()) for label, image in zip(batch["label"], images)]


def torch_sample_transform(folder):
    """trainer-check --framework torch's CPU path: SampleTransform in the dataset (its evaluation crop, no
    normalisation), each image decoded where it is read."""
    from imagenet_build.torch import RecordDataset, SampleTransform

    transform = SampleTransform(training=False, size=16, resize=16, mean=(0, 0, 0), std=(1, 1, 1))
    dataset = RecordDataset(folder, "train", shuffle=False, decode=False, transform=transform)
    return [(int(s["label"]) + 1, s["image"].permute(1, 2, 0).numpy()) for s in map(dataset.__getitem__,
                                                                                    range(len(dataset)))]


def torch_sample_batches(folder):
    """The same through a DataLoader's worker: each batch read in one call (RecordDataset.__getitems__), its crops
    resized into the batch's shared memory."""
    from imagenet_build.torch import RecordDataset, SampleTransform, collate

    transform = SampleTransform(training=False, size=16, resize=16, normalise=False)
    dataset = RecordDataset(folder, "train", shuffle=False, decode=False, transform=transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=1, collate_fn=collate)
    return [(int(label) + 1, image.permute(1, 2, 0).numpy()) for batch in loader
            for label, image in zip(batch["label"], batch["image"])]


def grain_crop_batch(folder):
    """imagenet_build.grain: RecordSource through Grain's DataLoader (a worker process), CropBatch's evaluation
    crops written into Grain's shared memory."""
    grain = pytest.importorskip("grain")
    from imagenet_build.grain import CropBatch, RecordSource
    from imagenet_build.torch import SampleTransform

    source = RecordSource(folder, "train")
    sampler = grain.samplers.IndexSampler(len(source), grain.sharding.NoSharding(), shuffle=False, num_epochs=1)
    crop = CropBatch(SampleTransform(training=False, size=16, resize=16, normalise=False))
    loader = grain.DataLoader(data_source=source, sampler=sampler, worker_count=1,
                              operations=[grain.transforms.Batch(8, batch_fn=crop)])
    return [(int(label) + 1, image.transpose(1, 2, 0)) for batch in loader
            for label, image in zip(batch["label"], batch["image"])]


def tf_data(folder):
    """imagenet_build.tfdata.make_dataset: the evaluation crop, no normalisation."""
    pytest.importorskip("tensorflow")
    from imagenet_build.tfdata import make_dataset

    dataset = make_dataset(shard_paths(folder), training=False, batch_size=64, image_size=16, mean=(0, 0, 0),
                           std=(1, 1, 1))
    return [(int(label) + 1, image) for images, labels in dataset for image, label in zip(images.numpy(),
                                                                                          labels.numpy())]


def tf_data_training(folder):
    """make_dataset's training crops: a JPEG's crop decoded alone (decode_and_crop_jpeg), a PNG's cut from it
    decoded whole; no normalisation."""
    pytest.importorskip("tensorflow")
    from imagenet_build.tfdata import make_dataset

    dataset = make_dataset(shard_paths(folder), training=True, repeat=False, drop_remainder=False, seed=0,
                           batch_size=64, image_size=16, mean=(0, 0, 0), std=(1, 1, 1))
    return [(int(label) + 1, image) for images, labels in dataset for image, label in zip(images.numpy(),
                                                                                          labels.numpy())]


def dali(folder):
    """imagenet_build.dali's pipeline (trainer-check's) on the CPU: its evaluation branch, no normalisation."""
    pytest.importorskip("nvidia.dali")
    from imagenet_build.dali import pipeline

    count = len(records_in(shard_paths(folder)))
    pipe = pipeline(folder, "train", batch_size=count, device_id=None, training=False, size=16, mean=(0, 0, 0),
                    std=(1, 1, 1), layout="HWC")
    pipe.build()
    images, labels = pipe.run()
    return [(int(np.array(labels.at(k)).reshape(-1)[0]) + 1, np.array(images.at(k))) for k in range(len(labels))]


def records_in(paths):
    return [payload for path in paths for payload in records_of(path)]


READERS = {  # name: read a build's train split -> [(stored label, image HWC)], each record once
    "imagenet_build.torch RecordDataset": torch_dataset,
    "imagenet_build.torch BatchTransform (trainer-check --framework torch on a GPU)": torch_batch_transform,
    "imagenet_build.torch SampleTransform (trainer-check --framework torch on the CPU)": torch_sample_transform,
    "imagenet_build.torch SampleTransform, batches from a DataLoader worker": torch_sample_batches,
    "imagenet_build.grain RecordSource + CropBatch, Grain's DataLoader": grain_crop_batch,
    "imagenet_build.tfdata make_dataset": tf_data,
    "imagenet_build.tfdata make_dataset, training crops": tf_data_training,
    "imagenet_build.dali pipeline (trainer-check's)": dali,
}


def test_every_registered_reader_is_read_here():
    """Each reader of the library's registry (readers/registry.py) reads every kind of record here, by its public
    module (imagenet_build.<name>)."""
    import imagenet_build.readers  # noqa: F401  (registers them)
    from imagenet_build.readers.registry import READERS as REGISTRY

    assert {how.split()[0].removeprefix("imagenet_build.") for how in READERS} == set(REGISTRY)


@pytest.fixture(scope="module")
def read(builds):
    """read(reader, build) -> {stored label: image}: each reader reads each build once."""
    done = {}

    def get(reader, build):
        if (reader, build) not in done:
            images = READERS[reader](builds[build])
            labels = [label for label, _ in images]
            assert len(set(labels)) == len(labels), (reader, build, labels)  # every record once
            done[reader, build] = dict(images)
        return done[reader, build]

    return get


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_reads_every_kind_of_record_the_tool_writes(read, stored, reader, kind):
    build, label = KINDS[kind]
    label = label_of(build, label)
    image_format, colour = stored[build, label]
    assert image_format == (b"PNG" if build == "lossless" else b"JPEG")
    image = np.asarray(read(reader, build)[label], dtype=np.float64)
    assert image.ndim == 3 and image.shape[-1] == 3, image.shape
    assert np.abs(image.reshape(-1, 3) - colour).max() <= 4, (image.reshape(-1, 3).mean(axis=0), colour)


def test_the_kinds_are_what_they_say(builds, stored):
    """The records are of the kinds named: the convert build re-encoded the CMYK, PNG and junk inputs (and only
    those), the resized build's images are 32x24, write_arrays' colours are exact in PNG."""
    reencoded = {}
    for shard in sorted(builds["convert"].glob("train-*-of-*")):
        for payload in records_of(shard):
            record = decode_example(payload)
            name = record["image/filename"][0].decode().split(".")[0]
            reencoded[name] = record["image/encoded"][0] != INPUTS[name]
    assert reencoded == {name: name in ("cmyk", "png", "junk") for name in INPUTS}
    for shard in sorted(builds["resized"].glob("train-*-of-*")):
        for payload in records_of(shard):
            record = decode_example(payload)
            assert (record["image/width"][0], record["image/height"][0]) == (32, 24)
    for k, colour in enumerate(ARRAY_COLOURS, start=1):
        assert list(stored["lossless", k][1]) == list(colour)


def test_a_png_record_one_reader_cannot_read_fails_verify_and_the_pytorch_reader_names_it(builds, tmp_path):
    """A lossless build whose record holds a PNG with an IDAT CRC that fails (TensorFlow and DALI stop on it,
    torchvision's decoder crashed the process): verify said sound; it names the record under readers, and the
    PyTorch reader refuses it in one line naming the shard, the byte and the file."""
    import json
    import shutil

    from imagenet_build.infra.errors import BuildError
    from imagenet_build.torch import RecordDataset
    from png_cases import DAMAGED

    folder = tmp_path / "lossless"
    shutil.copytree(builds["lossless"], folder)
    shard = "train-00000-of-00002"
    broken = DAMAGED["IDAT CRC wrong"][0]

    def plant(example):
        example.features.feature["image/encoded"].bytes_list.value[0] = broken
        example.features.feature["image/height"].int64_list.value[0] = 21
        example.features.feature["image/width"].int64_list.value[0] = 30

    edit_record(folder, shard, 0, plant)
    report = json.loads(run_cli("verify", folder, "--workers", 1, "--json").stdout)
    readers = [(p["file"], p["record"], p["message"]) for p in report["problems"] if p["check"] == "readers"]
    assert readers == [(shard, 0, "PNG: chunk IDAT at byte 33: CRC mismatch: TensorFlow's and DALI's decoders stop "
                                  "on it (torchvision's crashes on some), and the PyTorch reader refuses it")]
    name = decode_example(records_of(folder / shard)[0])["image/filename"][0].decode()
    dataset = RecordDataset(folder, "train", shuffle=False)
    with pytest.raises(BuildError) as refused:
        [dataset[k] for k in range(len(dataset))]
    assert str(refused.value) == (f"{folder / shard}: byte 0 ({name}): does not decode as PNG (PNG: chunk IDAT at "
                                  "byte 33: CRC mismatch; imagenet-build verify names such records)")
