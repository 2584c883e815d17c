"""The commit check: manifest.json, and a complete build's TFDS files, are written only when every shard they list
agrees with the shard itself and its name, and the manifest's figures with its shards.

Every writer of a manifest comes through here: convert (each manifest of a run, a rerun's kept shards among
them), write_arrays and `tfds`; nothing else calls format/manifest.py's writer or the TFDS files' (an
architecture test holds the package to it). A shard's facts are what its own files say: its records are its
index's lines, where the index covers the shard exactly (format/dali_index.py's rule), its bytes its size, its
sha256 and its index's. A shard this run wrote is not read again: its facts are the figures its writer reported.
A shard kept from an earlier run is read once, when resume decides to keep it (its sha256 is what resume compares
anyway), and its entry held to the plan too: its records and the inputs it left out add up to the images the
plan gives it, each left out once, with its own label. `tfds` reads each index and size, not the shards' bytes.

What is checked, `manifest_problem`: the manifest's schema (format/manifest.py's reader would refuse it);
each shard listed once, its name a shard's, its split its name's, each figure its files' facts; each split's
figures the sums of its entries, its label counts adding up to its records, within the classes; a complete
split's shards a whole set of its -of-N; the totals the sums of all; and, where the folder was listed, no shard
in it that the manifest leaves out. A rerun rewrites a kept shard whose entry disagrees; anything else that
disagrees is one BuildError line, and no manifest.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, Optional

from imagenet_build.format.build_figures import figures_of
from imagenet_build.format.dali_index import check_index
from imagenet_build.format.destination import Destination
from imagenet_build.format.manifest import (
    Manifest,
    ShardEntry,
    SplitFigures,
    schema_problem,
    tfds_documents,
    write_manifest,
)
from imagenet_build.format.naming import MANIFEST_NAME, index_path, parse_shard_name, shard_set_problems
from imagenet_build.format.tfds_metadata import write_tfds_files
from imagenet_build.infra import read_door, storage
from imagenet_build.infra.errors import BuildError, PathLike
from imagenet_build.infra.jsonfile import shown
from imagenet_build.model import ShardSpec

READ_THREADS = 16  # shards' facts read at once (one HEAD and one GET each on an object store)


class ShardFacts(NamedTuple):
    """What a shard's own files say of it, each field named as its manifest entry's."""

    records: Optional[int]  # its index's lines; None where the index does not cover the shard exactly
    bytes: int
    sha256: Optional[str]  # None: its bytes not read (tfds)
    index_bytes: Optional[int]  # None: not reported (an entry without it)
    index_sha256: str


def reported(entry: ShardEntry) -> ShardFacts:
    """The facts of a shard this run wrote: its writer's figures (its entry), not read again."""
    return ShardFacts(entry["records"], entry["bytes"], entry["sha256"], entry.get("index_bytes"),
                      entry["index_sha256"])


def read_facts(shard: str, index: str, hash_shard: bool = True) -> ShardFacts | None:
    """A shard's facts as its files give them, its bytes hashed unless not `hash_shard`; None where the shard or
    its index is not a readable regular file (the read door refuses a FIFO or a device unread)."""
    try:
        raw = read_door.read_bytes(index)
        size = storage.size(shard)
    except OSError:
        return None
    digest = read_door.sha256(shard) if hash_shard else None
    if hash_shard and digest is None:
        return None
    records = None if check_index(raw, None, size) else raw.count(b"\n")
    return ShardFacts(records, size, digest, len(raw), hashlib.sha256(raw).hexdigest())


def entry_problem(entry: ShardEntry, facts: ShardFacts | None) -> str:
    """What in a shard's entry disagrees with its name or with its files' facts, in words; "" where nothing does."""
    parsed = parse_shard_name(entry["name"])
    if parsed is None:
        return "not a shard's name"
    if entry["split"] != parsed.split:
        return f"listed under split {shown(entry['split'])}"
    if facts is None:
        return "its shard or its index is not a file that can be read"
    if facts.records is None:
        return "its index does not cover it"
    for field, fact in zip(ShardFacts._fields, facts):
        if fact is not None and field in entry and entry[field] != fact:  # type: ignore[literal-required]
            return f"{field} {shown(entry[field])}, its files' {shown(fact)}"  # type: ignore[literal-required]
    return ""


def kept_problem(entry: ShardEntry, facts: ShardFacts | None, spec: ShardSpec) -> str:
    """What disagrees in an earlier run's word on a shard (its manifest entry, its task's receipt) that resume
    would keep: entry_problem, then against the plan: its records and the inputs it left out add up to the
    shard's images, each left out once and with its own label."""
    problem = entry_problem(entry, facts)
    if problem:
        return problem
    skipped = entry["skipped"]
    if entry["records"] + len(skipped) != len(spec.entries):
        return f"{entry['records']} records and {len(skipped)} left out, of the plan's {len(spec.entries)} images"
    labels = {image.relpath: image.label for image in spec.entries} if skipped else {}
    files = Counter(item["file"] for item in skipped)
    for item in skipped:
        if files[item["file"]] > 1 or labels.get(item["file"]) != item["label"]:
            return f"left out {shown(item['file'])} (label {shown(item['label'])}): no such input of the shard, " \
                   "or not once"
    return ""


def manifest_problem(manifest: Manifest, facts: Mapping[str, ShardFacts | None],
                     held: Collection[str] | None = None) -> str:
    """The first thing in a manifest about to be written that its shards (their `facts`, by name) or its own
    figures contradict, in words; "" where nothing does. `held`: the shards the folder holds, where listed."""
    problem = schema_problem(manifest)
    if problem:
        return problem
    entries = manifest["shards"]
    listed = Counter(entry["name"] for entry in entries)
    for entry in entries:
        if listed[entry["name"]] > 1:
            return f"{entry['name']}: listed {listed[entry['name']]} times"
        problem = entry_problem(entry, facts.get(entry["name"]))
        if problem:
            return f"{entry['name']}: {problem}"
    problem = _figures_problem(manifest)
    if problem or held is None or not manifest["complete"]:
        return problem
    unlisted = sorted(set(held) - set(listed))
    return f"{unlisted[0]}: in the folder, not listed" if unlisted else ""


def _figures_problem(manifest: Manifest) -> str:
    """Each split's figures against its shard entries, and the totals against all of them."""
    by_split: dict[str, list[ShardEntry]] = {}
    for entry in manifest["shards"]:
        by_split.setdefault(entry["split"], []).append(entry)
    splits = manifest["splits"]
    for split in sorted(set(by_split) | set(splits)):
        if split not in splits:
            return f"splits.{split}: missing, yet shards of it are listed"
        problem = _split_problem(split, splits[split], by_split.get(split, []), manifest)
        if problem:
            return problem
    return _sums_problem("totals", manifest.get("totals", {}), manifest["shards"], ("records", "bytes"))


def _split_problem(split: str, figures: SplitFigures, entries: Sequence[ShardEntry], manifest: Manifest) -> str:
    """One split's figures: its shards -of- its count (all of them when complete), its sums, its label counts."""
    names = [entry["name"] for entry in entries]
    other = next((name for name in names if _total(name) != figures["shards"]), None)
    if other is not None:
        return f"{other}: not one of the {figures['shards']} shards of splits.{split}"
    if manifest["complete"]:
        gaps = shard_set_problems(split, names) if names else [(split, "no shard listed")]
        if gaps:
            return f"{gaps[0][0]}: {gaps[0][1]}, in a complete manifest"
    problem = _sums_problem(f"splits.{split}", figures, entries, ("records", "bytes"))
    if problem:
        return problem
    if figures.get("shards_done", len(entries)) != len(entries):
        return f"splits.{split}.shards_done is {figures.get('shards_done')}, {len(entries)} listed"
    counts = figures.get("label_counts")
    if counts is None:
        return ""
    if sum(counts.values()) != figures["records"]:
        return f"splits.{split}.label_counts add up to {sum(counts.values())}, of {figures['records']} records"
    beyond = next((label for label in counts if not label.isdecimal()
                   or not 1 <= int(label) <= manifest["num_classes"]), None)
    return f"splits.{split}.label_counts: {shown(beyond)} is no label of the build" if beyond is not None else ""


def _total(name: str) -> int:
    """The N of a shard's -of-N (entry_problem has found each name a shard's)."""
    parsed = parse_shard_name(name)
    assert parsed is not None, name
    return parsed.total


def _sums_problem(where: str, figures: Mapping[str, object], entries: Sequence[ShardEntry],
                  keys: Sequence[str]) -> str:
    actual = figures_of(entries)
    for key in keys:
        if key in figures and figures[key] != actual[key]:
            return f"{where}.{key} is {shown(figures[key])}, its shard entries add up to {actual[key]}"
    return ""


def _refuse(output_dir: PathLike, problem: str) -> None:
    if problem:
        raise BuildError(f"{storage.join(output_dir, MANIFEST_NAME)}: not written: {problem} "
                         "(imagenet-build verify says what else is wrong)")


def commit(output_dir: PathLike, manifest: Manifest, facts: Mapping[str, ShardFacts | None],
           held: Collection[str] | None = None) -> Manifest:
    """The manifest written (with a complete build's TFDS files, first) once manifest_problem finds nothing;
    else one BuildError line, and nothing written. Returns the manifest as written."""
    _refuse(output_dir, manifest_problem(manifest, facts, held))
    return write_manifest(output_dir, manifest)


def commit_tfds(root: str, manifest: Manifest) -> list[str]:
    """A complete build's TFDS files written beside it, from its manifest, once the manifest holds against its
    shards: each index and size read, every shard the folder holds listed (their bytes are not read: their
    sha256 and their records are verify's). Returns the files' names, in the order written."""
    indexes = Destination.recorded(root, manifest).index
    names = [entry["name"] for entry in manifest["shards"]]
    with ThreadPoolExecutor(READ_THREADS) as pool:
        found = pool.map(lambda name: read_facts(storage.join(root, name), index_path(name, indexes), False), names)
        facts = dict(zip(names, found))
    held = [name for name, is_dir in storage.listdir(root).items() if not is_dir and parse_shard_name(name)]
    _refuse(root, manifest_problem(manifest, facts, held))
    documents = tfds_documents(manifest)
    write_tfds_files(root, documents)
    return list(documents)
