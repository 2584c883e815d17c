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
the pool; a worker then reads each image with one pread. An entry's relpath is
`<shard file>/<original name>`: its basename stays the original name (the record's
filename, the key of boxes and --subset), and its folder names the shard file
under the split's root, so no new field is needed and nothing else changes.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import tarfile
from array import array
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Dict, List, NamedTuple, Tuple, Union

from imagenet_build.infra import storage
from imagenet_build.infra.errors import InputError, PathLike, UsageError, input_errors
from imagenet_build.model import SplitInput, Where, file_name
from imagenet_build.sources.base import VALIDATION_NAME, Reader, once_each, refuse_empty_pieces, will_need
from imagenet_build.sources.copies import Copy, Layout, Piece, listing, register
from imagenet_build.sources.tars import BLOCK, Member, list_members, plain_members, read_member, read_range

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.infra.workers import Workers
    from imagenet_build.model import ImageEntry, ShardSpec

NAME = "WebDataset shards"
SHARD = re.compile(r"^(?P<prefix>.+)-(?P<split>train|validation|val)-(?P<number>\d+)\.tar$")
TRAIN_NAME = re.compile(r"^(n\d{8})_\d+\.JPEG$")
IMAGENET_KEY = re.compile(r"^(n\d{8}_\d+|ILSVRC2012_val_\d{8})$")
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png")
SPLITS = {"train": "train", "validation": "validation", "val": "validation"}

SampleMember = Tuple[int, int, int, int]  # (data offset, data size, member number in the shard, header CRC)
Sample = Dict[str, SampleMember]  # a sample's members by extension
# list_shard's result: relpaths, offsets, sizes, header CRCs, synset numbers in cls_synsets() (or -1), names
# derived from keys, ignored members, left out [(relpath, reason)]
ShardColumns = Tuple[List[str], "array[int]", "array[int]", "array[int]", "array[int]", int, List[str],
                     List[Tuple[str, str]]]


def _sorted_synsets() -> tuple[str, ...]:
    """What `.cls` indexes: the 1000 ILSVRC2012 synsets, sorted (TFDS's imagenet2012 labels, timm's order)."""
    from imagenet_build.catalog.classes import DEFAULT_LABELS_FILE, read_labels_file

    synsets = tuple(read_labels_file(DEFAULT_LABELS_FILE))
    assert list(synsets) == sorted(synsets)
    return synsets


_SYNSETS: tuple[str, ...] = ()
_VALIDATION_LABELS: dict[str, list[str]] = {}


def cls_synsets() -> tuple[str, ...]:
    global _SYNSETS
    if not _SYNSETS:
        _SYNSETS = _sorted_synsets()
    return _SYNSETS


def _validation_labels(path: str) -> list[str]:
    if path not in _VALIDATION_LABELS:
        from imagenet_build.catalog.classes import read_validation_labels

        _VALIDATION_LABELS[path] = read_validation_labels(path)
    return _VALIDATION_LABELS[path]


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


def assemble(pieces: list[Piece]) -> Copy:
    files = _shard_files(pieces)
    copy = Copy(NAME, NAME)
    if "train" in files:
        shards = [p for _, p in files["train"]]
        copy.scan_train = lambda catalog, on_error, pool: scan_shards(
            "train", shards, catalog, on_error, pool, None)
    if "validation" in files:
        shards_v = [p for _, p in files["validation"]]
        copy.scan_validation = lambda catalog, on_error, pool, labels, labels_file: scan_shards(
            "validation", shards_v, catalog, on_error, pool, str(labels_file))
    return copy


# ------------------------------------------------------------------ the scan


def _split_member(name: str) -> tuple[str, str] | None:
    """(key, extension) as WebDataset splits a member name: at the first dot of its last part; None without one."""
    folder, _, base = name.rpartition("/")
    if "." not in base:
        return None
    stem, _, ext = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), ext


def _original_name(key: str, read_json: Callable[[], Any]) -> tuple[str, bool]:
    """(the sample's original file name, whether it was only derived from the key)."""
    stem = key.rsplit("/", 1)[-1]
    if IMAGENET_KEY.match(stem):
        return stem + ".JPEG", False
    meta = read_json()
    if isinstance(meta, dict):
        name = meta.get("filename") or meta.get("file_name")
        if isinstance(name, str) and name.strip("/"):
            return file_name(name), False
    return stem + ".JPEG", True


class _Unusable(Exception):
    """A sample that cannot be built; its message says why (list_shard fails or leaves it out)."""


def list_shard(
    path: str, shardrel: str, split: str, on_error: str, validation_labels_file: str | None
) -> ShardColumns:
    """A worker task: one shard file's samples as compact columns.

    Returns (relpaths, offsets, sizes, header CRCs, synset numbers in cls_synsets() or -1, names
    derived from keys, ignored members, left out [(relpath, reason)]). Reads the tar headers and
    each sample's `.cls` (and its `.json` only when the key is not an ImageNet name).
    """
    synsets = cls_synsets()
    number_of = {s: i for i, s in enumerate(synsets)}
    relpaths: list[str] = []
    offsets, sizes, crcs, found = array("Q"), array("Q"), array("Q"), array("h")
    ignored: list[str] = []
    left_out: list[tuple[str, str]] = []
    derived = 0
    with input_errors(path, expected="a .tar shard", missing="shard not found"):
        size = storage.size(path)
        with storage.open_read(path, random_access=True) as f:
            source: Union[int, IO[bytes]] = f if storage.is_url(path) else f.fileno()
            listed = None
            if isinstance(source, int):
                if hasattr(os, "posix_fadvise"):  # only the header pages: no read-ahead of the images between them
                    os.posix_fadvise(source, 0, 0, os.POSIX_FADV_RANDOM)
                # with the bytes of the small members (.cls, .json), read with their headers
                listed = plain_members(source, size, path, small_data=True)
            if listed is None:  # anything but plain ustar headers: tarfile's listing
                listed = list_members(f, size, path), {}
            samples = _samples(listed[0], shardrel, path, ignored)
            small = listed[1]

            def data(member: SampleMember) -> bytes:
                """A small member's bytes: read with its header when it was listed, else by offset."""
                held = small.get(member[2])
                return held if held is not None else read_range(source, member[0], member[1])

            for key, members in samples.items():
                try:
                    image, cls = _image_and_cls(members, data, len(synsets))
                    name, was_derived = _original_name(key, partial(_read_json, members, data))
                    derived += was_derived
                    synset = _synset_of_name(name, validation_labels_file)
                    if synset is not None and synset != synsets[cls]:
                        raise _Unusable(f".cls {cls} is {synsets[cls]}, but its name {name} is of {synset}")
                except _Unusable as e:
                    if on_error == "fail":
                        raise InputError(path, f"sample {key}: {e}; --on-error skip builds without it") from None
                    left_out.append((f"{shardrel}/{key}", str(e)))
                    continue
                relpaths.append(f"{shardrel}/{name}")
                offsets.append(image[0])
                sizes.append(image[1])
                crcs.append(image[3])
                found.append(number_of.get(synset or synsets[cls], -1))
    return relpaths, offsets, sizes, crcs, found, derived, ignored, left_out


def _samples(members: list[Member], shardrel: str, path: str, ignored: list[str]) -> dict[str, Sample]:
    """The shard's files grouped by key, in shard order; names without a key (or hidden ones) go to `ignored`."""
    samples: dict[str, Sample] = {}
    for number, (name, offset, length, is_file, crc) in enumerate(members):
        if not is_file:
            continue
        split = _split_member(name)
        if split is None or name.rsplit("/", 1)[-1].startswith("."):  # a hidden file has an empty key
            ignored.append(f"{shardrel}:{name}")
            continue
        key, ext = split
        sample = samples.setdefault(key, {})
        if ext in sample:
            raise InputError(path, f"sample {key}: two .{ext} members (a key may appear once)")
        sample[ext] = (offset, length, number, crc)
    return samples


def _image_and_cls(members: Sample, data: Callable[[SampleMember], bytes], classes: int) -> tuple[SampleMember, int]:
    """A sample's image member and its `.cls` label, which must be in 0..classes-1."""
    image = next((members[e] for e in members if e.rsplit(".", 1)[-1].lower() in IMAGE_EXTENSIONS), None)
    if image is None:
        raise _Unusable(f"no image member (.jpg), only {', '.join('.' + e for e in sorted(members))}")
    if "cls" not in members:
        raise _Unusable("no .cls member: its label is unknown")
    text = data(members["cls"])
    try:
        cls = int(text.strip())
    except ValueError:
        raise _Unusable(f".cls is not a number: {text[:20]!r}") from None
    if not 0 <= cls < classes:
        raise _Unusable(f".cls {cls} is outside 0..{classes - 1} (the ILSVRC2012 classes)")
    return image, cls


def _read_json(members: Sample, data: Callable[[SampleMember], bytes]) -> Any:
    """A sample's `.json`, or None when it has none or it does not parse."""
    if "json" not in members:
        return None
    try:
        return json.loads(data(members["json"]))
    except ValueError:
        return None


def _synset_of_name(name: str, validation_labels_file: str | None) -> str | None:
    """The synset an ImageNet file name says (a validation name's by the labels file), or None."""
    train_name = TRAIN_NAME.match(name)
    if train_name:
        return train_name.group(1)
    val_name = VALIDATION_NAME.match(name)
    if val_name and validation_labels_file:
        labels = _validation_labels(validation_labels_file)
        n = int(val_name.group(1))
        if not 1 <= n <= len(labels):
            raise _Unusable(f"no label: {validation_labels_file} has {len(labels)} lines, this is image {n}")
        return labels[n - 1]
    return None


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
        path = relpaths[i]
        return path[path.rindex("/") + 1:]

    def place(where: Where) -> str:  # where: (the image's number in the columns,)
        return f"{root}/{relpaths[where[0] if where else 0].rsplit('/', 1)[0]}"

    for label in range(1, len(catalog.synsets) + 1):
        items: list[tuple[str, Where]] = [(name_of(i), (i,)) for i in sorted(images.by_label.get(label, ()),
                                                                              key=name_of)]
        for _, where in once_each(items, place, result, on_error):
            i = where[0] if where else 0
            result.add(relpaths[i], label, (images.offsets[i], images.sizes[i], images.crcs[i]))


# ------------------------------------------------------------------ reading in a worker


class ShardReader(Reader):
    """A shard's images by byte range from the WebDataset shard files: one pread each.

    An output shard draws from many input shard files (the plan shuffles), so the
    open files are kept in a small LRU; the next READ_AHEAD ranges are announced
    to the kernel, as the other readers do.
    """

    OPEN_FILES = 64

    def __init__(self, spec: ShardSpec) -> None:
        super().__init__(spec)
        # shard file -> fd (or file object for a URL)
        self._open: OrderedDict[str, Union[int, IO[bytes]]] = OrderedDict()
        self._stamps: dict[str, str] = {}

    def close(self) -> None:
        for source in self._open.values():
            os.close(source) if isinstance(source, int) else source.close()
        self._open.clear()

    def _source(self, shardrel: str) -> Union[int, IO[bytes]]:
        source = self._open.get(shardrel)
        if source is not None:
            self._open.move_to_end(shardrel)
            return source
        path = storage.join(self.spec.source_root, shardrel)
        with input_errors(path, expected="a .tar shard", missing="shard file vanished since it was listed"):
            source = storage.open_read(path, random_access=True) if storage.is_url(path) else os.open(path, os.O_RDONLY)
        self._open[shardrel] = source
        if len(self._open) > self.OPEN_FILES:
            _, old = self._open.popitem(last=False)
            os.close(old) if isinstance(old, int) else old.close()
        return source

    def announce(self, number: int, entry: ImageEntry) -> None:
        try:
            source = self._source(entry.relpath.rsplit("/", 1)[0])
        except InputError:
            return  # read() reports it, in order
        if isinstance(source, int):
            will_need(source, entry.offset - BLOCK, BLOCK + entry.size)

    def read(self, number: int) -> tuple[bytes, str]:
        self.read_ahead(number)
        entry = self.spec.entries[number]
        shardrel, name = entry.relpath.rsplit("/", 1)
        shard = storage.join(self.spec.source_root, shardrel)
        if shardrel not in self._stamps:
            self._stamps[shardrel] = self.identity(self.spec, entry).split("|", 1)[1]
        self.identities.append(f"{shardrel}@{entry.offset}:{entry.size}|{self._stamps[shardrel]}")
        data, member = read_member(self._source(shardrel), entry.offset, entry.size, entry.extra, f"{shard}:{name}")
        return data, f"{shard}:{member}"

    @staticmethod
    def identity(spec: ShardSpec, entry: ImageEntry) -> str:
        """Its place in its shard file, and that file's size and modification time."""
        shardrel = entry.relpath.rsplit("/", 1)[0]
        try:
            stamp = storage.stamp(storage.join(spec.source_root, shardrel))
        except FileNotFoundError:
            stamp = "absent"
        except OSError as e:
            stamp = f"unreadable: {e.strerror}"
        return f"{shardrel}@{entry.offset}:{entry.size}|{stamp}"



# ------------------------------------------------------------------ the sample, in this layout


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o444
    tar.addfile(info, io.BytesIO(data))


def write_sample(ilsvrc_sample: PathLike, out: PathLike) -> None:
    """The sample as timm's copy is laid out: shuffled samples over several shards per split.

    `<key>.cls`, `<key>.jpg`, `<key>.json` per sample (WebDataset's TarWriter writes a
    sample's members sorted by extension), key = original name without `.JPEG`, json
    `{"filename", "height", "label", "width"}` as copies derived from timm's show.
    The images are written untouched (a real timm copy holds TFDS's re-encodings of
    ImageNet's 22 CMYK JPEGs and its PNG, which differ from the archive's bytes).
    """
    from PIL import Image

    from imagenet_build.sources.samples import enough_for

    sample, folder = Path(ilsvrc_sample), Path(out)
    number = {s: i for i, s in enumerate(cls_synsets())}
    validation_synsets = (sample / "validation_labels.txt").read_text().split()

    def validation_image(p: Path) -> tuple[str, str]:
        match = VALIDATION_NAME.match(p.name)
        if match is None:
            raise InputError(p, "not an ILSVRC2012_val_<8 digits>.JPEG name: not the ILSVRC sample")
        return validation_synsets[int(match.group(1)) - 1], p.name

    splits: dict[str, tuple[list[Path], int, int, Callable[[Path], tuple[str, str]]]] = {
        "train": (sorted((sample / "train").glob("*/*.JPEG")), 3, 4,
                  lambda p: (p.parent.name, f"{p.parent.name}/{p.name}")),
        "validation": (sorted((sample / "validation").glob("*.JPEG")), 2, 2, validation_image),
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
            with tarfile.open(folder / shard, "w", format=tarfile.PAX_FORMAT) as tar:
                for image in part:
                    synset, filename = describe(image)
                    with Image.open(image) as im:
                        width, height = im.size
                    key = image.name[: -len(".JPEG")]
                    meta = {"filename": filename, "height": height, "label": number[synset], "width": width}
                    _add(tar, f"{key}.cls", str(number[synset]).encode())
                    _add(tar, f"{key}.jpg", image.read_bytes())
                    _add(tar, f"{key}.json", json.dumps(meta).encode())
        split_info[split] = {"name": split, "filenames": names, "shard_lengths": lengths,
                             "num_samples": sum(lengths)}
    info = {"name": "imagenet1k", "splits": split_info}
    (folder / "_info.json").write_text(json.dumps(info, indent=2) + "\n")


register(Layout(NAME, identify, assemble, short="wds", write_sample=write_sample, folder=True))
