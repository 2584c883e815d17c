"""The checks across a folder's shards: the shard set (what the listing cannot see: two shards with the
same bytes), the manifest (each shard against its entry, and the manifest's own sums) and TFDS's two
files (against the shards and the manifest's classes)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterator, Mapping

from imagenet_build.format.build_figures import figures_of
from imagenet_build.format.manifest import Manifest, ShardEntry, tfds_documents
from imagenet_build.format.naming import MANIFEST_NAME, TFDS_FILES, index_name, parse_shard_name
from imagenet_build.format.tfds_metadata import differences, read_tfds_file
from imagenet_build.verify.check import Mode
from imagenet_build.verify.folder import Folder, FolderCheck
from imagenet_build.verify.problems import Finding
from imagenet_build.verify.shard import ShardVerifyFigures


class ShardSet(FolderCheck):
    """Names, gaps, totals and strays are found while listing the folder (listing.py), before any shard
    is read; the shards' bytes, after."""

    name, rank = "shard-set", 40
    covers = "shard names consecutive from 00000, one -of-N per split, no strays, no orphan indexes"

    def run_folder(self, folder: Folder) -> Iterator[Finding]:
        """Two shards with the same bytes (a copy under another number): every record of one is in the other,
        and a reader takes them twice an epoch. Without a manifest, nothing else would notice."""
        first: dict[str, str] = {}
        for name in sorted(folder.results):
            digest = folder.results[name].sha256
            if digest is None:  # --quick, or broken framing
                continue
            if digest in first:
                yield Finding(name, None, None,
                              f"the same bytes as {first[digest]}: its records would be read twice an epoch")
            first.setdefault(digest, name)


class ManifestCheck(FolderCheck):
    name, rank = "manifest", 50
    covers = "record counts, sizes and sha256 of shards and indexes against manifest.json, and its own sums"

    @classmethod
    def runs(cls, mode: Mode) -> bool:
        return mode.manifest

    def run_folder(self, folder: Folder) -> Iterator[Finding]:
        assert folder.manifest is not None
        yield from _check_manifest(folder.manifest, folder.results, folder.mode.quick)
        yield from _check_manifest_figures(folder.manifest)
        if folder.mode.quick:
            folder.notes.append("--quick: sha256 and label counts against the manifest not checked")


def _check_manifest(manifest: Manifest, results: dict[str, ShardVerifyFigures], quick: bool) -> Iterator[Finding]:
    """Each shard against its entry; nothing listed missing, nothing there unlisted."""
    if not manifest.get("complete"):
        yield Finding(MANIFEST_NAME, None, None, f"the build is not complete: {_how_it_ended(manifest)}")
    listed = {entry["name"]: entry for entry in manifest.get("shards", [])}
    for name, result in results.items():
        entry = listed.get(name)
        if entry is None:
            yield Finding(name, None, None, "shard not listed in manifest.json")
            continue
        if result.records != entry["records"]:
            yield Finding(name, None, None, f"{result.records} records, manifest says {entry['records']}")
        if result.bytes != entry["bytes"]:
            yield Finding(name, None, None, f"{result.bytes} bytes, manifest says {entry['bytes']}")
        if not quick and result.sha256 != entry["sha256"]:
            yield Finding(name, None, None, "sha256 differs from the manifest's")
        if not quick and result.index_sha256 and result.index_sha256 != entry.get("index_sha256"):
            yield Finding(index_name(name), None, None, "index sha256 differs from the manifest's")
    for name in listed:
        if name not in results:
            yield Finding(name, None, None, "listed in manifest.json but missing")


def _how_it_ended(manifest: Manifest) -> str:
    """What the manifest of an incomplete build says of the run that wrote it last."""
    ended = manifest.get("ended")
    if ended == "failed":
        return f"convert failed: {manifest.get('error') or 'no error recorded'}"
    if ended == "interrupted":
        return "convert was interrupted (run the same command again to resume)"
    return "convert stopped without a word (killed, or it crashed); run the same command again to resume"


def _check_manifest_figures(manifest: Manifest) -> Iterator[Finding]:
    """The manifest against itself: each shard listed once under its own split, and each split's and the
    totals' figures the sum of its shard entries (trainer-check and readers take a split's records from
    there: a wrong figure fails them, or sizes an epoch wrong)."""
    entries = manifest.get("shards", [])
    for name, times in sorted(Counter(entry["name"] for entry in entries).items()):
        if times > 1:
            yield Finding(name, None, None, f"listed {times} times in manifest.json")
    by_split: dict[str, list[ShardEntry]] = {}
    for entry in entries:
        parsed = parse_shard_name(entry["name"])
        if parsed is None or parsed.split != entry["split"]:
            yield Finding(entry["name"], None, None, f"listed under split {entry['split']!r}")
        by_split.setdefault(entry["split"], []).append(entry)
    if not manifest.get("complete"):
        return  # the figures of an interrupted build are those of the shards done so far
    splits: Mapping[str, Mapping[str, Any]] = manifest.get("splits", {})
    totals: Mapping[str, Any] = manifest.get("totals", {})
    sums = [(f"splits.{split}", splits.get(split), by_split.get(split, []), ("shards", "records", "bytes"))
            for split in sorted(set(by_split) | set(splits))] + [("totals", totals, entries, ("records", "bytes"))]
    for where, figures, listed, keys in sums:
        if figures is None:
            yield Finding(MANIFEST_NAME, None, None, f"{where}: missing, yet shards of it are listed")
            continue
        actual = figures_of(listed)
        for key in keys:
            if key in figures and figures[key] != actual[key]:
                yield Finding(MANIFEST_NAME, None, None,
                              f"{where}.{key} is {figures[key]}, its shard entries add up to {actual[key]}")


class TfdsFiles(FolderCheck):
    """features.json and dataset_info.json, where the folder has them, against what the shards hold: TFDS
    sizes a split, slices it and finds its files by them alone, and decodes each record by features.json."""

    name, rank = "tfds", 55
    covers = "TFDS's features.json and dataset_info.json: splits, shard lengths, bytes and names, features, classes"

    @classmethod
    def runs(cls, mode: Mode) -> bool:
        return mode.manifest

    def run_folder(self, folder: Folder) -> Iterator[Finding]:
        assert folder.manifest is not None
        found: dict[str, Any] = {}
        for name in TFDS_FILES:
            try:
                found[name] = read_tfds_file(folder.root, name)
            except ValueError as e:
                yield Finding(name, None, None, str(e))
        if not any(found.get(name) is not None for name in TFDS_FILES):
            if len(found) == len(TFDS_FILES):
                folder.notes.append("no features.json and dataset_info.json: TensorFlow Datasets cannot open this "
                                    "build (imagenet-build tfds FOLDER writes them)")
            return
        if not folder.manifest.get("complete"):
            yield Finding(sorted(found)[0], None, None,
                          "TFDS files in a build that is not complete: TFDS would take its shards for the build")
            return
        shards = {name: (result.records, result.bytes) for name, result in folder.results.items()}
        for name, expected in tfds_documents(folder.manifest, shards).items():
            if name in found and found[name] is None:
                yield Finding(name, None, None, "missing, yet the other TFDS file is there "
                                                "(imagenet-build tfds FOLDER writes both)")
            elif name in found:
                for line in differences(found[name], expected):
                    yield Finding(name, None, None, line)
