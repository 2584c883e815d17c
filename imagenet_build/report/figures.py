"""What a build folder says of itself, as the page shows it: the manifest's figures, and what verify and
trainer-check left there (verify.json, trainer-check.json and its picture: docs/report.md).

A file that is missing is no finding; one that cannot be read is a note on the page, never a crash.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import Any, Dict, List, NamedTuple, Optional, TypedDict

from imagenet_build.format.build_figures import recorded_label_counts, split_totals
from imagenet_build.format.manifest import Manifest
from imagenet_build.format.naming import MANIFEST_NAME, TRAINER_CHECK_JSON, VERIFY_JSON
from imagenet_build.infra import read_door, storage
from imagenet_build.infra.jsonfile import JsonError, read_json


class SplitRow(NamedTuple):
    split: str
    records: int
    shards: int
    bytes: int
    classes: int
    reencoded: int
    skipped: int
    resized: int | None  # a resized build's images decoded, resized and re-encoded (None: a full-size build)


class Found(NamedTuple):
    """A JSON document the checking verbs left in the folder, or why it cannot be used (notes)."""

    document: dict[str, Any] | None
    notes: list[str]


def split_rows(manifest: Manifest, records: Mapping[str, int]) -> list[SplitRow]:
    """Each split's figures: records (`records`: by the shards' indexes), shards, bytes, classes, inputs stored
    re-encoded and left out, and in a resized build the images resized."""
    rows = []
    for split, figures in manifest["splits"].items():
        found = split_totals(manifest, split)
        rows.append(SplitRow(split, records.get(split, 0), figures["shards"], figures.get("bytes", 0),
                             len(figures.get("label_counts", {})), found["reencoded"],
                             found["skipped"] + found["left_out"], found.get("resized")))
    return rows


def label_counts(manifest: Manifest) -> dict[str, dict[int, int]]:
    """{split: {label: records}} from the manifest (complete builds record them), every class of the build
    there: one the manifest does not list holds no record (it lists none of 0)."""
    classes = range(1, manifest["num_classes"] + 1)
    counts = {}
    for split in manifest["splits"]:
        listed = recorded_label_counts(manifest, split)
        if listed:
            counts[split] = {**{label: 0 for label in classes}, **listed}
    return counts


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


class _Ok(TypedDict):
    ok: bool


class PageProblem(TypedDict, total=False):
    """One of verify's problems or warnings, as the page reads it."""

    check: str
    file: Optional[str]
    record: Optional[int]
    offset: Optional[int]
    message: str


class PageVerifySummary(TypedDict, total=False):
    checks: List[str]
    mode: str
    shards: int
    records: int
    problem_counts: Dict[str, int]
    warning_counts: Dict[str, int]
    notes: List[str]
    manifest_sha256: Optional[str]


class VerifyDocument(_Ok, total=False):
    """What the page reads of verify.json (verify --json's document, or its error document)."""

    problems: List[PageProblem]
    warnings: List[PageProblem]
    summary: PageVerifySummary
    error: str


class TrainerLine(TypedDict, total=False):
    name: str
    ok: bool
    detail: str


class TrainerDocument(_Ok, total=False):
    """What the page reads of trainer-check.json (trainer-check --json's document, or its error document)."""

    checks: List[TrainerLine]
    framework: str
    device: str
    model: str
    split: str
    steps: int
    batch_size: int
    show: str
    error: str


DOCUMENT_LIMIT = 16 << 20  # bytes of verify.json or trainer-check.json: a few kB each
PICTURE_LIMIT = 64 << 20  # bytes of trainer-check's picture: a few MB
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _read_json(path: str, shape: Any) -> Found:
    try:
        document = read_json(path, shape, limit=DOCUMENT_LIMIT)
    except FileNotFoundError:
        return Found(None, [])
    except JsonError as e:
        return Found(None, [f"{e}; left out"])
    except OSError as e:
        return Found(None, [f"{path}: cannot be read ({e.strerror or e}); left out"])
    return Found(document, [])


def verify_found(folder: str) -> Found:
    """verify.json (verify --json's output), with a note when it judged another manifest than the folder's
    (its manifest_sha256; a verify.json without one: older than the manifest)."""
    path = storage.join(folder, VERIFY_JSON)
    found = _read_json(path, VerifyDocument)
    if found.document is None:
        return found
    if "summary" not in found.document and "error" in found.document:
        return Found(found.document, [f"{path}: verify ended with an error: {found.document['error']}"])
    notes = []
    manifest = storage.join(folder, MANIFEST_NAME)
    judged = found.document.get("summary", {}).get("manifest_sha256")
    if judged is not None:
        if judged != read_door.sha256(manifest):
            notes.append(f"{path} judged another {MANIFEST_NAME} than this folder's: it may judge an earlier "
                         "build; run verify again")
    elif not storage.is_url(folder) and os.path.exists(manifest) and os.path.getmtime(path) < os.path.getmtime(
            manifest):
        notes.append(f"{path} is older than {MANIFEST_NAME}: it may judge an earlier build; run verify again")
    return Found(found.document, notes)


def trainer_found(folder: str) -> tuple[Found, bytes | None]:
    """trainer-check.json and the picture its "show" names: the build's own picture only (a file of this
    folder, however "show" names it), bounded, and a PNG; anything else a note."""
    path = storage.join(folder, TRAINER_CHECK_JSON)
    found = _read_json(path, TrainerDocument)
    show = (found.document or {}).get("show")
    if not show:
        return found, None
    picture = storage.join(folder, storage.basename(show))
    try:
        data = _own_picture(folder, show, picture)
    except ValueError as e:
        return Found(found.document, found.notes + [f"{show}: the picture {path} names {e}; left out"]), None
    except OSError as e:
        return Found(found.document, found.notes + [f"{picture}: the picture {path} names cannot be read "
                                                    f"({e.strerror or e}); left out"]), None
    return found, data


def _own_picture(folder: str, show: str, picture: str) -> bytes:
    """The bytes of the picture `show` names, if it is `picture`, a PNG file of the build's folder; ValueError
    (why not) otherwise."""
    if not storage.is_url(folder):
        named = show if os.path.isabs(show) else os.path.join(folder, show)
        if os.path.realpath(named) != os.path.realpath(picture) or os.path.dirname(
                os.path.realpath(picture)) != os.path.realpath(folder):
            raise ValueError(f"is not a file of the build's folder {folder}")
        if not stat.S_ISREG(os.stat(picture).st_mode):
            raise ValueError("is not a regular file")
    if storage.size(picture) > PICTURE_LIMIT:
        raise ValueError(f"is larger than {PICTURE_LIMIT:,} bytes")
    with read_door.open_read(picture) as f:
        data = f.read(PICTURE_LIMIT + 1)
    if len(data) > PICTURE_LIMIT:
        raise ValueError(f"is larger than {PICTURE_LIMIT:,} bytes")
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("is not a PNG file")
    return data


def options_shown(manifest: Manifest) -> Mapping[str, Any]:
    """The options a build was made with, and where its inputs came from (without each shard's state)."""
    inputs = {k: v for k, v in manifest.get("inputs", {}).items() if k != "shards"}
    return {**manifest["options"], **({"inputs": inputs} if inputs else {})}
