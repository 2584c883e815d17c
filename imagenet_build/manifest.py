"""manifest.json: the commit point of a build.

Written atomically (temp name, fsync, rename), rewritten as shards complete with
`"complete": false`, and a last time with `"complete": true`. Resume trusts only
the shards it lists. It holds nothing that varies between runs (no times, no
worker count), so an interrupted and resumed build ends with the same bytes as
an uninterrupted one.
"""

from __future__ import annotations

import json
from typing import Any

from imagenet_build import storage
from imagenet_build.errors import PathLike
from imagenet_build.naming import MANIFEST_NAME

FORMAT = 2  # the manifest's version: bump when a reader of the old one would misread the new
Manifest = dict[str, Any]  # the parsed JSON document; schema_problem() says which shape readers rely on

READABLE = {"imagenet-build/1": 1, 1: 1, 2: 2}  # what this version reads ("imagenet-build/1": the first)


def dumps(manifest: Manifest) -> bytes:
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()


def write_manifest(output_dir: PathLike, manifest: Manifest) -> None:
    """Atomically: a temp file renamed, or one upload for an object store."""
    storage.write_bytes(storage.join(output_dir, MANIFEST_NAME), dumps(manifest))


def read_manifest(output_dir: PathLike) -> Manifest | None:
    """The manifest dict, or None when there is none.

    ValueError ("<path>: <field>: <what is wrong>") when it is not ours, unreadable, or
    any field the readers rely on has the wrong shape: every reader (verify, resume,
    trainer-check, the one-shot script) goes through this one check.
    """
    path = storage.join(output_dir, MANIFEST_NAME)
    try:
        text = storage.read_bytes(path).decode("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    try:
        manifest = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    version = manifest.get("format") if isinstance(manifest, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT:
        raise ValueError(f"{path}: format {version}, written by a newer imagenet-build (this one reads formats "
                         f"up to {FORMAT}): upgrade imagenet-build")
    if version not in READABLE or isinstance(version, bool):
        raise ValueError(f"{path}: not an imagenet-build manifest (no \"format\" this version reads: "
                         f"{', '.join(map(str, sorted(READABLE.values())))})")
    problem = schema_problem(manifest)
    if problem:
        raise ValueError(f"{path}: {problem}")
    return manifest


# The shape every reader relies on: field -> (type, required). Nested tables below.
_INT, _STR, _BOOL, _LIST, _DICT = int, str, bool, list, dict
_TOP = {
    "complete": (_BOOL, True),
    "options": (_DICT, True),
    "inputs": (_DICT, False),
    "num_classes": (_INT, True),
    "synsets": (_LIST, True),
    "splits": (_DICT, True),
    "shards": (_LIST, True),
    "totals": (_DICT, False),
}
_SPLIT = {
    "shards": (_INT, True),
    "shards_done": (_INT, False),
    "records": (_INT, True),
    "bytes": (_INT, False),
    "left_out": (_LIST, False),
    "label_counts": (_DICT, False),
}
_SHARD = {
    "split": (_STR, True),
    "name": (_STR, True),
    "records": (_INT, True),
    "bytes": (_INT, True),
    "sha256": (_STR, True),
    "index_bytes": (_INT, False),
    "index_sha256": (_STR, True),
    "skipped": (_LIST, True),
    "reencoded": (_LIST, True),
    "fingerprint": (_STR, False),
    "resized": (_INT, False),  # resized builds: images decoded, resized and encoded
}
_TYPE_NAMES = {_INT: "a whole number >= 0", _STR: "a string", _BOOL: "true or false", _LIST: "a list",
               _DICT: "an object"}


def _field_problem(table: dict[str, tuple[type, bool]], record: dict[str, Any], where: str) -> str:
    for key, (kind, required) in table.items():
        if key not in record:
            if required:
                return f"{where}{key}: missing"
            continue
        value = record[key]
        # bool is an int in Python, and an int is no bool: check both ways
        ok = isinstance(value, kind) and (kind is _BOOL or not isinstance(value, bool))
        if ok and kind is _INT:
            ok = value >= 0
        if not ok:
            return f"{where}{key}: {json.dumps(value)[:40]} is not {_TYPE_NAMES[kind]}"
    return ""


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
    index_dir = manifest["options"].get("index_dir")
    if index_dir is not None and not isinstance(index_dir, str):
        return "options.index_dir: not a string"
    for split, figures in manifest["splits"].items():
        if not isinstance(figures, dict):
            return f"splits.{split}: not an object"
        problem = _field_problem(_SPLIT, figures, f"splits.{split}.")
        if problem:
            return problem
        counts = figures.get("label_counts", {})
        if not all(k.isdigit() and isinstance(v, int) and not isinstance(v, bool) for k, v in counts.items()):
            return f"splits.{split}.label_counts: expected {{\"<label>\": <count>}}"
    for number, shard in enumerate(manifest["shards"]):
        if not isinstance(shard, dict):
            return f"shards[{number}]: not an object"
        problem = _field_problem(_SHARD, shard, f"shards[{number}].")
        if problem:
            return problem
    return ""
