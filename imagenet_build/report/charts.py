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

STANDOUT = 3  # the classes named at each end of the records-per-class chart


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
    """(the n classes with the fewest records, the n with the most), each (label, records), when they differ."""
    ranked = sorted(counts.items(), key=lambda item: (item[1], item[0]))
    if not ranked or ranked[0][1] == ranked[-1][1]:
        return [], []
    k = min(n, len(ranked) // 2)
    return ranked[:k], ranked[::-1][:k]


def class_chart(counts_by_split: Mapping[str, Mapping[int, int]], names: Mapping[int, str]) -> Chart:
    """Records per class, each split's classes sorted by their records, the classes that stand out named."""
    figure = _figure()
    axes = figure.add_subplot()
    named = []
    for split, counts in counts_by_split.items():
        values = sorted(counts.values(), reverse=True)
        axes.plot(range(1, len(values) + 1), values, marker="." if len(values) <= 100 else None, label=split)
        fewest, most = standouts(counts)
        for label, records in most + fewest:
            rank = sorted(counts.values(), reverse=True).index(records) + 1
            axes.annotate(names.get(label, str(label))[:24], (rank, records), fontsize=7,
                          xytext=(4, 4), textcoords="offset points")
        if fewest:
            named.append(f"{split}: fewest " + ", ".join(f"{names.get(lb, lb)} ({n})" for lb, n in fewest)
                         + "; most " + ", ".join(f"{names.get(lb, lb)} ({n})" for lb, n in most))
    axes.set_xlabel("classes, by records")
    axes.set_ylabel("records")
    axes.set_ylim(bottom=0)
    axes.legend()
    caption = "; ".join(named) or "every class has the same number of records"
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
