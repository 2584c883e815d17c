"""The folder as the folder checks see it once every shard was checked, and the base of a folder check."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Tuple

from imagenet_build.format.manifest import Manifest
from imagenet_build.infra import storage
from imagenet_build.verify.check import Check, Mode
from imagenet_build.verify.problems import Finding, Place
from imagenet_build.verify.shard import ShardVerifyFigures

Seen = Dict[Tuple[int, str], Tuple[int, Place]]  # (label, synset): (records, the first of them)


@dataclass
class Folder:
    """A verified folder: its manifest, its shards by split, what each shard's task found, and the notes
    of the report (a check appends what it could not check, and why)."""

    root: str
    index_dir: str
    manifest: Manifest | None
    mode: Mode
    by_split: Dict[str, List[Tuple[int, str]]]  # {split: [(shard number, path)]}
    results: Dict[str, ShardVerifyFigures]  # by shard name
    seen: Seen  # every (label, synset) pair the records hold (none with --quick)
    split_counts: Dict[str, Counter[int]]  # {split: records per label}
    notes: List[str]
    tallies: Dict[str, Dict[str, Any]] = field(default_factory=dict)  # {check: {shard name: its shard_tally}}

    def split_records(self) -> dict[str, int]:
        """{split: records} by the shards' own framing."""
        return {split: sum(self.results[storage.basename(path)].records for _, path in shards)
                for split, shards in self.by_split.items()}


class FolderCheck(Check):
    """A check across the folder: `run_folder` gives its findings, on the driver, after every shard task."""

    def run_folder(self, folder: Folder) -> Iterable[Finding]:
        raise NotImplementedError
