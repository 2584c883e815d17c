"""`report`: the builds a folder holds (itself, or a resized build's size folders), each read only as far as
its page shows it, and the page written atomically.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from typing import Any, Dict, List, TypedDict

from imagenet_build.catalog.classes import (
    DEFAULT_LABELS_FILE,
    DEFAULT_METADATA_FILE,
    read_labels_file,
    read_metadata_file,
)
from imagenet_build.format.build_folder import BuildFolder
from imagenet_build.format.manifest import Manifest
from imagenet_build.format.naming import MANIFEST_NAME, REPORT_HTML, builds_below
from imagenet_build.format.output_guard import check_output_file
from imagenet_build.infra import storage, write_door
from imagenet_build.infra.errors import BuildError, check_count
from imagenet_build.infra.optional import require_all
from imagenet_build.infra.workers import progress_bar
from imagenet_build.report import PER_CLASS, charts, figures, page
from imagenet_build.report.page_sample import Sampled, chosen_labels, classes_given, read_many, sample, with_image
from imagenet_build.report.records import Fields, Place, RecordError, Shards
from imagenet_build.report.thumbs import thumbnail
from imagenet_build.verify.verify_run import folder_problems

STDOUT = "-"  # -o -: the page on stdout


class ReportResult(TypedDict):
    """report's result and its --json document: `ok` when the page lists no problem."""

    ok: bool
    page: str  # where the page was written
    builds: List[str]  # the build folders it shows
    problems: List[str]  # what it lists as wrong: verify's problems, records or shards it could not read
    read: Dict[str, int]  # what it read: "records" in the builds, "heads" read, "whole" records read


def builds_in(folder: str) -> list[tuple[BuildFolder, Manifest]]:
    """The builds `folder` holds, each opened with its manifest: itself, or the builds in its sub-folders (a
    resized build's size folders: format/naming.py's builds_below, the rule every verb names them by).
    BuildError when none."""
    top = BuildFolder.open(folder, files=False)  # a file of the build that is no regular file: the page shows it
    opened = [top] if top.manifest is not None else [
        BuildFolder.open(storage.join(top.path, name), files=False) for name in builds_below(top.path)]
    found = [(build, build.manifest) for build in opened if build.manifest is not None]
    if not found:
        raise BuildError(f"{folder}: holds no build (no manifest.json, nor resized builds' folders holding one)")
    return found


@functools.lru_cache(maxsize=1)
def _shipped() -> tuple[dict[str, int], dict[str, str]]:
    """ILSVRC's label of each synset (the shipped labels file's order), and the shipped texts."""
    synsets = read_labels_file(DEFAULT_LABELS_FILE)
    return {s: k for k, s in enumerate(synsets, start=1)}, read_metadata_file(DEFAULT_METADATA_FILE)


def expected_labels(synsets: list[str]) -> dict[int, int]:
    """For a build of ILSVRC synsets: the label ILSVRC's order gives each class (the build's synsets ranked in the
    shipped labels file's order), by the build's label, where the two differ (a labels file in another order)."""
    ilsvrc, _ = _shipped()
    if not synsets or not all(s in ilsvrc for s in synsets):
        return {}
    ranked = {s: k for k, s in enumerate(sorted(synsets, key=ilsvrc.__getitem__), start=1)}
    return {label: ranked[s] for label, s in enumerate(synsets, start=1) if ranked[s] != label}


def order_problem(folder: str, synsets: list[str], expected: dict[int, int]) -> list[str]:
    """A build whose ILSVRC classes are labelled in another order than ImageNet's (a labels file in another
    order): one problem of the build, naming the first class out of place. Every model trained on ImageNet's
    labels, and every evaluation against them, would read its labels wrong."""
    if not expected:
        return []
    label = min(expected)
    return [f"{storage.join(folder, MANIFEST_NAME)}: the classes are not in ImageNet's order: label {label} is "
            f"{synsets[label - 1]}, which ImageNet's order labels {expected[label]} ({len(expected):,} of "
            f"{len(synsets):,} classes out of place): a labels file in another order? Convert with the shipped "
            "labels file, or one in its order"]


def _tile(place: Place | None, read: Fields | RecordError | None, expected: dict[int, int]) -> page.Tile:
    if read is None or isinstance(read, RecordError):
        return page.Tile(None, None, place, str(read or "not listed by the shard's index"), None)
    try:
        thumb = thumbnail(read.image or b"")
    except ValueError as e:
        return page.Tile(None, read, place, str(e), None)
    return page.Tile(thumb, read, place, "", expected.get(read.label) if read.label is not None else None)


def _verify_tiles(shards: Shards, verify: dict[str, Any] | None, expected: dict[int, int]) -> dict[Any, page.Tile]:
    """The record each of verify's problems and warnings names, where its shard's index lists it."""
    wanted: dict[Place, tuple[str, int]] = {}
    for p in (verify or {}).get("problems", []) + (verify or {}).get("warnings", []):
        if isinstance(p.get("record"), int) and p.get("check") not in ("index", "shard-set"):
            place = shards.find(str(p.get("file")), p["record"])
            if place is not None:
                wanted[place] = (place.shard, place.number)
    return {wanted[place]: _tile(place, read, expected) for place, read in read_many(wanted, with_image)}


def _names(manifest: Manifest, sampled: Sampled) -> dict[int, str]:
    """label -> "synset text", the text as the records store it, else the shipped one."""
    texts = {f.label: f.text for f in sampled.stats if f.label is not None}
    texts.update({label: f.text for label, rows in sampled.sheets.items() for _, f in rows})
    shipped = _shipped()[1]
    return {k: f"{s} {texts.get(k) or shipped.get(s, '')}".strip() for k, s in enumerate(manifest["synsets"], 1)}


def build_view(build: BuildFolder, manifest: Manifest, title: str, per_class: int, classes: int | None,
               verify: figures.Found, read: dict[str, int]) -> page.BuildView:
    """One build's section: its figures, verify's and trainer-check's results, charts and contact sheets."""
    folder = build.path
    shards = Shards(build, list(manifest["splits"]))
    labels = chosen_labels(manifest["num_classes"], classes)
    bar = progress_bar(None, 0, f"report {storage.basename(folder)}", "record")
    try:
        sampled = sample(shards, labels, per_class, bar)
    finally:
        bar.close()
    expected = expected_labels(manifest["synsets"])
    verify_tiles = _verify_tiles(shards, verify.document, expected)
    read["records"] += shards.total
    read["heads"] += sampled.heads_read
    read["whole"] += sum(len(rows) for rows in sampled.sheets.values()) + len(verify_tiles)
    names = _names(manifest, sampled)
    trainer, picture = figures.trainer_found(folder)
    counts = figures.label_counts(manifest)
    drawn = ([charts.class_chart(counts, names)] if counts else []) + charts.sample_charts(sampled.stats, shards.total)
    sheets = [(f"label {label}: {names.get(label, '')} ({len(rows)} shown)",
               [_tile(place, fields, expected) for place, fields in rows]) for label, rows in sampled.sheets.items()]
    notes = [] if manifest["complete"] else ["manifest.json: the build is not complete"]
    return page.BuildView(
        title=title, complete=manifest["complete"], rows=figures.split_rows(manifest, shards.split_records),
        num_classes=manifest["num_classes"],
        reencoded=figures.inputs_listed(manifest, "reencoded"), skipped=figures.inputs_listed(manifest, "skipped"),
        boxes=(len(sampled.stats), sum(1 for f in sampled.stats if f.boxes), sum(len(f.boxes) for f in sampled.stats)),
        options=figures.options_shown(manifest), verify=verify,
        verify_tiles=verify_tiles, trainer=trainer, trainer_picture=picture,
        charts=drawn, sheets=sheets, problems=_build_problems(build, manifest, shards, sampled, sheets, expected),
        notes=notes)


def _build_problems(build: BuildFolder, manifest: Manifest, shards: Shards, sampled: Sampled,
                    sheets: list[tuple[str, list[page.Tile]]], expected: dict[int, int]) -> list[str]:
    """What the page finds wrong with a build: what verify's folder checks find (the shard set against its
    names and the manifest, records counted by the indexes), indexes that do not cover their shards, classes out
    of ImageNet's order, and records that could not be read or shown."""
    folder = build.path
    try:
        found = [_where(folder, p) for p in folder_problems(build, shards.records())]
    except BuildError as e:  # no shard at all
        found = [str(e)]
    found += [why for _, why in shards.problems]  # each names the index and its shard
    found += order_problem(folder, manifest["synsets"], expected)
    found += [f"{p.path}, record {p.number}, byte {p.offset}: {why}" for p, why in sampled.unreadable[:50]]
    found += [f"{t.place.path}, record {t.place.number}: {t.problem}" for _, tiles in sheets for t in tiles
              if t.thumb is None and t.place is not None]
    if len(sampled.unreadable) > 50:
        found.append(f"... and {len(sampled.unreadable) - 50} more records")
    return found


def _verify_now(folder: str, workers: int) -> figures.Found:
    from imagenet_build.verify.verify_run import verify

    return figures.Found(dict(verify(folder, workers=workers)), [])


def _where(folder: str, problem: Mapping[str, Any]) -> str:
    """One of verify's problems in a line: its file (in the build's folder), record and message."""
    where = storage.join(folder, str(problem["file"])) if problem.get("file") else folder
    record = f", record {problem['record']}" if isinstance(problem.get("record"), int) else ""
    return f"{where}{record}: {problem.get('message')}"


def report(folder: str, output: str | None = None, per_class: int | None = None, classes: int | str | None = None,
           run_verify: bool = False, workers: int = 0) -> ReportResult:
    """Write the page of the build(s) in `folder` to `output` (default: FOLDER/report.html; "-": stdout).
    per_class: thumbnails in each class's sheet (None: PER_CLASS); classes: how many classes get a sheet, "all", or
    None (the default)."""
    per_class = PER_CLASS if per_class is None else check_count(per_class, "--per-class", 1)
    shown = classes_given(classes)
    check_count(workers, "--workers", 0)
    require_all(["matplotlib"], "imagenet-build report")
    folder = folder.rstrip("/") if storage.is_url(folder) else folder
    target = storage.join(folder, REPORT_HTML) if output is None else output
    found = builds_in(folder)
    if target != STDOUT:
        check_output_file(target, "report" if output is None else "report -o", may_write=[REPORT_HTML])
    sections, problems = [], []
    read = {"records": 0, "heads": 0, "whole": 0}
    for build, manifest in found:
        path = build.path
        verify = _verify_now(path, workers) if run_verify else figures.verify_found(path)
        title = path if len(found) == 1 else storage.basename(path)
        view = build_view(build, manifest, title, per_class, shown, verify, read)
        sections.append(page.build_section(view))
        document = verify.document or {}
        problems += [_where(path, p) for p in document.get("problems", [])] + view.problems
    html = page.document(f"imagenet-build report: {folder}", sections).encode("utf-8")
    if target == STDOUT:
        sys.stdout.buffer.write(html)
        sys.stdout.flush()
    else:
        write_door.write_bytes(target, html)
    listed = list(dict.fromkeys(problems))
    return ReportResult(ok=not listed, page=target, builds=[build.path for build, _ in found], problems=listed,
                        read=read)
