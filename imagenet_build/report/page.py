"""The page: one HTML file holding everything it shows (styles inline, images as data: URIs, no script),
so it opens from disk with no network, in any browser, years later.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any, NamedTuple

from imagenet_build.report.charts import Chart
from imagenet_build.report.figures import Found, SplitRow
from imagenet_build.report.records import Fields, Place
from imagenet_build.report.thumbs import Thumbnail, data_uri

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
h1{font-size:1.5em}h2{border-bottom:2px solid #ccc;margin-top:2em}h3{margin-top:1.5em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}
.ok{color:#070;font-weight:bold}.bad{color:#b00;font-weight:bold}.note{color:#865}
.charts{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0}figcaption{font-size:12px;max-width:640px}
.row{display:flex;flex-wrap:wrap;gap:6px;margin-bottom:10px}
.tile{display:inline-block;width:132px;font-size:11px;vertical-align:top;overflow-wrap:anywhere}
.pic{position:relative;display:inline-block;line-height:0}
.box{position:absolute;border:2px solid #f0f;box-sizing:border-box}
.mismatch{color:#fff;background:#b00;padding:0 2px}
pre{background:#f7f7f7;padding:.5em;overflow:auto;max-height:20em}
"""


class Tile(NamedTuple):
    """One record shown: its thumbnail (None: why not, in `problem`), its fields, where it is."""

    thumb: Thumbnail | None
    fields: Fields | None
    place: Place | None
    problem: str
    expected_label: int | None  # ILSVRC's label for its synset, where the build's differs


class BuildView(NamedTuple):
    """Everything one build's section shows."""

    title: str
    complete: bool
    rows: list[SplitRow]
    num_classes: int
    reencoded: tuple[int, list[tuple[str, str]]]
    skipped: tuple[int, list[tuple[str, str]]]
    boxes: tuple[int, int, int]  # records looked at, records with boxes, boxes
    options: Mapping[str, Any]
    verify: Found
    verify_tiles: dict[tuple[str, int], Tile]  # (shard, record) -> the record verify names
    trainer: Found
    trainer_picture: bytes | None
    charts: list[Chart]
    sheets: list[tuple[str, list[Tile]]]  # (class heading, its tiles)
    problems: list[str]  # what this page found wrong: the folder's, the indexes', records it could not read
    notes: list[str]


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    cells = "".join(f"<th{' class=l' if i < left else ''}>{escape(str(h))}</th>" for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f"<td{' class=l' if i < left else ''}>{escape(str(c))}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _listed(title: str, count: int, items: Sequence[tuple[str, str]]) -> str:
    if not count:
        return f"<p>{escape(title)}: none</p>"
    more = f"<li>... and {count - len(items):,} more</li>" if count > len(items) else ""
    lines = "".join(f"<li>{escape(a)}: {escape(b)}</li>" for a, b in items)
    return f"<p>{escape(title)}: {count:,}</p><ul>{lines}{more}</ul>"


def _figures(view: BuildView) -> str:
    resized = any(r.resized is not None for r in view.rows)  # a resized build: how many of its images were
    rows = [(r.split, f"{r.records:,}", f"{r.shards:,}", f"{r.bytes / 1e6:,.1f}", r.classes,
             *([f"{r.resized or 0:,}"] if resized else []), r.reencoded, r.skipped) for r in view.rows]
    seen, boxed, boxes = view.boxes
    state = "" if view.complete else "<p class=bad>the manifest says this build is not complete</p>"
    return (f"<h3>Figures</h3>{state}"
            + _table(("split", "records", "shards", "MB", "classes", *(["resized"] if resized else []), "re-encoded",
                      "skipped"), rows)
            + f"<p>{view.num_classes:,} classes; boxes: {boxed:,} of {seen:,} records looked at hold "
              f"{boxes:,} box(es)</p>"
            + _listed("Inputs stored re-encoded", *view.reencoded) + _listed("Inputs left out", *view.skipped)
            + f"<details><summary>Options</summary><pre>{escape(json.dumps(view.options, indent=1))}</pre></details>")


def tile_html(tile: Tile) -> str:
    """One thumbnail with its boxes drawn over it, captioned with the stored label, synset and text."""
    f, place = tile.fields, tile.place
    where = f"{place.shard} #{place.number}" if place else ""
    if tile.thumb is None:
        return f"<span class=tile><span class=bad>{escape(tile.problem)}</span><br>{escape(where)}</span>"
    boxes = "".join(
        f'<i class=box style="left:{x0 * 100:.2f}%;top:{y0 * 100:.2f}%;width:{(x1 - x0) * 100:.2f}%;'
        f'height:{(y1 - y0) * 100:.2f}%"></i>' for x0, y0, x1, y1 in (f.boxes if f else []))
    caption = ""
    if f is not None:
        caption = f"label {f.label} &middot; {escape(f.synset)}<br>{escape(f.text)}<br>{escape(f.filename)}"
        if tile.expected_label is not None:
            caption += f"<br><span class=mismatch>ILSVRC's label: {tile.expected_label}</span>"
    return (f"<span class=tile><span class=pic><img src=\"{tile.thumb.uri}\" width={tile.thumb.width} "
            f"height={tile.thumb.height} alt=\"{escape(where)}\">{boxes}</span><br>{caption}<br>"
            f"<small>{escape(where)}</small></span>")


def _findings(title: str, found: Sequence[Mapping[str, Any]], tiles: Mapping[tuple[str, int], Tile]) -> str:
    if not found:
        return ""
    items = []
    for p in found:
        where = ", ".join(str(x) for x in (p.get("file"), p.get("record") is not None and f"record {p['record']}",
                                           p.get("offset") is not None and f"byte {p['offset']}") if x)
        tile = tiles.get((str(p.get("file")), p["record"])) if isinstance(p.get("record"), int) else None
        items.append(f"<li><b>{escape(str(p.get('check')))}</b> {escape(where)}: {escape(str(p.get('message')))}"
                     + (f"<br>{tile_html(tile)}" if tile else "") + "</li>")
    return f"<h4>{escape(title)}</h4><ul>{''.join(items)}</ul>"


def _verify(view: BuildView) -> str:
    notes = "".join(f"<p class=note>{escape(n)}</p>" for n in view.verify.notes)
    result = view.verify.document
    if result is None or "summary" not in result:
        return f"<h3>verify</h3>{notes}<p>not run: run <code>imagenet-build verify DIR --json &gt; " \
               f"DIR/verify.json</code>, or <code>report --verify</code></p>"
    s = result["summary"]
    counts = sum(s.get("problem_counts", {}).values())
    status = "<span class=ok>sound</span>" if result["ok"] else f"<span class=bad>FAILED: {counts:,} problem(s)</span>"
    rows = [(name, "ok" if name not in s.get("problem_counts", {}) else s["problem_counts"][name])
            for name in s.get("checks", [])]
    return (f"<h3>verify</h3>{notes}<p>{status} ({escape(str(s.get('mode')))} check of {s.get('shards', 0):,} "
            f"shards, {s.get('records', 0):,} records)</p>" + _table(("check", "problems"), rows)
            + _findings("Problems", result.get("problems", []), view.verify_tiles)
            + _findings("Warnings", result.get("warnings", []), view.verify_tiles)
            + "".join(f"<p class=note>note: {escape(n)}</p>" for n in s.get("notes", [])))


def _trainer(view: BuildView) -> str:
    notes = "".join(f"<p class=note>{escape(n)}</p>" for n in view.trainer.notes)
    result = view.trainer.document
    if result is None:
        return f"<h3>trainer-check</h3>{notes}<p>not in this folder: run <code>imagenet-build trainer-check DIR " \
               f"--json --show DIR/trainer-check.png &gt; DIR/trainer-check.json</code></p>"
    status = "<span class=ok>passed</span>" if result.get("ok") else "<span class=bad>FAILED</span>"
    rows = [(c.get("name"), "ok" if c.get("ok") else "FAILED", c.get("detail", "")) for c in result.get("checks", [])]
    picture = (f"<p><img src=\"{data_uri('image/png', view.trainer_picture)}\" alt=\"the batches trained on\" "
               f"style=\"max-width:100%\"></p>" if view.trainer_picture else "")
    figures = ", ".join(f"{k} {result[k]}" for k in ("framework", "device", "model", "split", "steps", "batch_size")
                        if k in result)
    return (f"<h3>trainer-check</h3>{notes}<p>{status} ({escape(figures)})</p>"
            + _table(("check", "", "detail"), rows, left=3) + picture)


def _charts(view: BuildView) -> str:
    figures = "".join(f"<figure><img src=\"{c.uri}\" alt=\"{escape(c.title)}\"><figcaption><b>{escape(c.title)}"
                      f"</b>: {escape(c.caption)}</figcaption></figure>" for c in view.charts)
    return f"<h3>Charts</h3><div class=charts>{figures}</div>"


def _sheets(view: BuildView) -> str:
    rows = "".join(f"<h4>{escape(title)}</h4><div class=row>{''.join(tile_html(t) for t in tiles)}</div>"
                   for title, tiles in view.sheets)
    return f"<h3>Contact sheets: records of each class, from the shards</h3>{rows}"


def build_section(view: BuildView) -> str:
    problems = ("<h3>Problems this page found</h3><ul>"
                + "".join(f"<li class=bad>{escape(p)}</li>" for p in view.problems) + "</ul>") if view.problems else ""
    notes = "".join(f"<p class=note>{escape(n)}</p>" for n in view.notes)
    return (f"<section><h2>{escape(view.title)}</h2>{notes}{problems}{_figures(view)}{_verify(view)}"
            f"{_trainer(view)}{_charts(view)}{_sheets(view)}</section>")


def document(title: str, sections: Sequence[str]) -> str:
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
            f"<meta name=viewport content=\"width=device-width\"><style>{STYLE}</style></head><body>"
            f"<h1>{escape(title)}</h1>{''.join(sections)}</body></html>\n")
