"""manifest.json: the commit point of a build.

Written atomically (temp name, fsync, rename), rewritten as shards complete with
`"complete": false`, and a last time with `"complete": true`. Resume trusts only
the shards it lists. It holds nothing that varies between runs (no times, no
worker count), so an interrupted and resumed build ends with the same bytes as
an uninterrupted one.
"""

import json

from imagenet_build import storage

MANIFEST_NAME = "manifest.json"
FORMAT = "imagenet-build/1"


def index_dir_of(output_dir, manifest, override=None):
    """Where a build's DALI indexes are: as given, as its manifest records it, else <output>/dali_idx."""
    from imagenet_build.dali_index import DEFAULT_INDEX_DIR

    if override:
        return str(override)
    label = (manifest or {}).get("options", {}).get("index_dir")
    if label and (storage.is_url(label) or label.startswith("/")):
        return label
    return storage.join(output_dir, label or DEFAULT_INDEX_DIR)


def dumps(manifest):
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()


def write_manifest(output_dir, manifest):
    """Atomically: a temp file renamed, or one upload for an object store."""
    storage.write_bytes(storage.join(output_dir, MANIFEST_NAME), dumps(manifest))


def read_manifest(output_dir):
    """The manifest dict, or None when there is none. ValueError when it is not ours or unreadable."""
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
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{path}: not an imagenet-build manifest (format {FORMAT})")
    return manifest
