"""Hugging Face `ILSVRC/imagenet-1k` as served now: `data/{train,validation,test}-NNNNN-of-NNNNN.parquet`.

Each row is `image` {bytes, path} and `label` (0-based, in the sorted-synset order of
the repository's classes.py). `image.path` is the old tar member name
(`n01440764_10026_n01440764.JPEG`), so names, labels and checks are those of the
.tar.gz copy (huggingface.py), and the shards are the same bytes. The `label`
column must agree with the name's synset (an error under --on-error fail, left
out under skip).

Every row is checked as it is read: a null `image.path`, `image.bytes` or `label`, a label
outside 0..999, a path that is not UTF-8 text, or a label that disagrees with the path's
synset is an error naming the file and the row (--on-error skip leaves the row out, listed).

Reading: a parquet file can be read by row group, but the repository's row
groups hold many images each, and every shard needs images from all 294 files,
so reading one image would read its whole row group. Instead each file is read
once, in order, a batch of rows at a time, and its images are written one after
the other into a spool file, a tar (each image a member named by its path), as a
.tar.gz is decompressed (see spool.py); the workers then read each image with one
pread and check its header as for every tar. Needs pyarrow (`imagenet-build[parquet]`).
"""

from __future__ import annotations

import re
import zlib
from array import array
from pathlib import Path
from typing import Any

from imagenet_build.catalog.classes import DEFAULT_LABELS_FILE, read_labels_file
from imagenet_build.infra import optional, read_door, storage, write_door
from imagenet_build.infra.errors import InputError, input_errors
from imagenet_build.model import utf8_name
from imagenet_build.sources import huggingface
from imagenet_build.sources.copies import CopyKind, Piece, listing, register
from imagenet_build.sources.listings import Listing
from imagenet_build.sources.samples import enough_for, validation_images
from imagenet_build.sources.tars import BLOCK, write_header

NAME = "Hugging Face ILSVRC/imagenet-1k (parquet)"
FILE = re.compile(r"^(train|validation|test)-(\d{5})-of-(\d{5})\.parquet$")
BATCH = 64  # rows held at a time (~7 MB of ImageNet images)


def identify(path: str) -> list[Piece]:
    base = storage.basename(path)
    if FILE.match(base):
        return [Piece(NAME, base, path)]
    names = listing(path)
    if names.get("data") and not any(FILE.match(n) for n in names):
        path, names = storage.join(path, "data"), listing(storage.join(path, "data"))
    return [Piece(NAME, n, storage.join(path, n)) for n in sorted(names) if FILE.match(n) and not names[n]]


def _check_schema(schema: Any, path: str) -> None:
    """InputError unless `image` is a struct of `bytes` and `path` and `label` an integer: Hugging Face's columns."""
    import pyarrow

    names = schema.names
    if not {"image", "label"} <= set(names):
        raise InputError(path, f"has columns {', '.join(names)}, not image and label: not a Hugging Face "
                               "imagenet-1k file")
    types = pyarrow.types
    image, label = schema.field("image").type, schema.field("label").type
    fields = {field.name: field.type for field in image} if types.is_struct(image) else {}
    binary, string = fields.get("bytes"), fields.get("path")
    if not (binary is not None and (types.is_binary(binary) or types.is_large_binary(binary))
            and string is not None and (types.is_string(string) or types.is_large_string(string))):
        raise InputError(path, f"its image column is {image}, not a struct of bytes (binary) and path (string): "
                               "not a Hugging Face imagenet-1k file")
    if not types.is_integer(label):
        raise InputError(path, f"its label column is {label}, not an integer: not a Hugging Face imagenet-1k file")


def spool_parquet(path: str, target: str, threads: int = 1) -> Listing:
    """A worker task: one parquet file's images into `target`, a tar of them one after the other; its listing.
    (`threads`, the task's share of the workers, is not used: a file is read row group by row group.)

    Returns the columns of spool.spool_and_list, its last the rows left out: [(path or "row N", problem)].
    """
    pq = optional.require("pyarrow.parquet", "reading Hugging Face's parquet files")
    import pyarrow

    synsets = read_labels_file(DEFAULT_LABELS_FILE)  # classes.py's order: the 1000 synsets, sorted
    names: list[str] = []
    offsets, sizes, files, crcs = array("Q"), array("Q"), array("b"), array("Q")
    problems: list[tuple[str, str]] = []
    part = target + ".part"
    try:
        with input_errors(path, expected="a parquet file", missing="file not found"), \
                read_door.open_read(path, random_access=True) as f, write_door.open_write(part) as out:
            try:
                table = pq.ParquetFile(f, pre_buffer=False)  # row group by row group: bounded memory
                _check_schema(table.schema_arrow, path)
                offset = row = 0
                for batch in table.iter_batches(batch_size=BATCH, columns=["image", "label"]):
                    for data, name, label in _rows(batch, path):
                        problem = _problem(name, data, label, synsets)
                        if problem:
                            problems.append((name or f"row {row}", f"{f'row {row}: ' if name else ''}{problem}"))
                        else:
                            header = write_header(name, len(data))
                            offset += len(header)
                            out.write(header + data + bytes(-len(data) % BLOCK))
                            names.append(name)
                            offsets.append(offset)
                            sizes.append(len(data))
                            files.append(1)
                            crcs.append(zlib.crc32(header[-BLOCK:]))
                            offset += len(data) + -len(data) % BLOCK
                        row += 1
                out.write(bytes(2 * BLOCK))
            except pyarrow.ArrowException as e:
                raise InputError(path, f"not a readable parquet file ({e}): truncated or damaged?") from None
        write_door.replace(part, target)
    except BaseException:
        write_door.remove(part, missing_ok=True)
        raise
    return names, offsets, sizes, files, crcs, problems


def _rows(batch: Any, path: str) -> Any:
    """(image.bytes, image.path, label) of each row of a batch, the path through the name rule (utf8_name)."""
    import pyarrow

    images = batch.column("image")
    paths = images.field("path")
    raw = paths.view(pyarrow.large_binary() if pyarrow.types.is_large_string(paths.type) else pyarrow.binary())
    names = [None if name is None else utf8_name(name, path, ":") for name in raw.to_pylist()]
    return zip(images.field("bytes").to_pylist(), names, batch.column("label").to_pylist())


def _problem(name: str | None, data: bytes | None, label: int | None, synsets: list[str]) -> str:
    """What is wrong with a row ("" for nothing): every label and path is checked, not only those in range."""
    if name is None:
        return "image.path is null"
    if data is None:
        return "image.bytes is null"
    if label is None:
        return "label is null"
    if not 0 <= label < len(synsets):
        return f"label {label} is outside 0..{len(synsets) - 1} (the ILSVRC2012 classes)"
    match = re.search(r"_(n\d{8})\.JPEG$", name)
    if match and synsets[label] != match.group(1):
        return f"named for synset {match.group(1)} but its label {label} is {synsets[label]}"
    return ""


class ParquetCopy(huggingface.HfCopy):
    """The parquet files, each written into the spool as a tar of its images (spool_parquet): from there on,
    Hugging Face's .tar.gz copy."""

    listed_as = "parquet"


def assemble(pieces: list[Piece]) -> ParquetCopy:
    splits: dict[str, dict[int, tuple[int, str]]] = {}
    for piece in pieces:
        match = FILE.match(piece.role)
        assert match is not None  # identify() made the role from a name FILE matched
        split, number, count = match.groups()
        splits.setdefault(split, {})[int(number)] = (int(count), piece.path)
    files = {split: _complete(split, found) for split, found in splits.items()}
    labelled = {split: found for split, found in files.items() if split in ("train", "validation")}
    if not labelled:
        raise InputError(pieces[0].path, "only the unlabelled test split was given")
    copy = ParquetCopy(NAME, f"{NAME} files", labelled, task=spool_parquet)
    if "test" in files:
        copy.notes.append(f"{len(files['test'])} test file(s) ignored: the test split has no labels")
    return copy


def _complete(split: str, found: dict[int, tuple[int, str]]) -> list[str]:
    """A split's files in order: all of them (`<split>-<k>-of-<count>`), or InputError naming the missing."""
    count = max(c for c, _ in found.values())
    missing = [f"{split}-{k:05d}-of-{count:05d}.parquet" for k in range(count) if k not in found]
    if missing or any(c != count for c, _ in found.values()):
        first = next(iter(found.values()))[1]
        shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise InputError(storage.parent(first), f"{len(missing) or 'some'} {split} file(s) missing or of another "
                                                f"set ({shown}): give all the files of a split")
    return [found[k][1] for k in range(count)]


def write_sample(ilsvrc_sample: Path, out: Path) -> None:
    """`data/train-0000k-of-00003.parquet` (train dealt round-robin: the real row order is not documented),
    `data/validation-00000-of-00001.parquet`, `data/test-00000-of-00001.parquet`."""
    pq = optional.require("pyarrow.parquet", "writing a parquet sample")
    import pyarrow

    sample, data = Path(ilsvrc_sample), Path(out) / "data"
    write_door.make_folder(data)
    synsets = read_labels_file(DEFAULT_LABELS_FILE)

    def write(name: str, rows: list[tuple[str, Path, int]]) -> None:
        table = pyarrow.table({
            "image": pyarrow.array([{"bytes": read_door.read_bytes(p), "path": n} for n, p, _ in rows],
                                   pyarrow.struct([("bytes", pyarrow.binary()), ("path", pyarrow.string())])),
            "label": pyarrow.array([label for _, _, label in rows], pyarrow.int64()),
        })
        with write_door.new_file(data / name) as f:
            pq.write_table(table, f, row_group_size=4)

    train = sorted(sample.glob("train/*/*.JPEG"), key=lambda p: p.name)
    validation = validation_images(sample)
    enough_for(len(train), 3, "train", "hf-parquet")
    enough_for(len(validation), 1, "validation", "hf-parquet")
    rows = [(f"{p.stem}_{p.parent.name}.JPEG", p, synsets.index(p.parent.name)) for p in train]
    for k in range(3):
        write(f"train-{k:05d}-of-00003.parquet", rows[k::3])
    write("validation-00000-of-00001.parquet",
          [(f"{p.stem}_{synset}.JPEG", p, synsets.index(synset)) for p, synset in validation])
    write("test-00000-of-00001.parquet",
          [(f"ILSVRC2012_test_{n:08d}.JPEG", p, -1) for n, (p, _) in enumerate(validation[:2], start=1)])


register(CopyKind(NAME, identify, assemble, rank=50, short="hf-parquet", write_sample=write_sample, folder=True))
