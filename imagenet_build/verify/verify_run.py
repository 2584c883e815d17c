"""Prove a folder of shards sound: framing, CRCs, DALI indexes, the shard set, the manifest, the records.

Reads only what was written. The build is opened as every reader opens one (format/build_folder.py), but
judging: a manifest that cannot be read is a problem found, not the end. The folder is listed first
(listing.py); then one task per shard on the workers, reading it once through every record and shard
check (shard.py); then the folder checks on the driver, on what the tasks returned (folder.py).
Problems are collected, never raised: the report (verify_result.py) lists them all (a bounded number per
check) with file, record number and byte offset. The checks themselves are the registered classes
(check.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from imagenet_build.format.build_folder import BuildFolder
from imagenet_build.format.naming import MANIFEST_NAME, index_path, parse_shard_name
from imagenet_build.infra import storage
from imagenet_build.infra.errors import BuildError, PathLike, UsageError, check_count
from imagenet_build.infra.lock import writing_now
from imagenet_build.infra.processes import pool_size
from imagenet_build.infra.workers import Workers, progress_bar
from imagenet_build.verify.check import Check, Mode, checks_run
from imagenet_build.verify.folder import Folder, FolderCheck, Seen
from imagenet_build.verify.listing import list_shards
from imagenet_build.verify.problems import Problem, Problems
from imagenet_build.verify.shard import (
    ShardVerifyFigures,
    ShardVerifyResult,
    ShardVerifyTask,
    check_shard,
    framed_records,
)
from imagenet_build.verify.verify_result import VerifyResult, verify_result


def verify(
    root: PathLike,
    index_dir: str | None = None,
    quick: bool = False,
    deep: bool = False,
    expect_imagenet: bool = False,
    workers: int = 0,
) -> VerifyResult:
    """Check a build folder; returns {"ok", "problems", "warnings", "summary"} (never raises for a bad shard)."""
    started = time.monotonic()
    build = BuildFolder.open(root, index_dir, judging=True)
    if quick and deep:
        raise UsageError("--quick and --deep exclude each other")
    check_count(workers, "--workers", 0)
    problems, warnings = Problems(), Problems()
    notes: list[str] = []
    if build.manifest_problem:
        problems.add("manifest", MANIFEST_NAME, None, None, build.manifest_problem)
    if build.manifest is None:
        notes.append("no manifest.json: shards verified structurally only")
    folder, manifest, index_dir = build.path, build.manifest, build.index_dir
    _refuse_while_written([folder, index_dir])
    by_split = list_shards(folder, index_dir, problems)
    mode = Mode(quick, deep, expect_imagenet, bool(manifest))
    checks = checks_run(mode)
    tasks = [ShardVerifyTask(path, index_path(path, index_dir), mode, tuple(checks))
             for shards in by_split.values() for _, path in shards]
    gathered = _Gathered(problems, warnings)
    _run_tasks(tasks, workers, gathered)
    view = Folder(folder, index_dir, manifest, mode, by_split, gathered.results, gathered.seen,
                  gathered.split_counts, notes, gathered.tallies)
    _run_folder_checks(view, checks, problems, warnings)
    return verify_result(view, checks, problems, warnings, time.monotonic() - started)


def _run_folder_checks(view: Folder, checks: list[type[Check]], problems: Problems, warnings: Problems) -> None:
    for check in checks:
        if issubclass(check, FolderCheck):
            found = warnings if check.warning else problems
            for finding in check().run_folder(view):
                found.add(check.name, *finding)


def folder_problems(build: BuildFolder, index_records: Mapping[str, int]) -> list[Problem]:
    """The problems verify --quick finds at the folder's level (the listing's, and the folder checks that read
    no payload), without reading the shards whose records `index_records` counts ({shard name: records, by its
    index}); any other shard's records are counted by its framing, as --quick counts them. What `report`
    lists of a build, so that it finds what verify's folder checks find. BuildError for a folder with no shard."""
    problems = Problems()
    root, manifest, index_dir = build.path, build.manifest, build.index_dir
    by_split = list_shards(root, index_dir, problems)
    mode = Mode(quick=True, deep=False, expect_imagenet=False, manifest=bool(manifest))
    results = {}
    for shards in by_split.values():
        for _, path in shards:
            name = storage.basename(path)
            records = index_records.get(name)
            results[name] = ShardVerifyFigures(name, framed_records(path) if records is None else records,
                                         storage.size(path), None, None)
    view = Folder(root, index_dir, manifest, mode, by_split, results, {}, {}, [])
    _run_folder_checks(view, checks_run(mode), problems, Problems())
    return problems.shown


def _refuse_while_written(folders: list[str]) -> None:
    """A build being written is no build to judge: its shards and manifest are not final yet."""
    for folder in dict.fromkeys(folders):
        writer = writing_now(folder)
        if writer:
            raise BuildError(f"{folder}: {writer} is writing this folder; verify when it ends")


class _Gathered:
    """What the shard tasks returned, gathered as each ends: figures by shard, the (label, synset) pairs
    with their first record, records per label and split, and the problems."""

    def __init__(self, problems: Problems, warnings: Problems) -> None:
        self.problems, self.warnings = problems, warnings
        self.results: dict[str, ShardVerifyFigures] = {}
        self.seen: Seen = {}
        self.split_counts: dict[str, Counter[int]] = {}
        self.tallies: dict[str, dict[str, Any]] = {}

    def add(self, task: ShardVerifyTask, result: ShardVerifyResult) -> None:
        name = result.figures.name
        shard = parse_shard_name(name)
        assert shard is not None  # the listing lists only the names it parsed
        counts = self.split_counts.setdefault(shard.split, Counter())
        for (label, synset), (count, number, offset) in result.label_pairs.items():
            place = (name, number, offset)
            before, first = self.seen.get((label, synset), (0, place))
            self.seen[(label, synset)] = (before + count, min(first, place))
            counts[label] += count
        for check, tally in result.tallies.items():
            self.tallies.setdefault(check, {})[name] = tally
        self.problems.merge(result.problems)
        self.warnings.merge(result.warnings)
        self.results[name] = result.figures


def _run_tasks(tasks: list[ShardVerifyTask], workers: int, gathered: _Gathered) -> None:
    bar = progress_bar(len(tasks), 0, "verify", "shard")

    def done(task: ShardVerifyTask, result: ShardVerifyResult) -> None:
        gathered.add(task, result)
        bar.update(1)

    try:
        with Workers(min(pool_size(workers), len(tasks))) as pool:
            pool.run(check_shard, tasks, done)
    finally:
        bar.close()

