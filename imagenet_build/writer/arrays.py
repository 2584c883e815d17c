"""Arrays in memory (CIFAR-10 and the like) -> the same sharded format, indexes and manifest.

Labels come as datasets ship them, 0-based class ids; records hold them 1-based
like every other build. Order and shard layout are slim's (seed-12345 shuffle,
linspace), so the bytes are a function of the arrays and the options alone.
The folder is held as convert holds it (lock.py): one writer at a time.
"""

from __future__ import annotations

import io
import json
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from imagenet_build.encode.example import encode_example_parts
from imagenet_build.format.build_figures import assemble, manifest_base, split_figures
from imagenet_build.format.destination import destination
from imagenet_build.format.folder_contents import folder_entries
from imagenet_build.format.manifest import (
    Manifest,
    ShardEntry,
    SplitFigures,
    read_manifest,
    write_labels,
)
from imagenet_build.format.naming import (
    MANIFEST_NAME,
    SPLIT_NAME,
    index_name,
    is_shard_of,
    parse_shard_name,
    shard_name,
)
from imagenet_build.infra import storage, write_door
from imagenet_build.infra.errors import BuildError, PathLike, check_flag, check_path
from imagenet_build.infra.optional import require
from imagenet_build.plan import shard_ranges, shuffled_order
from imagenet_build.request import QUALITY, is_quality
from imagenet_build.writer.commit import ShardFacts, commit, manifest_problem, read_facts, reported
from imagenet_build.writer.output_folder import locked
from imagenet_build.writer.shard_writer import shard_entry, write_records


def _encode(pixels: Any, lossless: bool, quality: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    image = Image.fromarray(pixels, "RGB")
    if lossless:
        image.save(out, "PNG")
    else:
        image.save(out, "JPEG", quality=quality)
    return out.getvalue()


def write_arrays(images: Any, labels: Any, output_dir: PathLike, split: str = "train", num_shards: int = 1, *,
                 class_names: Sequence[Any] | None = None, quality: int = 95, lossless: bool = False,
                 layout_threads: int = 1, index_dir: PathLike | None = None) -> Manifest:
    """Write uint8 images [N, H, W, 3] with integer labels [N] (0-based) as `<split>-NNNNN-of-SSSSS` shards.

    Each image is JPEG-encoded at `quality`, or PNG with lossless=True (image/format then says PNG).
    class_names[k] is the synset and text of class k (default: the folder's classes, else the
    number). Returns the manifest. Writing another split into the same folder adds it to the
    manifest, each split with its own encoding and layout (the index folder must be the same: the
    manifest records one); writing a split again replaces it.
    """
    output_dir = check_path(output_dir, "output_dir")
    index_dir = None if index_dir is None else check_path(index_dir, "index_dir")
    lossless = check_flag(lossless, "lossless")
    np = require("numpy", "write_arrays")

    images = np.asarray(images)
    labels = np.asarray(labels).reshape(-1)
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise BuildError(f"images must be uint8 [N, H, W, 3], got {images.dtype} {list(images.shape)}")
    if len(labels) != len(images):
        raise BuildError(f"{len(images)} images but {len(labels)} labels")
    if not len(images):
        raise BuildError("no images to write")
    if not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0:
        raise BuildError("labels must be integers from 0 (class ids)")
    if not SPLIT_NAME.fullmatch(str(split)):
        raise BuildError(f"split {split!r}: a split is named with letters, digits, '_', '.' and '-' (train, test, ...)")
    if not is_quality(quality):
        raise BuildError(f"quality must be {QUALITY[0]}..{QUALITY[1]}, not {quality!r}")
    names = _class_names(class_names) if class_names is not None else None
    if names is not None and labels.max() >= len(names):
        raise BuildError(f"label {int(labels.max())} but only {len(names)} class names")
    ranges = shard_ranges(len(images), num_shards, layout_threads)
    if any(begin == end for begin, end in ranges):
        raise BuildError(f"{len(images)} images cannot fill {num_shards} shards")
    if storage.is_url(output_dir) or (index_dir is not None and storage.is_url(index_dir)):
        raise BuildError(f"{output_dir}: write_arrays writes local folders (copy the folder to the store after)")
    dest = destination(output_dir, index_dir)
    with locked(dest):
        return _write_split(images, labels, Path(dest.output), Path(dest.index), dest.label_for_manifest(), split,
                            num_shards, ranges, names, quality, lossless, layout_threads)


def _class_names(given: Sequence[Any]) -> list[str]:
    """Each class's synset and text: one line of labels.txt each, so non-empty, one line, UTF-8, each once."""
    names = [str(n) for n in given]
    for name in names:
        if not name.strip() or "\n" in name or "\r" in name:
            raise BuildError(f"class name {name!r}: class names are non-empty, on one line")
        try:  # the records' image/class/text and labels.txt are UTF-8: a lone surrogate is not text
            name.encode("utf-8")
        except UnicodeEncodeError as e:
            raise BuildError(f"class name {name!r}: not encodable as UTF-8 ({e.reason} at {e.start}), as "
                             "labels.txt and image/class/text are") from None
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise BuildError(f"class name {repeated[0]!r} given more than once: each class needs its own name")
    return names


def _previous_build(output_dir: Path, index_label: str) -> Manifest:
    """The arrays build the folder holds already (its other splits are kept), or {}; refused when it is
    unreadable, a convert build, or one with its indexes elsewhere."""
    try:  # before anything is written: an unreadable manifest is refused here as convert refuses it
        previous = read_manifest(output_dir) or {}
    except ValueError as e:
        raise BuildError(f"{e}; remove it, or write the arrays to another folder") from None
    if previous and previous.get("options", {}).get("source") != "arrays":
        raise BuildError(f"{output_dir}: holds a build of convert; write the arrays to another folder")
    if previous and previous["options"].get("index_dir") != index_label:
        raise BuildError(f"{output_dir}: its splits' indexes are in {previous['options'].get('index_dir')}, not "
                         f"{index_label}; write this split's there too (the manifest records one index folder)")
    return previous


def _write_split(images: Any, labels: Any, output_dir: Path, index_dir: Path, index_label: str, split: str,
                 num_shards: int, ranges: list[tuple[int, int]], given_names: list[str] | None, quality: int,
                 lossless: bool, layout_threads: int) -> Manifest:
    """write_arrays' work, with the folders held."""
    previous = _previous_build(output_dir, index_label)
    names = given_names or previous.get("synsets") or [str(k) for k in range(int(labels.max()) + 1)]
    if labels.max() >= len(names):
        raise BuildError(f"label {int(labels.max())} but the folder's build has {len(names)} classes")
    if previous.get("synsets") not in (None, names):
        raise BuildError(f"{output_dir}: holds a build with other classes; write the arrays elsewhere")
    facts = _kept_facts(previous, output_dir, index_dir, split)
    write_door.make_folder(index_dir)
    _clear_split(output_dir, index_dir, split, {shard_name(split, k, num_shards) for k in range(num_shards)})
    order = shuffled_order(len(images))
    suffix, image_format = (".png", b"PNG") if lossless else (".jpg", b"JPEG")

    def payloads(begin: int, end: int) -> Iterator[tuple[bytes, bytes, bytes]]:
        for i in order[begin:end]:
            label = int(labels[i]) + 1
            yield encode_example_parts(
                encoded=_encode(images[i], lossless, quality),
                filename=f"{split}_{i:08d}{suffix}",
                height=images.shape[1],
                width=images.shape[2],
                label=label,
                synset=names[label - 1],
                text=names[label - 1],
                image_format=image_format,
            )

    shards = []
    for k, (begin, end) in enumerate(ranges):
        name = shard_name(split, k, num_shards)
        shards.append(shard_entry(split, name, write_records(name, output_dir, index_dir, payloads(begin, end))))
        facts[name] = reported(shards[-1])
    counts = array("Q", [0] * len(names))
    for label in labels:
        counts[int(label)] += 1
    figures = split_figures(num_shards, shards, [], {k + 1: n for k, n in enumerate(counts)})
    figures["encoding"] = "PNG" if lossless else f"JPEG q{quality}"
    figures["layout_threads"] = layout_threads
    held = [entry.name for entry in folder_entries(str(output_dir), str(index_dir)) if entry.kind == "shard"]
    manifest = commit(output_dir, _manifest(previous, split, figures, shards, names, index_label), facts, held)
    write_labels(output_dir, names)
    return json.loads(json.dumps(manifest))


def _kept_facts(previous: Manifest, output_dir: Path, index_dir: Path, split: str) -> dict[str, ShardFacts | None]:
    """The facts of the shards of the folder's other splits, which the manifest keeps, read from their files;
    refused before anything is written where the folder's manifest disagrees with its shards (writer/commit.py:
    each entry, each split's figures, a shard of another split that it does not list)."""
    if not previous:
        return {}
    facts = {entry["name"]: read_facts(str(output_dir / entry["name"]), str(index_dir / index_name(entry["name"])))
             for entry in previous["shards"]}
    others = [entry.name for entry in folder_entries(str(output_dir), str(index_dir))
              if entry.kind == "shard" and not is_shard_of(entry.name, split)]
    problem = manifest_problem(previous, facts, others)
    if problem:
        raise BuildError(f"{output_dir / MANIFEST_NAME}: {problem}; imagenet-build verify says what else is wrong "
                         "(write the arrays to another folder)")
    return {entry["name"]: facts[entry["name"]] for entry in previous["shards"] if entry["split"] != split}


def _manifest(previous: Manifest, split: str, figures: SplitFigures, shards: list[ShardEntry], names: list[str],
              index_label: str) -> Manifest:
    """The folder's manifest: the previous one's other splits, and this one."""
    kept = [s for s in previous.get("shards", []) if s["split"] != split]
    all_shards = sorted(kept + shards, key=lambda s: (s["split"] != "train", s["name"]))
    splits = {s: v for s, v in previous.get("splits", {}).items() if s != split}
    splits[split] = figures
    options = {"source": "arrays", "index_dir": index_label}  # each split's encoding and layout: its own
    base = manifest_base(options, {"arrays": {s: v["records"] for s, v in splits.items()}}, names)
    return assemble(base, dict(sorted(splits.items())), all_shards, complete=True)


def _clear_split(output_dir: Path, index_dir: Path, split: str, planned: set[str]) -> None:
    """Remove the split's shards of another layout, their indexes, and temporary files left by an
    interrupted write: a folder holding train-*-of-00004 beside train-*-of-00002 reads as one split."""
    def stale(shard: str) -> bool:
        parsed = parse_shard_name(shard)
        return parsed is not None and parsed.split == split and shard not in planned

    for entry in folder_entries(str(output_dir), str(index_dir)):
        if entry.kind == "temp" or (entry.kind in ("shard", "index") and stale(entry.shard)):
            write_door.remove(entry.path)
