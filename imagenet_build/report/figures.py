"""What a build folder says of itself, as the page shows it: the manifest's figures, and what verify and
trainer-check left there (verify.json, trainer-check.json and its picture: docs/report.md).

A file that is missing is no finding; one that cannot be read is a note on the page, never a crash.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from imagenet_build.build.manifest import Manifest
from imagenet_build.format.naming import MANIFEST_NAME, TRAINER_CHECK_JSON, VERIFY_JSON
from imagenet_build.infra import storage


class SplitRow(NamedTuple):
    split: str
    records: int
    shards: int
    bytes: int
    classes: int
    reencoded: int
    skipped: int


class Found(NamedTuple):
    """A JSON document the checking verbs left in the folder, or why it cannot be used (notes)."""

    document: dict[str, Any] | None
    notes: list[str]


def split_rows(manifest: Manifest) -> list[SplitRow]:
    """Each split's figures: records, shards, bytes, classes, inputs stored re-encoded and left out."""
    rows = []
    for split, figures in manifest["splits"].items():
        shards = [s for s in manifest["shards"] if s["split"] == split]
        rows.append(SplitRow(
            split, figures["records"], figures["shards"], figures.get("bytes", 0),
            len(figures.get("label_counts", {})),
            sum(1 for s in shards for r in s["reencoded"] if r.get("reencoded")),
            sum(len(s["skipped"]) for s in shards) + len(figures.get("left_out", [])),
        ))
    return rows


def label_counts(manifest: Manifest) -> dict[str, dict[int, int]]:
    """{split: {label: records}} from the manifest (complete builds record them)."""
    return {split: {int(k): v for k, v in figures.get("label_counts", {}).items()}
            for split, figures in manifest["splits"].items() if figures.get("label_counts")}


def inputs_listed(manifest: Manifest, kind: str, limit: int = 20) -> tuple[int, list[tuple[str, str]]]:
    """(how many, the first `limit` as (file, why)) of the inputs stored re-encoded (`reencoded`) or left out
    (`skipped`)."""
    found = []
    for shard in manifest["shards"]:
        for entry in shard[kind]:  # type: ignore[literal-required]
            why = entry.get("reencoded") or entry.get("reason") or entry.get("note") or ""
            if kind == "skipped" or entry.get("reencoded"):
                found.append((str(entry.get("file", "")), str(why)))
    for figures in manifest["splits"].values():
        if kind == "skipped":
            found += [(str(e.get("file", "")), str(e.get("reason", ""))) for e in figures.get("left_out", [])]
    return len(found), found[:limit]


def _read_json(path: str) -> Found:
    try:
        document = json.loads(storage.read_bytes(path).decode("utf-8"))
    except FileNotFoundError:
        return Found(None, [])
    except (ValueError, OSError) as e:
        return Found(None, [f"{path}: cannot be read ({e}); left out"])
    if not isinstance(document, dict) or "ok" not in document:
        return Found(None, [f"{path}: not the JSON document of an imagenet-build verb; left out"])
    return Found(document, [])


def verify_found(folder: str) -> Found:
    """verify.json (verify --json's output), with a note when it judged another manifest than the folder's
    (its manifest_sha256; a verify.json without one: older than the manifest)."""
    path = storage.join(folder, VERIFY_JSON)
    found = _read_json(path)
    if found.document is None:
        return found
    if "summary" not in found.document and "error" in found.document:
        return Found(found.document, [f"{path}: verify ended with an error: {found.document['error']}"])
    notes = []
    manifest = storage.join(folder, MANIFEST_NAME)
    judged = found.document.get("summary", {}).get("manifest_sha256")
    if judged is not None:
        if judged != storage.sha256(manifest):
            notes.append(f"{path} judged another {MANIFEST_NAME} than this folder's: it may judge an earlier "
                         "build; run verify again")
    elif not storage.is_url(folder) and os.path.exists(manifest) and os.path.getmtime(path) < os.path.getmtime(
            manifest):
        notes.append(f"{path} is older than {MANIFEST_NAME}: it may judge an earlier build; run verify again")
    return Found(found.document, notes)


def trainer_found(folder: str) -> tuple[Found, bytes | None]:
    """trainer-check.json and the picture its "show" names (relative to the folder unless absolute)."""
    path = storage.join(folder, TRAINER_CHECK_JSON)
    found = _read_json(path)
    show = (found.document or {}).get("show")
    if not show:
        return found, None
    picture = show if storage.is_url(show) or os.path.isabs(show) else storage.join(folder, show)
    try:
        return found, storage.read_bytes(picture)
    except OSError as e:
        return Found(found.document, found.notes + [f"{picture}: the picture {path} names cannot be read "
                                                    f"({e.strerror or e})"]), None


def options_shown(manifest: Manifest) -> Mapping[str, Any]:
    """The options a build was made with, and where its inputs came from (without each shard's state)."""
    inputs = {k: v for k, v in manifest.get("inputs", {}).items() if k != "shards"}
    return {**manifest["options"], **({"inputs": inputs} if inputs else {})}
