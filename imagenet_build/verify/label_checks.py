"""The checks of the labels: each record's (1-based), then across the folder (one synset per label and one
label per synset, counts against the manifest); the ReaL labels a --real-labels build's validation records carry;
and with --expect-imagenet ImageNet's totals."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Iterable, Iterator, NamedTuple, Optional, Tuple

from imagenet_build.catalog.classes import IMAGENET_CLASSES, IMAGENET_TOTALS, SUBSET_TRAIN_IMAGES
from imagenet_build.format.build_figures import label_counts, recorded_label_counts
from imagenet_build.format.manifest import Manifest, carries_real_labels
from imagenet_build.format.naming import MANIFEST_NAME
from imagenet_build.format.record_schema import EXTRA, FIRST_LABEL, LIST_FIELD, REAL_LABELS
from imagenet_build.infra import storage
from imagenet_build.verify.check import Mode
from imagenet_build.verify.folder import Folder, FolderCheck
from imagenet_build.verify.problems import Finding, Place
from imagenet_build.verify.record import Record, RecordCheck


class Labels(RecordCheck, FolderCheck):
    name, rank = "labels", 80
    covers = "labels in 1..K, one synset per label, counts against the manifest"

    def run_record(self, record: Record) -> Iterable[str]:
        if not record.readable:
            return ()
        label = record.one["image/class/label"]
        return (f"label {label}: labels are 1-based (0 is background)",) if label < FIRST_LABEL else ()

    def run_folder(self, folder: Folder) -> Iterator[Finding]:
        """Each problem names a record that shows it: the first with the label, or where a label and synset
        disagree, the first record of the rarest pair (most likely the wrong one)."""
        manifest, expect_imagenet = folder.manifest, folder.mode.expect_imagenet
        num_classes = (manifest or {}).get("num_classes") or (IMAGENET_CLASSES if expect_imagenet else None)
        synsets = (manifest or {}).get("synsets")
        if num_classes is None:
            folder.notes.append("no manifest: labels checked to be >= 1 and consistent, not against a class count")
        by_label: dict[int, dict[str, tuple[int, Place]]] = {}
        by_synset: dict[str, dict[int, tuple[int, Place]]] = {}
        for (label, synset), seen_pair in folder.seen.items():
            by_label.setdefault(label, {})[synset] = seen_pair
            by_synset.setdefault(synset, {})[label] = seen_pair
        for label, pairs in sorted(by_label.items()):
            if num_classes is not None and label > num_classes:
                first = min(place for _, place in pairs.values())
                yield Finding(*first, f"label {label} above the {num_classes} classes")
            if len(pairs) > 1:
                yield Finding(*_rarest(pairs), f"label {label} carries several synsets: {sorted(pairs)}")
            elif synsets and 1 <= label <= len(synsets) and set(pairs) != {synsets[label - 1]}:
                ((name, (_, place)),) = pairs.items()
                yield Finding(*place, f"label {label} carries {name}, the labels file says {synsets[label - 1]}")
        for synset, labels in sorted(by_synset.items()):
            if len(labels) > 1:
                yield Finding(*_rarest(labels), f"synset {synset} under several labels: {sorted(labels)}")
        if manifest:
            yield from _check_label_counts(manifest, folder.split_counts)


def _rarest(pairs: dict[Any, tuple[int, Place]]) -> Place:
    """The first record of the pair with the fewest records (of two as common, the one met later)."""
    return max(pairs.values(), key=lambda seen_pair: (-seen_pair[0], seen_pair[1]))[1]


def _check_label_counts(manifest: Manifest, split_counts: dict[str, Counter[int]]) -> Iterator[Finding]:
    """The records of each label per split against the manifest's counts."""
    for split, counts in split_counts.items():
        expected = manifest.get("splits", {}).get(split, {}).get("label_counts")
        if expected is None:
            continue
        if label_counts(counts) != expected:
            differ = sorted(set(expected) ^ {str(k) for k in counts}
                            | {k for k, v in expected.items() if counts.get(int(k)) != v}, key=int)
            yield Finding(split, None, None,
                          f"label counts differ from the manifest for labels {', '.join(differ[:10])}")


class EmptyClasses(FolderCheck):
    """A class of the build with no records in a split: a training run never sees it, an evaluation never scores
    it. A build may be so on purpose (a split of a subset, a copy lacking a class), so it is a warning. The
    classes are the manifest's; a copy that holds some of them by its nature (ImageNet-A's 200) is held to
    those (its manifest's inputs.source.labels)."""

    name, rank, warning, counted = "empty-classes", 210, True, "split(s)"
    covers = "every class of the build has records in each split (one with none is never trained on or scored)"

    def run_folder(self, folder: Folder) -> Iterator[Finding]:
        manifest = folder.manifest or {}
        num_classes = manifest.get("num_classes")
        if not num_classes:
            return  # no manifest: no class count to hold the labels to
        held = (manifest.get("inputs", {}).get("source") or {}).get("labels")
        if not (isinstance(held, list) and held and all(isinstance(label, int) for label in held)):
            held = None
        wanted = held or range(FIRST_LABEL, num_classes + FIRST_LABEL)
        synsets = manifest.get("synsets") or []
        for split in sorted(folder.by_split):
            counts = _split_label_counts(folder, manifest, split)
            if counts is None:
                continue
            missing = [label for label in wanted if not counts.get(label)]
            if missing:
                named = ", ".join(f"label {label}" + (f" ({synsets[label - 1]})" if 0 < label <= len(synsets) else "")
                                  for label in missing[:5])
                yield Finding(split, None, None, f"{len(missing)} of {len(wanted)} classes have no {split} records: "
                                                 f"{named}{' ...' if len(missing) > 5 else ''}")


def _split_label_counts(folder: Folder, manifest: Manifest, split: str) -> Mapping[int, int] | None:
    """A split's records per label: counted in its records, or with --quick (which reads no labels) the
    manifest's; None when neither is known."""
    if not folder.mode.quick:
        return folder.split_counts.get(split, Counter())
    return recorded_label_counts(manifest, split)


class RealTally(NamedTuple):
    """What the real-labels check needs of one shard's records: how many carry the feature and how many lack it,
    the first of each (record number, byte offset), and the highest ReaL label with its record."""

    carrying: int = 0
    lacking: int = 0
    first_carrying: Optional[Tuple[int, int]] = None
    first_lacking: Optional[Tuple[int, int]] = None
    highest: Optional[Tuple[int, int, int]] = None  # (label, record number, byte offset)


class RealLabels(RecordCheck, FolderCheck):
    """image/class/real_labels (convert --real-labels): one int64 list of 1-based labels in every validation
    record of a build whose manifest says it carries them, and in no other record."""

    name, rank = "real-labels", 85
    covers = "ReaL labels: an int64 list in every validation record iff the manifest says so, labels in 1..K"
    _kind = LIST_FIELD[EXTRA[REAL_LABELS]]

    def __init__(self) -> None:
        self._tally = RealTally()
        self._lacking = 0  # records without the feature, counted apart (most records of most builds)

    def run_record(self, record: Record) -> Iterable[str]:
        if not record.readable:
            return ()
        t, place = self._tally, (record.number, record.offset)
        if REAL_LABELS not in record.kinds:
            self._lacking += 1
            if t.first_lacking is None:
                self._tally = t._replace(first_lacking=place)
            return ()
        self._tally = t = t._replace(carrying=t.carrying + 1, first_carrying=t.first_carrying or place)
        kind, labels = record.kinds[REAL_LABELS], record.lists[REAL_LABELS]
        if kind != self._kind:
            return (f"{REAL_LABELS} is {kind or 'a Feature holding no list'}, expected {self._kind}",)
        if labels and (t.highest is None or max(labels) > t.highest[0]):
            self._tally = t._replace(highest=(max(labels), *place))
        found = [f"{REAL_LABELS}: label {label}: labels are 1-based (0 is background)"
                 for label in sorted(set(labels)) if label < FIRST_LABEL]
        found += [f"{REAL_LABELS}: label {label} listed twice"
                  for label, count in sorted(Counter(labels).items()) if count > 1]
        return found

    def shard_tally(self) -> RealTally:
        return self._tally._replace(lacking=self._lacking)

    def run_folder(self, folder: Folder) -> Iterator[Finding]:
        manifest = folder.manifest
        claimed = carries_real_labels(manifest) if manifest else None
        tallies: dict[str, RealTally] = folder.tallies.get(self.name, {})
        by_split: dict[str, list[tuple[str, RealTally]]] = {}
        for split, listed in folder.by_split.items():
            names = sorted(storage.basename(path) for _, path in listed)
            by_split[split] = [(name, tallies[name]) for name in names if name in tallies]
        for split, shards in sorted(by_split.items()):
            yield from _real_presence(split, shards, claimed)
        if claimed and not by_split.get("validation"):
            yield Finding(MANIFEST_NAME, None, None, "says the validation records carry ReaL labels, but the "
                                                     "folder has no validation shards")
        num_classes = (manifest or {}).get("num_classes")
        highest = max(((t.highest, name) for name, t in tallies.items() if t.highest), default=None)
        if highest and num_classes is not None and highest[0][0] > num_classes:
            (label, number, offset), name = highest
            yield Finding(name, number, offset, f"{REAL_LABELS}: label {label} above the {num_classes} classes")


def _real_presence(split: str, shards: list[tuple[str, RealTally]], claimed: bool | None) -> Iterator[Finding]:
    """The records of a split that carry the feature, or lack it, against what the manifest says (None: no
    manifest: a validation split all one way)."""
    carrying, lacking = sum(t.carrying for _, t in shards), sum(t.lacking for _, t in shards)
    first_carrying = next(((name, *t.first_carrying) for name, t in shards if t.first_carrying), None)
    first_lacking = next(((name, *t.first_lacking) for name, t in shards if t.first_lacking), None)
    if split != "validation":
        if first_carrying:
            yield Finding(*first_carrying, f"carries {REAL_LABELS}, which only validation records may "
                                           f"({carrying} {split} record(s) carry it)")
    elif claimed and first_lacking:
        yield Finding(*first_lacking, f"lacks {REAL_LABELS}, which manifest.json says every validation record "
                                      f"carries ({lacking} record(s) lack it)")
    elif claimed is False and first_carrying:
        yield Finding(*first_carrying, f"carries {REAL_LABELS}, yet manifest.json says the build has no ReaL "
                                       f"labels ({carrying} record(s) carry it)")
    elif claimed is None and first_carrying and first_lacking:
        yield Finding(*first_lacking, f"lacks {REAL_LABELS}, which {carrying} other validation record(s) carry")


class Imagenet(FolderCheck):
    """Each split's records and the classes against ImageNet's (the labels the records hold, or with --quick
    the manifest's class count)."""

    name, rank = "imagenet", 100
    covers = "the full ILSVRC2012 totals, or the copy's own (--expect-imagenet)"

    @classmethod
    def runs(cls, mode: Mode) -> bool:
        return mode.expect_imagenet

    def run_folder(self, folder: Folder) -> Iterator[Finding]:
        manifest, split_records = folder.manifest, folder.split_records()
        expected, what = expected_totals(manifest)
        wanted_classes = expected_classes(manifest)
        for split, total in expected.items():
            if split_records.get(split) != total:
                yield Finding(split, None, None, f"{split_records.get(split, 0)} records, {what} has {total:,}")
        seen_labels = None if folder.mode.quick else {label for label, _ in folder.seen}
        classes = len(seen_labels) if seen_labels is not None else (manifest or {}).get("num_classes")
        if classes is None:
            folder.notes.append("--expect-imagenet: classes not counted (--quick reads no labels, and there is no "
                                "manifest)")
        elif classes != wanted_classes:
            yield Finding("classes", None, None, f"{classes:,} classes, {what} has {wanted_classes:,}")


def _source_kind(manifest: Manifest | None) -> Any:
    """The registered kind of copy the build was converted from (its manifest's inputs.source.layout), or None."""
    from imagenet_build.sources.copies import copy_kind_named

    return copy_kind_named(((manifest or {}).get("inputs", {}).get("source") or {}).get("layout"))


def expected_classes(manifest: Manifest | None) -> int:
    """The classes a full build holds: ILSVRC2012's 1000, or the copy's own (ImageNet-A's and -R's 200)."""
    known = _source_kind(manifest)
    return known.classes if known is not None and known.classes else IMAGENET_CLASSES


def expected_totals(manifest: Manifest | None) -> tuple[dict[str, int], str]:
    """({split: records}, what) a full build should hold: ILSVRC2012's, the copy's own (the face-blurred
    release lacks a few images), and a shipped subset's train count."""
    expected, what = dict(IMAGENET_TOTALS), "ILSVRC2012"
    options = (manifest or {}).get("options", {})
    known = _source_kind(manifest)
    if known is not None and known.totals:
        expected, what = dict(known.totals), known.name
    subset = options.get("subset")
    if subset in SUBSET_TRAIN_IMAGES:
        expected["train"], what = SUBSET_TRAIN_IMAGES[subset], f"{what} --subset {subset}"
    return expected, what
