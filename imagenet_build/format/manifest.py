"""manifest.json: the commit point of a build.

Written atomically (temp name, fsync, rename), rewritten as shards complete with
`"complete": false`, and a last time with `"complete": true`. Resume trusts only
the shards it lists. It holds nothing that varies between runs (no times, no
worker count), so an interrupted and resumed build ends with the same bytes as
an uninterrupted one.

The manifest's schema (the typed fields every reader relies on) and its one reader, `read_manifest`,
which holds a manifest to them; its one writer. A build's figures, and the manifest assembled from
them, are build_figures.py's. labels.txt, the class of each label for builds whose classes are not
the labels file's, is written here too. So are the two files that make a complete build a TensorFlow
Datasets folder (format/tfds_metadata.py): written just before the manifest that says complete,
removed before one that does not. Every manifest names the version of imagenet-build that wrote it.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Mapping, Sequence
from typing import Any, Dict, List, TypedDict, Union, cast, get_origin, get_type_hints

from imagenet_build._version import __version__
from imagenet_build.format import tfds_metadata
from imagenet_build.format.naming import LABELS_NAME, MANIFEST_NAME, parse_shard_name
from imagenet_build.format.record_schema import EXTRA, IMAGE_KEY, LABEL_KEY, ONE_VALUE, SCHEMA
from imagenet_build.infra import storage, write_door
from imagenet_build.infra.errors import PathLike
from imagenet_build.infra.jsonfile import read_json, shape_problem

FORMAT = 2  # the manifest's version: bump when a reader of the old one would misread the new
SHARD_INPUTS = "shards"  # manifest["inputs"]["shards"]: {shard name: its inputs' state}
# manifest["options"]["real_labels"]: "<file> sha256:<hex>" of the real.json a build's validation records carry the
# ReaL labels of (format.record_schema.REAL_LABELS); absent from other builds' manifests
REAL_LABELS_OPTION = "real_labels"


class ShardEntry(TypedDict, total=False):
    """One shard of a build, as manifest.json lists it."""

    split: str
    name: str
    records: int
    bytes: int
    sha256: str
    index_bytes: int
    index_sha256: str
    skipped: List[dict]  # inputs left out under --on-error skip: {file, label, reason}
    reencoded: List[dict]  # inputs stored re-encoded, or noted: {file, reencoded, note}
    fingerprint: str  # what the bytes depend on (plan.ShardSpec.fingerprint)
    resized: int  # resized builds: images decoded, resized and encoded


class Skipped(TypedDict):
    """An input a shard left out under --on-error skip."""

    file: str
    label: int
    reason: str


class Reencoded(TypedDict):
    """An input a shard stores re-encoded ("reencoded": why), or holds with a note (its name disagrees)."""

    file: str
    reencoded: str
    note: str


class LeftOut(TypedDict):
    """An input a split's listing left out, before any shard."""

    file: str
    reason: str


class SplitFigures(TypedDict, total=False):
    """One split of a build."""

    shards: int
    shards_done: int
    records: int
    bytes: int
    left_out: List[dict]
    label_counts: Dict[str, int]  # "<label>": records, once every shard is done
    encoding: str  # write_arrays: how its images are stored ("JPEG q95", "PNG")
    layout_threads: int  # write_arrays: the split's layout (convert's is in options, for both splits)


class Manifest(TypedDict, total=False):
    """manifest.json, the commit point of a build: written by convert and write_arrays, read by verify,
    resume, trainer-check and the readers. `read_manifest` checks every field against these types."""

    format: Union[int, str]
    complete: bool
    options: Dict[str, Any]  # the layout options: a rerun must repeat them
    inputs: Dict[str, Any]  # where the images came from, and each shard's inputs' state
    num_classes: int
    synsets: List[str]  # label k is synsets[k - 1]
    splits: Dict[str, SplitFigures]
    shards: List[ShardEntry]
    totals: Dict[str, int]
    ended: str  # an incomplete build whose run stopped: "interrupted" or "failed" (none: killed, or running)
    error: str  # "failed": the one line the run ended with
    imagenet_build_version: str  # the version of imagenet-build that wrote it (absent from those before 0.1.0's)


def carries_real_labels(manifest: Manifest) -> bool:
    """The manifest's word that every validation record carries image/class/real_labels (and no other does)."""
    return bool(manifest.get("options", {}).get(REAL_LABELS_OPTION))


def write_labels(output_dir: PathLike, synsets: Sequence[str]) -> None:
    """labels.txt: the synset (or class name) of label k on line k, atomically."""
    write_door.write_bytes(storage.join(output_dir, LABELS_NAME), "".join(f"{name}\n" for name in synsets).encode(),
                           within=output_dir)


# the fields a reader may rely on being there (the others are optional)
_REQUIRED = {
    Manifest: {"complete", "options", "num_classes", "synsets", "splits", "shards"},
    SplitFigures: {"shards", "records"},
    ShardEntry: {"split", "name", "records", "bytes", "sha256", "index_sha256", "skipped", "reencoded"},
}


READABLE = (1, 2)  # the formats this version reads: 1, a published build's, has this schema


def dumps(manifest: Manifest) -> bytes:
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()


def write_manifest(output_dir: PathLike, manifest: Manifest) -> Manifest:
    """Atomically: a temp file renamed, or one upload for an object store. A complete build's TFDS files are
    written first, an incomplete one's removed. Returns the manifest as written (with the version)."""
    written = cast(Manifest, dict(manifest, imagenet_build_version=__version__))
    if written.get("complete"):
        tfds_metadata.write_tfds_files(output_dir, tfds_documents(written))
    else:
        tfds_metadata.remove_tfds_files(output_dir)
    write_door.write_bytes(storage.join(output_dir, MANIFEST_NAME), dumps(written), within=output_dir)
    return written


def tfds_record_schema(manifest: Manifest) -> tfds_metadata.RecordSchema:
    """slim's schema as the build's records hold it: with image/class/real_labels where the manifest says so."""
    types = dict(SCHEMA, **EXTRA) if carries_real_labels(manifest) else SCHEMA
    return tfds_metadata.RecordSchema(types, ONE_VALUE, IMAGE_KEY, LABEL_KEY)


TFDS_DESCRIPTION = ("TF-slim's image records (build_imagenet_data's 15 features), written by imagenet-build: "
                    "its manifest.json says from what, and with which options.")


def tfds_documents(manifest: Manifest, shards: Mapping[str, tuple[int, int]] | None = None
                   ) -> dict[str, Mapping[str, Any]]:
    """features.json and dataset_info.json of a complete build: slim's features with the manifest's classes,
    each split's shard lengths and bytes; those of the manifest's shard entries, or `shards` ({shard name:
    (records, bytes)}: what verify found in the shards themselves)."""
    if shards is None:
        shards = {entry["name"]: (entry["records"], entry["bytes"]) for entry in manifest["shards"]}
    by_split: dict[str, list[tuple[int, int, int]]] = {}
    for name, (records, size) in shards.items():
        parsed = parse_shard_name(name)
        if parsed is not None:
            by_split.setdefault(parsed.split, []).append((parsed.number, records, size))
    splits = [tfds_metadata.SplitShards(split, [records for _, records, _ in sorted(numbered)],
                                        sum(size for _, _, size in numbered))
              for split, numbered in by_split.items()]
    encodings = {split.get("encoding") for split in manifest["splits"].values()}
    image_format = "png" if encodings == {"PNG"} else "jpeg"  # write_arrays' lossless=True: every split PNG
    schema = tfds_record_schema(manifest)
    return tfds_metadata.tfds_documents(tfds_metadata.features_json(schema, manifest["synsets"], image_format),
                                        tfds_metadata.dataset_info_json(splits, schema, TFDS_DESCRIPTION))


def read_manifest(output_dir: PathLike) -> Manifest | None:
    """The manifest dict, or None when there is none.

    ValueError ("<path>: <field>: <what is wrong>") when it is not ours, unreadable, or
    any field the readers rely on has the wrong shape: every reader (verify, resume,
    trainer-check, the one-shot script) goes through this one check.
    """
    path = storage.join(output_dir, MANIFEST_NAME)
    try:
        manifest = read_json(path)  # bounded, nesting bounded: one line for any bytes
    except FileNotFoundError:
        return None
    version = manifest.get("format") if isinstance(manifest, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT:
        raise ValueError(f"{path}: format {version}, written by a newer imagenet-build (this one reads formats "
                         f"up to {FORMAT}): upgrade imagenet-build")
    if type(version) is not int or version not in READABLE:  # a bool is no version, nor 2.0
        raise ValueError(f"{path}: not an imagenet-build manifest (no \"format\" this version reads: "
                         f"{', '.join(map(str, READABLE))})")
    problem = schema_problem(manifest)
    if problem:
        raise ValueError(f"{path}: {problem}")
    return manifest


_TYPE_NAMES = {int: "a whole number >= 0", str: "a string", bool: "true or false", list: "a list",
               dict: "an object"}


def _table(model: type) -> dict[str, tuple[type, bool]]:
    """field -> (the JSON type it must have, whether it must be there), from a TypedDict above."""
    hints = get_type_hints(model)
    return {key: (get_origin(hint) or hint, key in _REQUIRED[model]) for key, hint in hints.items()
            if key != "format"}  # format is checked first, by read_manifest


_TOP, _SPLIT, _SHARD = _table(Manifest), _table(SplitFigures), _table(ShardEntry)


def _field_problem(table: dict[str, tuple[type, bool]], record: Mapping[str, Any], where: str) -> str:
    for key, (kind, required) in table.items():
        if key not in record:
            if required:
                return f"{where}{key}: missing"
            continue
        value = record[key]
        # bool is an int in Python, and an int is no bool: check both ways
        ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        if ok and kind is int:
            ok = value >= 0
        if not ok:
            return f"{where}{key}: {json.dumps(value)[:40]} is not {_TYPE_NAMES[kind]}"
        if kind is list and key in _ITEMS:
            problem = _items_problem(value, key, f"{where}{key}")
            if problem:
                return problem
    return ""


_ITEMS = {"skipped": Skipped, "reencoded": Reencoded, "left_out": LeftOut}  # each item's keys: what readers look up
# per list: its items' keys, fetched at once, and their types in that order
_ITEM_TYPES = {key: (operator.itemgetter(*get_type_hints(model)), tuple(get_type_hints(model).values()))
               for key, model in _ITEMS.items()}


def _items_problem(items: List[Any], key: str, where: str) -> str:
    """The first item of a list of entries (skipped, reencoded, left_out) without its keys or with a value of
    another type, in words ("" where none): each item's types fetched at once (a resized ImageNet's 1.28 M
    re-encoded entries in ~0.3 s), the one that fails named by the shape's own words."""
    getter, types = _ITEM_TYPES[key]
    for number, item in enumerate(items):
        try:
            if tuple(map(type, getter(item))) == types:
                continue
        except (KeyError, TypeError):  # a key missing; a list or a string for an object
            pass
        return shape_problem(item, _ITEMS[key], f"{where}[{number}]")
    return ""


def _options_problem(options: Mapping[str, Any]) -> str:
    """The options a reader takes from the manifest: strings where given."""
    for option in ("index_dir", REAL_LABELS_OPTION):
        value = options.get(option)
        if value is not None and not isinstance(value, str):
            return f"options.{option}: not a string"
    return ""


def _inputs_problem(inputs: Mapping[str, Any]) -> str:
    """What readers look up under inputs: each kept shard's inputs' state (resume: {shard name: state}), and the copy
    the build came from (verify: an object, its kind and classes)."""
    return (shape_problem(inputs.get(SHARD_INPUTS, {}), Dict[str, str], f"inputs.{SHARD_INPUTS}")
            or shape_problem(inputs.get("source", {}), Dict[str, Any], "inputs.source"))


def shard_entry_problem(entry: Any) -> str:
    """"<field>: <what is wrong>" for a shard entry of the wrong shape (one a task's receipt carries), or ""."""
    if not isinstance(entry, dict):
        return "not an object"
    return _field_problem(_SHARD, entry, "")


def schema_problem(manifest: Manifest) -> str:
    """"<field>: <what is wrong>" for the first field of the wrong shape, or ""."""
    problem = _field_problem(_TOP, manifest, "")
    if problem:
        return problem
    synsets = manifest["synsets"]
    if not all(isinstance(s, str) and s for s in synsets):
        return "synsets: every entry must be a non-empty string"
    if len(synsets) != manifest["num_classes"]:
        return f"synsets: {len(synsets)} entries for num_classes {manifest['num_classes']}"
    problem = _options_problem(manifest["options"]) or _inputs_problem(manifest.get("inputs", {}))
    if problem:
        return problem
    for split, figures in manifest["splits"].items():
        if not isinstance(figures, dict):
            return f"splits.{split}: not an object"
        problem = _field_problem(_SPLIT, figures, f"splits.{split}.")
        if problem:
            return problem
        counts = figures.get("label_counts", {})
        if not all(k.isdigit() and isinstance(v, int) and not isinstance(v, bool) and v > 0
                   for k, v in counts.items()):
            return f"splits.{split}.label_counts: expected {{\"<label>\": <count of at least 1>}}"
    for number, shard in enumerate(manifest["shards"]):
        if not isinstance(shard, dict):
            return f"shards[{number}]: not an object"
        problem = _field_problem(_SHARD, shard, f"shards[{number}].")
        if problem:
            return problem
    return ""
