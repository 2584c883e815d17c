"""`sample --layout kaggle`: the ILSVRC sample as Kaggle's zip, `imagenet-object-localization-challenge.zip`.

Which members are stored and which deflated (Kaggle's choice for the real zip is not known, so both):
- LOC_* files and XML annotations: deflated;
- train JPEGs: stored, but every third of a class deflated, with a data descriptor;
- validation JPEGs: deflated for odd image numbers, stored for even ones;
- test JPEGs: stored.
Folder entries (`.../`) come before their files, as `zip -r` writes them.
"""

from __future__ import annotations

from pathlib import Path

from imagenet_build.catalog.classes import DEFAULT_METADATA_FILE, read_labels_file, read_metadata_file
from imagenet_build.infra import read_door
from imagenet_build.sources.kaggle_listing import ANNOTATIONS, MAPPING, SOLUTION, TEST, TRAIN, VAL, ZIP_NAME
from imagenet_build.sources.samples import enough_for
from imagenet_build.sources.zips import DEFLATED, STORED, ZipMember, write_zip

SOLUTION_HEAD = "ImageId,PredictionString\n"


def write_sample(ilsvrc_sample: Path, out: Path) -> None:
    """`imagenet-object-localization-challenge.zip`, shaped as Kaggle's download, from the ILSVRC sample."""
    enough_for(len(list(Path(ilsvrc_sample).glob("validation/*.JPEG"))), 1, "validation", "kaggle")
    write_zip(Path(out) / ZIP_NAME, sample_members(ilsvrc_sample))


def sample_members(ilsvrc_sample: Path) -> list[ZipMember]:
    """The sample's tree as Kaggle lays it out: [(member name, bytes, method, data descriptor?)]."""
    sample = Path(ilsvrc_sample)
    synsets = read_labels_file(sample / "labels.txt")
    members = _loc_files(sample, synsets)
    for kind in ("Annotations", "Data"):
        members += [_folder(f"ILSVRC/{kind}/"), _folder(f"ILSVRC/{kind}/CLS-LOC/")]
    members += _images(sample, synsets)
    members += _annotations(sample, synsets)
    tests = len(_test_images(sample))
    members.append(("LOC_sample_submission.csv", (SOLUTION_HEAD + "".join(
        f"ILSVRC2012_test_{n:08d},{synsets[0]} 0 0 10 10\n" for n in range(1, tests + 1))).encode(), DEFLATED, False))
    return members


def _folder(name: str) -> ZipMember:
    return name, b"", STORED, False


def _loc_files(sample: Path, synsets: list[str]) -> list[ZipMember]:
    """LOC_synset_mapping.txt, LOC_val_solution.csv (rows not in image order, as Kaggle's are not) and
    LOC_train_solution.csv, from the sample's labels and XML."""
    import xml.etree.ElementTree as ET  # here: a convert does not need it

    texts = read_metadata_file(DEFAULT_METADATA_FILE)
    mapping = "".join(f"{s} {texts.get(s, s)}\n" for s in synsets)
    val_labels = read_door.read_text(sample / "validation_labels.txt").split()
    rows = sorted((synset, f"ILSVRC2012_val_{number:08d},{synset} 0 0 {10 + number} {20 + number} ")
                  for number, synset in enumerate(val_labels, start=1))
    train_rows = []
    for xml in sorted((sample / "bbox").glob("*/*.xml")):
        root = ET.fromstring(read_door.read_bytes(xml))
        boxes = " ".join(f"{o.findtext('name')} " + " ".join(o.findtext(f"bndbox/{k}", "") for k in
                                                              ("xmin", "ymin", "xmax", "ymax"))
                         for o in root.iter("object"))
        train_rows.append(f"{xml.stem},{boxes}\n")
    return [(MAPPING, mapping.encode(), DEFLATED, False),
            (SOLUTION, (SOLUTION_HEAD + "".join(r + "\n" for _, r in rows)).encode(), DEFLATED, False),
            ("LOC_train_solution.csv", (SOLUTION_HEAD + "".join(train_rows)).encode(), DEFLATED, False)]


def _test_images(sample: Path) -> list[Path]:
    return sorted((sample / "validation").iterdir())[:3]


def _images(sample: Path, synsets: list[str]) -> list[ZipMember]:
    """The train, validation and test JPEGs under Data/CLS-LOC/, each folder entry before its files."""
    members = [_folder(TRAIN)]
    for synset in synsets:
        members.append(_folder(f"{TRAIN}{synset}/"))
        for n, image in enumerate(sorted((sample / "train" / synset).iterdir())):
            deflated = n % 3 == 2
            members.append((f"{TRAIN}{synset}/{image.name}", read_door.read_bytes(image),
                            DEFLATED if deflated else STORED, deflated))
    members.append(_folder(VAL))
    for image in sorted((sample / "validation").iterdir()):
        number = int(image.stem.rsplit("_", 1)[1])
        members.append((f"{VAL}{image.name}", read_door.read_bytes(image), DEFLATED if number % 2 else STORED, False))
    members.append(_folder(TEST))
    for number, image in enumerate(_test_images(sample), start=1):
        members.append((f"{TEST}ILSVRC2012_test_{number:08d}.JPEG", read_door.read_bytes(image), STORED, False))
    return members


def _annotations(sample: Path, synsets: list[str]) -> list[ZipMember]:
    """The XML annotations under Annotations/CLS-LOC/train/<synset>/."""
    members = [_folder(ANNOTATIONS)]
    for synset in synsets:
        xmls = sorted((sample / "bbox" / synset).glob("*.xml"))
        if xmls:
            members.append(_folder(f"{ANNOTATIONS}{synset}/"))
        members += [(f"{ANNOTATIONS}{synset}/{xml.name}", read_door.read_bytes(xml), DEFLATED, False) for xml in xmls]
    return members
