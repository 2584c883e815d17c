"""WebDataset copies of ImageNet (timm's `timm/imagenet-1k-wds` and the like), read in place.

A copy is a folder of uncompressed tar shards, `<prefix>-train-NNNN.tar` and
`<prefix>-validation-NN.tar` (or `-val-`): timm's are `imagenet1k-train-0000.tar`
… `-1023.tar` and `imagenet1k-validation-00.tar` … `-63.tar`. Each sample is a
run of members sharing a key: `<key>.jpg` (the image), `<key>.cls` (its label,
0-based, as ASCII digits) and optionally `<key>.json`. timm's copy was made from
TFDS's imagenet2012, whose label is the index in the sorted list of the 1000
ILSVRC2012 synsets (the shipped labels file is that sorted list) and whose key is
the original file name without `.JPEG` (`n01440764_10026`, `ILSVRC2012_val_00000001`).

Records are slim's, as from the ILSVRC2012 tarballs: the original file name in
`image/filename`, the label from the labels file (the synset comes from the name;
`.cls` is checked against it), slim's order (class by class, by name), never the
shards' own (shuffled) order. Where a key is not an ImageNet name, the name is
the json's `filename` (`n01440764/n01440764_3778.JPEG` in copies derived from
timm's), else `<key>.JPEG` and the label from `.cls`; such records cannot equal
the ILSVRC build's and the scan says so.

Every image is a byte range of its shard file. The scan lists each shard's tar
headers and reads its `.cls` members (tiny preads), one shard file per task on
the pool; a worker then reads each image with one pread (webdataset_shard.py). An entry's relpath is
`<shard file>/<original name>`: its basename stays the original name (the record's
filename, the key of boxes and --subset), and its folder names the shard file
under the split's root, so no new field is needed and nothing else changes.
"""

from __future__ import annotations

import json
import os
import random
import re
import tarfile
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from imagenet_build.infra import read_door, storage, write_door
from imagenet_build.infra.errors import InputError, PathLike, UsageError
from imagenet_build.model import SplitInput, Where, file_name
from imagenet_build.sources.copies import Copy, CopyKind, Piece, listing, register
from imagenet_build.sources.copy_rules import once_each, refuse_empty_pieces
from imagenet_build.sources.samples import enough_for, tar_add, validation_images
from imagenet_build.sources.webdataset_shard import ShardColumns, ShardReader, cls_synsets, list_shard

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.infra.workers import Workers

NAME = "WebDataset shards"
SHARD = re.compile(r"^(?P<prefix>.+)-(?P<split>train|validation|val)-(?P<number>\d+)\.tar$")
SPLITS = {"train": "train", "validation": "validation", "val": "validation"}


# ------------------------------------------------------------------ telling the copy apart


def identify(path: str) -> list[Piece]:
    """One piece per shard file given; a folder of shards: one piece per split it holds."""
    base = storage.basename(path)
    match = SHARD.match(base)
    if match:
        return [Piece(NAME, f"{SPLITS[match['split']]}-shard {base}", path)]
    names = listing(path)
    splits = sorted({SPLITS[m["split"]] for n, is_dir in names.items() if not is_dir for m in [SHARD.match(n)] if m})
    return [Piece(NAME, f"{split}-shards", path) for split in splits]


def _shard_files(pieces: list[Piece]) -> dict[str, list[tuple[int, str]]]:
    """{split: [(number, path)]} of the shards the pieces name, sorted by number; one prefix for the copy."""
    found: dict[str, dict[str, int]] = {}
    prefixes: dict[str, str] = {}
    for piece in pieces:
        role = piece.role
        if role.endswith("-shards"):
            split = role[: -len("-shards")]
            paths = [storage.join(piece.path, n) for n, is_dir in sorted(listing(piece.path).items()) if not is_dir]
            complete = True
        else:
            split, paths, complete = role.split("-shard ")[0], [piece.path], False
        numbers = []
        for path in paths:
            match = SHARD.match(storage.basename(path))
            if match and SPLITS[match["split"]] == split:
                found.setdefault(split, {})[path] = int(match["number"])
                prefixes.setdefault(match["prefix"], path)
                numbers.append(int(match["number"]))
        gap = next((k for k, n in enumerate(sorted(numbers)) if n != k), None)
        if complete and gap is not None:  # a folder's shards run 0..N-1, or it is a partial copy
            raise InputError(piece.path, f"{split} shard number {gap} is missing ({len(numbers)} shard files, "
                                         f"numbered up to {max(numbers)}): a partial copy")
    if len(prefixes) > 1:
        first, second = list(prefixes.values())[:2]
        raise UsageError(f"--from was given shards of two WebDataset copies: {first} and {second}; "
                         "give the shards of one copy")
    return {split: sorted(((n, p) for p, n in paths.items()), key=lambda item: item[0])
            for split, paths in found.items()}


class WdsCopy(Copy):
    """A folder of shards (or the shard files), each split's read in place."""

    kind = description = NAME

    def __init__(self, shards: dict[str, list[str]]) -> None:
        self.shards = shards  # split -> its shard files, by number
        self.notes = []

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(split for split in ("train", "validation") if split in self.shards)

    def scan_train(self, catalog: Catalog, on_error: str, pool: Workers) -> SplitInput:
        return scan_shards("train", self.shards["train"], catalog, on_error, pool, None)

    def scan_validation(self, catalog: Catalog, on_error: str, pool: Workers,
                        labels_loader: Callable[[], list[str]], labels_file: PathLike) -> SplitInput:
        return scan_shards("validation", self.shards["validation"], catalog, on_error, pool, str(labels_file))


def assemble(pieces: list[Piece]) -> WdsCopy:
    return WdsCopy({split: [path for _, path in numbered] for split, numbered in _shard_files(pieces).items()})


# ------------------------------------------------------------------ the scan


class _Images(NamedTuple):
    """A split's images gathered from its shards: columns in shard order, and their indexes by label."""

    relpaths: list[str]
    offsets: array[int]
    sizes: array[int]
    crcs: array[int]
    by_label: dict[int, array[int]]


def scan_shards(
    split: str,
    shards: list[str],
    catalog: Catalog,
    on_error: str,
    pool: Workers,
    validation_labels_file: str | None,
) -> SplitInput:
    """A split's shard files → its images in slim's order (class by class in labels-file order, by name)."""
    root = storage.parent(shards[0]) if storage.is_url(shards[0]) else os.path.commonpath(
        [os.path.dirname(os.path.abspath(p)) for p in shards])
    rel = [storage.basename(p) if storage.is_url(p) else os.path.relpath(os.path.abspath(p), root) for p in shards]
    result = SplitInput(split, str(root), "wds", reader=ShardReader)
    listed: dict[str, ShardColumns] = {}
    tasks = [(str(shards[k]), rel[k], split, on_error, validation_labels_file) for k in range(len(shards))]
    pool.run(list_shard, tasks, lambda task, columns: listed.__setitem__(task[1], columns))
    refuse_empty_pieces(((shards[k], len(listed[r][0]) + len(listed[r][7])) for k, r in enumerate(rel)), split)
    images = _gather(result, rel, listed, catalog)
    missing = [s for label, s in enumerate(catalog.synsets, start=1) if label not in images.by_label]
    if not images.relpaths:
        raise InputError(root, f"the {split} shards hold no images of the synsets in {catalog.labels_file}")
    if missing and split == "train" and on_error == "fail":
        raise InputError(root, f"the train shards hold no images of {len(missing)} synset(s) of the labels file "
                               f"({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}): a partial copy? "
                               "Pass a --labels-file with only the classes you have, or --on-error skip")
    result.empty_classes.extend(missing)
    _add_by_name(result, root, images, catalog, on_error)
    return result


def _gather(result: SplitInput, rel: list[str], listed: dict[str, ShardColumns], catalog: Catalog) -> _Images:
    """The shards' columns joined in shard order, keeping the catalog's synsets; notes on what was left out."""
    synsets = cls_synsets()
    label_of_number = array("H", (catalog.label_of.get(s, 0) for s in synsets))
    images = _Images([], array("Q"), array("Q"), array("Q"), {})
    outside = derived = 0
    for r in rel:  # shard order, whatever order the tasks ended in
        names, offs, lens, crcs, found, n_derived, ignored, left_out = listed.pop(r)
        derived += n_derived
        result.ignored.extend(ignored)
        result.left_out.extend(left_out)
        for i, number in enumerate(found):
            label = label_of_number[number] if number >= 0 else 0
            if not label:
                outside += 1
                continue
            images.by_label.setdefault(label, array("I")).append(len(images.relpaths))
            images.relpaths.append(names[i])
            images.offsets.append(offs[i])
            images.sizes.append(lens[i])
            images.crcs.append(crcs[i])
    split = result.split
    if outside:
        result.notes.append(f"{outside} {split} image(s) left out: their synsets are not in {catalog.labels_file}")
    if derived:
        result.notes.append(f"{derived} {split} sample(s) carry no original file name: image/filename is "
                            "<key>.JPEG, so those records differ from the build from the ILSVRC2012 tarballs")
    return images


def _add_by_name(result: SplitInput, root: str, images: _Images, catalog: Catalog, on_error: str) -> None:
    """Add the images class by class in labels-file order, by name; a name twice: once_each's rule."""
    relpaths = images.relpaths

    def name_of(i: int) -> str:
        return file_name(relpaths[i])

    def place(where: Where) -> str:  # where: (the image's number in the columns,)
        return f"{root}/{relpaths[where[0] if where else 0].rsplit('/', 1)[0]}"

    for label in range(1, len(catalog.synsets) + 1):
        items: list[tuple[str, Where]] = [(name_of(i), (i,)) for i in sorted(images.by_label.get(label, ()),
                                                                              key=name_of)]
        for _, where in once_each(items, place, result, on_error):
            i = where[0] if where else 0
            result.add(relpaths[i], label, (images.offsets[i], images.sizes[i], images.crcs[i]))


# ------------------------------------------------------------------ the sample, in this shape


def write_sample(ilsvrc_sample: Path, out: Path) -> None:
    """The sample as timm's copy is laid out: shuffled samples over several shards per split.

    `<key>.cls`, `<key>.jpg`, `<key>.json` per sample (WebDataset's TarWriter writes a
    sample's members sorted by extension), key = original name without `.JPEG`, json
    `{"filename", "height", "label", "width"}` as copies derived from timm's show.
    The images are written untouched (a real timm copy holds TFDS's re-encodings of
    ImageNet's 22 CMYK JPEGs and its PNG, which differ from the archive's bytes).
    """
    from PIL import Image

    sample, folder = Path(ilsvrc_sample), Path(out)
    number = {s: i for i, s in enumerate(cls_synsets())}
    synset_of = {path: synset for path, synset in validation_images(sample)}

    def validation_image(p: Path) -> tuple[str, str]:
        return synset_of[p], p.name

    splits: dict[str, tuple[list[Path], int, int, Callable[[Path], tuple[str, str]]]] = {
        "train": (sorted((sample / "train").glob("*/*.JPEG")), 3, 4,
                  lambda p: (p.parent.name, f"{p.parent.name}/{p.name}")),
        "validation": (sorted(synset_of), 2, 2, validation_image),
    }
    split_info: dict[str, dict[str, Any]] = {}
    for split, (images, count, digits, describe) in splits.items():
        enough_for(len(images), count, split, "wds")
        random.Random(split).shuffle(images)
        names = [f"imagenet1k-{split}-{k:0{digits}d}.tar" for k in range(count)]
        lengths = []
        for k, shard in enumerate(names):
            part = images[k::count]
            lengths.append(len(part))
            with write_door.new_file(folder / shard) as f, tarfile.open(fileobj=f, mode="w",
                                                                        format=tarfile.PAX_FORMAT) as tar:
                for image in part:
                    synset, filename = describe(image)
                    with read_door.open_read(image) as f, Image.open(f) as im:
                        width, height = im.size
                    key = image.name[: -len(".JPEG")]
                    meta = {"filename": filename, "height": height, "label": number[synset], "width": width}
                    tar_add(tar, f"{key}.cls", str(number[synset]).encode(), mode=0o444)
                    tar_add(tar, f"{key}.jpg", read_door.read_bytes(image), mode=0o444)
                    tar_add(tar, f"{key}.json", json.dumps(meta).encode(), mode=0o444)
        split_info[split] = {"name": split, "filenames": names, "shard_lengths": lengths,
                             "num_samples": sum(lengths)}
    info = {"name": "imagenet1k", "splits": split_info}
    write_door.write_bytes(folder / "_info.json", (json.dumps(info, indent=2) + "\n").encode(), sync=False)


register(CopyKind(NAME, identify, assemble, rank=30, short="wds", write_sample=write_sample, folder=True))
