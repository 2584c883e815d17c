"""The plan: which image goes into which shard, as a pure function of the inputs.

Slim's layout (REFERENCE §3): shuffle the indices with `random.Random(12345)`,
cut them into `layout_threads` ranges with numpy's linspace truncated to int,
cut each range into `num_shards / layout_threads` shards the same way, and number
shards thread by thread. Workers execute one ShardSpec each, so the bytes never
depend on how many workers ran or whether the run was resumed.
"""

import hashlib
import json
import random
from dataclasses import dataclass

from imagenet_build.errors import BuildError

SHUFFLE_SEED = 12345
FORMAT_VERSION = 1  # bump when the bytes written for the same plan change


def linspace_int(start, stop, num):
    """`numpy.linspace(start, stop, num).astype(int)` without numpy, to the last bit.

    numpy computes `arange(num) * step + start` in float64 with `step = (stop - start) / (num - 1)`
    and sets the last point to `stop` exactly; Python floats are the same IEEE doubles.
    """
    if num == 1:
        return [int(start)]
    div = num - 1
    delta = float(stop - start)
    step = delta / div
    if step == 0:
        points = [i / div * delta + start for i in range(num)]
    else:
        points = [i * step + start for i in range(num)]
    points[-1] = stop
    return [int(p) for p in points]


def shard_ranges(num_items, num_shards, layout_threads):
    """[(begin, end)] positions in the shuffled list for shard 0..num_shards-1."""
    if num_shards < 1 or layout_threads < 1:
        raise BuildError("shard and layout-thread counts must be at least 1")
    if num_shards % layout_threads:
        raise BuildError(
            f"{num_shards} shards cannot be split over {layout_threads} layout threads: "
            "the shard count must be a multiple of --layout-threads (slim's rule)"
        )
    per_thread = num_shards // layout_threads
    spacing = linspace_int(0, num_items, layout_threads + 1)
    ranges = []
    for t in range(layout_threads):
        cuts = linspace_int(spacing[t], spacing[t + 1], per_thread + 1)
        ranges.extend((cuts[s], cuts[s + 1]) for s in range(per_thread))
    return ranges


def shuffled_order(num_items):
    """Slim's shuffle of the indices (Python 3's Mersenne Twister, seed 12345)."""
    order = list(range(num_items))
    random.Random(SHUFFLE_SEED).shuffle(order)
    return order


def shard_name(split, index, num_shards):
    return f"{split}-{index:05d}-of-{num_shards:05d}"


@dataclass(frozen=True)
class ShardSpec:
    """One shard to write: its name, where its images are, and the images in record order."""

    split: str
    index: int
    num_shards: int
    source_root: str
    entries: tuple  # ImageEntry, in record order
    classes: dict  # label -> (synset, text) for the labels in this shard

    @property
    def name(self):
        return shard_name(self.split, self.index, self.num_shards)

    def fingerprint(self, on_error):
        """Hash of everything the shard's bytes depend on (not where the inputs live)."""
        digest = hashlib.sha256()
        head = [FORMAT_VERSION, self.name, on_error]
        digest.update(json.dumps(head).encode())
        for entry in self.entries:
            synset, text = self.classes[entry.label]
            digest.update(json.dumps([entry.relpath, entry.label, synset, text, entry.boxes]).encode())
        return digest.hexdigest()


def attach_boxes(entries, boxes_by_name):
    """Entries with their boxes (looked up by base name) filled in."""
    if not boxes_by_name:
        return entries
    out = []
    for entry in entries:
        boxes = boxes_by_name.get(entry.filename)
        out.append(entry._replace(boxes=boxes) if boxes else entry)
    return out


def plan_split(split_input, catalog, num_shards, layout_threads):
    """ShardSpecs for one split, shard 0 first."""
    entries = split_input.entries
    ranges = shard_ranges(len(entries), num_shards, layout_threads)
    empty = sum(1 for begin, end in ranges if begin == end)
    if empty:
        raise BuildError(
            f"{split_input.split}: {len(entries)} images cannot fill {num_shards} shards "
            f"({empty} would be empty); use fewer --{split_input.split}-shards"
        )
    order = shuffled_order(len(entries))
    specs = []
    for index, (begin, end) in enumerate(ranges):
        shard_entries = tuple(entries[i] for i in order[begin:end])
        labels = sorted({e.label for e in shard_entries})
        specs.append(
            ShardSpec(
                split=split_input.split,
                index=index,
                num_shards=num_shards,
                source_root=split_input.root,
                entries=shard_entries,
                classes={label: (catalog.synset(label), catalog.text(label)) for label in labels},
            )
        )
    return specs
