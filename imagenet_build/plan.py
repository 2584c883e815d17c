"""The plan: which image goes into which shard, as a pure function of the inputs.

Slim's layout (docs/convert.md, Order and sharding): shuffle the indices with `random.Random(12345)`,
cut them into `layout_threads` ranges with numpy's linspace truncated to int,
cut each range into `num_shards / layout_threads` shards the same way, and number
shards thread by thread. Workers execute one ShardSpec each, so the bytes never
depend on how many workers ran or whether the run was resumed.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING

from imagenet_build.catalog.boxes import unpack_boxes
from imagenet_build.format.naming import shard_name
from imagenet_build.infra.errors import BuildError, UsageError
from imagenet_build.model import ImageEntry, ShardSpec, file_name

if TYPE_CHECKING:
    from imagenet_build.catalog.classes import Catalog
    from imagenet_build.model import SplitInput

SHUFFLE_SEED = 12345



def linspace_int(start: int, stop: int, num: int) -> list[int]:
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


def shard_ranges(num_items: int, num_shards: int, layout_threads: int) -> list[tuple[int, int]]:
    """[(begin, end)] positions in the shuffled list for shard 0..num_shards-1."""
    if num_shards < 1 or layout_threads < 1:
        raise UsageError("shard and layout-thread counts must be at least 1")
    if num_shards % layout_threads:
        raise UsageError(
            f"{num_shards} shards cannot be split over {layout_threads} layout threads: "
            "the shard count must be a multiple of --layout-threads (slim's rule)"
        )
    per_thread = num_shards // layout_threads
    spacing = linspace_int(0, num_items, layout_threads + 1)
    ranges: list[tuple[int, int]] = []
    for t in range(layout_threads):
        cuts = linspace_int(spacing[t], spacing[t + 1], per_thread + 1)
        ranges.extend((cuts[s], cuts[s + 1]) for s in range(per_thread))
    return ranges


def shuffled_order(num_items: int) -> array[int]:
    """Slim's shuffle of the indices (Python 3's Mersenne Twister, seed 12345).

    An array, not a list (5 MB instead of 46 MB for ImageNet); shuffle() swaps
    the same positions either way.
    """
    order = array("I", range(num_items))
    random.Random(SHUFFLE_SEED).shuffle(order)
    return order


class SplitPlan:
    """The shards of one split. Specs are made on demand, so a plan of 1.28 M images stays small."""

    def __init__(
        self,
        split_input: SplitInput,
        catalog: Catalog,
        boxes: dict[str, bytes] | None,
        num_shards: int,
        layout_threads: int,
        real_labels: dict[str, tuple[int, ...]] | None = None,
    ) -> None:
        """`real_labels`: a validation split's ReaL labels by file name (--real-labels), else None."""
        self.input = split_input
        self.split = split_input.split
        self.num_shards = num_shards
        self._catalog = catalog
        self._boxes = boxes
        self._real_labels = real_labels
        self.ranges = shard_ranges(len(split_input), num_shards, layout_threads)
        empty = sum(1 for begin, end in self.ranges if begin == end)
        if empty:
            raise BuildError(
                f"{self.split}: {len(split_input)} images cannot fill {num_shards} shards "
                f"({empty} would be empty); use fewer --{self.split}-shards"
            )
        self.order = shuffled_order(len(split_input))

    @property
    def names(self) -> list[str]:
        return [shard_name(self.split, k, self.num_shards) for k in range(self.num_shards)]

    def size(self, k: int) -> int:
        begin, end = self.ranges[k]
        return end - begin

    def spec(self, k: int) -> ShardSpec:
        begin, end = self.ranges[k]
        source = self.input
        entries = []
        real_labels = self._real_labels
        for i in self.order[begin:end]:
            relpath = source.relpaths[i]
            packed = self._boxes.get(file_name(relpath)) if self._boxes else None
            boxes = unpack_boxes(packed) if packed else ()
            real = None if real_labels is None else real_labels[file_name(relpath)]
            if source.archive:
                entries.append(ImageEntry(relpath, source.labels[i], boxes, source.offsets[i], source.sizes[i],
                                          source.member_infos[i] if source.member_infos else 0, real))
            else:
                entries.append(ImageEntry(relpath, source.labels[i], boxes, real_labels=real))
        cat = self._catalog
        return ShardSpec(
            split=self.split,
            index=k,
            num_shards=self.num_shards,
            source_root=source.root,
            reader=source.reader,
            entries=tuple(entries),
            classes={label: (cat.synset(label), cat.text(label)) for label in sorted({e.label for e in entries})},
            source_stamp=source.stamp,
            imagenet=cat.is_imagenet and not source.path_names,  # slim's lists name ILSVRC2012's files
            member_prefix=source.member_prefix,
            path_names=source.path_names,
        )

    def __iter__(self) -> Iterator[ShardSpec]:
        return (self.spec(k) for k in range(self.num_shards))
