"""The page's charts, drawn with matplotlib (the `report` extra), each a PNG inlined in the page.

The only module of the package that imports matplotlib, and only when a page is made: the build path
and every other verb start without it (an import contract in pyproject.toml holds it).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from imagenet_build.infra.optional import require
from imagenet_build.report.records import Fields
from imagenet_build.report.thumbs import data_uri

STANDOUT = 3  # the classes named at each end of the records-per-class chart, at most
STRAY = 0.1  # named when this far from the median class's records


class Chart(NamedTuple):
    title: str
    uri: str  # the PNG, as a data: URI
    caption: str


def _figure(width: float = 6.4, height: float = 3.6) -> Any:
    # through the door for optional packages: a missing extra is one line (and mypy does not read matplotlib)
    figure = require("matplotlib.figure", "imagenet-build report")
    return figure.Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(figure: Any) -> str:
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return data_uri("image/png", out.getvalue())


def standouts(counts: Mapping[int, int], n: int = STANDOUT) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(up to n classes with the fewest records, up to n with the most), each (label, records): those more than
    STRAY from the median class's records, the furthest first."""
    ranked = sorted(counts.items(), key=lambda item: (item[1], item[0]))
    if not ranked:
        return [], []
    median = ranked[len(ranked) // 2][1]
    fewest = [item for item in ranked if item[1] < median * (1 - STRAY)][:n]
    most = [item for item in ranked[::-1] if item[1] > median * (1 + STRAY)][:n]
    return fewest, most


def class_chart(counts_by_split: Mapping[str, Mapping[int, int]], names: Mapping[int, str]) -> Chart:
    """Records per class, each split's classes sorted by their records, the classes that stand out named."""
    figure = _figure()
    axes = figure.add_subplot()
    named = []
    for split, counts in counts_by_split.items():
        values = sorted(counts.values(), reverse=True)
        axes.plot(range(1, len(values) + 1), values, marker="." if len(values) <= 100 else None, label=split)
        fewest, most = standouts(counts)
        for n, (label, records) in enumerate(most + fewest):
            axes.annotate(names.get(label, str(label))[:24], (values.index(records) + 1, records), fontsize=7,
                          xytext=(6, 10 * (n % STANDOUT) - 10), textcoords="offset points")
        empty = sum(1 for n in counts.values() if not n)
        if empty:
            named.append(f"{split}: {empty:,} of {len(counts):,} classes hold no record")
        for which, found in (("fewest", fewest), ("most", most)):
            if found:
                named.append(f"{split}, {which}: " + ", ".join(f"{names.get(lb, lb)} ({n:,})" for lb, n in found))
    axes.set_xlabel("classes, by records")
    axes.set_ylabel("records")
    ticker = require("matplotlib.ticker", "imagenet-build report")
    for axis in (axes.xaxis, axes.yaxis):  # whole classes and records, however few
        axis.set_major_locator(ticker.MaxNLocator(integer=True))
    axes.set_ylim(bottom=0)
    axes.legend()
    caption = "; ".join(named) or f"no class more than {STRAY:.0%} from the median class"
    return Chart("Records per class", _png(figure), caption)


def sample_charts(stats: Sequence[Fields], of: int) -> list[Chart]:
    """Image sizes, encoded bytes and aspect ratios of the sampled records (`of`: the build's records)."""
    sized = [f for f in stats if f.width and f.height]
    where = f"{len(stats):,} records" + (f" sampled of {of:,}" if len(stats) < of else " (every record)")
    figure = _figure(4.8, 4.0)
    axes = figure.add_subplot()
    axes.scatter([f.width for f in sized], [f.height for f in sized], s=4, alpha=0.4)
    axes.set_xlabel("width (px)")
    axes.set_ylabel("height (px)")
    charts = [Chart("Image sizes (width x height)", _png(figure), where)]
    figure = _figure()
    axes = figure.add_subplot()
    axes.hist([f.encoded_bytes / 1000 for f in stats], bins=50)
    axes.set_xlabel("encoded image, kB")
    axes.set_ylabel("records")
    charts.append(Chart("Encoded bytes per image", _png(figure), where))
    figure = _figure()
    axes = figure.add_subplot()
    axes.hist([f.width / f.height for f in sized], bins=50)  # type: ignore[operator]
    axes.set_xlabel("aspect ratio (width / height)")
    axes.set_ylabel("records")
    charts.append(Chart("Aspect ratios", _png(figure), where))
    return charts
