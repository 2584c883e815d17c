"""A build's figures, computed here once from its shard entries, and the manifest assembled with them.

Each split's shards, records, bytes and label counts, and the build's totals, as the manifest records
them: convert and write_arrays assemble their manifests here (one assembler), verify holds a manifest's
figures to its shards with the same sums, and convert's summary, trainer-check and report read them
through here rather than summing on their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Dict

from imagenet_build.format.manifest import FORMAT, SHARD_INPUTS, Manifest, ShardEntry, SplitFigures


def figures_of(entries: Iterable[ShardEntry]) -> Dict[str, int]:
    """The figures of a set of shards (a split's, or all of a build's): how many, their records, their bytes."""
    listed = list(entries)
    return {"shards": len(listed), "records": sum(e["records"] for e in listed),
            "bytes": sum(e["bytes"] for e in listed)}


def totals(shards: Sequence[ShardEntry]) -> Dict[str, int]:
    """A build's totals: records, bytes, images left out and images stored re-encoded; in a resized build also
    the images decoded, resized and encoded (the others are stored as the full-size build stores them)."""
    figures = figures_of(shards)
    found = {"records": figures["records"], "bytes": figures["bytes"],
             "skipped": sum(len(e["skipped"]) for e in shards),
             "reencoded": sum(1 for e in shards for r in e["reencoded"] if r.get("reencoded"))}
    if any("resized" in e for e in shards):
        found["resized"] = resized_count(shards)
    return found


def resized_count(shards: Iterable[ShardEntry]) -> int:
    """The images of a resized build's shards that were decoded, resized and encoded."""
    return sum(e.get("resized", 0) for e in shards)


def label_counts(counts: Mapping[int, int]) -> Dict[str, int]:
    """A split's label counts as the manifest records them: {"<label>": records}, by label, none of 0 records."""
    return {str(k): v for k, v in sorted(counts.items()) if v}


def recorded_label_counts(manifest: Manifest, split: str) -> Dict[int, int] | None:
    """A split's label counts as its manifest records them, {label: records} (labels of 0 records left out);
    None where it records none (an incomplete build, or no such split). A count under a name that is no label
    (a manifest edited by hand: "²") is left out, for verify's labels check to name."""
    recorded = manifest.get("splits", {}).get(split, {}).get("label_counts")
    if recorded is None:
        return None
    return {int(label): records for label, records in recorded.items() if label.isdecimal()}


def split_figures(num_shards: int, done: Sequence[ShardEntry], left_out: Iterable[tuple[str, str]],
                  labels: Mapping[int, int] | None) -> SplitFigures:
    """One split's figures from its shards done so far; `labels` ({label: records}) once all are done."""
    figures = figures_of(done)
    split = SplitFigures(shards=num_shards, shards_done=figures["shards"], records=figures["records"],
                         bytes=figures["bytes"], left_out=[{"file": f, "reason": r} for f, r in left_out])
    if labels is not None:
        split["label_counts"] = label_counts(labels)
    return split


def split_totals(manifest: Manifest, split: str) -> Dict[str, int]:
    """One split's totals, as `totals` gives a build's, from the split's shard entries; "left_out" besides: the
    split's inputs its listing left out (before any shard)."""
    found = totals([entry for entry in manifest["shards"] if entry["split"] == split])
    found["left_out"] = len(manifest["splits"].get(split, {}).get("left_out", []))
    return found


def manifest_base(options: Mapping[str, Any], inputs: Mapping[str, Any], synsets: Sequence[str]) -> Manifest:
    """What a build's manifest holds before any shard is written: this version's format, the options a rerun
    must repeat, where the images came from, and the classes (label k is synsets[k - 1])."""
    return Manifest(format=FORMAT, options=dict(options), inputs=dict(inputs), num_classes=len(synsets),
                    synsets=list(synsets))


def assemble(base: Manifest, splits: Mapping[str, SplitFigures], shards: Sequence[ShardEntry], complete: bool,
             input_states: Mapping[str, str] | None = None) -> Manifest:
    """The manifest of a build, convert's and write_arrays' alike: `base`'s format, options, inputs and classes,
    the splits' figures, the shards in order and their totals; `input_states` ({shard name: its inputs' state},
    convert's) recorded under inputs.shards for the next resume."""
    inputs = dict(base["inputs"])
    if input_states is not None:
        inputs[SHARD_INPUTS] = dict(input_states)
    return Manifest(
        format=base["format"],
        options=base["options"],
        num_classes=base["num_classes"],
        synsets=base["synsets"],
        inputs=inputs,
        complete=complete,
        splits=dict(splits),
        shards=list(shards),
        totals=totals(shards),
    )
